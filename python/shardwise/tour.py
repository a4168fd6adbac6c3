"""What ``shardwise demo`` and ``shardwise show`` print: the sharding representation (parsed,
validated, printed back, pictured and converted to other formats), the bundled program with
its ops' sharding rules, and the bundled transformer step propagated and explained. The
partition-and-run part of the demo is the ``partition`` and ``run`` commands, in
``shardwise.cli``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from shardwise import __version__
from shardwise.errors import ShardingError
from shardwise.mesh import Mesh
from shardwise.sharding import TensorSharding

__all__ = ["demo", "demo_program", "demo_propagation", "formats_table", "show"]


def _try(f: Callable[[], Any]) -> Text:
    """The value of ``f()`` as plain text (never rich markup: shardings and rules contain
    brackets), or why there is none."""
    try:
        return Text(str(f()))
    except ImportError as e:
        return Text(f"({e})", style="dim")
    except ShardingError as e:
        return Text(f"not expressible: {e}", style="yellow")


def formats_table(ts: TensorSharding, shape: Sequence[int] | None) -> Table:
    """The layout of ``ts`` in every supported format (strict=False: propagation-only parts dropped)."""
    t = Table(title="the same layout in other formats", show_header=True, header_style="bold")
    t.add_column("format")
    t.add_column("value", overflow="fold")
    if shape is not None:
        t.add_row("local shape", _try(lambda: ts.local_shape(shape)))
    t.add_row("XLA HLO sharding", _try(lambda: ts.to_hlo_sharding(strict=False)))
    t.add_row("JAX PartitionSpec", _try(lambda: ts.to_partition_spec(strict=False)))
    t.add_row("PyTorch DTensor placements", _try(lambda: ts.to_dtensor_placements(strict=False)))
    t.add_row("MindSpore layout (dev matrix, tensor map)", _try(lambda: ts.to_mindspore_layout(strict=False)))
    t.add_row("MindSpore strategy", _try(lambda: ts.to_mindspore_strategy()))
    t.add_row("hidet mesh_axis_per_dim", _try(lambda: ts.to_hidet(strict=False)))
    return t


def show(console: Console, ts: TensorSharding, shape: Sequence[int] | None, *, user: bool = False) -> None:
    ts.validate(shape, user=user)
    console.print(Text(str(ts), style="bold"), Text(f" on {ts.mesh}"))
    console.print(f"valid{' for shape ' + str(tuple(shape)) if shape is not None else ''}", style="green")
    if shape is not None and len(shape) in (1, 2):
        from shardwise.visualize import MAX_PICTURE_DEVICES

        mesh = ts.resolve_mesh(None)
        if mesh.size <= MAX_PICTURE_DEVICES:
            console.print(ts.visualize(shape))
        else:
            console.print(
                f"(no device picture: the mesh has {mesh.size} devices, pictures are drawn up to {MAX_PICTURE_DEVICES})",
                highlight=False,
            )
    console.print(formats_table(ts, shape))


_DEMO_MESH = '#sdy.mesh<["x"=2, "y"=4]>'
_DEMO_SHAPE = (8, 16)
_DEMO_SHARDINGS = [
    ('#sdy.sharding<@mesh, [{"x"}, {"y"}]>', "batch on x, features on y"),
    ('#sdy.sharding<@mesh, [{"y", "x"}, {}]>', "one dim on both axes, y major"),
    ('#sdy.sharding<@mesh, [{"x", ?}, {?}]>', "open dims: propagation may add axes"),
    ('#sdy.sharding<@mesh, [{"x"}p0, {}], replicated={"y"}>', "priority 0; y may not shard it"),
    ('#sdy.sharding<@mesh, [{"y":(1)2}, {"x", "y":(2)2}]>', "sub-axes of y, as after a reshape"),
    ('#sdy.sharding<@mesh, [{}, {"x"}], unreduced={"y"}>', "partial sums along y"),
]
_DEMO_INVALID = [
    ('#sdy.sharding<@mesh, [{"x"}, {"x"}]>', None),
    ('#sdy.sharding<@mesh, [{}], replicated={"y", "x"}>', None),
    ('#sdy.sharding<@mesh, [{"y":(1)2, "y":(2)2}, {}]>', None),
    ('#sdy.sharding<@mesh, [{"x", "y"}, {}]>', (2, 16)),
    ('#sdy.sharding<@mesh, [{"x"} {}]>', None),
]


def demo(console: Console) -> None:
    """Parse, validate, print and picture the bundled example shardings."""
    mesh = Mesh.parse(_DEMO_MESH)
    meshes = {"mesh": mesh}
    console.rule(f"shardwise {__version__}: the sharding representation")
    console.print(Text(f"mesh @mesh = {mesh.body()}: {mesh.size} devices, axes {mesh.shape}"))
    table = Table(title=f"shardings of a tensor<{_DEMO_SHAPE[0]}x{_DEMO_SHAPE[1]}xf32>", header_style="bold")
    for col in ("sharding (parsed, printed back)", "meaning", "local shape", "XLA HLO sharding"):
        table.add_column(col, overflow="fold")
    for text, meaning in _DEMO_SHARDINGS:
        ts = TensorSharding.parse(text, meshes)
        assert str(ts) == text  # byte-identical round trip
        ts.validate(_DEMO_SHAPE)
        table.add_row(
            Text(str(ts)), meaning, str(ts.local_shape(_DEMO_SHAPE)), _try(lambda: ts.to_hlo_sharding(strict=False))
        )
    console.print(table)

    ts = TensorSharding.parse(_DEMO_SHARDINGS[0][0], meshes)
    console.print(ts.visualize(_DEMO_SHAPE))
    console.print(TensorSharding.parse(_DEMO_SHARDINGS[4][0], meshes).visualize(_DEMO_SHAPE))
    console.print(formats_table(ts, _DEMO_SHAPE))

    bad = Table(title="invalid input is rejected with the rule it breaks", header_style="bold")
    for col in ("input", "error", "rule"):
        bad.add_column(col, overflow="fold")
    for text, shape in _DEMO_INVALID:
        try:
            TensorSharding.parse(text, meshes).validate(shape, user=True)
            bad.add_row(Text(text), Text("accepted?!", style="red"), "")
        except ShardingError as e:
            bad.add_row(
                Text(text + (f" on shape {shape}" if shape else "")),
                Text(str(e)),
                str(getattr(e, "rule", None) or type(e).__name__),
            )
    console.print(bad)


def demo_program(console: Console) -> None:
    """The bundled example program: a small MLP written with the Builder, each op with the
    sharding rule Shardy's registry gives it."""
    from shardwise.ir.builder import Builder
    from shardwise.rules.from_ir import rules_for

    mesh = Mesh.parse(_DEMO_MESH)
    b = Builder(mesh)
    x = b.arg((8, 16), sharding=b.sharding([["x"], None]))
    w1 = b.arg((16, 32), sharding=b.sharding([None, ["y"]]))
    w2 = b.arg((32, 16))
    h = b.tanh(b.dot_general(x, w1, contracting=((1,), (0,))))
    y = b.dot_general(h, w2, contracting=((1,), (0,)))
    module = b.ret(b.reduce(b.reshape(y, (8, 4, 4)), dims=(2,), kind="sum"))
    rules = rules_for(module)
    console.rule("the program IR and its op sharding rules")
    table = Table(title="@main of the bundled MLP (Builder API)", header_style="bold")
    for col in ("op", "operands -> results", "sharding rule (factors, sizes, kinds)"):
        table.add_column(col, overflow="fold")
    for op in module.func("main").body.ops:
        rule = rules[id(op)]
        types = ", ".join(str(v.type) for v in op.operands) + " -> " + ", ".join(str(v.type) for v in op.results)
        table.add_row(op.name, Text(types), Text("-" if rule is None else str(rule)[len("#sdy.op_sharding_rule") :]))
    console.print(table)
    console.print(
        Text(
            "arguments: " + ", ".join(str(a.sharding) if a.sharding else "unsharded" for a in module.func("main").args)
        )
    )


