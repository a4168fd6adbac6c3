"""Axis-reference arithmetic of Shardy's ``AxisRefAttr`` (``shardy/dialect/sdy/ir/dialect.cc``)
and the list helpers of ``shardy/dialect/sdy/ir/utils.cc`` that the passes need:
``operator<``, prefix/suffix without overlap, ``getAxisSetDiff``, ``sortAndMergeAxes``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from shardwise.mesh import Mesh
from shardwise.sharding import AxisRef

_INF = float("inf")


def key(a: AxisRef) -> tuple[str, int, float]:
    """Sort key of Shardy's ``AxisRefAttr::operator<`` (name, then sub-axes by pre-size, a
    full axis after the sub-axes of pre-size 1)."""
    return (a.name, a.pre_size or 1, a.size if a.size is not None else _INF)


def pre_size(a: AxisRef) -> int:
    """The pre-size of a sub-axis, 1 for a full axis."""
    return a.pre_size if a.pre_size is not None else 1


def size(a: AxisRef, mesh: Mesh) -> int:
    """The size of ``a`` in ``mesh``."""
    return a.size if a.size is not None else mesh.axis_size(a.name)


def next_pre_size(a: AxisRef, mesh: Mesh) -> int:
    """``pre_size * size`` of a sub-axis, the axis size of a full axis."""
    if a.pre_size is not None and a.size is not None:
        return a.pre_size * a.size
    return mesh.axis_size(a.name)


def make(name: str, pre: int, sz: int, mesh: Mesh) -> AxisRef:
    """``name`` restricted to ``[pre, pre*sz)``; the full axis when that covers it."""
    if pre == 1 and sz == mesh.axis_size(name):
        return AxisRef(name)
    return AxisRef(name, pre, sz)


def overlaps(a: AxisRef, b: AxisRef) -> bool:
    """Shardy's ``AxisRefAttr::overlaps``."""
    if a.name != b.name:
        return False
    if a.pre_size is None or b.pre_size is None or a.size is None or b.size is None:
        return True
    return a.pre_size < b.pre_size * b.size and b.pre_size < a.pre_size * a.size


def can_coexist(a: AxisRef, b: AxisRef) -> bool:
    """Shardy's ``AxisRefAttr::canCoexist``: the two can be parts of one valid sharding."""
    if a.name != b.name or a.pre_size is None or b.pre_size is None or a.size is None or b.size is None:
        return True
    lo_pre, hi_pre = sorted((a.pre_size, b.pre_size))
    lo_next, hi_next = sorted((a.pre_size * a.size, b.pre_size * b.size))
    if lo_next > hi_pre:
        return lo_next % hi_pre == 0 and hi_pre % lo_pre == 0 and hi_next % lo_next == 0
    return hi_pre % lo_next == 0


def prefix_without_overlap(a: AxisRef, b: AxisRef, mesh: Mesh) -> AxisRef | None:
    """Shardy's ``getPrefixWithoutOverlap``: the part of ``a`` before ``b``."""
    if not can_coexist(a, b):
        return None
    if not overlaps(a, b):
        return a
    pa, pb = pre_size(a), pre_size(b)
    if pa >= pb:
        return None
    return AxisRef(a.name, pa, pb // pa)


def suffix_without_overlap(a: AxisRef, b: AxisRef, mesh: Mesh) -> AxisRef | None:
    """Shardy's ``getSuffixWithoutOverlap``: the part of ``a`` after ``b``."""
    if not can_coexist(a, b):
        return None
    if not overlaps(a, b):
        return a
    na, nb = next_pre_size(a, mesh), next_pre_size(b, mesh)
    if na <= nb:
        return None
    return AxisRef(a.name, nb, na // nb)


def _first_overlapping(a: AxisRef, ordered: Sequence[AxisRef]) -> AxisRef | None:
    import bisect

    keys = [key(x) for x in ordered]
    i = bisect.bisect_left(keys, key(a))
    if i > 0 and overlaps(a, ordered[i - 1]):
        return ordered[i - 1]
    if i < len(ordered) and overlaps(a, ordered[i]):
        return ordered[i]
    return None


def axis_set_diff(axes_a: Sequence[AxisRef], axes_b: Sequence[AxisRef], mesh: Mesh) -> list[AxisRef]:
    """Shardy's ``getAxisSetDiff``: the parts of ``axes_a`` not in ``axes_b``."""
    if not axes_a or list(axes_a) == list(axes_b):
        return []
    if not axes_b:
        return list(axes_a)
    set_b = sorted(axes_b, key=key)
    out: list[AxisRef] = []
    for a in axes_a:
        cur: AxisRef | None = a
        while cur is not None:
            b = _first_overlapping(cur, set_b)
            if b is None:
                out.append(cur)
                break
            prefix = prefix_without_overlap(cur, b, mesh)
            if prefix is not None:
                out.append(prefix)
            cur = suffix_without_overlap(cur, b, mesh)
    return out


def mesh_sorted(axes: Iterable[AxisRef], mesh: Mesh) -> list[AxisRef]:
    """``axes`` in mesh order (Shardy's ``getMeshComparator``)."""
    order = {name: i for i, name in enumerate(mesh.axis_names)}
    return sorted(axes, key=lambda a: (order.get(a.name, len(order)), key(a)[1:]))


def can_merge(a: AxisRef, b: AxisRef) -> bool:
    """Shardy's ``AxisRefAttr::canMerge``: ``a`` is the sub-axis right before ``b``."""
    return (
        a.name == b.name
        and a.pre_size is not None
        and b.pre_size is not None
        and a.size is not None
        and a.pre_size * a.size == b.pre_size
    )


def merge(a: AxisRef, b: AxisRef, mesh: Mesh) -> AxisRef:
    """Shardy's ``AxisRefAttr::merge`` (the full axis when the parts cover it)."""
    assert a.pre_size is not None and a.size is not None and b.size is not None
    return make(a.name, a.pre_size, a.size * b.size, mesh)


def sort_and_merge(axes: Iterable[AxisRef], mesh: Mesh) -> list[AxisRef]:
    """Shardy's ``sortAndMergeAxes``: mesh order, adjacent sub-axes merged."""
    out: list[AxisRef] = []
    for a in mesh_sorted(axes, mesh):
        if out and can_merge(out[-1], a):
            out[-1] = merge(out[-1], a, mesh)
        else:
            out.append(a)
    return out
