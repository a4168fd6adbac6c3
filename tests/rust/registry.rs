//! The builtin sharding rule registry (`shardwise::rules`): its attribute readers, a rule per
//! family, and its errors. The rules' agreement with Shardy's is measured in Python
//! (`tests/python/test_rules_*.py`, against jaxlib's `sdy-populate-op-sharding-rules`).

use shardwise::rule::print_rule;
use shardwise::rules::{self, attrs, Builtin, OpDesc, ValueDesc};
use shardwise::ErrorKind;

fn op(name: &str, operands: &[&[i64]], results: &[&[i64]], attributes: &[(&str, &str)]) -> OpDesc {
    OpDesc {
        name: name.into(),
        operands: operands.iter().map(|s| ValueDesc::tensor(s, "f32")).collect(),
        results: results.iter().map(|s| ValueDesc::tensor(s, "f32")).collect(),
        attributes: attributes.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(),
        regions: Vec::new(),
    }
}

fn with(name: &str, text: &str) -> OpDesc {
    op("test.op", &[], &[], &[(name, text)])
}

fn rule_text(op: &OpDesc) -> String {
    match rules::builtin_rule(op, false).unwrap() {
        Builtin::Rule(r) => print_rule(&r),
        other => panic!("expected a rule, got {other:?}"),
    }
}

#[test]
fn attribute_readers() {
    assert_eq!(attrs::ints(&with("a", "array<i64: 1, 0, -2>"), "a", None).unwrap(), vec![1, 0, -2]);
    assert_eq!(attrs::ints(&with("a", "array<i64>"), "a", None).unwrap(), Vec::<i64>::new());
    assert_eq!(attrs::ints(&with("a", "dense<[3, 4]> : tensor<2xi64>"), "a", None).unwrap(), vec![3, 4]);
    assert_eq!(attrs::dense_ints(&with("a", "dense<1> : tensor<2x2xi64>"), "a").unwrap(), (vec![2, 2], vec![1; 4]));
    assert_eq!(
        attrs::dense_ints(&with("a", "dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>"), "a").unwrap(),
        (vec![2, 2], vec![0, 1, 2, 3])
    );
    let hexed = "\"0x0100000000000000FFFFFFFFFFFFFFFF\"";
    assert_eq!(
        attrs::dense_ints(&with("a", &format!("dense<{hexed}> : tensor<1x2xi64>")), "a").unwrap(),
        (vec![1, 2], vec![1, -1])
    );
    assert_eq!(attrs::dense_ints(&with("a", "dense<\"0xFF\"> : tensor<3xi8>"), "a").unwrap().1, vec![-1; 3]);
    assert_eq!(attrs::dense_ints(&with("a", "dense<\"0xFF\"> : tensor<2xui8>"), "a").unwrap().1, vec![255; 2]);
    assert_eq!(attrs::string(&with("a", "\"a\\22b\\\\c\\n\""), "a", None).unwrap(), "a\"b\\c\n");
    assert_eq!(attrs::int(&with("a", "3 : i64"), "a", None).unwrap(), 3);
    assert_eq!(attrs::int(&with("a", "-3"), "a", None).unwrap(), -3);
    assert!(attrs::boolean(&with("a", "true"), "a", None).unwrap());
    assert_eq!(attrs::enum_case(&with("a", "#stablehlo<transpose ADJOINT>"), "a", None).unwrap(), "ADJOINT");
    let s = attrs::structure(
        &with("a", "#stablehlo.dot<lhs_batching_dimensions = [0], rhs_contracting_dimensions = [1, 2]>"),
        "a",
        "dot",
    )
    .unwrap();
    assert_eq!(s.list("lhs_batching_dimensions"), vec![0]);
    assert_eq!(s.list("rhs_contracting_dimensions"), vec![1, 2]);
    assert_eq!(s.list("lhs_contracting_dimensions"), Vec::<i64>::new());
    assert_eq!(s.to_string(), "{'lhs_batching_dimensions': (0,), 'rhs_contracting_dimensions': (1, 2)}");
    let compact = attrs::conv_dims(
        &with("dimension_numbers", "#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[f, b, 1, 0]>"),
        "dimension_numbers",
    )
    .unwrap();
    let raw = attrs::conv_dims(
        &with(
            "dimension_numbers",
            "#stablehlo.conv<raw input_batch_dimension = 0, input_feature_dimension = 3, \
             input_spatial_dimensions = [1, 2], kernel_input_feature_dimension = 2, \
             kernel_output_feature_dimension = 3, kernel_spatial_dimensions = [0, 1], \
             output_batch_dimension = 1, output_feature_dimension = 0, output_spatial_dimensions = [3, 2]>",
        ),
        "dimension_numbers",
    )
    .unwrap();
    assert_eq!(compact, raw);
    assert_eq!(compact.output_spatial, vec![3, 2]);
    assert_eq!(compact.input_feature, 3);
}

