"""The attribute parser of the interpreter and its errors; interpreter-level errors (missing
ops, bad inputs) and random_inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from shardwise.errors import ProgramError
from shardwise.execute.attrs import (
    parse_array,
    parse_bool,
    parse_conv_dims,
    parse_dense,
    parse_enum,
    parse_int,
    parse_struct,
)


def test_integers_booleans_arrays_and_enums() -> None:
    assert parse_int("3 : i64") == 3 and parse_int("-2") == -2 and parse_int(" 7 : i32 ") == 7
    assert parse_bool("true") and parse_bool("unit") and not parse_bool("false")
    assert parse_array("array<i64: 1, -2, 3>") == (1, -2, 3)
    assert parse_array("array<i64>") == ()
    assert parse_array("array<i1: true, false>") == (1, 0)
    assert parse_enum("#stablehlo<comparison_direction GE>") == "GE"
    assert parse_enum("#stablehlo<precision HIGHEST>") == "HIGHEST"


@pytest.mark.parametrize(
    "text,expected",
    [
        ("dense<1.500000e+00> : tensor<2x2xf32>", np.full((2, 2), 1.5, np.float32)),
        ("dense<[[1, 2], [3, 4]]> : tensor<2x2xi64>", np.array([[1, 2], [3, 4]], np.int64)),
        ("dense<[true, false]> : tensor<2xi1>", np.array([True, False])),
        ("dense<0xFF800000> : tensor<f32>", np.array(-np.inf, np.float32)),
        ("dense<0x7FC00000> : tensor<3xf32>", np.full(3, np.nan, np.float32)),
        ('dense<"0x0000803F00000040"> : tensor<2xf32>', np.array([1.0, 2.0], np.float32)),
        ('dense<"0x0000C03F"> : tensor<2x3xf32>', np.full((2, 3), 1.5, np.float32)),
        ("dense<[-1.000000e+00, 2.500000e-01]> : tensor<2xf64>", np.array([-1.0, 0.25])),
        ("dense<[(1.000000e+00,2.000000e+00)]> : tensor<1xcomplex<f32>>", np.array([1 + 2j], np.complex64)),
        ("dense<255> : tensor<ui8>", np.array(255, np.uint8)),
        ("dense<> : tensor<0xi64>", np.zeros((0,), np.int64)),
    ],
)
def test_dense_elements(text: str, expected: np.ndarray) -> None:
    got = parse_dense(text)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


def test_dense_bf16_bit_pattern() -> None:
    got = parse_dense("dense<0xFF80> : tensor<bf16>")
    assert got.dtype.name == "bfloat16" and math.isinf(float(got)) and float(got) < 0


def test_structured_dimension_numbers() -> None:
    g = parse_struct(
        "#stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>",
        "gather",
    )
    assert g == {"offset_dims": [1], "collapsed_slice_dims": [0], "start_index_map": [0], "index_vector_dim": 1}
    d = parse_struct(
        "#stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>",
        "dot",
    )
    assert d["lhs_contracting_dimensions"] == [2] and d["rhs_batching_dimensions"] == [0]
    c = parse_conv_dims("#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, f, 0, 1]>")
    assert (c.lhs_batch, c.lhs_feature, c.lhs_spatial) == (0, 3, [1, 2])
    assert (c.rhs_in, c.rhs_out, c.rhs_spatial) == (2, 3, [0, 1])
    assert (c.out_batch, c.out_feature, c.out_spatial) == (0, 1, [2, 3])


@pytest.mark.parametrize(
    "fn,text",
    [
        (parse_int, "x : i64"),
        (parse_bool, "maybe"),
        (parse_array, "[1, 2]"),
        (parse_enum, "GE"),
        (parse_dense, "dense<[1, 2, 3]> : tensor<2xi32>"),
        (parse_dense, "dense<[1, @]> : tensor<2xi32>"),
        (parse_dense, "dense<1> : tensor<2xq7>"),
        (lambda t: parse_struct(t, "dot"), "#stablehlo.gather<offset_dims = [1]>"),
        (parse_conv_dims, "#stablehlo.conv<raw>"),
    ],
)
def test_malformed_attributes_raise_program_error(fn: object, text: str) -> None:
    with pytest.raises(ProgramError, match="expected|cannot|holds|unsupported|trailing"):
        fn(text)  # type: ignore[operator]


@pytest.mark.jax
def test_missing_op_names_the_op_and_location() -> None:
    from shardwise import load_mlir
    from shardwise.execute import run

    m = load_mlir(
        """func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.custom_call @my_kernel(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}"""
    )
    with pytest.raises(ProgramError, match=r"stablehlo\.custom_call at loc\(.*2:8\).*'my_kernel'"):
        run(m, [np.ones(4, np.float32)])


@pytest.mark.jax
def test_bad_inputs_raise_program_error() -> None:
    from shardwise import load_mlir
    from shardwise.execute import run

    m = load_mlir("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  return %arg0 : tensor<4xf32>\n}")
    with pytest.raises(ProgramError, match="takes 1 arguments, got 2"):
        run(m, [np.ones(4), np.ones(4)])
    with pytest.raises(ProgramError, match=r"expected shape \(4,\).*got \(3,\)"):
        run(m, [np.ones(3)])
    with pytest.raises(ProgramError, match="no function @other"):
        run(m, [np.ones(4)], func="other")
    out = run(m, [np.arange(4)])
    assert out[0].dtype == np.float32


@pytest.mark.jax
def test_random_inputs_are_deterministic_and_typed() -> None:
    from shardwise import load_mlir
    from shardwise.execute import random_inputs

    m = load_mlir(
        "func.func @main(%a: tensor<3x4xf32>, %b: tensor<5xi32>, %c: tensor<2xi1>, %d: tensor<bf16>, %e: tensor<6xui8>) -> tensor<5xi32> {\n  return %b : tensor<5xi32>\n}"
    )
    f = m.func("main")
    x, y = random_inputs(f, 3), random_inputs(f, 3)
    z = random_inputs(f, 4)
    assert [a.dtype.name for a in x] == ["float32", "int32", "bool", "bfloat16", "uint8"]
    assert [a.shape for a in x] == [(3, 4), (5,), (2,), (), (6,)]
    for a, b in zip(x, y):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(x[0], z[0])
    assert x[1].min() >= -4 and x[1].max() <= 4 and x[4].max() <= 8


@pytest.mark.jax
def test_op_without_implementation_is_named() -> None:
    from shardwise import load_mlir
    from shardwise.execute import run

    m = load_mlir(
        """func.func @main(%arg0: tensor<4x4xf32>, %arg1: tensor<4xf32>) -> tensor<4x4xf32> {
  %0 = "stablehlo.batch_norm_inference"(%arg0, %arg1, %arg1, %arg1, %arg1) {epsilon = 1.0e-05 : f32, feature_index = 1 : i64} : (tensor<4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}"""
    )
    with pytest.raises(
        ProgramError,
        match=r"stablehlo\.batch_norm_inference at loc\(.*\): the interpreter has no implementation of stablehlo\.batch_norm_inference",
    ):
        run(m, [np.eye(4, dtype=np.float32), np.ones(4, dtype=np.float32)])
