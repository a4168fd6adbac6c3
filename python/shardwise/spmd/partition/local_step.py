"""The local step of the SPMD partitioner: the global program with explicit collectives
becomes one StableHLO program per rank on local shapes (issue 6, "Partitioner").

Every value's type becomes its rank-local (padded) shape ``TensorSharding.local_shape``; sdy
collectives become StableHLO collectives (``collectives.py``); ``sdy.manual_computation``
bodies, already local along their manual axes, are inlined on the operands' local blocks;
``iota`` along a sharded dimension is offset by the rank's block start; splat constants change
type; ``slice`` / ``dynamic_slice`` keep sharded dimensions whole, except windows kept sharded
(slices, reduce-windows and convolutions exchange halos with their neighbours: ``halo.py``);
reductions and dot
contractions over a padded dimension first replace the padding with the reduction's identity
(the reduce's init value, or zero for a dot). ``while`` / ``case`` / ``if`` bodies are
converted the same way. Programs are specialised to their rank (offsets are constants).
"""

from __future__ import annotations

import re

from shardwise.errors import ProgramError
from shardwise.execute.attrs import parse_array, parse_conv_dims, parse_int, parse_struct
from shardwise.execute.regions import body_kind
from shardwise.ir.core import Block, Func, Module, Op, Value
from shardwise.ir.sdy import get_sharding
from shardwise.ir.slots import SDY_COLLECTIVES
from shardwise.ir.types import TensorType, Type
from shardwise.mesh import Mesh
from shardwise.sharding import AxisRef, TensorSharding
from shardwise.spmd.partition.collectives import lower_collective
from shardwise.spmd.partition.emit import Emitter, _i64s, zero_text
from shardwise.spmd.partition.global_step import single_mesh
from shardwise.spmd.partition.groups import ceil_div, groups, index_over
from shardwise.spmd.partition.halo import Halo, halos, padding_without

__all__ = ["localize"]

_DROPPED_ATTRS = ("xla_shape", "mhlo.sharding", "mhlo.frontend_attributes")


#: Local types by (global type, sharding): the same on every rank (``localize``'s ``types``).
LocalTypes = dict[tuple[Type, TensorSharding], Type]