#[test]
fn malformed_attributes_are_op_info_errors_naming_op_attribute_and_text() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "array<i64: 1, x>",
            "ints",
            "test.op: attribute 'a': expected an integer array such as 'array<i64: 1, 0>', got 'array<i64: 1, x>'",
        ),
        (
            "dense<[1, 2, 3]> : tensor<2xi64>",
            "dense",
            "test.op: attribute 'a': expected 2 integers for shape [2], got 'dense<[1, 2, 3]> : tensor<2xi64>'",
        ),
        ("foo", "string", "test.op: attribute 'a': expected a string such as '\"name\"', got 'foo'"),
        ("1.5", "int", "test.op: attribute 'a': expected an integer such as '1 : i64', got '1.5'"),
        (
            "#stablehlo.dot<x = [y]>",
            "struct",
            "test.op: attribute 'a': expected integers in field 'x', got '#stablehlo.dot<x = [y]>'",
        ),
    ];
    for &(text, reader, expected) in cases {
        let o = with("a", text);
        let e = match reader {
            "ints" => attrs::ints(&o, "a", None).unwrap_err(),
            "dense" => attrs::dense_ints(&o, "a").unwrap_err(),
            "string" => attrs::string(&o, "a", None).unwrap_err(),
            "int" => attrs::int(&o, "a", None).unwrap_err(),
            _ => attrs::structure(&o, "a", "dot").unwrap_err(),
        };
        assert_eq!(e.kind, ErrorKind::OpInfo, "{text}");
        assert_eq!(e.message, expected);
    }
    let e = attrs::int(&op("test.op", &[], &[], &[("b", "1"), ("a0", "2")]), "a", None).unwrap_err();
    assert_eq!(e.message, "test.op: missing attribute 'a' (an integer such as '1 : i64'); attributes present: a0, b");
}

#[test]
fn one_rule_per_family_as_shardy_prints_it() {
    let dot = op(
        "stablehlo.dot_general",
        &[&[8, 16, 32], &[8, 32, 4]],
        &[&[8, 16, 4]],
        &[(
            "dot_dimension_numbers",
            "#stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], \
             lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>",
        )],
    );
    assert_eq!(
        rule_text(&dot),
        "#sdy.op_sharding_rule<([i, j, l], [i, l, k])->([i, j, k]) {i=8, j=16, k=4, l=32} reduction={l}>"
    );
    let reshape = op("stablehlo.reshape", &[&[6, 4]], &[&[2, 12]], &[]);
    assert_eq!(rule_text(&reshape), "#sdy.op_sharding_rule<([ij, k])->([i, jk]) {i=2, j=3, k=4}>");
    let transpose = op("stablehlo.transpose", &[&[2, 3]], &[&[3, 2]], &[("permutation", "array<i64: 1, 0>")]);
    assert_eq!(rule_text(&transpose), "#sdy.op_sharding_rule<([j, i])->([i, j]) {i=3, j=2}>");
    let add = op("stablehlo.add", &[&[4], &[4]], &[&[4]], &[]);
    assert_eq!(rule_text(&add), "#sdy.op_sharding_rule<([i], [i])->([i]) {i=4}>");
    let topk = op("stablehlo.custom_call", &[&[5, 10]], &[&[5, 2], &[5, 2]], &[("call_target_name", "\"mhlo.topk\"")]);
    assert_eq!(
        rule_text(&topk),
        "#sdy.op_sharding_rule<([i, j])->([i, j], [i, j]) {i=5, j=10} need_replication={j} blocked_propagation={j}>"
    );
}

#[test]
fn no_rule_and_unknown_ops_are_told_apart() {
    let v: &[&[i64]] = &[&[4]];
    assert_eq!(rules::builtin_rule(&op("stablehlo.while", v, v, &[]), false).unwrap(), Builtin::NoRule);
    assert_eq!(rules::builtin_rule(&op("func.return", v, &[], &[]), false).unwrap(), Builtin::NoRule);
    assert_eq!(rules::builtin_rule(&op("mydialect.op", v, v, &[]), false).unwrap(), Builtin::Unknown);
    let call = |target: &str| op("stablehlo.custom_call", v, v, &[("call_target_name", target)]);
    assert_eq!(rules::builtin_rule(&call("\"tpu_custom_call\""), false).unwrap(), Builtin::NoRule);
    assert_eq!(rules::builtin_rule(&call("\"my_target\""), false).unwrap(), Builtin::Unknown);
    // A reshape of zero elements gets no rule; a pointwise op without a tensor result neither.
    let empty = op("stablehlo.reshape", &[&[0, 4]], &[&[4, 0]], &[]);
    assert_eq!(rules::builtin_rule(&empty, false).unwrap(), Builtin::NoRule);
    assert!(rules::builtin_op_names().contains(&"stablehlo.custom_call"));
    assert!(rules::custom_call_targets().contains(&"X64Combine"));
}

