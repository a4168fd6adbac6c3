"""``sdy-explicit-gather-scatter-batching`` on the Python IR (Shardy's
``transforms/import/explicit_gather_scatter_batching.cc``): the one pass of Shardy's pipelines
without a native version yet."""

from __future__ import annotations

import re

from shardwise import _native
from shardwise.ir.core import Func, Module, Op, Value
from shardwise.ir.rewrite import Uses, erase_op, insert_before
from shardwise.ir.sdy import TERMINATORS
from shardwise.ir.types import TensorType
from shardwise.passes.registry import Options, register_pass

__all__ = ["explicit_gather_scatter_batching"]

#: Ops without memory effects (the native passes' list), which the greedy rewriter erases
#: when unused.
_NO_MEMORY_EFFECT_OPS = frozenset(_native.op_properties()["no_memory_effect"])

_GATHER_FIELDS = (
    "offset_dims",
    "collapsed_slice_dims",
    "operand_batching_dims",
    "start_indices_batching_dims",
    "start_index_map",
    "index_vector_dim",
)
_SCATTER_FIELDS = (
    "update_window_dims",
    "inserted_window_dims",
    "input_batching_dims",
    "scatter_indices_batching_dims",
    "scatter_dims_to_operand_dims",
    "index_vector_dim",
)
_STRUCT_FIELD = re.compile(r"(\w+)\s*=\s*(\[[^\]]*\]|-?\d+)")


