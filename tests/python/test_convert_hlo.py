"""``TensorSharding`` <-> XLA HLO sharding text, checked against JAX and XLA themselves.

Oracles:

* the text: ``str(NamedSharding(mesh, spec)._to_xla_hlo_sharding(rank))``
  (``jax/_src/named_sharding.py``: ``named_sharding_to_xla_hlo_sharding``), on an
  ``AbstractMesh`` (no devices needed); explicit device orders through JAX's own
  ``_logical_device_ids`` path (``HloSharding.subgroup_with_device_ordering``);
* canonical form: ``str(xc.HloSharding.from_string(ours)) == ours``;
* the meaning: which block of the global tensor every device holds, and which devices hold
  the same partial sum, read from XLA's own parse of the text (``tile_assignment_devices``),
  compared with ``TensorSharding.device_ranges``; and ``device_ranges`` itself against
  ``NamedSharding(...).devices_indices_map`` on 8 fake CPU devices.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

_COUNT_FLAG = "--xla_force_host_platform_device_count"
if _COUNT_FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" {_COUNT_FLAG}=8").strip()

jax = pytest.importorskip("jax")
np = pytest.importorskip("numpy")
pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax._src.lib import xla_client as xc
from jax.sharding import AbstractMesh, AxisType, NamedSharding
from jax.sharding import PartitionSpec as P
from shardwise import (
    AxisRef,
    ConversionError,
    DimSharding,
    Mesh,
    ShardingError,
    ShardingParseError,
    TensorSharding,
)

pytestmark = pytest.mark.jax

REPLICATED = xc.OpSharding.Type.REPLICATED
UNREDUCED = xc.OpSharding.Type.UNREDUCED
NAMES = ("x", "y", "z", "w")

# A mesh is a tuple of (name, size); a layout is (dims, unreduced, spec_len): dims[i] the mesh
# axis names sharding dim i (major to minor), unreduced the unreduced axis names, spec_len the
# number of PartitionSpec entries written (the rest are trailing dims JAX leaves unsharded).
Axes = tuple[tuple[str, int], ...]
Layout = tuple[tuple[tuple[str, ...], ...], tuple[str, ...], int]


def hyp(max_examples: int) -> Any:
    """Deterministic hypothesis settings (same examples every run, no example database)."""
    return settings(
        derandomize=True,
        max_examples=max_examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


# --------------------------------------------------------------------------- helpers


def pspec(layout: Layout) -> Any:
    dims, unreduced, spec_len = layout
    entries = [None if not d else d[0] if len(d) == 1 else tuple(d) for d in dims[:spec_len]]
    return P(*entries, unreduced=set(unreduced))


def abstract_mesh(axes: Axes) -> Any:
    return AbstractMesh(
        tuple(s for _, s in axes), tuple(n for n, _ in axes), axis_types=(AxisType.Explicit,) * len(axes)
    )


def jax_hlo(axes: Axes, spec: Any, rank: int, device_ids: Sequence[int] | None = None) -> str:
    ids = None if device_ids is None else tuple(device_ids)
    return str(NamedSharding(abstract_mesh(axes), spec, _logical_device_ids=ids)._to_xla_hlo_sharding(rank))


def our_mesh(axes: Axes, device_ids: Sequence[int] | None = None) -> Mesh:
    return Mesh(list(axes), device_ids=device_ids)


def ours(mesh: Mesh, layout: Layout) -> TensorSharding:
    """Our sharding of ``layout``: through ``from_partition_spec`` when JAX lets the spec be
    iterated; a spec with unreduced axes is built directly, because ``from_partition_spec``
    cannot read such a spec (see ``test_from_partition_spec_with_unreduced``)."""
    dims, unreduced, _ = layout
    if not unreduced:
        return TensorSharding.from_partition_spec(pspec(layout), mesh, len(dims))
    return TensorSharding(mesh, [list(d) for d in dims], unreduced=list(unreduced))


def xla_parse(text: str) -> Any:
    # XLA aborts the process on this combination; never hand it over.
    assert not ("last_tile_dim_replicate" in text and "last_tile_dims=" in text), text
    return xc.HloSharding.from_string(text)


def _block(i: int, n: int, d: int) -> tuple[int, int]:
    """Block ``i`` of a dim of size ``d`` split ``n`` ways (shards of ceil(d/n), last ones padded)."""
    c = -(-d // n)
    return (min(i * c, d), min((i + 1) * c, d))


View = dict[int, tuple[tuple[tuple[int, int], ...], tuple[int, ...]]]


def xla_view(text: str, shape: Sequence[int], devices: Sequence[int]) -> View:
    """device -> (its [start, stop) per dim, its coordinate along the unreduced tile dims), as
    XLA's own parse of ``text`` lays the devices out."""
    h = xla_parse(text)
    full = tuple((0, d) for d in shape)
    if h.is_replicated():
        return {d: (full, ()) for d in devices}
    if h.is_unreduced():
        return {d: (full, (d,)) for d in devices}
    if h.is_maximal():
        (d,) = h.tile_assignment_devices()
        return {d: (full, ())}
    dims = list(h.tile_assignment_dimensions())
    devs = list(h.tile_assignment_devices())
    types = list(h.subgroup_types())
    if not types and h.replicate_on_last_tile_dim():
        types = [REPLICATED]
    nd = len(dims) - len(types)
    assert nd == len(shape), (text, shape)
    out: View = {}
    for idx, dev in zip(itertools.product(*(range(n) for n in dims)), devs):
        ranges = tuple(_block(i, n, s) for i, n, s in zip(idx[:nd], dims[:nd], shape))
        out[dev] = (ranges, tuple(idx[nd + k] for k, t in enumerate(types) if t == UNREDUCED))
    assert sorted(out) == sorted(devices), (text, sorted(out), sorted(devices))
    return out


