"""Shardy's collectives on one rank: each ``sdy.<collective>`` of the global program becomes
StableHLO collectives (``all_gather``, ``all_reduce``, ``reduce_scatter``, ``all_to_all``,
``collective_permute`` with ``replica_groups`` of device ids over the named axes) and local
slices, on the rank's (padded) block.

Semantics (``shardy/dialect/sdy/ir/ops.td``): all-gather removes the axes from the minor end of
each dimension's sharding, all-slice appends them, all-to-all moves axes from the minor end of
``src_dim`` to the minor end of ``tgt_dim``, collective-permute changes which device holds which
block, all-reduce sums (or max/min) partial values over the axes, reduce-scatter is an
all-reduce then an all-slice. Padded shards (a dimension of size ``d`` split ``n`` ways holds
``ceil(d/n)``) are gathered then cut, sliced with zero padding past the end; a step whose
blocks do not nest (``ceil(d/(m*k)) * k != ceil(d/m)`` with ``m > 1``) raises ``ProgramError``
(the planner never emits one). When a native all-to-all or reduce-scatter cannot split a
padded dimension evenly it is done as all-gather + slice or all-reduce + slice (more bytes).
"""

from __future__ import annotations

import re

from shardwise.errors import ProgramError
from shardwise.ir.core import Op, Value
from shardwise.ir.types import TensorType
from shardwise.mesh import Mesh
from shardwise.sharding import AxisRef, TensorSharding
from shardwise.spmd.partition.emit import Emitter
from shardwise.spmd.partition.groups import axis_size, ceil_div, groups, index_over

__all__ = ["BlockState", "lower_collective", "parse_axis_list", "parse_axis_lists"]

_AXIS = re.compile(r'"[^"]*"(?::\(\d+\)\d+)?')


def parse_axis_list(text: str) -> list[AxisRef]:
    """``#sdy<axis_ref_list{"x", "y":(1)2}>`` or ``{"x"}`` -> axis refs."""
    return [AxisRef.parse(a) for a in _AXIS.findall(text)]


def parse_axis_lists(text: str) -> list[list[AxisRef]]:
    """``#sdy<list_of_axis_ref_lists[{"x"}, {}]>`` -> per-dimension axis refs."""
    inner = text[text.index("[") + 1 : text.rindex("]")]
    return [parse_axis_list(part) for part in re.findall(r"\{[^{}]*\}", inner)]


class BlockState:
    """A tensor's per-dimension axes on one rank while collectives change them, with the local
    (padded) size of each dimension and the start of the rank's block."""

    def __init__(self, mesh: Mesh, rank: int, shape: tuple[int, ...], dims: list[list[AxisRef]]) -> None:
        self.mesh, self.rank, self.shape, self.dims = mesh, rank, shape, [list(d) for d in dims]

    def count(self, axes: list[AxisRef]) -> int:
        n = 1
        for a in axes:
            n *= axis_size(self.mesh, a)
        return n

    def local(self, k: int, axes: list[AxisRef] | None = None) -> int:
        return ceil_div(self.shape[k], self.count(self.dims[k] if axes is None else axes))

    def start(self, k: int, axes: list[AxisRef] | None = None, device: int | None = None) -> int:
        axes = self.dims[k] if axes is None else axes
        return index_over(self.mesh, self.rank if device is None else device, axes) * ceil_div(
            self.shape[k], self.count(axes)
        )

    def block(self, device: int) -> tuple[int, ...]:
        return tuple(index_over(self.mesh, device, d) for d in self.dims)


