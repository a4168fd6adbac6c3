"""``from_torch``: a PyTorch module captured by ``torch.export`` (the core ATen op set, after
``run_decompositions()``) and translated op by op to the program IR's StableHLO (the
translations of ``registry.ATEN``).

Arguments of ``@main`` follow the exported program's inputs: parameters, buffers and lifted
constants (named by their fully qualified names, ``layers.0.linear1.weight``) and then the user
inputs (named by ``forward``'s parameter names); each name is the argument's ``jax.arg_info``,
the attribute JAX writes, so the rest of shardwise (``auto_shard``'s weights by name, the
partitioner's argument names) reads it as it reads a JAX program's. DTensor placements given for
a name become the argument's user sharding (``convert.dtensor.from_placements``).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any

from shardwise.convert.dtensor import from_placements
from shardwise.errors import ProgramError
from shardwise.importers.pytorch import (  # noqa: F401 (they register their translations)
    aten_conv,
    aten_index,
    aten_linalg,
    aten_pointwise,
    aten_pool,
    aten_reduce,
    aten_shape,
)
from shardwise.importers.pytorch.lowering import Lowering
from shardwise.importers.pytorch.registry import ATEN
from shardwise.ir.builder import Builder
from shardwise.ir.core import Module
from shardwise.mesh import Mesh
from shardwise.sharding import TensorSharding


def module_path(node: Any) -> str:
    """The module an FX node came from (``layers.0.self_attn``; ``""`` for the top module)."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path = list(stack.values())[-1][0]
    return str(path).removeprefix("L['self'].").removeprefix("L['self']")


def input_names(exported: Any, strip: str = "") -> list[str]:
    """The name of each input of an ``ExportedProgram``, in order: the fully qualified name of a
    parameter, buffer or constant (less the prefix ``strip``), or the placeholder's name for a
    user input."""
    return [
        spec.target.removeprefix(strip) if spec.target is not None else spec.arg.name
        for spec in exported.graph_signature.input_specs
    ]


def from_exported(
    exported: Any,
    *,
    mesh: Mesh | Mapping[str, int] | None = None,
    in_placements: Mapping[str, Sequence[Any]] | None = None,
) -> Module:
    """The program IR of an ``ExportedProgram`` (module docstring); its graph should hold core
    ATen ops (``exported.run_decompositions()``). ``in_placements``: input name -> DTensor
    placements (one per axis of ``mesh``).

    Raises ``ProgramError`` for an op without a translation (naming the op, the FX node and the
    module it came from), a mutated buffer or input (export the module in ``eval()`` mode), an
    input name ``in_placements`` names that the program does not have, and a dtype StableHLO
    programs here do not carry; ``ConversionError`` for placements that do not fit the mesh or
    the tensor."""
    lo, outputs = lower(exported, mesh=mesh, in_placements=in_placements)
    return lo.b.ret(*(v for _kind, _target, v in outputs))


def lower(
    exported: Any,
    *,
    mesh: Mesh | Mapping[str, int] | None = None,
    in_placements: Mapping[str, Sequence[Any]] | None = None,
    outputs: Sequence[str] = ("USER_OUTPUT",),
    extra_placements: Sequence[str] = (),
    strip: str = "",
    user_names: Sequence[str] | None = None,
) -> tuple[Lowering, list[tuple[str, str | None, Any]]]:
    """:func:`from_exported` up to ``@main``'s return: the lowering (its builder holds the
    arguments and ops) and each output as (its ``OutputKind`` name, its target, its value).
    ``outputs``: the output kinds allowed (others are refused as mutations);
    ``extra_placements``: names ``in_placements`` may give besides the program's inputs (for
    arguments the caller adds); ``strip``: a prefix of the fully qualified names to drop (in
    the names and the targets); ``user_names``: names for the user inputs, in order (default:
    their placeholders'). Raises as :func:`from_exported`."""
    specs = exported.graph_signature.output_specs
    kinds = [str(s.kind).rsplit(".", 1)[-1] for s in specs]
    refused = [s for s, k in zip(specs, kinds) if k not in outputs]
    if refused:
        raise ProgramError(
            f"from_torch: the program mutates {refused[0].target!r} ({refused[0].kind}); expected no mutation"
            " (call module.eval() before exporting a forward pass)"
        )
    b = Builder(mesh)
    placements = dict(in_placements or {})
    names = input_names(exported, strip)
    if user_names is not None:
        given = iter(user_names)
        specs_in = exported.graph_signature.input_specs
        names = [next(given) if spec.target is None else n for spec, n in zip(specs_in, names)]
    unknown = sorted(set(placements) - set(names) - set(extra_placements))
    if unknown:
        raise ProgramError(f"in_placements: no input named {unknown[0]!r}; the inputs are {', '.join(names)}")
    if placements and b.mesh is None:
        raise ProgramError("in_placements: expected a mesh to place the inputs on, got none")
    lo = Lowering(b)
    placeholders = [n for n in exported.graph.nodes if n.op == "placeholder"]
    for node, name in zip(placeholders, names):
        t = lo.result_type(node)
        lo.env[node] = add_arg(lo, name, t.shape, t.element_type, placements.get(name))
    results: list[Any] = []
    for node in exported.graph.nodes:
        if node.op == "call_function":
            lo.env[node] = _translate(lo, node)
        elif node.op == "output":
            results = list(node.args[0])
        elif node.op != "placeholder":
            raise ProgramError(f"from_torch: FX node {node.name} is a {node.op!r}; expected call_function nodes only")
    targets = [None if s.target is None else str(s.target).removeprefix(strip) for s in specs]
    return lo, [(k, t, lo.value(r)) for t, k, r in zip(targets, kinds, results)]