#[test]
fn bad_shapes_are_errors_naming_the_op_never_panics() {
    // A builder error names the op.
    let dot = op(
        "stablehlo.dot_general",
        &[&[4, 8], &[8]],
        &[&[4]],
        &[(
            "dot_dimension_numbers",
            "#stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [3]>",
        )],
    );
    let e = rules::builtin_rule(&dot, false).unwrap_err();
    assert!(e.message.starts_with("stablehlo.dot_general: "), "{}", e.message);
    // Missing operands, ranks that do not fit, empty shapes: errors, not panics.
    for name in rules::builtin_op_names() {
        for (operands, results) in
            [(&[][..], &[][..]), (&[&[2, 3][..]][..], &[&[][..]][..]), (&[&[][..]][..], &[&[5, 7, 9][..]][..])]
        {
            let o = op(name, operands, results, &[]);
            let _ = rules::builtin_rule(&o, false);
            let _ = rules::builtin_rule(&o, true);
        }
    }
}

/// A small deterministic generator (no dependency).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

#[test]
fn random_ops_give_rules_or_errors_never_panics_even_with_overflow_checks() {
    const SIZES: &[i64] = &[-1, 0, 1, 2, 3, 4, 8, i64::MAX / 2, i64::MAX];
    const TEXTS: &[(&str, &str)] = &[
        ("dimension", "1 : i64"),
        ("dimension", "-5 : i64"),
        ("dimensions", "array<i64: 0, 1>"),
        ("dimensions", "array<i64: 9>"),
        ("broadcast_dimensions", "array<i64: 0, 2>"),
        ("permutation", "array<i64: 1, 0, 2>"),
        ("all_gather_dim", "3 : i64"),
        ("split_dimension", "0 : i64"),
        ("concat_dimension", "1 : i64"),
        ("scatter_dimension", "0 : i64"),
        ("feature_index", "1 : i64"),
        ("fft_length", "array<i64: 4, 4, 4, 4, 4>"),
        ("left_side", "true"),
        ("transpose_a", "#stablehlo<transpose ADJOINT>"),
        ("window_dimensions", "array<i64: 2, 1>"),
        ("window_strides", "array<i64: 1>"),
        ("padding", "dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>"),
        ("padding", "dense<0> : tensor<1x2xi64>"),
        ("dot_dimension_numbers", "#stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [2]>"),
        ("dimension_numbers", "#stablehlo.conv<[b, 0, f]x[0, i, o]->[b, 0, f]>"),
        ("dimension_numbers", "#stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>"),
        ("scatter_dimension_numbers", "#stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>"),
        ("batch_group_count", "2 : i64"),
        ("feature_group_count", "3 : i64"),
    ];
    const TARGETS: &[&str] = &[
        "\"Eigh\"",
        "\"Qr\"",
        "\"mhlo.topk\"",
        "\"ApproxTopK\"",
        "\"X64Combine\"",
        "\"MoveToHost\"",
        "\"ProductOfElementaryHouseholderReflectors\"",
    ];
    let names = rules::builtin_op_names();
    let mut rng = Lcg(7);
    let (mut ruled, mut errors) = (0, 0);
    for _ in 0..20_000 {
        let value = |rng: &mut Lcg| {
            let rank = rng.next(5);
            ValueDesc::tensor(&(0..rank).map(|_| SIZES[rng.next(SIZES.len())]).collect::<Vec<_>>(), "f32")
        };
        let name = names[rng.next(names.len())];
        let operands: Vec<ValueDesc> = (0..rng.next(6)).map(|_| value(&mut rng)).collect();
        let results: Vec<ValueDesc> = (0..rng.next(4)).map(|_| value(&mut rng)).collect();
        let mut attributes: Vec<(String, String)> =
            (0..rng.next(8)).map(|_| TEXTS[rng.next(TEXTS.len())]).map(|(n, v)| (n.into(), v.into())).collect();
        if name == rules::CUSTOM_CALL {
            attributes.push(("call_target_name".into(), TARGETS[rng.next(TARGETS.len())].into()));
        }
        let o = OpDesc { name: name.into(), operands, results, attributes, regions: Vec::new() };
        for conservative in [false, true] {
            match rules::builtin_rule(&o, conservative) {
                Ok(_) => ruled += 1,
                Err(e) => {
                    assert!(e.message.contains(name) || e.message.starts_with("custom_call @"), "{}", e.message);
                    errors += 1;
                }
            }
        }
    }
    assert!(ruled > 1_000 && errors > 1_000, "{ruled} rules, {errors} errors");
}
