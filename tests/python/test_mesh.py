from __future__ import annotations

import pickle

import pytest
from shardwise import Mesh, MeshAxis, MeshError, ShardingError, ShardingParseError


def test_construct_parse_print() -> None:
    m = Mesh({"x": 2, "y": 4})
    assert str(m) == '#sdy.mesh<["x"=2, "y"=4]>'
    assert m == Mesh([("x", 2), MeshAxis("y", 4)]) == Mesh.parse(str(m)) == Mesh.parse('<["x"=2, "y"=4]>')
    assert hash(m) == hash(Mesh.parse(str(m)))
    assert m.size == 8 and m.axis_names == ("x", "y") and m.shape == {"x": 2, "y": 4}
    assert m.axis_size("y") == 4 and "x" in m and len(m) == 2
    assert m.devices == tuple(range(8)) and m.device_ids == ()
    assert repr(m) == "Mesh({'x': 2, 'y': 4})"
    assert m.op_text("mesh") == 'sdy.mesh @mesh = <["x"=2, "y"=4]>'
    assert m.op_text("my-mesh") == 'sdy.mesh @"my-mesh" = <["x"=2, "y"=4]>'
    assert Mesh.parse_op('sdy.mesh @"my-mesh" = <["x"=2, "y"=4]>') == ("my-mesh", m)
    with pytest.raises(KeyError, match="no axis"):
        m.axis_size("z")


def test_device_order_empty_and_maximal() -> None:
    m = Mesh({"a": 3, "b": 2}, device_ids=[0, 2, 4, 1, 3, 5])
    assert str(m) == '#sdy.mesh<["a"=3, "b"=2], device_ids=[0, 2, 4, 1, 3, 5]>'
    assert m.devices == (0, 2, 4, 1, 3, 5)
    # iota device ids are dropped by the constructor, rejected in text (as Shardy does)
    assert Mesh({"x": 2}, device_ids=[0, 1]).device_ids == ()
    with pytest.raises(MeshError, match="iota"):
        Mesh.parse('#sdy.mesh<["x"=2], device_ids=[0, 1]>')
    assert str(Mesh.empty()) == "#sdy.mesh<[]>" and Mesh.empty().is_empty and Mesh.empty().size == 0
    mx = Mesh.maximal(3)
    assert str(mx) == "#sdy.mesh<[], device_ids=[3]>" and mx.is_maximal and mx.devices == (3,)


@pytest.mark.parametrize(
    ("axes", "ids", "needle"),
    [
        ({"x": 0}, None, "size >= 1"),
        ([("x", 2), ("x", 2)], None, "duplicate"),
        ({"x": 2}, [0, 0], "permutation"),
        ({"x": 2}, [1], "device ids"),
        ({}, [0, 1], "at most one"),
        ({}, [-2], "non-negative"),
        ({"x": 2**40, "y": 2**40}, None, "overflows"),
    ],
)
def test_invalid_meshes(axes: object, ids: list[int] | None, needle: str) -> None:
    with pytest.raises(MeshError, match=needle) as e:
        Mesh(axes, device_ids=ids)  # type: ignore[arg-type]
    assert isinstance(e.value, ShardingError) and isinstance(e.value, ValueError)


def test_type_errors_and_immutability() -> None:
    with pytest.raises(TypeError, match="size must be an int"):
        Mesh({"x": "2"})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="name must be a str"):
        MeshAxis(1, 2)  # type: ignore[arg-type]
    m = Mesh({"x": 2})
    with pytest.raises(AttributeError):
        m.foo = 1  # type: ignore[attr-defined]
    assert pickle.loads(pickle.dumps(m)) == m
    assert pickle.loads(pickle.dumps(Mesh.maximal(2))) == Mesh.maximal(2)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "#sdy.mesh<",
        '#sdy.mesh<["x"=2',
        '#sdy.mesh<["x"=]>',
        '#sdy.mesh<["x"=2]> junk',
        '<["x"=99999999999999999999]>',
    ],
)
def test_malformed_mesh_text(text: str) -> None:
    with pytest.raises(ShardingParseError) as e:
        Mesh.parse(text)
    assert isinstance(e.value.offset, int)  # type: ignore[attr-defined]
