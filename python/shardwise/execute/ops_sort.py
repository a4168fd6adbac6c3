"""sort with a comparator body, multi-operand, stable (StableHLO spec), and ``chlo.top_k``.

A comparator that is one ``compare LT/GT`` of the first operand's pair uses the namespace's
stable ``argsort``. Any other (elementwise) comparator, made a strict total order by breaking
ties with the original index (which makes the sort stable), drives either

- for short rows, all pairs at once: element ``i`` lands at
  ``#{j : cmp(x_j, x_i)} + #{j < i : x_j, x_i equivalent}``;
- for long rows, Batcher's bitonic sorting network (K. E. Batcher, "Sorting networks and their
  applications", AFIPS 1968): ``O(log^2 n)`` stages, each one comparator evaluation on whole
  arrays, ``O(n)`` memory per row."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shardwise.execute._util import astype, is_float
from shardwise.execute.attrs import parse_bool, parse_enum, parse_int
from shardwise.execute.ops_elementwise import total_order_key
from shardwise.execute.regions import apply_body
from shardwise.execute.registry import register
from shardwise.ir.core import Op, Region

if TYPE_CHECKING:
    from shardwise.execute.interpreter import Interpreter

_PAIR_BUDGET = 1 << 22  # elements of one pairwise-comparison chunk
_PAIRWISE_MAX = 64  # longest row sorted by comparing all pairs


def _simple_comparator(region: Region) -> tuple[str, str | None] | None:
    block = region.entry
    ops = block.ops
    if len(ops) != 2 or ops[0].name != "stablehlo.compare" or ops[1].name not in ("stablehlo.return",):
        return None
    cmp, ret = ops
    if ret.operands[0] is not cmp.results[0]:
        return None
    direction = parse_enum(cmp.attributes["comparison_direction"])
    if list(cmp.operands) == [block.args[0], block.args[1]] and direction in ("LT", "GT"):
        ctype = parse_enum(cmp.attributes["compare_type"]) if "compare_type" in cmp.attributes else None
        return direction, ctype
    return None


def sort_permutation(it: Interpreter, op: Op, region: Region, rows: list[Any]) -> Any:
    """The stable sorting permutation (int64, shape ``(R, n)``) of rows ``rows[k]`` (each
    ``(R, n)``) under the comparator ``region``."""
    xp = it.xp
    simple = _simple_comparator(region)
    if simple is not None and simple[1] == "TOTALORDER" and not hasattr(rows[0], "view"):
        simple = None  # no bit view in this namespace: sort with the comparator itself
    if simple is not None:
        direction, ctype = simple
        key = rows[0]
        if is_float(xp, key):
            key = total_order_key(xp, key) if ctype == "TOTALORDER" else astype(xp, key, xp.float64) + 0.0
        return xp.argsort(key, axis=1, descending=direction == "GT", stable=True)
    R, n = rows[0].shape
    if n > _PAIRWISE_MAX:
        return _bitonic(it, op, region, rows)
    chunk = max(1, _PAIR_BUDGET // max(1, n * n))
    perms = []
    for r0 in range(0, R, chunk):
        part = [x[r0 : r0 + chunk] for x in rows]
        args = []
        for x in part:
            args += [x[:, None, :], x[:, :, None]]  # lhs = x_j (axis 2), rhs = x_i (axis 1)
        less_ji = apply_body(it, op, region, args)[0]  # [r, i, j]: cmp(x_j, x_i)
        less_ij = xp.permute_dims(less_ji, (0, 2, 1))  # cmp(x_i, x_j)
        equiv = xp.logical_not(less_ji) & xp.logical_not(less_ij)
        i_idx = xp.reshape(xp.arange(n), (1, n, 1))
        j_idx = xp.reshape(xp.arange(n), (1, 1, n))
        pos = xp.sum(astype(xp, less_ji, xp.int64), axis=2) + xp.sum(
            astype(xp, equiv & (j_idx < i_idx), xp.int64), axis=2
        )
        perms.append(xp.argsort(pos, axis=1, stable=True))
    return xp.concat(perms, axis=0)


def _bitonic(it: Interpreter, op: Op, region: Region, rows: list[Any]) -> Any:
    """Stable sorting permutation of ``(R, n)`` rows with the bitonic network over ``n`` padded
    to a power of two (padding elements sort last)."""
    xp = it.xp
    R, n = rows[0].shape
    m = 1 << (n - 1).bit_length()
    base = xp.reshape(xp.arange(R, dtype=xp.int64) * n, (R, 1))
    flat_rows = [xp.reshape(x, (-1,)) for x in rows]

    def before(a: Any, b: Any) -> Any:
        """Whether original element ``a`` sorts before ``b`` (index arrays of shape (R, k))."""
        va, vb = a < n, b < n
        ia = xp.reshape(xp.clip(a, 0, n - 1) + base, (-1,))
        ib = xp.reshape(xp.clip(b, 0, n - 1) + base, (-1,))
        args_ab, args_ba = [], []
        for x in flat_rows:
            xa, xb = xp.take(x, ia), xp.take(x, ib)
            args_ab += [xa, xb]
            args_ba += [xb, xa]
        ab = xp.reshape(apply_body(it, op, region, args_ab)[0], a.shape)
        ba = xp.reshape(apply_body(it, op, region, args_ba)[0], a.shape)
        first = ab | (~ab & ~ba & (a < b))
        return xp.where(va & vb, first, xp.where(va | vb, va, a < b))

    perm = xp.broadcast_to(xp.reshape(xp.arange(m, dtype=xp.int64), (1, m)), (R, m))
    idx = xp.arange(m, dtype=xp.int64)
    k = 2
    while k <= m:
        j = k // 2
        while j > 0:
            partner = idx ^ j
            lo = idx[partner > idx]
            hi = lo ^ j
            ascending = (lo & k) == 0
            a, b = xp.take(perm, lo, axis=1), xp.take(perm, hi, axis=1)
            swap = xp.where(ascending, ~before(a, b), before(a, b))
            merged = xp.concat([xp.where(swap, b, a), xp.where(swap, a, b)], axis=1)
            perm = xp.take(merged, xp.argsort(xp.concat([lo, hi])), axis=1)
            j //= 2
        k *= 2
    return perm[:, :n]


@register("stablehlo.sort")
def _sort(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    xp = it.xp
    dim = parse_int(op.attributes.get("dimension", "-1"))
    x0 = args[0]
    dim = dim % x0.ndim if x0.ndim else 0
    parse_bool(op.attributes.get("is_stable", "false"))  # every sort here is stable
    perm_axes = (*[d for d in range(x0.ndim) if d != dim], dim)
    moved = [xp.permute_dims(x, perm_axes) for x in args]
    lead = moved[0].shape[:-1]
    n = x0.shape[dim]
    R = 1
    for s in lead:
        R *= s
    rows = [xp.reshape(x, (R, n)) for x in moved]
    perm = sort_permutation(it, op, op.regions[0], rows)
    flat = xp.reshape(perm + xp.reshape(xp.arange(R, dtype=xp.int64) * n, (R, 1)), (-1,))
    inverse = [0] * x0.ndim
    for i, d in enumerate(perm_axes):
        inverse[d] = i
    out = []
    for x in rows:
        y = xp.reshape(xp.take(xp.reshape(x, (-1,)), flat), (*lead, n))
        out.append(xp.permute_dims(y, tuple(inverse)))
    return out


@register("chlo.top_k")
def _top_k(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    """The ``k`` largest elements of the last dimension, descending (ties: lower index first),
    and their indices."""
    xp, x = it.xp, args[0]
    k = parse_int(op.attributes["k"])
    key = total_order_key(xp, x) if is_float(xp, x) else x
    idx = xp.argsort(key, axis=-1, descending=True, stable=True)[..., :k]
    lead = x.shape[:-1]
    n = x.shape[-1]
    R = 1
    for s in lead:
        R *= s
    flat = xp.reshape(xp.reshape(idx, (R, k)) + xp.reshape(xp.arange(R, dtype=xp.int64) * n, (R, 1)), (-1,))
    vals = xp.reshape(xp.take(xp.reshape(x, (-1,)), flat), (*lead, k))
    return [vals, astype(xp, idx, it.result_dtype(op, 1))]
