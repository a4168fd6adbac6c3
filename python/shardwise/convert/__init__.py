"""Conversions between ``TensorSharding`` and other frameworks' sharding formats.

| module       | format                                                    | source of the format          |
|--------------|-----------------------------------------------------------|-------------------------------|
| ``hlo``      | XLA HLO sharding text (``{devices=[2,1,4]<=[8] ...}``)    | xla/hlo/ir/hlo_sharding.cc    |
| ``jax_spec`` | ``jax.sharding.PartitionSpec`` + mesh                     | jax/_src/named_sharding.py    |
| ``mindspore``| strategy tuples and tensor layouts (device matrix + map) | MindSpore sharding propagation|
| ``hidet``    | ``TensorShardSpec.mesh_axis_per_dim``                      | hidet auto-parallel RFC       |
| ``dtensor``  | PyTorch DTensor placements as plain tuples                | torch.distributed.tensor      |

Each ``to_*`` raises ``ConversionError`` for what the format cannot express. Open dims,
priorities and explicitly replicated axes steer propagation but are not part of a layout;
layout formats reject them unless ``strict=False``, which converts the current layout.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shardwise.errors import ConversionError

if TYPE_CHECKING:
    from shardwise.sharding import TensorSharding


def require_layout_only(ts: TensorSharding, fmt: str, strict: bool, *, allow_open_empty: bool = False) -> None:
    """Raises ``ConversionError`` when ``strict`` and ``ts`` carries propagation-only
    information (open dims, priorities, explicitly replicated axes) that ``fmt`` would drop."""
    if not strict:
        return
    problems = []
    open_dims = [i for i, d in enumerate(ts.dims) if d.is_open and (d.axes or not allow_open_empty)]
    if open_dims:
        problems.append(f"open dims {open_dims}")
    prio = [i for i, d in enumerate(ts.dims) if d.priority is not None]
    if prio:
        problems.append(f"priorities on dims {prio}")
    if ts.replicated:
        problems.append("explicitly replicated axes {" + ", ".join(str(a) for a in ts.replicated) + "}")
    if problems:
        raise ConversionError(
            f"{fmt} cannot express the {' and '.join(problems)} of {ts}; "
            "pass strict=False to convert the current layout only"
        )


def reject_sub_axes(ts: TensorSharding, fmt: str) -> None:
    """Raises ``ConversionError`` when a dimension or an unreduced axis is a sub-axis (replicated
    axes are checked by ``require_layout_only``: they are not part of a layout)."""
    subs = [str(a) for a in (*(a for d in ts.dims for a in d.axes), *ts.unreduced) if a.is_sub_axis]
    if subs:
        raise ConversionError(
            f"{fmt} cannot express sub-axes ({', '.join(subs)}) of {ts}; it names whole mesh axes only"
        )
