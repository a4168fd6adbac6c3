"""``TensorSharding`` <-> ``jax.sharding.PartitionSpec``, checked against JAX's own lowering.

Oracle: ``NamedSharding(mesh, spec)._to_sdy_sharding(rank)`` built into an MLIR attribute
(``jax/_src/named_sharding.py``: ``named_sharding_to_sdy_sharding``) prints the sdy text JAX
hands to Shardy; ``from_partition_spec(spec, mesh, rank, mesh_name=None)`` must print the same.
"""

from __future__ import annotations

import functools
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
pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax._src.interpreters import mlir as jmlir
from jax.sharding import AbstractMesh, AxisType, NamedSharding
from jax.sharding import PartitionSpec as P
from shardwise import (
    AxisRef,
    ConversionError,
    DimSharding,
    InvalidShardingError,
    Mesh,
    ShardingError,
    TensorSharding,
)

pytestmark = pytest.mark.jax

NAMES = ("x", "y", "z", "w")
OPEN = "open"  # a P.UNCONSTRAINED entry in a layout

# A mesh is a tuple of (name, size). A layout is (entries, unreduced, spec_len): entries[i] is
# a tuple of mesh axis names (major to minor, empty for None) or OPEN; spec_len is the number
# of PartitionSpec entries written, the rest being trailing dims JAX leaves unsharded.
Axes = tuple[tuple[str, int], ...]
Entry = Any  # tuple[str, ...] | OPEN
Layout = tuple[tuple[Entry, ...], tuple[str, ...], int]


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
    entries, unreduced, spec_len = layout
    out: list[Any] = []
    for e in entries[:spec_len]:
        out.append(P.UNCONSTRAINED if e == OPEN else None if not e else e[0] if len(e) == 1 else tuple(e))
    return P(*out, unreduced=set(unreduced))


def padded(spec: Any, rank: int) -> Any:
    """``spec`` with its trailing dims written out as None, as ``to_partition_spec`` gives them."""
    parts = list(spec.partitions)
    return P(*parts, *([None] * (rank - len(parts))), unreduced=spec.unreduced)


@functools.cache
def _ir_context() -> Any:
    return jmlir.make_ir_context()


def jax_sdy(axes: Axes, spec: Any, rank: int, device_ids: Sequence[int] | None = None) -> str:
    """JAX's sdy text. JAX wants unreduced axes Explicit and P.UNCONSTRAINED beside an Auto axis;
    axis types do not change the text."""
    types = tuple(AxisType.Explicit if n in spec.unreduced else AxisType.Auto for n, _ in axes)
    mesh = AbstractMesh(tuple(s for _, s in axes), tuple(n for n, _ in axes), axis_types=types)
    ids = None if device_ids is None else tuple(device_ids)
    sdy = NamedSharding(mesh, spec, _logical_device_ids=ids)._to_sdy_sharding(rank)
    with _ir_context():
        return str(sdy.build({}))


def dim_of(e: Entry) -> DimSharding:
    return DimSharding((), closed=False) if e == OPEN else DimSharding(list(e))


def ours(mesh: Mesh, layout: Layout, *, mesh_name: str | None = None) -> TensorSharding:
    """Our sharding of ``layout`` through ``from_partition_spec``; a spec with unreduced axes is
    built directly, because ``from_partition_spec`` cannot read such a spec (see
    ``test_from_partition_spec_with_unreduced``)."""
    entries, unreduced, _ = layout
    if not unreduced:
        return TensorSharding.from_partition_spec(pspec(layout), mesh, len(entries), mesh_name=mesh_name)
    dims = [dim_of(e) for e in entries]
    if mesh_name is None:
        return TensorSharding(mesh, dims, unreduced=list(unreduced), inline=True)
    return TensorSharding(mesh, dims, unreduced=list(unreduced), mesh_name=mesh_name)


def check_layout(axes: Axes, layout: Layout, device_ids: Sequence[int] | None = None) -> list[str]:
    rank = len(layout[0])
    spec = pspec(layout)
    mesh = Mesh(list(axes), device_ids=device_ids)
    ts = ours(mesh, layout)
    want = jax_sdy(axes, spec, rank, device_ids)
    if str(ts) != want:
        return [f"{spec} rank {rank} on {mesh}: ours {ts}, JAX {want}"]
    bad = []
    back = ts.to_partition_spec()
    if back != padded(spec, rank):
        bad.append(f"{ts}.to_partition_spec() = {back}, not {padded(spec, rank)}")
    if not spec.unreduced:
        again = TensorSharding.from_partition_spec(back, mesh, rank, mesh_name=None)
        if again != ts:
            bad.append(f"{ts} -> {back} -> {again}")
        named = TensorSharding.from_partition_spec(spec, mesh, rank)
        if named.mesh_name != "mesh" or str(named) != "#sdy.sharding<@mesh" + str(ts)[str(ts).index(", [") :]:
            bad.append(f"{spec} with the default mesh name gives {named}")
    return bad