def demo_propagation(console: Console) -> None:
    """The bundled real program: one transformer block's training step (``jax.value_and_grad``
    of attention + MLP, lowered by JAX 0.10.2 on a 2x4 mesh with batch on ``x`` and the weights
    on ``y``), propagated as Shardy does; arguments, key intermediates and results are shown."""
    import time
    from importlib.resources import files

    from shardwise.api import propagate
    from shardwise.importers.mlir import load_mlir

    console.rule("propagation: a transformer block training step")
    text = files("shardwise.examples").joinpath("transformer_step.mlir").read_text()
    try:
        module = load_mlir(text)
    except ImportError as e:
        console.print(Text(f"skipped: {e}", style="yellow"))
        return
    n_ops = sum(1 for _ in module.walk())
    t = time.perf_counter()
    out = propagate(module)
    seconds = time.perf_counter() - t
    f_in, f_out = module.func("main"), out.func("main")  # the input module is left unchanged
    table = Table(title=f"@main: {n_ops} ops on mesh {out.meshes['mesh']}", header_style="bold")
    for col in ("value", "type", "before (user / JAX)", "after propagation"):
        table.add_column(col, overflow="fold")
    for i, (a, b) in enumerate(zip(f_in.args, f_out.args)):
        table.add_row(f"%arg{i}", str(a.type), Text(str(a.sharding or "-")), Text(str(b.sharding)))
    key_ops = [op for op in f_out.body.ops if op.name in ("stablehlo.dot_general", "stablehlo.reduce")][:8]
    for op in key_ops:
        table.add_row(
            op.name.split(".")[1], str(op.result.type), "-", Text(str(op.result.sharding or "(replicated, open)"))
        )
    for i, s in enumerate(f_out.result_shardings):
        table.add_row(f"result {i}", str(f_out.result_types[i]), "-", Text(str(s or "-")))
    console.print(table)
    console.print(
        f"propagation ({n_ops} ops, Shardy's sdy-propagation-pipeline reproduced) took {seconds * 1000:.1f} ms",
        highlight=False,
    )
    # A weight gradient whose sharding came from far away: the axis travelled back from the
    # weight argument through the whole backward pass.
    from shardwise.explanation import explain

    console.rule("why: the gradient of a weight (result 3)")
    console.print(explain(module, "result3"))