class _Local:
    def __init__(self, mesh_name: str, mesh: Mesh, rank: int, types: LocalTypes) -> None:
        self.mesh_name, self.mesh, self.rank = mesh_name, mesh, rank
        self.types = types
        self.subst: dict[Value, Value] = {}
        self.em = Emitter()
        self.orig: dict[Value, tuple[Type, TensorSharding | None]] = {}
        self.orig_operands: list[Value] = []
        # The block being rebuilt (``block``): its new op list so far, the ops made after the
        # op being converted, the op after it in the block, and whether it stays.
        self.out: list[Op] = []
        self.after: list[Op] = []
        self.next: Op | None = None
        self.keep = True

    # ------------------------------------------------------------------ types
    def replicated(self, rank: int) -> TensorSharding:
        return TensorSharding(self.mesh, [[] for _ in range(rank)], mesh_name=self.mesh_name)

    def sharding(self, v: Value) -> TensorSharding | None:
        return get_sharding(v) if isinstance(v.type, TensorType) else None

    def local_type(self, t: Type, s: TensorSharding | None) -> Type:
        if s is None or not isinstance(t, TensorType) or s.rank == 0:
            return t
        local = self.types.get((t, s))
        if local is None:
            if any(d < 0 for d in t.shape):
                raise ProgramError(f"dynamic shape {t} cannot be partitioned")
            local = TensorType(s.local_shape(t.shape, meshes=self.mesh), t.element_type, t.encoding)
            self.types[(t, s)] = local
        return local

    def dim_info(self, t: TensorType, s: TensorSharding | None, k: int) -> tuple[int, int, int]:
        """(global size, local size, valid elements of the rank's block) of dimension ``k``."""
        d = t.shape[k]
        if s is None or k >= s.rank or not s.dims[k].axes:
            return d, d, d
        axes = list(s.dims[k].axes)
        n = 1
        for a in axes:
            n *= a.full_size(self.mesh) if a.size is None else a.size
        size = ceil_div(d, n)
        start = index_over(self.mesh, self.rank, axes) * size
        return d, size, max(0, min(d - start, size))

    # ------------------------------------------------------------------ walk
    def func(self, f: Func) -> None:
        for i, a in enumerate(f.args):
            a.type = self.local_type(a.type, a.sharding)
            a.sharding = None
            f.arg_attrs[i] = {k: v for k, v in f.arg_attrs[i].items() if k not in _DROPPED_ATTRS}
        for i, t in enumerate(f.result_types):
            f.result_types[i] = self.local_type(t, f.result_shardings[i])
            f.result_shardings[i] = None
            f.result_attrs[i] = {k: v for k, v in f.result_attrs[i].items() if k not in _DROPPED_ATTRS}
        self.block(f.body)

    def block(self, b: Block) -> None:
        """Converts the ops of ``b`` in order and rebuilds its op list in one pass: for each op,
        the ops its conversion makes before it (``em.sink`` is ``out``), the op unless it was
        erased, and the ops made after it. Nested blocks are rebuilt inside ``op``."""
        ops = list(b.ops)
        saved = self.out, self.after, self.next, self.keep
        out: list[Op] = []
        for k, op in enumerate(ops):
            self.out, self.after, self.keep = out, [], True
            self.next = ops[k + 1] if k + 1 < len(ops) else None
            self.op(op)
            if self.keep:
                out.append(op)
            out.extend(self.after)
        for op in out:
            op.parent = b
        b.ops = out
        self.out, self.after, self.next, self.keep = saved

    def at(self, op: Op) -> None:
        """New ops go before ``op``, the op being converted, with its location."""
        self.em.anchor, self.em.sink = op, self.out

    def after_current(self) -> None:
        """New ops go right after the op being converted, with the next op's location."""
        assert self.next is not None
        self.em.anchor, self.em.sink = self.next, self.after

    def erase(self, op: Op) -> None:
        """Drops ``op``, the op being converted, from the rebuilt block."""
        self.keep = False
        op.parent = None

    def op(self, op: Op) -> None:
        orig_operands = list(op.operands)
        self.orig_operands = orig_operands
        op.operands = [self.subst.get(v, v) for v in op.operands]
        for k in _DROPPED_ATTRS:
            op.attributes.pop(k, None)
        if op.name == "sdy.manual_computation":
            self.manual(op)
            return
        shardings = [self.sharding(r) for r in op.results]
        globals_ = [r.type for r in op.results]
        locals_ = [self.local_type(t, s) for t, s in zip(globals_, shardings)]
        for region in op.regions:
            for blk in region.blocks:
                for a in blk.args:
                    a.type = self.local_type(a.type, self.sharding(a))
                for a in blk.args:
                    a.sharding = None
                self.block(blk)
        self.orig_operands = orig_operands
        self.at(op)
        if op.name in SDY_COLLECTIVES:
            gt = self.orig[orig_operands[0]][0]
            assert isinstance(gt, TensorType)
            y = lower_collective(
                self.em, self.mesh, self.rank, op, op.operands[0], gt, self.orig_sharding(orig_operands[0])
            )
            if y.type != locals_[0]:
                raise ProgramError(f"{op.where()}: rank {self.rank} lowering gives {y.type}, expected {locals_[0]}")
            self.subst[op.results[0]] = y
            self.erase(op)
            return
        if op.name in ("sdy.reshard", "sdy.sharding_constraint"):
            raise ProgramError(f"{op.where()}: reshards must be lowered to collectives before the local step")
        if op.name == "sdy.sharding_group":
            self.erase(op)
            return
        if op.name in ("sdy.constant", "stablehlo.constant"):
            self.constant(op, globals_[0], locals_[0])
        elif op.name == "stablehlo.slice":
            haloed = self.exchange_halos(op, globals_[0], shardings[0])
            self.whole_dims(op, globals_[0], locals_[0], "limit_indices", skip=haloed)
        elif op.name in ("stablehlo.reduce_window", "stablehlo.pad"):
            self.exchange_halos(op, globals_[0], shardings[0])
        elif op.name == "stablehlo.dynamic_slice":
            self.whole_dims(op, globals_[0], locals_[0], "slice_sizes")
        elif op.name == "stablehlo.gather":
            self.gather_sizes(op, self.orig[orig_operands[0]][0], op.operands[0].type)
        elif op.name == "stablehlo.convolution":
            self.exchange_halos(op, globals_[0], shardings[0])
            self.local_groups(op, self.orig[orig_operands[0]][0], op.operands[0].type)
        elif op.name == "stablehlo.reduce":
            self.mask_reduce(op)
        elif op.name in ("stablehlo.dot_general", "stablehlo.dot"):
            self.mask_dot(op)
        elif op.name == "stablehlo.scatter" and len(op.operands) == 3:
            self.shift_indices(op, "scatter_dimension_numbers", "inserted_window_dims", "scatter_dims_to_operand_dims")
            self.split_updates(op)
        for r, t in zip(op.results, locals_):
            r.type = t
            r.sharding = None
        if op.name == "stablehlo.iota":
            self.iota(op, shardings[0], globals_[0])
        elif op.name == "stablehlo.reverse":
            self.mirror(op, shardings[0])
        elif op.name == "stablehlo.gather":
            in_range = self.shift_indices(op, "dimension_numbers", "collapsed_slice_dims", "start_index_map")
            if in_range is not None:
                self.mask_gather(op, in_range)

    def orig_sharding(self, v: Value) -> TensorSharding:
        """The global sharding of ``v`` (replicated when it has none)."""
        t, s = self.orig[v]
        return s if s is not None else self.replicated(t.rank if isinstance(t, TensorType) else 0)

    # ------------------------------------------------------------------ ops
    def constant(self, op: Op, g: Type, loc: Type) -> None:
        op.name = "stablehlo.constant"
        if g == loc:
            return
        text = op.attributes["value"]
        m = re.fullmatch(r"(dense<[^\[\]]*>)\s*:\s*tensor<.*>", text)
        if m is None:
            raise ProgramError(f"{op.where()}: a sharded non-splat constant must be replicated first")
        op.attributes["value"] = f"{m.group(1)} : {loc}"

    def whole_dims(self, op: Op, g: Type, loc: Type, attr: str, skip: frozenset[int] | set[int] = frozenset()) -> None:
        assert isinstance(g, TensorType) and isinstance(loc, TensorType)
        if g == loc:
            return
        values = list(parse_array(op.attributes[attr]))
        for k, (a, b) in enumerate(zip(g.shape, loc.shape)):
            if a != b and k not in skip:
                if values[k] != a:
                    raise ProgramError(f"{op.where()}: dimension {k} is sharded but not taken whole")
                values[k] = b
        op.attributes[attr] = _i64s(values)

    def exchange_halos(self, op: Op, result: Type, result_sharding: TensorSharding | None) -> set[int]:
        """The windows of a slice, reduce_window or convolution kept sharded (``halo.py``):
        each rank's block gets its neighbours' halos (one collective-permute per side; the
        padding value at the ends of the dimension), and the op runs on the extended block
        without padding (a slice from 0) on that dimension. Returns the operand dims done."""
        gt, s = self.orig[self.orig_operands[0]]
        if not isinstance(gt, TensorType) or not isinstance(result, TensorType):
            return set()
        kept = halos(self.mesh, op, gt, s, result, result_sharding)
        if not kept:
            return set()
        self.at(op)
        x = op.operands[0]
        t = x.type
        assert isinstance(t, TensorType)
        if op.name in ("stablehlo.reduce_window", "stablehlo.pad"):
            fill = op.operands[1]  # the init value, the padding value
        else:
            fill = self.em.constant(zero_text(t.element_type), TensorType((), t.element_type))
        for d, h in kept.items():
            x = self._with_halo(x, d, h, fill)
        op.operands[0] = x
        if op.name == "stablehlo.slice":
            start, limit = (
                list(parse_array(op.attributes["start_indices"])),
                list(parse_array(op.attributes["limit_indices"])),
            )
            for d, h in kept.items():
                start[d], limit[d] = 0, h.length
            op.attributes["start_indices"], op.attributes["limit_indices"] = _i64s(start), _i64s(limit)
        elif op.name == "stablehlo.pad":
            lo, hi = (
                list(parse_array(op.attributes["edge_padding_low"])),
                list(parse_array(op.attributes["edge_padding_high"])),
            )
            for d in kept:
                lo[d] = hi[d] = 0
            op.attributes["edge_padding_low"], op.attributes["edge_padding_high"] = _i64s(lo), _i64s(hi)
        elif "padding" in op.attributes:
            op.attributes["padding"] = padding_without(op, t.rank, set(kept))
        return set(kept)

    def _with_halo(self, x: Value, d: int, h: Halo, fill: Value) -> Value:
        """Rank's block of ``x`` extended by its neighbours' edges along ``d`` (``h.left`` from
        the previous block, ``h.right`` from the next; ``fill`` past the ends of the dimension),
        cut to the ``h.length`` elements its outputs read."""
        t = x.type
        assert isinstance(t, TensorType)
        index = index_over(self.mesh, self.rank, h.axes)
        chains = groups(self.mesh, list(h.axes))
        parts = []
        if h.left > 0:
            got = self.em.collective_permute(
                self.em.slice(x, d, h.block - h.left, h.block),
                [(g[j], g[j + 1]) for g in chains for j in range(len(g) - 1)],
            )
            if index > 0:
                parts.append(got)
        if index == 0 and h.before(0) > 0:
            parts.append(self._fill(t, d, h.before(0), fill))
        parts.append(x)
        if h.right > 0:
            got = self.em.collective_permute(
                self.em.slice(x, d, 0, h.right), [(g[j + 1], g[j]) for g in chains for j in range(len(g) - 1)]
            )
            if index < h.shards - 1:
                parts.append(got)
        if index == h.shards - 1 and h.after(index) > 0:
            parts.append(self._fill(t, d, h.after(index), fill))
        ext = parts[0] if len(parts) == 1 else self.em.concatenate(parts, d)
        start = h.start(index)
        if (start, h.length) == (0, h.before(index) + h.block + h.after(index)):
            return ext
        return self.em.slice(ext, d, start, start + h.length)

    def _fill(self, t: TensorType, d: int, width: int, fill: Value) -> Value:
        shape = list(t.shape)
        shape[d] = width
        return self.em.broadcast_in_dim(fill, shape, [])

    def local_groups(self, op: Op, g: Type, loc: Type) -> None:
        """A grouped convolution whose input features (feature groups) or input batch (batch
        groups) are split ``n`` ways runs ``count / n`` groups on each rank (XLA's grouped
        convolution handling in ``spmd/convolution_handler.cc``)."""
        assert isinstance(g, TensorType) and isinstance(loc, TensorType)
        d = parse_conv_dims(op.attributes["dimension_numbers"])
        for attr, dim in (("feature_group_count", d.lhs_feature), ("batch_group_count", d.lhs_batch)):
            groups = parse_int(op.attributes.get(attr, "1"))
            whole, local = g.shape[dim], loc.shape[dim]
            if groups == 1 or whole == local:
                continue
            if (groups * local) % whole:
                raise ProgramError(f"{op.where()}: {attr} {groups} cannot be split over {whole // local} shards")
            op.attributes[attr] = f"{groups * local // whole} : i64"

    def gather_sizes(self, op: Op, g: Type, loc: Type) -> None:
        """A gather's ``slice_sizes`` on the local operand: a dimension taken whole (the
        pass-through offset dims of ``coverage.replicated_dims``) takes the local size; a
        sharded batching dimension keeps its slice of 1."""
        assert isinstance(g, TensorType) and isinstance(loc, TensorType)
        if g == loc:
            return
        values = list(parse_array(op.attributes["slice_sizes"]))
        for k, (a, b) in enumerate(zip(g.shape, loc.shape)):
            if a != b and values[k] != 1:
                if values[k] != a:
                    raise ProgramError(f"{op.where()}: operand dimension {k} is sharded but not taken whole")
                values[k] = b
        op.attributes["slice_sizes"] = _i64s(values)

    def shift_indices(self, op: Op, numbers: str, slice_dims: str, index_map: str) -> Value | None:
        """Index-parallel gather and scatter (XLA's ``spmd/gather_scatter_handler.cc``): where
        an operand dimension that the indices address one element at a time (collapsed /
        inserted, size-1 slices) is sharded, each rank holds rows ``[start, start+size)`` of
        it, so the index component for that dimension is shifted by ``-start``. Scatter skips
        the update windows that fall outside (StableHLO's out-of-bounds rule), so it is done;
        gather clamps them, so the returned predicate (per index, of the indices' shape
        without the index vector dimension) says which rows are this rank's, for
        ``mask_gather``. ``None`` when no such dimension is sharded."""
        gt, s = self.orig[self.orig_operands[0]]
        if not isinstance(gt, TensorType) or s is None:
            return None
        dn = parse_struct(op.attributes[numbers], "scatter" if op.name == "stablehlo.scatter" else "gather")
        to_operand = list(dn.get(index_map, []))
        sharded = []
        for c in dn.get(slice_dims, []):
            d, size, _ = self.dim_info(gt, s, c)
            if size != d and c in to_operand:
                sharded.append((to_operand.index(c), self.dim_info_start(d, list(s.dims[c].axes)), size))
        if not sharded:
            return None
        self.at(op)
        indices = op.operands[1]
        it = indices.type
        assert isinstance(it, TensorType)
        ivd = int(dn.get("index_vector_dim", 0))
        scalar = TensorType((), it.element_type)
        if ivd < it.rank:
            starts = [0] * it.shape[ivd]
            for k, start, _ in sharded:
                starts[k] = start
            offset = self.em.constant(
                "[" + ", ".join(map(str, starts)) + "]", TensorType((it.shape[ivd],), it.element_type)
            )
            shifted = self.em.binary("subtract", indices, self.em.broadcast_in_dim(offset, it.shape, [ivd]))
        else:
            ((_, start, _),) = sharded
            shifted = self.em.binary(
                "subtract", indices, self.em.broadcast_in_dim(self.em.constant(str(start), scalar), it.shape, [])
            )
        op.operands[1] = shifted
        if op.name == "stablehlo.scatter":
            return None
        batch_shape = [n for i, n in enumerate(it.shape) if i != ivd]
        ok: Value | None = None
        for k, _, size in sharded:
            comp = self.em.reshape(self.em.slice(shifted, ivd, k, k + 1), batch_shape) if ivd < it.rank else shifted
            bt = TensorType(tuple(batch_shape), it.element_type)
            zero = self.em.broadcast_in_dim(self.em.constant("0", scalar), bt.shape, [])
            limit = self.em.broadcast_in_dim(self.em.constant(str(size), scalar), bt.shape, [])
            inside = self.em.binary("and", self.em.compare(comp, zero, "GE"), self.em.compare(comp, limit, "LT"))
            ok = inside if ok is None else self.em.binary("and", ok, inside)
        return ok

    def split_updates(self, op: Op) -> None:
        """A scatter-add whose updates are split between ranks along their own batch
        dimensions (``coverage.replicated_dims``): its result is all-reduced over those axes
        (the rule's reduction factor), so only the rank at index 0 along them scatters into
        the input; the others scatter into zeros (XLA's scatter handler does the same)."""
        if body_kind(op.regions[0]) != "add":
            return
        dn = parse_struct(op.attributes["scatter_dimension_numbers"], "scatter")
        window = set(dn.get("update_window_dims", []))
        idx_rank = self.orig[self.orig_operands[1]][0]
        assert isinstance(idx_rank, TensorType)
        ivd = int(dn.get("index_vector_dim", 0))
        idx_scatter = [d for d in range(idx_rank.rank) if d != ivd]
        batching = set(dn.get("scatter_indices_batching_dims", []))
        gt, s = self.orig[self.orig_operands[2]]
        if not isinstance(gt, TensorType) or s is None:
            return
        upd_scatter = [d for d in range(gt.rank) if d not in window]
        axes: list[AxisRef] = []
        for k, d in enumerate(upd_scatter):
            if k < len(idx_scatter) and idx_scatter[k] not in batching and d < len(s.dims):
                axes.extend(s.dims[d].axes)
        if not axes or index_over(self.mesh, self.rank, axes) == 0:
            return
        t = op.operands[0].type
        assert isinstance(t, TensorType)
        self.at(op)
        zero = self.em.constant(zero_text(t.element_type), TensorType((), t.element_type))
        op.operands[0] = self.em.broadcast_in_dim(zero, t.shape, [])

    def mask_gather(self, op: Op, in_range: Value) -> None:
        """Zeros the gathered rows whose index is not this rank's (``shift_indices``); the
        all-reduce of the rule's reduction factor then sums the ranks' rows."""
        rt = op.results[0].type
        assert isinstance(rt, TensorType)
        dn = parse_struct(op.attributes["dimension_numbers"], "gather")
        offset = set(dn.get("offset_dims", []))
        batch_dims = [d for d in range(rt.rank) if d not in offset]
        self.after_current()
        mask = self.em.broadcast_in_dim(in_range, rt.shape, batch_dims)
        zeros = self.em.broadcast_in_dim(
            self.em.constant(zero_text(rt.element_type), TensorType((), rt.element_type)), rt.shape, []
        )
        self.subst[op.results[0]] = self.em.select(mask, op.results[0], zeros)

    def mirror(self, op: Op, s: TensorSharding | None) -> None:
        """A reverse along sharded dimensions (unpadded: ``global_step``): the rank's block of
        the result is the reversed block of the rank at the mirrored index along each reversed
        dimension's axes, so the locally reversed block goes to that rank by one
        collective-permute (XLA's reverse handler does the same)."""
        if s is None:
            return
        per_dim = [
            list(s.dims[k].axes) for k in parse_array(op.attributes["dimensions"]) if k < len(s.dims) and s.dims[k].axes
        ]
        if not per_dim:
            return
        sizes = [len(groups(self.mesh, axes)[0]) for axes in per_dim]
        pairs = []
        for g in groups(self.mesh, [a for axes in per_dim for a in axes]):
            by_index = {tuple(index_over(self.mesh, d, axes) for axes in per_dim): d for d in g}
            for index, d in by_index.items():
                pairs.append((d, by_index[tuple(n - 1 - i for n, i in zip(sizes, index))]))
        self.after_current()
        self.subst[op.results[0]] = self.em.collective_permute(op.results[0], pairs)

    def iota(self, op: Op, s: TensorSharding | None, g: Type) -> None:
        if s is None:
            return
        k = parse_int(op.attributes["iota_dimension"])
        axes = list(s.dims[k].axes)
        if not axes:
            return
        assert isinstance(g, TensorType)
        start = self.dim_info_start(g.shape[k], axes)
        if start == 0:
            return
        t = op.results[0].type
        assert isinstance(t, TensorType)
        self.after_current()
        offset = self.em.constant(str(start), t)
        y = self.em.add(op.results[0], offset)
        self.subst[op.results[0]] = y

    def dim_info_start(self, d: int, axes: list[AxisRef]) -> int:
        n = 1
        for a in axes:
            n *= a.full_size(self.mesh) if a.size is None else a.size
        return index_over(self.mesh, self.rank, axes) * ceil_div(d, n)

    def _mask(self, op: Op, i: int, dims: list[int], fill: Value | None) -> None:
        gt, s = self.orig[self.orig_operands[i]]
        if not isinstance(gt, TensorType):
            return
        for k in dims:
            _d, size, valid = self.dim_info(gt, s, k)
            if valid >= size:
                continue
            t = op.operands[i].type
            assert isinstance(t, TensorType)
            if fill is None:
                fill = self.em.constant(zero_text(t.element_type), TensorType((), t.element_type))
            x = self.em.slice(op.operands[i], k, 0, valid)
            op.operands[i] = self.em.pad_high(x, k, size - valid, fill)

    def mask_reduce(self, op: Op) -> None:
        n = len(op.operands) // 2
        dims = list(parse_array(op.attributes["dimensions"]))
        for i in range(n):
            self._mask(op, i, dims, op.operands[n + i])

    def mask_dot(self, op: Op) -> None:
        if op.name == "stablehlo.dot":
            lhs, rhs = [op.operands[0].type.rank - 1], [0]
        else:
            text = op.attributes["dot_dimension_numbers"]
            lm = re.search(r"lhs_contracting_dimensions = \[([^\]]*)\]", text)
            rm = re.search(r"rhs_contracting_dimensions = \[([^\]]*)\]", text)
            lhs = [int(x) for x in lm.group(1).split(",") if x.strip()] if lm else []
            rhs = [int(x) for x in rm.group(1).split(",") if x.strip()] if rm else []
        self._mask(op, 0, lhs, None)
        self._mask(op, 1, rhs, None)

    def manual(self, op: Op) -> None:
        assert op.operand_shardings is not None
        body = op.regions[0].entry
        for a, v, s, g in zip(
            body.args, op.operands, op.operand_shardings, [self.orig[v][0] for v in self.orig_operands]
        ):
            a.type = self.local_type(g, s)
            a.sharding = None
            if a.type != v.type:
                raise ProgramError(f"{op.where()}: operand of type {v.type} does not fit the body argument {a.type}")
            self.subst[a] = v
        self.block(body)
        ret = body.ops[-1]
        self.out.extend(body.ops[:-1])  # the body inlined before the op
        body.ops = [ret]
        for r, v in zip(op.results, ret.operands):
            self.subst[r] = self.subst.get(v, v)
        self.erase(op)


def localize(module: Module, rank: int, types: LocalTypes | None = None) -> Module:
    """Rank ``rank``'s program: a copy of the global ``module`` (explicit sdy collectives, no
    ``sdy.reshard`` left; ``global_step``) on local shapes, with StableHLO collectives whose
    ``replica_groups`` are device ids and no shardings or meshes left. ``types``: a dict the
    calls for the ranks of one module share, so that each local type is computed once (they
    do not depend on the rank). ``ProgramError`` naming the op for anything the rewrite
    cannot express."""
    m = module.copy()
    mesh_name, mesh = single_mesh(m)
    ctx = _Local(mesh_name, mesh, rank, {} if types is None else types)
    # Global types and shardings, recorded before any type changes.
    ctx.orig = {v: (v.type, ctx.sharding(v)) for v in m.values()}
    for f in m.funcs:
        if f.regions[0].blocks:
            ctx.func(f)
    for op in list(m.ops):
        if op.name == "sdy.mesh":
            m.ops.remove(op)
    return m