def layouts(names: Sequence[str], rank: int) -> Iterator[Layout]:
    """Every layout of ``names`` on a rank-``rank`` tensor: each axis unused, on one dim (every
    order within a dim) or unreduced; each written empty dim None or UNCONSTRAINED (when JAX
    allows it: some axis is not unreduced); spec length from the last written dim to ``rank``."""
    for slots in itertools.product(range(-1, rank + 1), repeat=len(names)):
        groups = [[n for n, s in zip(names, slots) if s == i] for i in range(rank)]
        unreduced = tuple(n for n, s in zip(names, slots) if s == rank)
        can_open = len(unreduced) < len(names)
        for orders in itertools.product(*(itertools.permutations(g) for g in groups)):
            empty = [i for i, g in enumerate(orders) if not g]
            for opened in itertools.product([False, True] if can_open else [False], repeat=len(empty)):
                entries: list[Entry] = list(orders)
                for i, o in zip(empty, opened):
                    if o:
                        entries[i] = OPEN
                last = max((i + 1 for i, e in enumerate(entries) if e), default=0)
                for spec_len in sorted({last, rank}):
                    # dims past the spec are closed and unsharded
                    written = tuple(e if i < spec_len else () for i, e in enumerate(entries))
                    if written == tuple(entries):
                        yield written, unreduced, spec_len


def assert_none(bad: list[str]) -> None:
    assert not bad, f"{len(bad)} failures, first ones:\n" + "\n".join(bad[:8])


# --------------------------------------------------------------------------- against JAX

EXHAUSTIVE = [
    ((("x", 2), ("y", 4)), 1),
    ((("x", 2), ("y", 4)), 2),
    ((("x", 2), ("y", 4)), 3),
    ((("x", 8),), 4),
    ((("x", 2), ("u", 1), ("y", 4)), 2),
    ((("x", 1),), 2),
    ((("x", 2), ("y", 3), ("z", 2)), 2),
    ((("x", 2), ("y", 2), ("z", 2), ("w", 2)), 1),
]


@pytest.mark.parametrize("axes, rank", EXHAUSTIVE, ids=[f"{dict(a)}-r{r}" for a, r in EXHAUSTIVE])
def test_sdy_text_matches_jax_exhaustive(axes: Axes, rank: int) -> None:
    bad: list[str] = []
    n = 0
    for layout in layouts([a for a, _ in axes], rank):
        bad += check_layout(axes, layout)
        n += 1
    assert n > 1
    assert_none(bad)


