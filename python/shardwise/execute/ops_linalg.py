"""dot, dot_general, convolution, triangular_solve and cholesky (StableHLO spec). Products of floats narrower than 32 bits
and of float32 are accumulated in float64 and rounded once to the result type (the op's
declared result type, i.e. ``preferred_element_type``)."""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any

from shardwise.errors import ProgramError
from shardwise.execute._util import accumulate, astype, is_bool, is_complex, scalar_of, upcast
from shardwise.execute.attrs import (
    parse_array,
    parse_bool,
    parse_conv_dims,
    parse_dense,
    parse_enum,
    parse_int,
    parse_struct,
)
from shardwise.execute.ops_elementwise import convert
from shardwise.execute.ops_shape import pad
from shardwise.execute.registry import register
from shardwise.ir.core import Op

if TYPE_CHECKING:
    from shardwise.execute.interpreter import Interpreter


def dot_general(
    xp: Any, lhs: Any, rhs: Any, lb: list[int], rb: list[int], lc: list[int], rc: list[int], dtype: Any
) -> Any:
    """Result dims: batch dims, then lhs free dims, then rhs free dims (in operand order)."""
    lf = [d for d in range(lhs.ndim) if d not in lb and d not in lc]
    rf = [d for d in range(rhs.ndim) if d not in rb and d not in rc]
    bshape = [lhs.shape[d] for d in lb]
    B = math.prod(bshape)
    K = math.prod(lhs.shape[d] for d in lc)
    M = math.prod(lhs.shape[d] for d in lf)
    N = math.prod(rhs.shape[d] for d in rf)
    a = xp.reshape(xp.permute_dims(accumulate(xp, lhs), tuple(lb + lf + lc)), (B, M, K))
    b = xp.reshape(xp.permute_dims(accumulate(xp, rhs), tuple(rb + rc + rf)), (B, K, N))
    if is_bool(xp, a):
        a, b = astype(xp, a, xp.int32), astype(xp, b, xp.int32)
    if a.dtype != b.dtype:
        common = xp.result_type(a.dtype, b.dtype)
        a, b = astype(xp, a, common), astype(xp, b, common)
    if xp.isdtype(a.dtype, "integral") and xp.isdtype(dtype, "integral") and a.dtype != dtype:
        a, b = astype(xp, a, dtype), astype(xp, b, dtype)
    out = xp.matmul(a, b)
    return convert(xp, xp.reshape(out, tuple(bshape + [lhs.shape[d] for d in lf] + [rhs.shape[d] for d in rf])), dtype)