def ts_view(ts: TensorSharding, shape: Sequence[int]) -> View:
    """The same view of our sharding: ``device_ranges`` and the device's mesh coordinate along
    the unreduced (sub-)axes."""
    mesh = ts.mesh
    assert mesh is not None
    sizes = [a.size for a in mesh.axes]
    out: View = {}
    for pos, dev in enumerate(mesh.devices):
        coord: dict[str, int] = {}
        rest = pos
        for ax in reversed(mesh.axes):
            coord[ax.name] = rest % ax.size
            rest //= ax.size
        unr = []
        for a in ts.unreduced:
            c = coord[a.name]
            if a.pre_size is not None and a.size is not None:
                # "x":(m)k is the middle factor of x reshaped to [m, k, rest]
                c = (c // (mesh.axis_size(a.name) // (a.pre_size * a.size))) % a.size
            unr.append(c)
        out[dev] = (ts.device_ranges(shape, dev), tuple(unr))
    assert len(out) == math.prod(sizes) or mesh.is_maximal
    return out


def canon(view: View) -> tuple[dict[int, Any], set[frozenset[int]]]:
    """Ranges per device, and the classes of devices holding the very same values (same block,
    same partial sum): the coordinate numbering itself does not matter."""
    classes: dict[Any, set[int]] = {}
    for d, key in view.items():
        classes.setdefault(key, set()).add(d)
    return {d: r for d, (r, _) in view.items()}, {frozenset(c) for c in classes.values()}


DIVISIBLE = 144  # every product of axis sizes 1..4 up to 16 divides it
RAGGED = (5, 7, 3, 6)


def shapes(rank: int) -> list[tuple[int, ...]]:
    return [(DIVISIBLE,) * rank, RAGGED[:rank]]


def _from_hlo(bad: list[str], text: str, rank: int, mesh: Mesh | None) -> TensorSharding | None:
    try:
        return TensorSharding.from_hlo_sharding(text, rank, mesh)
    except ShardingError as e:
        bad.append(f"from_hlo_sharding({text!r}, {rank}, {mesh!r}) raised {type(e).__name__}: {e}")
        return None


def check_round_trips(ts: TensorSharding, text: str, rank: int, *, exact: bool) -> list[str]:
    """Every property of one produced HLO text; returns the failures (empty when all hold)."""
    bad: list[str] = []
    mesh = ts.mesh
    assert mesh is not None
    parsed = xla_parse(text)
    if str(parsed) != text:
        bad.append(f"{ts}: {text!r} is not canonical, XLA prints {str(parsed)!r}")
    back = _from_hlo(bad, text, rank, mesh)
    derived = None
    if text == "{unreduced}":
        with pytest.raises(ConversionError):
            TensorSharding.from_hlo_sharding(text, rank)
    else:
        derived = _from_hlo(bad, text, rank, None)
    for shape in shapes(rank):
        want = canon(ts_view(ts, shape))
        if canon(xla_view(text, shape, mesh.devices)) != want:
            bad.append(f"{ts}: {text!r} lays devices out differently from device_ranges for shape {shape}")
        if back is not None and canon(ts_view(back, shape)) != want:
            bad.append(f"{ts}: from_hlo_sharding({text!r}, mesh) gave {back}, another layout (shape {shape})")
        if derived is None:
            continue
        if text == "{replicated}":
            if not (derived.is_fully_replicated and derived.rank == rank):
                bad.append(f"from_hlo_sharding({text!r}) gave {derived}")
        elif canon(ts_view(derived, shape)) != want:
            bad.append(
                f"{ts}: from_hlo_sharding({text!r}) without a mesh gave {derived}, another layout (shape {shape})"
            )
    if back is not None:
        if back.to_hlo_sharding() != text:
            bad.append(f"{ts}: {text!r} -> {back} -> {back.to_hlo_sharding()!r}")
        if exact and back != ts:
            bad.append(f"{ts}: from_hlo_sharding({text!r}, mesh) gave {back}, not the same sharding")
    # a derived iota mesh gives back an iota text (XLA keeps a device list it was given as one)
    if (
        derived is not None
        and "<=" in text
        and not (derived.mesh and derived.mesh.device_ids)
        and derived.to_hlo_sharding() != text
    ):
        bad.append(f"{ts}: {text!r} -> {derived} -> {derived.to_hlo_sharding()!r} (derived mesh)")
    return bad


def check_layout(axes: Axes, layout: Layout, device_ids: Sequence[int] | None = None) -> list[str]:
    rank = len(layout[0])
    mesh = our_mesh(axes, device_ids)
    ts = ours(mesh, layout)
    spec = pspec(layout)
    want = jax_hlo(axes, spec, rank, device_ids)
    got = ts.to_hlo_sharding()
    if got != want:
        return [f"mesh {mesh}, {spec}, rank {rank}: ours {got!r}, JAX {want!r}"]
    # size-1 axes leave no trace in HLO; everything else comes back as it was (unreduced too)
    exact = all(s > 1 for _, s in axes)
    return check_round_trips(ts, got, rank, exact=exact)


def layouts(names: Sequence[str], rank: int) -> Iterator[Layout]:
    """Every layout of ``names`` on a rank-``rank`` tensor: each axis unused, on one dim (in every
    order within the dim) or unreduced; spec length from the last sharded dim to ``rank``."""
    for slots in itertools.product(range(-1, rank + 1), repeat=len(names)):
        groups = [[n for n, s in zip(names, slots) if s == i] for i in range(rank)]
        unreduced = tuple(n for n, s in zip(names, slots) if s == rank)
        for orders in itertools.product(*(itertools.permutations(g) for g in groups)):
            last = max((i + 1 for i, g in enumerate(orders) if g), default=0)
            for spec_len in sorted({last, rank}):
                yield tuple(orders), unreduced, spec_len


def assert_none(bad: list[str]) -> None:
    assert not bad, f"{len(bad)} failures, first ones:\n" + "\n".join(bad[:8])


# --------------------------------------------------------------------------- to HLO, exhaustive

EXHAUSTIVE = [
    ((("x", 2), ("y", 4)), 1),
    ((("x", 2), ("y", 4)), 2),
    ((("x", 2), ("y", 4)), 3),
    ((("x", 4),), 4),
    ((("x", 3), ("y", 2)), 2),
    ((("x", 2), ("y", 1), ("z", 2)), 2),
    ((("x", 1),), 2),
    ((("x", 2), ("y", 2), ("z", 2), ("w", 2)), 1),
    ((("x", 1), ("y", 4), ("z", 1), ("w", 4)), 2),
    ((("x", 2), ("y", 3), ("z", 2)), 2),
]


@pytest.mark.parametrize("axes, rank", EXHAUSTIVE, ids=[f"{dict(a)}-r{r}" for a, r in EXHAUSTIVE])
def test_to_hlo_matches_jax_exhaustive(axes: Axes, rank: int) -> None:
    bad: list[str] = []
    n = 0
    for layout in layouts([a for a, _ in axes], rank):
        bad += check_layout(axes, layout)
        n += 1
    assert n > 1
    assert_none(bad)


# --------------------------------------------------------------------------- to HLO, random


@st.composite
def mesh_axes(draw: Any, max_devices: int = 16, max_axes: int = 4) -> Axes:
    n = draw(st.integers(1, max_axes))
    sizes: list[int] = []
    for _ in range(n):
        sizes.append(draw(st.integers(1, min(4, max_devices // math.prod(sizes)))))
    return tuple(zip(NAMES, sizes))


@st.composite
def layout_of(draw: Any, names: Sequence[str], rank: int, unreduced: bool = True) -> Layout:
    top = rank if unreduced else rank - 1
    slots = {n: draw(st.integers(-1, top)) for n in names}
    order = draw(st.permutations(list(names)))
    dims = tuple(tuple(n for n in order if slots[n] == i) for i in range(rank))
    unr = tuple(n for n in names if slots[n] == rank)
    last = max((i + 1 for i, d in enumerate(dims) if d), default=0)
    return dims, unr, draw(st.integers(last, rank))


@st.composite
def cases(draw: Any, max_devices: int = 16, device_order: bool = True) -> tuple[Axes, Layout, list[int] | None]:
    axes = draw(mesh_axes(max_devices))
    rank = draw(st.integers(1, 4))
    layout = draw(layout_of([a for a, _ in axes], rank))
    n = math.prod(s for _, s in axes)
    ids = None
    if device_order and n > 1 and draw(st.booleans()):
        ids = draw(st.permutations(range(n)))
        if ids == list(range(n)):
            ids = None
    return axes, layout, ids


@hyp(400)
@given(cases())
def test_to_hlo_matches_jax_random(case: tuple[Axes, Layout, list[int] | None]) -> None:
    axes, layout, ids = case
    assert_none(check_layout(axes, layout, ids))


@pytest.mark.parametrize(
    "ids",
    [[3, 1, 0, 2, 7, 5, 6, 4], [7, 6, 5, 4, 3, 2, 1, 0], [0, 2, 4, 6, 1, 3, 5, 7], [1, 0, 2, 3, 4, 5, 6, 7]],
)
def test_explicit_device_order_matches_jax(ids: list[int]) -> None:
    axes: Axes = (("x", 2), ("y", 4))
    bad: list[str] = []
    for rank in (1, 2):
        for layout in layouts(["x", "y"], rank):
            bad += check_layout(axes, layout, ids)
    assert_none(bad)


def test_explicit_device_order_examples() -> None:
    mesh = Mesh([("x", 2), ("y", 2)], device_ids=[0, 2, 1, 3])
    assert TensorSharding(mesh, [["x"], ["y"]]).to_hlo_sharding() == "{devices=[2,2]0,2,1,3}"
    # replication groups are sorted, as XLA's printer does
    mesh = Mesh([("x", 2), ("y", 4)], device_ids=[3, 1, 0, 2, 7, 5, 6, 4])
    assert (
        TensorSharding(mesh, [["y"], None]).to_hlo_sharding()
        == "{devices=[4,1,2]3,7,1,5,0,6,2,4 last_tile_dim_replicate}"
    )
    assert (
        TensorSharding(mesh, [["x"], None]).to_hlo_sharding()
        == "{devices=[2,1,4]0,1,2,3,4,5,6,7 last_tile_dim_replicate}"
    )


def test_known_texts() -> None:
    m = Mesh({"x": 2, "y": 4})
    assert TensorSharding(m, [["x"], None]).to_hlo_sharding() == "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"
    assert TensorSharding(m, [None, ["y", "x"]]).to_hlo_sharding() == "{devices=[1,8]<=[2,4]T(1,0)}"
    assert (
        TensorSharding(m, [["x"], None], unreduced=["y"]).to_hlo_sharding()
        == "{devices=[2,1,4]<=[8] last_tile_dims={unreduced}}"
    )
    assert (
        TensorSharding(m, [None, None], unreduced=["y"]).to_hlo_sharding()
        == "{devices=[1,1,4,2]<=[2,4]T(1,0) last_tile_dims={unreduced, replicated}}"
    )
    assert TensorSharding(m, [None], unreduced=["x", "y"]).to_hlo_sharding() == "{unreduced}"
    assert TensorSharding(m, [None, None]).to_hlo_sharding() == "{replicated}"
    assert TensorSharding(Mesh({"x": 1}), [["x"]]).to_hlo_sharding() == "{replicated}"
    assert TensorSharding(Mesh.empty(), [None]).to_hlo_sharding() == "{replicated}"
    assert TensorSharding(Mesh.maximal(3), []).to_hlo_sharding() == "{maximal device=3}"


# --------------------------------------------------------------------------- sub-axes


@st.composite
def split_cases(draw: Any) -> tuple[Axes, Axes, dict[str, tuple[str, int]], Layout, list[int] | None]:
    """A mesh with at least one size-4 axis, the JAX mesh with some size-4 axes split into two
    size-2 axes ``<name>0`` (major) and ``<name>1``, and a layout over the split mesh."""
    n_axes = draw(st.integers(1, 3))
    four = draw(st.integers(0, n_axes - 1))
    sizes: list[int] = []
    for i in range(n_axes):
        sizes.append(
            4 if i == four else draw(st.integers(1, min(4, 16 // (math.prod(sizes) * (4 if i < four else 1)))))
        )
    axes: Axes = tuple(zip(NAMES, sizes))
    split_axes: list[tuple[str, int]] = []
    pieces: dict[str, tuple[str, int]] = {}  # split name -> (axis, pre-size)
    for name, size in axes:
        if size == 4 and (name == NAMES[four] or draw(st.booleans())):
            split_axes += [(name + "0", 2), (name + "1", 2)]
            pieces[name + "0"] = (name, 1)
            pieces[name + "1"] = (name, 2)
        else:
            split_axes.append((name, size))
    rank = draw(st.integers(1, 3))
    layout = draw(layout_of([a for a, _ in split_axes], rank))
    n = math.prod(sizes)
    ids = draw(st.permutations(range(n))) if draw(st.booleans()) else None
    if ids == list(range(n)):
        ids = None
    return axes, tuple(split_axes), pieces, layout, ids


def _refs(names: Sequence[str], pieces: dict[str, tuple[str, int]]) -> list[AxisRef]:
    out: list[AxisRef] = []
    for n in names:
        if n not in pieces:
            out.append(AxisRef(n))
            continue
        axis, pre = pieces[n]
        ref = AxisRef(axis, pre, 2)
        if out and out[-1] == AxisRef(axis, 1, 2) and pre == 2:
            out[-1] = AxisRef(axis)  # "y":(1)2 then "y":(2)2 is all of "y"
        else:
            out.append(ref)
    return out


@hyp(200)
@given(split_cases())
def test_sub_axes_match_jax_split_mesh(case: Any) -> None:
    axes, split_axes, pieces, layout, ids = case
    dims, unreduced, _ = layout
    mesh = our_mesh(axes, ids)
    unr = _refs(sorted(unreduced, key=[a for a, _ in split_axes].index), pieces)
    ts = TensorSharding(mesh, [_refs(d, pieces) for d in dims], unreduced=unr)
    want = jax_hlo(split_axes, pspec(layout), len(dims), ids)
    got = ts.to_hlo_sharding()
    assert got == want, f"{ts}: ours {got!r}, JAX on {split_axes} with {pspec(layout)}: {want!r}"
    exact = all(s > 1 for _, s in axes)
    assert_none(check_round_trips(ts, got, len(dims), exact=exact))


def test_sub_axis_example() -> None:
    mesh = Mesh({"x": 2, "y": 4})
    ts = TensorSharding(mesh, [[AxisRef("y", 2, 2)], None])
    split = (("x", 2), ("y0", 2), ("y1", 2))
    assert jax_hlo(split, P("y1"), 2) == "{devices=[2,1,4]<=[4,2]T(1,0) last_tile_dim_replicate}"
    assert ts.to_hlo_sharding() == jax_hlo(split, P("y1"), 2)
    assert TensorSharding.from_hlo_sharding(ts.to_hlo_sharding(), 2, mesh=mesh) == ts
    ts = TensorSharding(mesh, [[AxisRef("y", 2, 2), "x"], [AxisRef("y", 1, 2)]])
    assert ts.to_hlo_sharding() == jax_hlo(split, P(("y1", "x"), "y0"), 2)
    assert TensorSharding.from_hlo_sharding(ts.to_hlo_sharding(), 2, mesh=mesh) == ts


# --------------------------------------------------------------------------- device_ranges vs JAX


@st.composite
def device_cases(draw: Any) -> tuple[Axes, Layout, list[int]]:
    axes = draw(mesh_axes(max_devices=8))
    rank = draw(st.integers(1, 3))
    layout = draw(layout_of([a for a, _ in axes], rank, unreduced=False))
    n = math.prod(s for _, s in axes)
    return axes, layout, draw(st.permutations(range(n)))


@hyp(150)
@given(device_cases())
def test_device_ranges_match_jax_devices_indices_map(case: tuple[Axes, Layout, list[int]]) -> None:
    axes, layout, ids = case
    devices = jax.devices()
    if len(devices) < len(ids):
        pytest.skip(f"needs {len(ids)} devices; jax was initialised with {len(devices)}")
    by_id = {d.id: d for d in devices}
    jmesh = jax.sharding.Mesh(
        np.array([by_id[i] for i in ids], dtype=object).reshape([s for _, s in axes]), [a for a, _ in axes]
    )
    rank = len(layout[0])
    shape = (24, 48, 72)[:rank]
    indices = NamedSharding(jmesh, pspec(layout)).devices_indices_map(shape)
    ts = ours(our_mesh(axes, ids), layout)
    for dev, idx in indices.items():
        want = tuple(sl.indices(n)[:2] for sl, n in zip(idx, shape))
        assert ts.device_ranges(shape, dev.id) == want, (str(ts), dev.id)


def test_device_ranges_ragged() -> None:
    ts = TensorSharding(Mesh({"x": 4}), [["x"]])
    assert [ts.device_ranges((5,), d) for d in range(4)] == [((0, 2),), ((2, 4),), ((4, 5),), ((5, 5),)]


# --------------------------------------------------------------------------- from HLO, XLA's texts


@st.composite
def factorization(draw: Any, n: int, parts: int) -> list[int]:
    """``parts`` positive ints whose product is ``n``."""
    out = []
    for _ in range(parts - 1):
        divisors = [d for d in range(1, n + 1) if n % d == 0]
        d = draw(st.sampled_from(divisors))
        out.append(d)
        n //= d
    return out + [n]


@st.composite
def xla_texts(draw: Any) -> tuple[str, int, int]:
    """Any tiled HLO sharding XLA itself builds: iota reshape/transpose or a device list, with
    replicated and/or unreduced subgroups."""
    n = draw(st.sampled_from([2, 3, 4, 6, 8, 12, 16]))
    rank = draw(st.integers(1, 3))
    types = draw(st.sampled_from([[], [REPLICATED], [UNREDUCED], [REPLICATED, UNREDUCED]]))
    dims = draw(factorization(n, rank + len(types)))
    if draw(st.booleans()):
        reshape = draw(factorization(n, draw(st.integers(1, 3))))
        perm = draw(st.permutations(range(len(reshape))))
        h = xc.HloSharding.iota_tile(dims=dims, reshape_dims=reshape, transpose_perm=perm, subgroup_types=types)
    else:
        ids = np.array(draw(st.permutations(range(n))), dtype=np.int64).reshape(dims)
        h = xc.HloSharding.subgroup_with_device_ordering(ids, subgroup_types=types)
    return str(h), rank, n


@hyp(300)
@given(xla_texts())
def test_from_hlo_reads_any_xla_text(case: tuple[str, int, int]) -> None:
    text, rank, n = case
    if text in ("{replicated}", "{unreduced}"):  # every tile dim was 1
        return
    ts = TensorSharding.from_hlo_sharding(text, rank)
    assert ts.mesh is not None and sorted(ts.mesh.devices) == list(range(n))
    for shape in shapes(rank):
        assert canon(ts_view(ts, shape)) == canon(xla_view(text, shape, range(n))), (text, str(ts))
    # and back: the same layout (the text may differ: XLA keeps a device list it got as one)
    again = ts.to_hlo_sharding()
    for shape in shapes(rank):
        assert canon(xla_view(again, shape, range(n))) == canon(xla_view(text, shape, range(n))), (text, str(ts), again)
    assert str(xla_parse(again)) == again
    # A derived iota mesh prints the same iota text. Not so with unreduced subgroups: those are
    # a set of axes, printed in mesh order whatever order the text listed their devices in, and
    # JAX's short {unreduced} where XLA's iota_tile keeps all-1 data dims.
    if "<=" in text and not ts.mesh.device_ids and "unreduced" not in text:
        assert again == text, (text, str(ts))


def test_from_hlo_examples() -> None:
    m = Mesh({"x": 2, "y": 4})
    assert (
        str(TensorSharding.from_hlo_sharding("{devices=[2,1,4]<=[8] last_tile_dim_replicate}", 2, m))
        == '#sdy.sharding<@mesh, [{"x"}, {}]>'
    )
    assert (
        str(TensorSharding.from_hlo_sharding("{devices=[1,8]<=[2,4]T(1,0)}", 2, m))
        == '#sdy.sharding<@mesh, [{}, {"y", "x"}]>'
    )
    assert (
        str(TensorSharding.from_hlo_sharding("{devices=[2,1,4]<=[8] last_tile_dims={unreduced}}", 2, m))
        == '#sdy.sharding<@mesh, [{"x"}, {}], unreduced={"y"}>'
    )
    assert (
        str(TensorSharding.from_hlo_sharding("{unreduced}", 1, m)) == '#sdy.sharding<@mesh, [{}], unreduced={"x", "y"}>'
    )
    assert str(TensorSharding.from_hlo_sharding("{replicated}", 2, m)) == "#sdy.sharding<@mesh, [{}, {}]>"
    # a device order that is a transpose of the mesh's becomes sub-axes
    assert (
        str(TensorSharding.from_hlo_sharding("{devices=[4]0,2,1,3}", 1, Mesh({"x": 4})))
        == '#sdy.sharding<@mesh, [{"x":(2)2, "x":(1)2}]>'
    )
    inline = TensorSharding.from_hlo_sharding("{devices=[2,4]<=[8]}", 2, m, mesh_name=None)
    assert str(inline) == '#sdy.sharding<mesh<["x"=2, "y"=4]>, [{"x"}, {"y"}]>'
    named = TensorSharding.from_hlo_sharding("{devices=[2,4]<=[8]}", 2, m, mesh_name="grid")
    assert str(named) == '#sdy.sharding<@grid, [{"x"}, {"y"}]>'
    # no mesh: one derived from the text
    derived = TensorSharding.from_hlo_sharding("{devices=[4]0,3,1,2}", 1)
    assert derived.mesh is not None and derived.mesh.devices == (0, 3, 1, 2)
    assert [derived.device_ranges((8,), d) for d in (0, 3, 1, 2)] == [((0, 2),), ((2, 4),), ((4, 6),), ((6, 8),)]
    maximal = TensorSharding.from_hlo_sharding("{maximal device=3}", 2)
    assert maximal.mesh == Mesh.maximal(3) and maximal.to_hlo_sharding() == "{maximal device=3}"
    assert TensorSharding.from_hlo_sharding("{maximal device=3}", 0, Mesh.maximal(3)).mesh == Mesh.maximal(3)


# --------------------------------------------------------------------------- errors


def test_error_hierarchy() -> None:
    assert issubclass(ConversionError, ShardingError) and issubclass(ConversionError, ValueError)
    assert issubclass(ShardingParseError, ShardingError) and issubclass(ShardingParseError, ValueError)


@pytest.mark.parametrize(
    "text, rank, mesh",
    [
        ("{manual}", 1, None),
        ("{manual}", 1, Mesh({"x": 2})),
        ("{unknown}", 1, None),
        ("{{replicated}, {devices=[2]0,1}}", 1, None),
        ("{{devices=[2]0,1}}", 1, Mesh({"x": 2})),
        ("{devices=[2,2]<=[4] last_tile_dims={manual}}", 1, None),
        ("{devices=[2,1,2]<=[4] last_tile_dims={manual, replicated}}", 1, None),
        ("{devices=[2,1,4]<=[8] last_tile_dim_replicate}", 3, Mesh({"x": 2, "y": 4})),
        ("{devices=[2,1,4]<=[8] last_tile_dim_replicate}", 1, None),
        ("{devices=[2,4]<=[8]}", 1, None),
        ("{devices=[2,4]<=[8]}", 3, Mesh({"x": 2, "y": 4})),
        ("{devices=[2,1,4]<=[8] last_tile_dim_replicate}", 2, Mesh({"x": 4})),  # 8 devices, 4 in the mesh
        ("{devices=[4]0,3,1,2}", 1, Mesh({"x": 4})),  # no reshape/transpose of x
        ("{maximal device=3}", 0, Mesh({"x": 4})),
        ("{maximal device=3}", 0, Mesh.maximal(2)),
        ("{unreduced}", 1, None),  # which axes are unreduced needs a mesh
        ('{devices=[2]0,1 metadata={op_name="a"}}', 1, None),
    ],
)
def test_from_hlo_conversion_errors(text: str, rank: int, mesh: Mesh | None) -> None:
    with pytest.raises(ConversionError):
        TensorSharding.from_hlo_sharding(text, rank, mesh)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "replicated",
        "{replicated",
        "{replicated} x",
        "{foo}",
        "{devices=}",
        "{devices=[2}",
        "{devices=[2,2]<=[3]}",
        "{devices=[2]<=[2]T(0,0)}",
        "{devices=[2]<=[2]T(1)}",
        "{devices=[4]<=[2,2]T(0)}",
        "{devices=[2]0}",
        "{devices=[2]0,1,2}",
        "{devices=[0]}",
        "{devices=[-2]0,1}",
        "{devices=[2]0,x}",
        "{maximal device=}",
        "{devices=[2,2]<=[4] last_tile_dims={bogus}}",
        "{devices=[2]<=[2] last_tile_dims={replicated, unreduced, replicated}}",
    ],
)
def test_from_hlo_malformed(text: str) -> None:
    with pytest.raises(ShardingParseError):
        TensorSharding.from_hlo_sharding(text, 1)


@pytest.mark.parametrize(
    "text, mesh",
    [
        ("{devices=[2]0,0}", None),
        ("{devices=[2]0,2}", None),
        ("{devices=[2]0,0}", Mesh({"x": 2})),
        ("{devices=[2]-1,0}", None),
        # one tile: XLA itself rejects these ("non-maximal shardings must have more than one device")
        ("{devices=[1,1]0}", None),
        ("{devices=[1,1]<=[1]}", None),
    ],
)
def test_from_hlo_rejects_bad_device_lists(text: str, mesh: Mesh | None) -> None:
    with pytest.raises(ShardingError):
        TensorSharding.from_hlo_sharding(text, text.count(",", 0, text.index("]")) + 1, mesh)


def test_to_hlo_strict() -> None:
    mesh = Mesh({"x": 2, "y": 4})
    open_dim = TensorSharding(mesh, [DimSharding(["x"], closed=False), None])
    prio = TensorSharding(mesh, [DimSharding(["x"], priority=0), None])
    rep = TensorSharding(mesh, [["x"], None], replicated=["y"])
    for ts in (open_dim, prio, rep):
        with pytest.raises(ConversionError):
            ts.to_hlo_sharding()
        assert ts.to_hlo_sharding(strict=False) == "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"


def test_to_hlo_unconstrained_not_strict_matches_jax() -> None:
    # P.UNCONSTRAINED needs an Auto axis in JAX; the layout ignores it.
    am = AbstractMesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    mesh = Mesh({"x": 2, "y": 4})
    for spec in (P("x", P.UNCONSTRAINED), P(P.UNCONSTRAINED, ("y", "x"))):
        want = str(NamedSharding(am, spec)._to_xla_hlo_sharding(3))
        ts = TensorSharding.from_partition_spec(spec, mesh, 3)
        assert ts.to_hlo_sharding(strict=False) == want
        with pytest.raises(ConversionError):
            ts.to_hlo_sharding()


def test_to_hlo_invalid_sharding() -> None:
    with pytest.raises(ShardingError):
        TensorSharding("mesh", [["x"], ["x"]]).to_hlo_sharding(Mesh({"x": 2}))
    with pytest.raises(ShardingError):
        TensorSharding("mesh", [["x"]]).to_hlo_sharding(Mesh({"y": 2}))
    with pytest.raises(ShardingError):
        TensorSharding("mesh", [["q"]]).to_hlo_sharding(Mesh({"x": 2}))


# --------------------------------------------------------------------------- regressions of fixed bugs


@pytest.mark.parametrize(
    "ids, dims, unreduced, text",
    [
        ([0, 1, 3, 2], [["x"]], [], "{devices=[2,2]0,1,2,3 last_tile_dim_replicate}"),
        ([3, 1, 0, 2, 7, 5, 6, 4], [["x"], None], [], "{devices=[2,1,4]0,1,2,3,4,5,6,7 last_tile_dim_replicate}"),
        ([0, 1, 3, 2], [None], ["x"], "{devices=[1,2,2]0,1,2,3 last_tile_dims={unreduced, replicated}}"),
    ],
)
def test_from_hlo_explicit_order_with_replication(ids: list[int], dims: Any, unreduced: list[str], text: str) -> None:
    axes = [("x", 2), ("y", len(ids) // 2)]
    ts = TensorSharding(Mesh(axes, device_ids=ids), dims, unreduced=unreduced)
    assert ts.to_hlo_sharding() == text  # the text is right: JAX prints the same (test_explicit_device_order_*)
    assert TensorSharding.from_hlo_sharding(text, len(dims)) is not None  # without the mesh it is read
    assert TensorSharding.from_hlo_sharding(text, len(dims), ts.mesh) == ts


def test_from_partition_spec_with_unreduced() -> None:
    mesh = Mesh({"x": 2, "y": 4})
    ts = TensorSharding.from_partition_spec(P("x", unreduced={"y"}), mesh, 2)
    assert ts == TensorSharding(mesh, [["x"], None], unreduced=["y"])
    assert ts.to_hlo_sharding() == jax_hlo((("x", 2), ("y", 4)), P("x", unreduced={"y"}), 2)