def add_arg(lo: Lowering, name: str, shape: Sequence[int], etype: str, placements: Sequence[Any] | None) -> Any:
    """A new argument of ``@main`` named ``name`` (its ``jax.arg_info``), with the sharding of
    DTensor ``placements`` when given."""
    b = lo.b
    sharding = None
    if placements is not None:
        assert b.mesh is not None
        sharding = from_placements(TensorSharding, placements, b.mesh, len(shape), mesh_name=b.mesh_name)
    v = b.arg(tuple(shape), etype, sharding=sharding)
    b.func.arg_attrs[-1]["jax.arg_info"] = '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return v


def _translate(lo: Lowering, node: Any) -> Any:
    if node.target is operator.getitem:
        return lo.env[node.args[0]][node.args[1]]
    target = str(node.target)
    fn = ATEN.get(target)
    if fn is None:
        where = module_path(node)
        raise ProgramError(
            f"from_torch: no translation for ATen op {target} (FX node {node.name}"
            + (f", from module {where!r}" if where else "")
            + f"); translated: {len(ATEN)} overloads, shardwise.importers.pytorch.supported_ops() lists them"
        )
    try:
        return fn(lo, node)
    except ProgramError:
        raise
    except (ValueError, IndexError, TypeError, KeyError) as e:
        where = module_path(node)
        raise ProgramError(
            f"from_torch: cannot translate {target} (FX node {node.name}"
            + (f", from module {where!r}" if where else "")
            + f"): {e}"
        ) from None


def from_torch(
    module: Any,
    example_args: Sequence[Any],
    example_kwargs: Mapping[str, Any] | None = None,
    *,
    mesh: Mesh | Mapping[str, int] | None = None,
    in_placements: Mapping[str, Sequence[Any]] | None = None,
    strict: bool = False,
) -> Module:
    """A ``torch.nn.Module`` as a shardwise ``Module``: ``torch.export.export(module,
    example_args, example_kwargs, strict=strict)``, decomposed to core ATen, then
    :func:`from_exported`. Only the example tensors' shapes and dtypes matter. Call
    ``module.eval()`` first for a forward pass (dropout off, batch norm statistics not updated).

    ``in_placements``: input name (a parameter's or buffer's fully qualified name, or one of
    ``forward``'s parameter names) -> DTensor placements (``Shard(d)``, ``Replicate()``, or
    the tuples ``("shard", d)``, ``("replicate",)``), one per axis of ``mesh``.

    Raises ``ImportError`` without torch, what ``torch.export`` raises for a module it cannot
    capture, and what :func:`from_exported` raises."""
    import torch

    exported = torch.export.export(module, tuple(example_args), kwargs=dict(example_kwargs or {}), strict=strict)
    return from_exported(exported.run_decompositions(), mesh=mesh, in_placements=in_placements)


def torch_arguments(module: Any, example_args: Sequence[Any], exported: Any = None) -> list[Any]:
    """The arrays (numpy) for ``@main``'s arguments of ``from_torch(module, example_args)``, in
    order: the module's parameters, buffers and constants by name, then ``example_args``.
    ``exported``: the decomposed ``ExportedProgram`` if the caller has it."""
    import torch

    if exported is None:
        exported = torch.export.export(module, tuple(example_args), strict=False).run_decompositions()
    state = {
        **dict(module.named_parameters(remove_duplicate=False)),
        **dict(module.named_buffers(remove_duplicate=False)),
        **dict(exported.constants),
    }
    users = iter(example_args)
    out = []
    for spec, name in zip(exported.graph_signature.input_specs, input_names(exported)):
        t = state[name] if spec.target is not None else next(users)
        out.append(t.detach().cpu().numpy() if hasattr(t, "detach") else t)
    return out


def supported_ops() -> list[str]:
    """The ATen overloads ``from_torch`` translates, sorted."""
    return sorted(ATEN)
