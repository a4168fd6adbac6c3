"""Plans for PyTorch: the shardings of a program from ``shardwise.from_torch`` (propagated, or
chosen by ``auto_shard``) as DTensor placements per parameter, and applied to the module.

``placements(program)`` reads ``@main``'s arguments by their names (``jax.arg_info``: the
fully qualified names ``from_torch`` gives them) and converts each argument's sharding with
``convert.dtensor.to_placements`` (one placement per mesh axis, ``("shard", d)``,
``("replicate",)`` or ``("partial", op)``). ``distribute(module, plan, device_mesh)`` replaces
each parameter and buffer by ``torch.distributed.tensor.distribute_tensor`` of it with its
placements (DTensor's API, PyTorch docs "torch.distributed.tensor"). torch is imported only when
``distribute`` is called.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from shardwise.convert.dtensor import Placement, to_placements
from shardwise.errors import ConversionError
from shardwise.ir.core import Module
from shardwise.mesh import Mesh

__all__ = ["distribute", "parse_placements", "placements", "plan_table", "torch_placements"]


def arg_name(attrs: Mapping[str, str], i: int) -> str:
    info = attrs.get("jax.arg_info")
    return info[1:-1].replace('\\"', '"').replace("\\\\", "\\") if info else f"arg{i}"


def input_names(module: Any, plan: Mapping[str, Any]) -> list[str]:
    """``plan``'s names that are not ``module``'s parameters or buffers, in order: forward's
    inputs, then (a ``from_torch_step`` plan) the target and the optimizer's state."""
    own = {k for k, _ in module.named_parameters(remove_duplicate=False)} | {k for k, _ in module.named_buffers()}
    return [k for k in plan if k not in own]


def placements(program: Module, *, func: str = "main") -> dict[str, tuple[Placement, ...]]:
    """Input name (``jax.arg_info``, else ``arg{i}``) -> DTensor placements of its sharding, one
    per axis of the program's mesh, for every argument of ``func``; an argument without a
    sharding is replicated. Shapes: one tuple of ``len(mesh.axes)`` placements per argument.

    Raises ``ConversionError`` naming the argument for a sharding DTensor cannot express (a
    sub-axis, a dimension split by mesh axes against mesh order), and when the program has
    no mesh or more than one."""
    meshes = program.meshes
    if len(meshes) != 1:
        raise ConversionError(f"placements: expected a program with one mesh, got {len(meshes)} ({', '.join(meshes)})")
    mesh: Mesh = next(iter(meshes.values()))
    f = program.func(func)
    out: dict[str, tuple[Placement, ...]] = {}
    for i, (arg, attrs) in enumerate(zip(f.body.args, f.arg_attrs)):
        name = arg_name(attrs, i)
        if arg.sharding is None:
            out[name] = tuple(("replicate",) for _ in mesh.axes)
            continue
        try:
            out[name] = to_placements(arg.sharding, mesh, strict=False)
        except ConversionError as e:
            raise ConversionError(f"argument {name!r}: {e}") from None
    return out


def torch_placements(plan: Mapping[str, Sequence[Placement]]) -> dict[str, tuple[Any, ...]]:
    """``plan`` with each placement as DTensor's object (``Shard(d)``, ``Replicate()``,
    ``Partial(op)``). Raises ``ImportError`` without torch."""
    from torch.distributed.tensor import Partial, Replicate, Shard

    def one(p: Placement) -> Any:
        if p[0] == "shard":
            return Shard(int(p[1]))
        if p[0] == "partial":
            return Partial(p[1])
        return Replicate()

    return {name: tuple(one(p) for p in ps) for name, ps in plan.items()}


