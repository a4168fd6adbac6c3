from __future__ import annotations

import pickle

import pytest
from shardwise import (
    AxisRef,
    DimSharding,
    InvalidShardingError,
    Mesh,
    MeshError,
    ShardingError,
    ShardingParseError,
    TensorSharding,
)

MESH = Mesh({"x": 2, "y": 8, "z": 2})
MESHES = {"mesh": MESH}


def test_build_and_print() -> None:
    t = TensorSharding(
        MESH,
        [DimSharding(["x", AxisRef("y", 2, 2)], closed=False, priority=1), None],
        replicated=["z", AxisRef("y", 1, 2)],
    )
    # replicated axes are stored in mesh order
    assert str(t) == '#sdy.sharding<@mesh, [{"x", "y":(2)2, ?}p1, {}], replicated={"y":(1)2, "z"}>'
    assert t == TensorSharding.parse(str(t), MESHES) and hash(t) == hash(TensorSharding.parse(str(t), MESHES))
    assert t.body() == str(t)[len("#sdy.sharding") :]
    assert t.rank == 2 and not t.is_fully_replicated
    assert t.axis_refs == (AxisRef("x"), AxisRef("y", 2, 2), AxisRef("y", 1, 2), AxisRef("z"))
    inline = TensorSharding(Mesh({"a": 2}), [["a"]], inline=True)
    assert str(inline) == '#sdy.sharding<mesh<["a"=2]>, [{"a"}]>'
    assert TensorSharding.parse(str(inline)).mesh == Mesh({"a": 2})
    assert str(TensorSharding("other", [None])) == "#sdy.sharding<@other, [{}]>"
    assert (
        str(TensorSharding(MESH, [], unreduced=["y", "x"], reduction="max"))
        == '#sdy.sharding<@mesh, [], unreduced=max{"x", "y"}>'
    )
    assert str(TensorSharding.replicated_on(MESH, 2, open=True)) == "#sdy.sharding<@mesh, [{?}, {?}]>"
    assert pickle.loads(pickle.dumps(t)) == t
    assert eval(repr(t), {"TensorSharding": TensorSharding}) == TensorSharding.parse(str(t))


def test_per_value() -> None:
    text = '#sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>, <@mesh, []>]>'
    ts = TensorSharding.parse_per_value(text, MESHES)
    assert len(ts) == 2 and ts[0].mesh == MESH
    assert TensorSharding.print_per_value(ts) == text
    assert TensorSharding.print_per_value([]) == "#sdy.sharding_per_value<[]>"


def test_parse_binds_and_validates() -> None:
    t = TensorSharding.parse('#sdy.sharding<@mesh, [{"x"}]>')
    assert t.mesh is None and t.mesh_name == "mesh"
    with pytest.raises(MeshError, match="pass meshes="):
        t.local_shape((4,))
    assert t.local_shape((4,), meshes=MESHES) == (2,)
    assert t.bind(MESH).local_shape((4,)) == (2,)
    # a single Mesh resolves any name
    assert TensorSharding.parse('<@foo, [{"x"}]>', MESH).mesh == MESH
    with pytest.raises(InvalidShardingError) as e:
        TensorSharding.parse('<@mesh, [{"w"}]>', MESHES)
    assert e.value.rule == "unknown-axis"  # type: ignore[attr-defined]
    assert 'unknown axis "w"' in str(e.value)
    with pytest.raises(MeshError, match=r'unknown mesh @nomesh; known meshes: \["mesh"\]'):
        TensorSharding.parse('<@nomesh, [{"x"}]>', MESHES)


@pytest.mark.parametrize(
    ("build", "rule"),
    [
        (lambda: TensorSharding(MESH, [["x"], ["x"]]), "duplicate-axis"),
        (lambda: TensorSharding(MESH, [[AxisRef("y", 1, 2), AxisRef("y", 2, 2)]]), "mergeable-sub-axes"),
        (lambda: TensorSharding(MESH, [[AxisRef("y", 1, 4)], [AxisRef("y", 2, 4)]]), "overlapping-sub-axes"),
        (lambda: TensorSharding(MESH, [["y"], [AxisRef("y", 2, 2)]]), "full-and-sub-axis"),
        (lambda: TensorSharding(MESH, [[AxisRef("y", 1, 8)]]), "sub-axis-is-full-axis"),
        (lambda: TensorSharding(MESH, [[AxisRef("y", 3, 2)]]), "sub-axis-divisibility"),
        (lambda: AxisRef("y", 0, 2), "sub-axis-pre-size"),
        (lambda: AxisRef("y", 1, 1), "sub-axis-size"),
        (lambda: TensorSharding(MESH, [DimSharding((), priority=0)]), "priority-on-empty-closed-dim"),
        (lambda: TensorSharding(MESH, [DimSharding(["x"], priority=-1)]), "negative-priority"),
        (lambda: TensorSharding.parse('<@mesh, [{}], replicated={"z", "x"}>', MESHES), "unsorted-replicated"),
        (lambda: TensorSharding(MESH, [["q"]]), "unknown-axis"),
        (lambda: TensorSharding(MESH, [["x"]]).validate((4, 4)), "rank-mismatch"),
        (lambda: TensorSharding(MESH, [["x"], ["y", "z"]]).validate((1, 4), user=True), "dim-exhausted"),
        (lambda: TensorSharding(MESH, [["x"]]).validate((0,), user=True), "zero-size-dim-sharded"),
        (lambda: TensorSharding(MESH, [[AxisRef("y", 2, 2)]]).validate(user=True), "sub-axis-in-user-sharding"),
        (lambda: TensorSharding(Mesh.maximal(0), [None]), "maximal-mesh-sharding"),
        (lambda: AxisRef("y", 1, 2).merge(AxisRef("y", 4, 2), MESH), "cannot-merge"),
    ],
)
def test_each_invariant_raises_with_its_rule(build: object, rule: str) -> None:
    with pytest.raises(InvalidShardingError) as e:
        build()  # type: ignore[operator]
    assert e.value.rule == rule  # type: ignore[attr-defined]
    assert isinstance(e.value, ShardingError) and isinstance(e.value, ValueError)


