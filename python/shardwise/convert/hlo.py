"""XLA HLO sharding strings (``HloSharding::ToString``), computed in ``rust/src/convert/hlo.rs``.

To HLO follows JAX's ``named_sharding_to_xla_hlo_sharding`` and XLA's canonical printing, so the
text equals ``str(NamedSharding(mesh, spec)._to_xla_hlo_sharding(rank))``; mesh axes of size 1
are dropped as JAX does, sub-axes split the iota reshape dims, an explicit device order prints
the device list. From HLO recognises the tile assignment as an iota reshape/transpose of the
target mesh (``ConversionError`` when it is not one), or derives a mesh.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shardwise import _native
from shardwise.convert import require_layout_only
from shardwise.errors import ConversionError
from shardwise.mesh import Mesh, text_error

if TYPE_CHECKING:
    from shardwise.sharding import TensorSharding


def to_hlo_sharding(ts: TensorSharding, mesh: Mesh, *, strict: bool = True) -> str:
    """``{devices=[2,1,4]<=[8] last_tile_dim_replicate}``, ``{replicated}``,
    ``{maximal device=3}``, … Unreduced axes become ``last_tile_dims={unreduced}``.

    Raises ``ConversionError`` (strict: open dims, priorities, explicitly replicated axes) and
    ``InvalidShardingError`` when ``ts`` is invalid on ``mesh``.
    """
    require_layout_only(ts, "an HLO sharding", strict)
    return str(_native.to_hlo_sharding(ts._native_sharding(), mesh._core))


def from_hlo_sharding(
    cls: type[TensorSharding], text: str, rank: int, mesh: Mesh | None = None, *, mesh_name: str | None = "mesh"
) -> TensorSharding:
    """The sharding (a ``cls``) of a rank-``rank`` tensor described by HLO sharding ``text``, with closed
    dims. On ``mesh`` when given (bound by ``mesh_name``; inlined when ``mesh_name`` is None);
    otherwise on a derived mesh with axes ``axis_0``, ``axis_1``, … (one per iota piece, or one
    per tile dim with explicit ``device_ids`` when the device list is no iota reshape).

    Raises ``ShardingParseError`` (malformed text) and ``ConversionError`` (manual, tuple, wrong
    rank, or a device order the mesh cannot express).
    """
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise ConversionError(f"rank must be a non-negative int, got {rank!r}")
    if rank >= 2**63:
        raise ConversionError(f"rank must be a non-negative int, got {rank!r}")
    try:
        core, m = _native.from_hlo_sharding(text, rank, None if mesh is None else mesh._core, mesh_name)
    except UnicodeEncodeError as e:
        raise text_error(text, e, "an HLO sharding") from None
    return cls._from_core(core, mesh if mesh is not None else Mesh._from_core(m))