def distribute(module: Any, plan: Mapping[str, Sequence[Placement]], device_mesh: Any) -> Any:
    """``module`` with every parameter and buffer a DTensor on ``device_mesh`` with its
    placements from ``plan`` (``placements``; a name the plan lacks is replicated), in place;
    returns ``module``. A parameter shared by several names (tied weights) takes the first
    name's placements and stays shared; buffers keep their persistence. Every rank of
    ``device_mesh``'s process group calls it with the same module and plan.

    Every convolution (``torch.nn.Conv1d/2d/3d``) computes on DTensor inputs as DTensor
    cannot in torch 2.15: its input redistributed to a split over the batch (dim 0) on at most
    one mesh dim and replicated on the others, its weight and bias replicated (all-gathered if
    the plan splits them), the convolution run on the local shards and the result wrapped back
    (``DTensor.to_local`` / ``from_local``), the weight's gradient a partial sum over the mesh
    dims that split the batch. DTensor's own convolution runs on the local shards as they come
    (``torch/distributed/tensor/_tp_conv.py``: ``convolution_handler``), so an input split over
    channels (a batch norm's split scale makes one) gives the wrong local shape, one split over
    the batch on two mesh dims is refused (``DTensorSpec.dim_map``), and its backward fails on a
    mesh of two or more dims when the input or bias gradient is not asked for ("mixes None with
    placements", ``_ops/utils.py``). ``check.known_refusals`` still forbids split convolution
    weights: the plan's memory would not hold while they are gathered.

    Raises ``ConversionError`` when a placement count differs from the device mesh's
    dimensions, ``ImportError`` without torch."""
    import torch
    from torch.distributed.tensor import Replicate, distribute_tensor

    objects = torch_placements(plan)
    ndim = device_mesh.ndim
    for name, ps in objects.items():
        if len(ps) != ndim:
            raise ConversionError(
                f"plan[{name!r}]: expected {ndim} placements (one per device mesh dim), got {len(ps)}"
            )
    replicate = tuple(Replicate() for _ in range(ndim))
    done: dict[int, Any] = {}  # a parameter shared by several names (tied weights) stays shared
    for name, param in list(module.named_parameters(remove_duplicate=False)):
        owner, _, leaf = name.rpartition(".")
        sub = module.get_submodule(owner) if owner else module
        if id(param) not in done:
            dt = distribute_tensor(param.detach(), device_mesh, objects.get(name, replicate))
            done[id(param)] = torch.nn.Parameter(dt, requires_grad=param.requires_grad)
        setattr(sub, leaf, done[id(param)])
    for name, buf in list(module.named_buffers()):
        owner, _, leaf = name.rpartition(".")
        sub = module.get_submodule(owner) if owner else module
        persistent = leaf not in sub._non_persistent_buffers_set
        sub.register_buffer(
            leaf, distribute_tensor(buf, device_mesh, objects.get(name, replicate)), persistent=persistent
        )
    for sub in module.modules():
        if isinstance(sub, (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)):
            sub.forward = functools.partial(_conv_forward, sub, sub.forward)  # type: ignore[method-assign]
    return module


def _conv_forward(conv: Any, forward: Any, x: Any) -> Any:
    # One convolution on local shards (see distribute); ``forward`` for a plain tensor.
    import torch
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard

    if not isinstance(x, DTensor):
        return forward(x)
    mesh = x.device_mesh
    batched = x.ndim == conv.weight.ndim  # an unbatched input (channels first) is replicated
    want, split = [], False  # the first split of the batch kept, the rest replicated
    for p in x.placements:
        keep = batched and type(p) is Shard and p.dim == 0 and not split
        split |= keep
        want.append(p if keep else Replicate())
    if tuple(want) != tuple(x.placements):
        x = x.redistribute(mesh, want)
    grads = [Partial() if p.is_shard(0) else Replicate() for p in want]
    replicate = [Replicate()] * mesh.ndim

    def local(t: Any) -> Any:
        if not isinstance(t, DTensor):
            return t
        if any(not p.is_replicate() for p in t.placements):
            t = t.redistribute(mesh, replicate)
        return t.to_local(grad_placements=grads)

    out = conv._conv_forward(x.to_local(), local(conv.weight), local(conv.bias))
    shape = torch.Size((x.shape[0], *out.shape[1:]) if batched else out.shape)  # an uneven split
    stride = torch.empty(shape, device="meta").stride()
    return DTensor.from_local(out, mesh, want, run_check=False, shape=shape, stride=stride)


def parse_placements(text: str, n: int) -> tuple[Placement, ...]:
    """``S0,R`` (one per mesh axis: ``S<dim>`` shards that dim, ``R`` replicates) as
    placements. Raises ``ConversionError`` naming the text."""
    parts = [p.strip() for p in text.split(",")]
    out: list[Placement] = []
    for p in parts:
        if p.upper() == "R":
            out.append(("replicate",))
        elif p[:1].upper() == "S" and p[1:].isdigit():
            out.append(("shard", int(p[1:])))
        else:
            raise ConversionError(f"placements {text!r}: expected S<dim> or R per mesh axis, got {p!r}")
    if len(out) != n:
        raise ConversionError(f"placements {text!r}: expected {n} (one per mesh axis), got {len(out)}")
    return tuple(out)


def plan_table(plan: Mapping[str, Sequence[Placement]], mesh: Mesh) -> Any:
    """A rich table of ``plan``: one row per name, one column per mesh axis."""
    from rich.table import Table

    table = Table(title=f"DTensor plan on {mesh}")
    table.add_column("name")
    for axis in mesh.axis_names:
        table.add_column(axis)
    for name, ps in plan.items():
        table.add_row(
            name, *("R" if p[0] == "replicate" else f"S({p[1]})" if p[0] == "shard" else f"P({p[1]})" for p in ps)
        )
    return table
