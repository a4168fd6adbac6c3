"""``stablehlo.fft`` (StableHLO spec, "fft": github.com/openxla/stablehlo/blob/main/docs/spec.md#fft).

The transform runs over the last ``len(fft_length)`` dimensions of the operand:

- ``FFT``: complex -> complex forward transform;
- ``IFFT``: complex -> complex inverse transform, scaled by ``1 / prod(fft_length)``;
- ``RFFT``: real -> complex forward transform; the last result dimension is
  ``fft_length[-1] // 2 + 1`` (the non-redundant half);
- ``IRFFT``: complex -> real inverse of ``RFFT``; the result's last dimensions are ``fft_length``
  (the operand's last dimension, ``fft_length[-1] // 2 + 1``, is read as a Hermitian half; the
  imaginary parts of its DC and Nyquist terms are ignored).

The namespace's ``fft`` extension (array API ``xp.fft``) computes it, in double precision (a
complex64 / float32 operand is widened first), and the result is rounded once to the declared
type, like dot products (``_util.accumulate``); XLA's float32 FFT is measured against that.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shardwise.errors import ProgramError
from shardwise.execute._util import accumulate, astype, upcast
from shardwise.execute.attrs import parse_array, parse_enum
from shardwise.execute.registry import register
from shardwise.ir.core import Op

if TYPE_CHECKING:
    from shardwise.execute.interpreter import Interpreter


def _fft_namespace(xp: Any) -> Any:
    f = getattr(xp, "fft", None)
    if f is None:
        raise ProgramError(
            f"stablehlo.fft needs the array API fft extension; namespace {getattr(xp, '__name__', xp)!r} has none"
        )
    return f


@register("stablehlo.fft")
def _fft(it: Interpreter, op: Op, args: list[Any]) -> list[Any]:
    xp = it.xp
    kind = parse_enum(op.attributes["fft_type"])
    length = parse_array(op.attributes["fft_length"])
    x = accumulate(xp, upcast(xp, args[0]))
    rank = len(length)
    if rank == 0 or rank > x.ndim:
        raise ProgramError(f"{op.where()}: fft_length {list(length)} does not fit operand of rank {x.ndim}")
    axes = tuple(range(x.ndim - rank, x.ndim))
    fft = _fft_namespace(xp)
    if kind == "FFT":
        out = fft.fftn(x, s=length, axes=axes)
    elif kind == "IFFT":
        out = fft.ifftn(x, s=length, axes=axes)
    elif kind == "RFFT":
        out = fft.rfftn(x, s=length, axes=axes)
    elif kind == "IRFFT":
        out = fft.irfftn(x, s=length, axes=axes)
    else:
        raise ProgramError(f"{op.where()}: unknown fft_type {kind!r}")
    return [astype(xp, out, it.result_dtype(op))]