def test_error_messages_name_value_expected_and_got() -> None:
    with pytest.raises(
        InvalidShardingError,
        match=r'invalid sharding .*replicated=\{"z", "x"\}.*expected \{"x", "z"\}, got \{"z", "x"\}',
    ):
        TensorSharding.parse('<@mesh, [{}], replicated={"z", "x"}>', MESHES)
    with pytest.raises(
        InvalidShardingError, match=r"expected 1 dimension shardings for a tensor of rank 1 \(shape \[4\]\), got 2"
    ):
        TensorSharding(MESH, [["x"], None]).validate((4,))
    with pytest.raises(ShardingParseError, match=r"expected ',' at offset 27") as e:
        TensorSharding.parse('#sdy.sharding<@mesh, [{"x" "y"}]>')
    assert e.value.offset == 27  # type: ignore[attr-defined]


def test_local_shape_and_device_ranges() -> None:
    mesh = Mesh({"x": 2, "y": 4, "z": 2})
    t = TensorSharding(mesh, [["x"], ["z", "y"]])
    assert t.local_shape((4, 8)) == (2, 1)
    assert t.device_ranges((4, 8), 1) == ((0, 2), (4, 5))
    covered = sorted(r for d in mesh.devices for r in [t.device_ranges((4, 8), d)])
    assert len(set(covered)) == 16  # every device holds a distinct 2x1 block
    padded = TensorSharding(mesh, [["y"]])
    assert padded.local_shape((6,)) == (2,)
    assert [padded.device_ranges((6,), d)[0] for d in (0, 2, 4, 6)] == [(0, 2), (2, 4), (4, 6), (6, 6)]
    assert t.device_slices((4, 8), 1) == (slice(0, 2), slice(4, 5))
    with pytest.raises(MeshError, match="device 16 is not in the mesh"):
        t.device_ranges((4, 8), 16)


def test_axis_ref_relations() -> None:
    m = Mesh({"x": 8})
    a, b, full = AxisRef("x", 1, 2), AxisRef("x", 2, 4), AxisRef("x")
    assert str(b) == '"x":(2)4' and AxisRef.parse('"x":(2)4') == b and repr(b) == "AxisRef('x', 2, 4)"
    assert full.contains(a) and full.strictly_contains(b) and not a.contains(full)
    assert a.prefix_of(full) and b.suffix_of(full, m)
    assert a.can_merge(b) and a.merge(b, m) == full
    assert AxisRef("x", 1, 4).overlap(b) == AxisRef("x", 2, 2) and a.overlap(b) is None
    assert not a.overlaps(b) and AxisRef("x", 1, 4).overlaps(b)
    assert AxisRef.sorted([b, "x", a], m) == (a, full, b)
    assert b.full_size(m) == 4 and full.full_size(m) == 8 and b.next_pre_size(m) == 8
    with pytest.raises(TypeError, match="needs both"):
        AxisRef("x", 2)


def test_visualize_renders_blocks() -> None:
    from rich.console import Console

    mesh = Mesh({"x": 2, "y": 2})
    console = Console(width=100, record=True)
    console.print(TensorSharding(mesh, [["x"], ["y"]]).visualize((4, 6)))
    out = console.export_text()
    for d, cell in enumerate(["[0:2, 0:3]", "[0:2, 3:6]", "[2:4, 0:3]", "[2:4, 3:6]"]):
        assert f"dev {d}" in out and cell in out
    console = Console(width=100, record=True)
    console.print(TensorSharding(mesh, [["y"]]).visualize((5,)))
    out = console.export_text()
    assert "dev 0,2" in out and "[0:3]" in out and "dev 1,3" in out and "[3:5]" in out
    with pytest.raises(ShardingError, match="rank-1 and rank-2"):
        TensorSharding(mesh, [None, None, None]).visualize((2, 2, 2))