@st.composite
def cases(draw: Any) -> tuple[Axes, Layout, list[int] | None]:
    n_axes = draw(st.integers(1, 4))
    sizes: list[int] = []
    for _ in range(n_axes):
        sizes.append(draw(st.integers(1, min(4, 16 // math.prod(sizes)))))
    axes: Axes = tuple(zip(NAMES, sizes))
    names = [a for a, _ in axes]
    rank = draw(st.integers(1, 4))
    slots = {n: draw(st.integers(-1, rank)) for n in names}
    order = draw(st.permutations(names))
    entries: list[Entry] = [tuple(n for n in order if slots[n] == i) for i in range(rank)]
    unreduced = tuple(n for n in names if slots[n] == rank)
    if len(unreduced) < len(names):
        entries = [OPEN if not e and draw(st.integers(0, 3)) == 0 else e for e in entries]
    last = max((i + 1 for i, e in enumerate(entries) if e), default=0)
    spec_len = draw(st.integers(last, rank))
    entries = [e if i < spec_len else () for i, e in enumerate(entries)]
    n = math.prod(sizes)
    ids = draw(st.permutations(range(n))) if n > 1 and draw(st.booleans()) else None
    if ids == list(range(n)):
        ids = None  # an iota order is no explicit order (Shardy drops it)
    return axes, (tuple(entries), unreduced, spec_len), ids


@hyp(300)
@given(cases())
def test_sdy_text_matches_jax_random(case: tuple[Axes, Layout, list[int] | None]) -> None:
    axes, layout, ids = case
    assert_none(check_layout(axes, layout, ids))


def test_examples() -> None:
    mesh = Mesh({"x": 2, "y": 4, "z": 2})
    axes: Axes = (("x", 2), ("y", 4), ("z", 2))
    for spec, rank, text in [
        (P("x", None), 2, '#sdy.sharding<mesh<["x"=2, "y"=4, "z"=2]>, [{"x"}, {}]>'),
        (P(("y", "x")), 3, '#sdy.sharding<mesh<["x"=2, "y"=4, "z"=2]>, [{"y", "x"}, {}, {}]>'),
        (P(None, P.UNCONSTRAINED, "z"), 3, '#sdy.sharding<mesh<["x"=2, "y"=4, "z"=2]>, [{}, {?}, {"z"}]>'),
        (P(), 2, '#sdy.sharding<mesh<["x"=2, "y"=4, "z"=2]>, [{}, {}]>'),
        (P(), 0, '#sdy.sharding<mesh<["x"=2, "y"=4, "z"=2]>, []>'),
    ]:
        assert jax_sdy(axes, spec, rank) == text
        assert str(TensorSharding.from_partition_spec(spec, mesh, rank, mesh_name=None)) == text
    # the default binds the mesh by name
    assert str(TensorSharding.from_partition_spec(P("x"), mesh, 2)) == '#sdy.sharding<@mesh, [{"x"}, {}]>'
    assert (
        str(TensorSharding.from_partition_spec(P("x"), mesh, 2, mesh_name="grid"))
        == '#sdy.sharding<@grid, [{"x"}, {}]>'
    )
    # rank defaults to the spec's length
    assert TensorSharding.from_partition_spec(P("x", None, "y"), mesh).rank == 3
    # a plain sequence of entries is a spec too
    assert TensorSharding.from_partition_spec(["x", ("y", "z"), None], mesh) == TensorSharding(
        mesh, [["x"], ["y", "z"], None]
    )
    assert TensorSharding.from_partition_spec((), mesh, 1) == TensorSharding(mesh, [None])
    # one-element tuples are single names
    assert TensorSharding.from_partition_spec([("x",)], mesh) == TensorSharding.from_partition_spec(["x"], mesh)


def test_explicit_device_order_example() -> None:
    axes: Axes = (("x", 2), ("y", 4))
    ids = [3, 1, 0, 2, 7, 5, 6, 4]
    mesh = Mesh(list(axes), device_ids=ids)
    text = '#sdy.sharding<mesh<["x"=2, "y"=4], device_ids=[3, 1, 0, 2, 7, 5, 6, 4]>, [{"y"}, {}]>'
    assert jax_sdy(axes, P("y"), 2, ids) == text
    assert str(TensorSharding.from_partition_spec(P("y"), mesh, 2, mesh_name=None)) == text


def test_unreduced_text_matches_jax() -> None:
    axes: Axes = (("x", 2), ("u", 1), ("y", 4))
    mesh = Mesh(list(axes))
    ts = TensorSharding(mesh, [["x"], DimSharding((), closed=False), None], unreduced=["y", "u"], inline=True)
    want = jax_sdy(axes, P("x", P.UNCONSTRAINED, unreduced={"y", "u"}), 3)
    assert want == '#sdy.sharding<mesh<["x"=2, "u"=1, "y"=4]>, [{"x"}, {?}, {}], unreduced={"u", "y"}>'
    assert str(ts) == want
    assert ts.to_partition_spec() == P("x", P.UNCONSTRAINED, None, unreduced={"u", "y"})


# --------------------------------------------------------------------------- to_partition_spec


def test_to_partition_spec_examples() -> None:
    mesh = Mesh({"x": 2, "y": 4, "z": 2})
    assert TensorSharding(mesh, [["x"], None]).to_partition_spec() == P("x", None)
    assert TensorSharding(mesh, [["y", "x"], ["z"]]).to_partition_spec() == P(("y", "x"), "z")
    assert TensorSharding(mesh, [DimSharding((), closed=False), None]).to_partition_spec() == P(P.UNCONSTRAINED, None)
    assert TensorSharding(mesh, []).to_partition_spec() == P()
    assert TensorSharding(mesh, [None], unreduced=["z", "x"]).to_partition_spec() == P(None, unreduced={"x", "z"})


def test_to_partition_spec_strict() -> None:
    mesh = Mesh({"x": 2, "y": 4})
    prio = TensorSharding(mesh, [DimSharding(["x"], priority=1), None])
    rep = TensorSharding(mesh, [["x"], None], replicated=["y"])
    for ts in (prio, rep):
        with pytest.raises(ConversionError):
            ts.to_partition_spec()
        assert ts.to_partition_spec(strict=False) == P("x", None)
    # an open empty dim is P.UNCONSTRAINED, strict or not
    assert TensorSharding(mesh, [DimSharding((), closed=False)]).to_partition_spec(strict=True) == P(P.UNCONSTRAINED)


@pytest.mark.parametrize("strict", [True, False])
def test_to_partition_spec_errors(strict: bool) -> None:
    mesh = Mesh({"x": 2, "y": 4})
    sub = [
        TensorSharding(mesh, [[AxisRef("y", 1, 2)], None]),
        TensorSharding(mesh, [["x", AxisRef("y", 2, 2)]]),
        TensorSharding(mesh, [None], unreduced=[AxisRef("y", 1, 2)]),
    ]
    open_with_axes = [
        TensorSharding(mesh, [DimSharding(["x"], closed=False), None]),
        TensorSharding(mesh, [None, DimSharding(["y", "x"], closed=False)]),
    ]
    for ts in sub + open_with_axes:
        with pytest.raises(ConversionError):
            ts.to_partition_spec(strict=strict)


# --------------------------------------------------------------------------- from_partition_spec errors


def test_error_hierarchy() -> None:
    assert issubclass(ConversionError, ShardingError) and issubclass(ConversionError, ValueError)


@pytest.mark.parametrize(
    "spec, rank",
    [
        (P("x", "y"), 1),
        (P("x", None, None), 2),
        (P(None), 0),
        (["x", 3], 2),
        ([["x"]], 1),  # a list is no tuple of names
        ([("x", 1)], 1),
        ([object()], 1),
    ],
)
def test_from_partition_spec_conversion_errors(spec: Any, rank: int) -> None:
    with pytest.raises(ConversionError):
        TensorSharding.from_partition_spec(spec, Mesh({"x": 2, "y": 4}), rank)


@pytest.mark.parametrize(
    "spec",
    [
        P("q"),
        P(("x", "q")),
        P("x", "x"),
        P(("x", "y"), "y"),
        P(("x", "x")),
    ],
)
def test_from_partition_spec_invalid(spec: Any) -> None:
    mesh = Mesh({"x": 2, "y": 4})
    with pytest.raises(ShardingError):
        TensorSharding.from_partition_spec(spec, mesh, 2)
    with pytest.raises(InvalidShardingError):
        TensorSharding.from_partition_spec(spec, mesh, 2, mesh_name=None)


# --------------------------------------------------------------------------- known bug


UNREDUCED_SPECS = [
    (P("x", unreduced={"y"}), 2, '#sdy.sharding<mesh<["x"=2, "y"=4]>, [{"x"}, {}], unreduced={"y"}>'),
    (P(unreduced={"x", "y"}), 1, '#sdy.sharding<mesh<["x"=2, "y"=4]>, [{}], unreduced={"x", "y"}>'),
    (P(None, "y", unreduced={"x"}), 3, '#sdy.sharding<mesh<["x"=2, "y"=4]>, [{}, {"y"}, {}], unreduced={"x"}>'),
]


@pytest.mark.parametrize("spec, rank, text", UNREDUCED_SPECS)
def test_unreduced_specs_jax_text(spec: Any, rank: int, text: str) -> None:
    assert jax_sdy((("x", 2), ("y", 4)), spec, rank) == text


@pytest.mark.parametrize("spec, rank, text", UNREDUCED_SPECS)
def test_from_partition_spec_with_unreduced(spec: Any, rank: int, text: str) -> None:
    mesh = Mesh({"x": 2, "y": 4})
    ts = TensorSharding.from_partition_spec(spec, mesh, rank, mesh_name=None)
    assert str(ts) == text
    assert ts.to_partition_spec() == padded(spec, rank)


def test_partition_spec_round_trip_with_unreduced() -> None:
    mesh = Mesh({"x": 2, "y": 4})
    ts = TensorSharding(mesh, [["x"], None], unreduced=["y"])
    assert TensorSharding.from_partition_spec(ts.to_partition_spec(), mesh) == ts
