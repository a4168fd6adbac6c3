"""Tables that print as pictures: ``print(report.table())`` and ``print(ts.visualize(shape))``
show the table, as ``rich``'s ``console.print`` does, instead of ``<rich.table.Table ...>``."""

from __future__ import annotations

import io
import shutil

from rich.console import Console
from rich.table import Table

__all__ = ["PrintableTable", "render_text"]


def render_text(renderable: object, width: int | None = None) -> str:
    """``renderable`` drawn as plain text (no colour codes), ``width`` columns wide (default:
    the terminal's width, 100 when there is no terminal)."""
    buf = io.StringIO()
    cols = width if width is not None else shutil.get_terminal_size((100, 24)).columns
    Console(file=buf, width=cols, color_system=None, force_terminal=False, soft_wrap=False).print(renderable)
    return buf.getvalue().rstrip("\n")


class PrintableTable(Table):
    """A ``rich.table.Table`` whose ``str()`` is the drawn table (``print(t)`` shows it)."""

    def __str__(self) -> str:
        return render_text(self)