def _parse_struct(text: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for name, value in _STRUCT_FIELD.findall(text):
        if value.startswith("["):
            out[name] = [int(x) for x in value[1:-1].split(",") if x.strip()]
        else:
            out[name] = [int(value)]
    return out


def _print_struct(mnemonic: str, fields: tuple[str, ...], values: dict[str, list[int]]) -> str:
    parts = []
    for f in fields:
        v = values.get(f, [])
        if f == "index_vector_dim":
            parts.append(f"{f} = {v[0] if v else 0}")
        elif v:
            parts.append(f"{f} = [{', '.join(str(x) for x in v)}]")
    return f"#stablehlo.{mnemonic}<{', '.join(parts)}>"


def _i64_array(values: list[int]) -> str:
    return "array<i64" + (": " + ", ".join(str(v) for v in values) if values else "") + ">"


def _unwrap(v: Value) -> Value:
    while True:
        d = v.defining_op
        if d is None:
            return v
        if d.name in ("stablehlo.reshape", "stablehlo.broadcast_in_dim"):
            v = d.operands[0]
        elif d.name == "stablehlo.clamp":
            v = d.operands[1]
        elif d.name == "stablehlo.select":
            on_false = d.operands[2]
            v = (
                on_false
                if on_false.defining_op is not None and on_false.defining_op.name == "stablehlo.iota"
                else d.operands[1]
            )
        else:
            return v


def _iota_origin(indices: Value, index_vector_dim: int, removed: int) -> bool:
    v = indices
    d = v.defining_op
    if d is not None and d.name == "stablehlo.concatenate":
        if _int_attr(d, "dimension") != index_vector_dim or removed >= len(d.operands):
            return False
        v = d.operands[removed]
    root = _unwrap(v).defining_op
    return root is not None and root.name == "stablehlo.iota" and _int_attr(root, "iota_dimension") == 0


def _int_attr(op: Op, name: str) -> int:
    return int(op.attributes.get(name, "0").split(":")[0].strip())


def _slice_and_concat(before: Op, indices: Value, index_vector_dim: int, removed: int) -> Value:
    t = indices.type
    assert isinstance(t, TensorType)
    shape = list(t.shape)
    total = shape[index_vector_dim]
    new_shape = list(shape)
    new_shape[index_vector_dim] -= 1
    d = indices.defining_op
    if (
        d is not None
        and d.name == "stablehlo.concatenate"
        and _int_attr(d, "dimension") == index_vector_dim
        and len(d.operands) == total
    ):
        inputs = [v for i, v in enumerate(d.operands) if i != removed]
        if len(inputs) == 1:
            return inputs[0]
        concat = Op(
            "stablehlo.concatenate",
            inputs,
            [TensorType(new_shape, t.element_type)],
            {"dimension": f"{index_vector_dim} : i64"},
            location=before.location,
        )
        insert_before(before, concat)
        return concat.results[0]
    parts: list[Value] = []
    for start_i, end_i in ((0, removed), (removed + 1, total)):
        if start_i >= end_i:
            continue
        start = [0] * len(shape)
        limit = list(shape)
        start[index_vector_dim], limit[index_vector_dim] = start_i, end_i
        part_shape = list(shape)
        part_shape[index_vector_dim] = end_i - start_i
        attrs = {
            "start_indices": _i64_array(start),
            "limit_indices": _i64_array(limit),
            "strides": _i64_array([1] * len(shape)),
        }
        sl = Op("stablehlo.slice", [indices], [TensorType(part_shape, t.element_type)], attrs, location=before.location)
        insert_before(before, sl)
        parts.append(sl.results[0])
    if len(parts) == 1:
        return parts[0]
    concat = Op(
        "stablehlo.concatenate",
        parts,
        [TensorType(new_shape, t.element_type)],
        {"dimension": f"{index_vector_dim} : i64"},
        location=before.location,
    )
    insert_before(before, concat)
    return concat.results[0]


def _batch(op: Op, attr: str, mnemonic: str, fields: tuple[str, ...], data: Value, indices_index: int) -> bool:
    dims = _parse_struct(op.attributes.get(attr, ""))
    batching_field, collapsed_field, map_field = (fields[2], fields[1], fields[4])
    if dims.get(batching_field):
        return False
    indices = op.operands[indices_index]
    dt, it = data.type, indices.type
    if not isinstance(dt, TensorType) or not isinstance(it, TensorType) or dt.rank == 0 or it.rank == 0:
        return False
    ivd = dims.get("index_vector_dim", [0])[0]
    if ivd >= it.rank or it.shape[ivd] <= 1:
        return False
    if it.shape[0] != dt.shape[0]:
        return False
    index_map = list(dims.get(map_field, []))
    if 0 not in index_map:
        return False
    removed = index_map.index(0)
    if not _iota_origin(indices, ivd, removed):
        return False
    index_map.pop(removed)
    collapsed = list(dims.get(collapsed_field, []))
    if 0 not in collapsed:
        return False
    collapsed.remove(0)
    new_indices = _slice_and_concat(op, indices, ivd, removed)
    dims[map_field] = index_map
    dims[collapsed_field] = collapsed
    dims[batching_field] = [0]
    dims[fields[3]] = [0]
    op.attributes[attr] = _print_struct(mnemonic, fields, dims)
    op.operands[indices_index] = new_indices
    return True


def _erase_dead(func: Op) -> None:
    changed = True
    while changed:
        changed = False
        uses = Uses(func)
        for op in reversed([o for o in func.walk() if o is not func]):
            if (
                op.name in _NO_MEMORY_EFFECT_OPS
                and op.name not in TERMINATORS
                and not any(uses.has_uses(r) for r in op.results)
                and op.parent is not None
            ):
                erase_op(op, uses)
                changed = True


@register_pass("sdy-explicit-gather-scatter-batching", anchor="func.func")
def explicit_gather_scatter_batching(module: Module, func: Func, options: Options | None = None) -> None:
    """Turns the implicit batch dimension 0 of a ``stablehlo.gather`` / ``stablehlo.scatter``
    (dimension 0 of operand and indices of equal size, indexed by an iota along dimension 0,
    collapsed / inserted) into explicit batching dimensions, dropping that index component
    (slicing or re-concatenating the indices); then removes ops left without uses, as MLIR's
    greedy rewriter does. Mirrors Shardy's ``explicit_gather_scatter_batching.cc`` (the
    greedy rewriter's constant folding and hoisting are not reproduced)."""
    for op in list(func.walk()):
        if op.parent is None:
            continue
        if op.name == "stablehlo.gather":
            _batch(op, "dimension_numbers", "gather", _GATHER_FIELDS, op.operands[0], 1)
        elif op.name == "stablehlo.scatter":
            n = (len(op.operands) - 1) // 2
            _batch(op, "scatter_dimension_numbers", "scatter", _SCATTER_FIELDS, op.operands[0], n)
    _erase_dead(func)