@register("stablehlo.dot_general")
def _dot_general(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    dn = parse_struct(op.attributes["dot_dimension_numbers"], "dot")
    lhs, rhs = args
    return [
        dot_general(
            it.xp,
            lhs,
            rhs,
            dn.get("lhs_batching_dimensions", []),
            dn.get("rhs_batching_dimensions", []),
            dn.get("lhs_contracting_dimensions", []),
            dn.get("rhs_contracting_dimensions", []),
            it.result_dtype(op),
        )
    ]


@register("stablehlo.dot")
def _dot(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    lhs, rhs = args
    lc = [lhs.ndim - 1]
    return [dot_general(it.xp, lhs, rhs, [], [], lc, [0], it.result_dtype(op))]


def _pairs(op: Op, name: str, n: int, default: int) -> list[tuple[int, int]]:
    if name not in op.attributes:
        return [(default, default)] * n
    arr = parse_dense(op.attributes[name]).reshape(-1, 2)
    return [(int(a), int(b)) for a, b in arr.tolist()]


@register("stablehlo.convolution")
def _convolution(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    """General convolution: lhs (input) dilation, padding (negative allowed), window strides,
    rhs (kernel) dilation, window reversal, feature_group_count and batch_group_count, computed
    as one matmul per kernel window position."""
    xp = it.xp
    lhs, rhs = args
    dims = parse_conv_dims(op.attributes["dimension_numbers"])
    ns = len(dims.lhs_spatial)
    strides = parse_array(op.attributes["window_strides"]) if "window_strides" in op.attributes else (1,) * ns
    lhs_dil = parse_array(op.attributes["lhs_dilation"]) if "lhs_dilation" in op.attributes else (1,) * ns
    rhs_dil = parse_array(op.attributes["rhs_dilation"]) if "rhs_dilation" in op.attributes else (1,) * ns
    reversal = parse_array(op.attributes["window_reversal"]) if "window_reversal" in op.attributes else (0,) * ns
    padding = _pairs(op, "padding", ns, 0)
    fgc = parse_int(op.attributes.get("feature_group_count", "1"))
    bgc = parse_int(op.attributes.get("batch_group_count", "1"))
    out_dtype = it.result_dtype(op)
    # Canonical layouts: x [N, C, spatial...], w [O, I, spatial...].
    x = xp.permute_dims(accumulate(xp, lhs), (dims.lhs_batch, dims.lhs_feature, *dims.lhs_spatial))
    w = xp.permute_dims(accumulate(xp, rhs), (dims.rhs_out, dims.rhs_in, *dims.rhs_spatial))
    rev = tuple(2 + i for i, r in enumerate(reversal) if r)
    if rev:
        w = xp.flip(w, axis=rev)
    zero = scalar_of(xp, x.dtype)
    x = pad(
        xp,
        x,
        zero,
        (0, 0, *(lo for lo, _ in padding)),
        (0, 0, *(hi for _, hi in padding)),
        (0, 0, *(d - 1 for d in lhs_dil)),
    )
    n, c = x.shape[0], x.shape[1]
    o, i_per_group = w.shape[0], w.shape[1]
    kernel = w.shape[2:]
    out_spatial = [max(0, (x.shape[2 + d] - (kernel[d] - 1) * rhs_dil[d] - 1) // strides[d] + 1) for d in range(ns)]
    if bgc > 1:
        # Batch groups: the batch splits into bgc groups, each paired with o/bgc output features.
        xs = [x[g * (n // bgc) : (g + 1) * (n // bgc), ...] for g in range(bgc)]
        ws = [w[g * (o // bgc) : (g + 1) * (o // bgc), ...] for g in range(bgc)]
        parts = [_conv_groups(xp, xg, wg, fgc, kernel, out_spatial, strides, rhs_dil) for xg, wg in zip(xs, ws)]
        out = xp.concat(parts, axis=1)
    else:
        out = _conv_groups(xp, x, w, fgc, kernel, out_spatial, strides, rhs_dil)
    if c != i_per_group * fgc:
        raise ProgramError(
            f"{op.where()}: input features {c} != kernel input features {i_per_group} x feature_group_count {fgc}"
        )
    # out is [N, O, spatial...]; move to the output layout.
    perm = [0] * (2 + ns)
    perm[dims.out_batch] = 0
    perm[dims.out_feature] = 1
    for k, d in enumerate(dims.out_spatial):
        perm[d] = 2 + k
    return [convert(xp, xp.permute_dims(out, tuple(perm)), out_dtype)]


def _conv_groups(
    xp: Any,
    x: Any,
    w: Any,
    groups: int,
    kernel: tuple[int, ...],
    out_spatial: list[int],
    strides: tuple[int, ...],
    rhs_dil: tuple[int, ...],
) -> Any:
    n, c = x.shape[0], x.shape[1]
    o = w.shape[0]
    cg, og = c // groups, o // groups
    ns = len(kernel)
    total = math.prod(out_spatial)
    outs = []
    for g in range(groups):
        xg = x[:, g * cg : (g + 1) * cg, ...]
        wg = w[g * og : (g + 1) * og, ...]
        acc = xp.zeros((n, og, total), dtype=xp.result_type(x.dtype, w.dtype))
        for pos in itertools.product(*(range(k) for k in kernel)):
            sl = tuple(
                slice(pos[d] * rhs_dil[d], pos[d] * rhs_dil[d] + (out_spatial[d] - 1) * strides[d] + 1, strides[d])
                for d in range(ns)
            )
            patch = xp.reshape(xg[(slice(None), slice(None), *sl)], (n, cg, total))  # [N, Cg, P]
            kw = wg[(slice(None), slice(None), *pos)]  # [Og, Cg]
            acc = acc + xp.matmul(kw, patch)
        outs.append(xp.reshape(acc, (n, og, *out_spatial)))
    return outs[0] if groups == 1 else xp.concat(outs, axis=1)


def _adjoint(xp: Any, a: Any) -> Any:
    """The conjugate transpose of the last two dimensions."""
    t = xp.matrix_transpose(a) if hasattr(xp, "matrix_transpose") else xp.swapaxes(a, -1, -2)
    return xp.conj(t) if is_complex(xp, t) else t


def _triangle(xp: Any, a: Any, lower: bool) -> Any:
    return xp.tril(a) if lower else xp.triu(a)


# JAX itself lowers Cholesky to the LAPACK custom call lapack_?potrf_ffi on CPU; other
# producers (and XLA's own expanders) emit stablehlo.cholesky.
@register("stablehlo.cholesky")
def cholesky(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    """Cholesky factor of each Hermitian positive-definite ``[..., N, N]`` matrix (StableHLO
    spec, "cholesky"): ``lower`` gives ``L`` with ``a = L L^H``, else ``U`` with ``a = U^H U``;
    only that triangle of ``a`` is read. The other triangle of the result is zero (the spec
    leaves it implementation-defined), and a matrix that is not positive definite gives NaNs
    in the whole matrix (the spec: implementation-defined; XLA's CPU result is the same). Computed column by column
    (Cholesky-Banachiewicz) in double precision, rounded once to the result type."""
    xp = it.xp
    lower = parse_bool(op.attributes["lower"]) if "lower" in op.attributes else False
    a = accumulate(xp, upcast(xp, args[0]))
    if not lower:  # U^H U = a  <=>  L L^H = a with L = U^H, and L's lower triangle is a's upper one, conjugated
        a = _adjoint(xp, a)
    n = a.shape[-1]
    rows = xp.reshape(xp.arange(n), (n,))
    cols: list[Any] = []
    for j in range(n):
        s = a[..., :, j]
        for k in range(j):
            ljk = cols[k][..., j : j + 1]
            s = s - cols[k] * (xp.conj(ljk) if is_complex(xp, ljk) else ljk)
        d = xp.sqrt(xp.real(s[..., j : j + 1]) if is_complex(xp, s) else s[..., j : j + 1])
        col = s / (astype(xp, d, s.dtype) if is_complex(xp, s) else d)
        col = xp.where(rows >= j, col, xp.zeros_like(col))
        cols.append(col)
    factor = xp.stack(cols, axis=-1) if cols else a
    failed = xp.any(xp.isnan(factor), axis=(-2, -1), keepdims=True)
    factor = xp.where(failed, xp.full_like(factor, math.nan), factor)
    if not lower:
        factor = _adjoint(xp, factor)
    return [astype(xp, factor, it.result_dtype(op))]


@register("stablehlo.triangular_solve")
def _triangular_solve(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    """Solves ``op(a) x = b`` (``left_side``) or ``x op(a) = b`` for batches of triangular
    ``a`` (StableHLO spec, "triangular_solve"): only the ``lower`` (or upper) triangle of ``a``
    is read, its diagonal taken as ones if ``unit_diagonal``; ``op`` is the identity, the
    transpose or the adjoint (``transpose_a``). By forward / backward substitution in double
    precision, rounded once to the result type."""
    xp = it.xp
    left = parse_bool(op.attributes.get("left_side", "false"))
    lower = parse_bool(op.attributes.get("lower", "false"))
    unit = parse_bool(op.attributes.get("unit_diagonal", "false"))
    transpose = parse_enum(op.attributes["transpose_a"]) if "transpose_a" in op.attributes else "NO_TRANSPOSE"
    a = _triangle(xp, accumulate(xp, upcast(xp, args[0])), lower)
    b = accumulate(xp, upcast(xp, args[1]))
    n = a.shape[-1]
    if unit:
        eye = xp.eye(n, dtype=a.dtype)
        a = a * (1 - eye) + eye
    if transpose == "TRANSPOSE":
        a, lower = xp.swapaxes(a, -1, -2), not lower
    elif transpose == "ADJOINT":
        a, lower = _adjoint(xp, a), not lower
    elif transpose != "NO_TRANSPOSE":
        raise ProgramError(f"{op.where()}: unknown transpose_a {transpose!r}")
    if not left:  # x T = b  <=>  T^T x^T = b^T
        a, b, lower = xp.swapaxes(a, -1, -2), xp.swapaxes(b, -1, -2), not lower
    if a.dtype != b.dtype:
        common = xp.result_type(a.dtype, b.dtype)
        a, b = astype(xp, a, common), astype(xp, b, common)
    xs: list[Any] = [None] * n
    order = range(n) if lower else range(n - 1, -1, -1)
    for i in order:
        r = b[..., i, :]
        for k in range(n):
            if xs[k] is not None:
                r = r - a[..., i, k : k + 1] * xs[k]
        xs[i] = r / a[..., i, i : i + 1]
    x = xp.stack(xs, axis=-2) if n else b
    if not left:
        x = xp.swapaxes(x, -1, -2)
    return [astype(xp, x, it.result_dtype(op))]