class _Lowering:
    def __init__(self, em: Emitter, mesh: Mesh, rank: int, op: Op) -> None:
        self.em, self.mesh, self.rank, self.op = em, mesh, rank, op

    def fail(self, why: str) -> ProgramError:
        return ProgramError(f"{self.op.where()}: cannot lower on rank {self.rank}: {why}")

    def gather(self, x: Value, st: BlockState, k: int, axes: list[AxisRef]) -> Value:
        if not axes:
            return x
        if st.dims[k][len(st.dims[k]) - len(axes) :] != axes:
            raise self.fail(
                f"all-gather axes {[str(a) for a in axes]} are not the minor end of dimension {k}'s {[str(a) for a in st.dims[k]]}"
            )
        old = st.local(k)
        rest = st.dims[k][: len(st.dims[k]) - len(axes)]
        new = st.local(k, rest)
        n = st.count(axes)
        if rest and old * n != new:
            raise self.fail(
                f"dimension {k} of size {st.shape[k]}: padded blocks of {old} gathered {n} ways do not nest in blocks of {new}"
            )
        y = self.em.all_gather(x, k, groups(self.mesh, axes))
        st.dims[k] = rest
        return y if old * n == new else self.em.slice(y, k, 0, new)

    def slice(self, x: Value, st: BlockState, k: int, axes: list[AxisRef]) -> Value:
        if not axes:
            return x
        old, old_start = st.local(k), st.start(k)
        new_axes = st.dims[k] + axes
        new, new_start = st.local(k, new_axes), st.start(k, new_axes)
        if st.dims[k] and old != new * st.count(axes):
            raise self.fail(
                f"dimension {k} of size {st.shape[k]}: blocks of {old} sliced {st.count(axes)} ways are not blocks of {new}"
            )
        st.dims[k] = new_axes
        return self.em.window(x, k, new_start - old_start, new)

    def all_to_all(self, x: Value, st: BlockState, axes: list[AxisRef], src: int, tgt: int) -> Value:
        n = st.count(axes)
        t_old = st.local(tgt)
        t_new = st.local(tgt, st.dims[tgt] + axes)
        rest = st.dims[src][: len(st.dims[src]) - len(axes)]
        s_old, s_new = st.local(src), st.local(src, rest)
        native = t_old % n == 0 and t_old // n == t_new and (s_old * n == s_new or not rest)
        if not native or st.dims[src][len(st.dims[src]) - len(axes) :] != axes:
            return self.slice(self.gather(x, st, src, axes), st, tgt, axes)
        y = self.em.all_to_all(x, tgt, src, groups(self.mesh, axes))
        st.dims[src] = rest
        st.dims[tgt] = st.dims[tgt] + axes
        return y if s_old * n == s_new else self.em.slice(y, src, 0, s_new)

    def permute(self, x: Value, st: BlockState, out: TensorSharding) -> Value:
        target = BlockState(self.mesh, self.rank, st.shape, [list(d.axes) for d in out.dims])
        holders: dict[tuple[int, ...], list[int]] = {}
        for d in self.mesh.devices:
            holders.setdefault(st.block(d), []).append(d)
        pairs: list[tuple[int, int]] = []
        used: set[int] = set()
        wanted = {d: target.block(d) for d in self.mesh.devices}
        for d in self.mesh.devices:
            if d in holders.get(wanted[d], []):
                pairs.append((d, d))
                used.add(d)
        for d in self.mesh.devices:
            if any(t == d for _, t in pairs):
                continue
            free = [s for s in holders.get(wanted[d], []) if s not in used]
            if not free:
                raise self.fail(f"no device holds block {wanted[d]} for device {d}")
            pairs.append((free[0], d))
            used.add(free[0])
        for k in range(len(st.dims)):
            if st.local(k) != target.local(k):
                raise self.fail(f"collective-permute changes the local size of dimension {k}")
        st.dims = target.dims
        return self.em.collective_permute(x, sorted(pairs))

    def all_reduce(self, x: Value, axes: list[AxisRef], kind: str) -> Value:
        return x if not axes else self.em.all_reduce(x, kind, groups(self.mesh, axes))

    def reduce_scatter(self, x: Value, st: BlockState, k: int, axes: list[AxisRef], kind: str) -> Value:
        if not axes:
            return x
        n, old = st.count(axes), st.local(k)
        new = st.local(k, st.dims[k] + axes)
        if old % n == 0 and old // n == new:
            st.dims[k] = st.dims[k] + axes
            return self.em.reduce_scatter(x, k, kind, groups(self.mesh, axes))
        return self.slice(self.all_reduce(x, axes, kind), st, k, axes)


def _reduction_kind(op: Op) -> str:
    text = op.attributes.get("reduction_op")
    if text is not None:
        for k in ("max", "min", "sum"):
            if k in text:
                return "add" if k == "sum" else k
    src = op.operands[0].defining_op
    if src is not None and src.name == "stablehlo.reduce" and src.regions:
        from shardwise.execute.regions import body_kind

        kind = body_kind(src.regions[0])
        if kind is not None:
            return kind
    return "add"


def lower_collective(em: Emitter, mesh: Mesh, rank: int, op: Op, x: Value, t: TensorType, src: TensorSharding) -> Value:
    """The rank's lowering of the ``sdy`` collective ``op`` applied to local value ``x`` (whose
    global tensor has type ``t`` and sharding ``src``); returns the local result.
    New ops go into ``em.sink``. ``ProgramError`` naming the op for what cannot be lowered."""
    out = op.results[0].sharding
    if not isinstance(t, TensorType) or out is None:
        raise ProgramError(f"{op.where()}: a collective needs a ranked tensor and an out_sharding")
    lw = _Lowering(em, mesh, rank, op)
    st = BlockState(mesh, rank, t.shape, [list(d.axes) for d in src.dims])
    name = op.name
    if name == "sdy.all_gather":
        for k, axes in enumerate(parse_axis_lists(op.attributes["gathering_axes"])):
            x = lw.gather(x, st, k, axes)
    elif name == "sdy.all_slice":
        for k, axes in enumerate(parse_axis_lists(op.attributes["slicing_axes"])):
            x = lw.slice(x, st, k, axes)
    elif name == "sdy.all_to_all":
        for m in re.finditer(r"\{([^{}]*)\}\s*:\s*(\d+)\s*->\s*(\d+)", op.attributes["params"]):
            x = lw.all_to_all(x, st, parse_axis_list(m.group(1)), int(m.group(2)), int(m.group(3)))
    elif name == "sdy.collective_permute":
        x = lw.permute(x, st, out)
    elif name == "sdy.all_reduce":
        x = lw.all_reduce(x, parse_axis_list(op.attributes["reduction_axes"]), _reduction_kind(op))
    elif name == "sdy.reduce_scatter":
        kind = _reduction_kind(op)
        for k, axes in enumerate(parse_axis_lists(op.attributes["reduce_scatter_axes"])):
            x = lw.reduce_scatter(x, st, k, axes, kind)
    else:
        raise ProgramError(f"{op.where()}: not a Shardy collective")
    want = [list(d.axes) for d in out.dims]
    if name != "sdy.all_reduce" and st.dims != want:
        raise lw.fail(f"the steps end at {[[str(a) for a in d] for d in st.dims]}, not the out_sharding {out}")
    return x
