"""Text pictures of shardings (rich), like ``jax.debug.visualize_array_sharding``. rich is
imported when a picture is drawn, not with ``shardwise.sharding``, which imports this module."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shardwise.errors import ShardingError
from shardwise.mesh import Mesh

if TYPE_CHECKING:
    from shardwise.sharding import TensorSharding
    from shardwise.tables import PrintableTable

_COLORS = ["cyan", "magenta", "green", "yellow", "blue", "red", "bright_cyan", "bright_magenta"]
_WIDTH = 64  # characters the whole grid aims for
#: The largest mesh a picture is drawn for: the grid asks every device for its block.
MAX_PICTURE_DEVICES = 4096


def device_grid(ts: TensorSharding, shape: Sequence[int], mesh: Mesh) -> PrintableTable:
    """A table with one cell per block of a rank-1 or rank-2 tensor: the index range of the
    block and the devices that hold it (blocks of padding only are left out). Cell widths are
    proportional to block sizes.

    Raises ``ShardingError`` for rank > 2, a mesh of more than ``MAX_PICTURE_DEVICES`` devices,
    and the errors of ``TensorSharding.device_ranges``.
    """
    from rich import box
    from rich.text import Text

    from shardwise.tables import PrintableTable

    if len(shape) not in (1, 2):
        raise ShardingError(f"device_grid draws rank-1 and rank-2 tensors, got shape {tuple(shape)}")
    if mesh.size > MAX_PICTURE_DEVICES:
        raise ShardingError(
            f"device_grid draws meshes of at most {MAX_PICTURE_DEVICES} devices, got {mesh.size} ({mesh})"
        )
    shape2 = (1, *shape) if len(shape) == 1 else tuple(shape)
    holders: dict[tuple[tuple[int, int], tuple[int, int]], list[int]] = {}
    for dev in mesh.devices:
        r = ts.device_ranges(shape, dev, meshes=mesh)
        rows, cols = ((0, 1), r[0]) if len(shape) == 1 else (r[0], r[1])
        if rows[0] < rows[1] and cols[0] < cols[1]:
            holders.setdefault((rows, cols), []).append(dev)
    row_ranges = sorted({k[0] for k in holders})
    col_ranges = sorted({k[1] for k in holders})
    title = f"{ts}  shape={tuple(shape)}"
    if ts.unreduced:
        title += "  (unreduced: devices hold partial sums)"
    table = PrintableTable(title=title, box=box.SQUARE, show_header=False, show_lines=True, padding=(0, 1))
    for lo, hi in col_ranges:
        width = max(8, round(_WIDTH * (hi - lo) / max(1, shape2[1])))
        table.add_column(justify="center", width=width)
    for ri, rows in enumerate(row_ranges):
        cells = []
        for ci, cols in enumerate(col_ranges):
            devs = holders.get((rows, cols), [])
            color = _COLORS[(ri * len(col_ranges) + ci) % len(_COLORS)]
            label = "dev " + ",".join(map(str, sorted(devs))) if devs else "-"
            where = f"[{cols[0]}:{cols[1]}]" if len(shape) == 1 else f"[{rows[0]}:{rows[1]}, {cols[0]}:{cols[1]}]"
            cells.append(Text(f"{label}\n{where}", style=f"bold {color}"))
        table.add_row(*cells)
    return table
