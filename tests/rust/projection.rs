//! Sharding projection: dimension shardings onto factors and back, expansion, greatest common
//! prefixes. The cases restate, in this crate's terms, the behaviour that Shardy's
//! `sharding_projection_test.cc` checks (the rules are those Shardy's registry gives the ops
//! of each case), plus this crate's own error cases.

use shardwise::propagation::{
    axis_list_prefix_status, distribute_axes_across_factors, FactorSharding, PrefixStatus, ShardingProjection,
    TensorFactorShardings,
};
use shardwise::rule::{parse_rule, OpShardingRule};
use shardwise::text::{parse_sharding, print_sharding};
use shardwise::{AxisRef, ErrorKind, Mesh, MeshRef, TensorSharding};

// ------------------------------------------------------------------ helpers

#[path = "common/mod.rs"]
mod common;
use common::{axes, closed, mesh, open, tensor};

fn rule(text: &str) -> OpShardingRule {
    parse_rule(&format!("<{text}>")).unwrap()
}

fn sharding(text: &str) -> TensorSharding {
    parse_sharding(text).unwrap()
}

fn mesh_ref() -> MeshRef {
    MeshRef::Named("mesh".into())
}

/// Builds the projection of `operands` and `results` (sharding texts, `None` for a tensor
/// without a sharding) and checks that projecting each tensor back gives its sharding again
/// (a fully open one when it had none), as Shardy's test fixture does for every case.
fn project(
    mesh: &Mesh,
    rule: &OpShardingRule,
    operands: &[Option<&str>],
    results: &[Option<&str>],
) -> ShardingProjection {
    let ops: Vec<Option<TensorSharding>> = operands.iter().map(|s| s.map(sharding)).collect();
    let res: Vec<Option<TensorSharding>> = results.iter().map(|s| s.map(sharding)).collect();
    let op_refs: Vec<Option<&TensorSharding>> = ops.iter().map(Option::as_ref).collect();
    let res_refs: Vec<Option<&TensorSharding>> = res.iter().map(Option::as_ref).collect();
    let p = ShardingProjection::build(&op_refs, &res_refs, rule, mesh, false).unwrap();
    let (back_ops, back_res) = p.to_tensor_shardings(rule, &mesh_ref(), mesh).unwrap();
    for (kind, originals, mappings, back) in
        [("operand", &ops, &rule.operand_mappings, &back_ops), ("result", &res, &rule.result_mappings, &back_res)]
    {
        for (i, (orig, b)) in originals.iter().zip(back).enumerate() {
            let expected =
                orig.clone().unwrap_or_else(|| TensorSharding::replicated(mesh_ref(), mappings[i].len(), true));
            assert_eq!(print_sharding(b), print_sharding(&expected), "{kind} {i} does not round-trip");
            assert_eq!(*b, expected);
        }
    }
    p
}

fn back(t: &TensorFactorShardings, mapping: &[Vec<i64>], rule: &OpShardingRule, mesh: &Mesh) -> String {
    print_sharding(&t.to_tensor_sharding(mapping, &rule.factor_sizes, &mesh_ref(), mesh).unwrap())
}

const DOT_2X8_8X4: &str = "([i, k], [k, j])->([i, j]) {i=2, j=4, k=8} reduction={k}";
const RESHAPE_8_TO_2X4: &str = "([ij])->([i, j]) {i=2, j=4}";
const RESHAPE_16_TO_4X4: &str = "([ij])->([i, j]) {i=4, j=4}";
const RESHAPE_4X4_TO_16: &str = "([i, j])->([ij]) {i=4, j=4}";
const ADD_2X4: &str = "([i, j], [i, j])->([i, j]) {i=2, j=4}";

// ------------------------------------------------------------------ build

#[test]
fn build_dot_general_simple() {
    let m = mesh(r#""a"=4, "b"=2, "c"=2, "d"=2, "e"=2"#);
    let r = rule(DOT_2X8_8X4);
    let p = project(
        &m,
        &r,
        &[Some(r#"<@mesh, [{"b"}, {"a", ?}]>"#), Some(r#"<@mesh, [{"a", "c"}, {"d", ?}], replicated={"b"}>"#)],
        &[Some(r#"<@mesh, [{?}, {"d", "e"}], replicated={"a", "c"}>"#)],
    );
    assert_eq!(p.operands[0], tensor([(0, closed("b").minor_most()), (2, open("a").minor_most())]));
    assert_eq!(
        p.operands[1],
        tensor([(1, open("d").minor_most()), (2, closed("a c").minor_most())]).with_replicated(axes("b"))
    );
    assert_eq!(
        p.results[0],
        tensor([(0, open("").minor_most()), (1, closed("d e").minor_most())]).with_replicated(axes("a c"))
    );
}

#[test]
fn build_dot_general_unreduced() {
    let m = mesh(r#""a"=4, "b"=2, "c"=4"#);
    let r = rule(DOT_2X8_8X4);
    let p = project(
        &m,
        &r,
        &[Some(r#"<@mesh, [{"b"}, {"a"}]>"#), Some(r#"<@mesh, [{?}, {?}], replicated={"b"}>"#)],
        &[Some(r#"<@mesh, [{"b"}, {}], replicated={"c":(1)2}, unreduced={"a", "c":(2)2}>"#)],
    );
    assert_eq!(p.operands[0], tensor([(0, closed("b").minor_most()), (2, closed("a").minor_most())]));
    assert_eq!(
        p.operands[1],
        tensor([(1, open("").minor_most()), (2, open("").minor_most())]).with_replicated(axes("b"))
    );
    assert_eq!(
        p.results[0],
        tensor([(0, closed("b").minor_most()), (1, closed("").minor_most())])
            .with_replicated(axes("c:(1)2"))
            .with_unreduced(axes("a c:(2)2"))
    );
}

#[test]
fn build_reshape_split_dim() {
    let m = mesh(r#""a"=4, "b"=2, "c"=3"#);
    let r = rule(RESHAPE_8_TO_2X4);
    let p = project(&m, &r, &[Some(r#"<@mesh, [{"a", "b"}], replicated={"c"}>"#)], &[None]);
    assert_eq!(
        p.operands[0],
        tensor([(0, closed("a:(1)2")), (1, closed("a:(2)2 b").minor_most())]).with_replicated(axes("c"))
    );
    assert_eq!(p.results[0], tensor([(0, open("").minor_most()), (1, open("").minor_most())]));
}

#[test]
fn build_reshape_split_dim_axis_already_split() {
    let m = mesh(r#""a"=16, "b"=8, "c"=4"#);
    let r = rule("([i, jk])->([i, j, k]) {i=16, j=2, k=4}");
    let p = project(&m, &r, &[Some(r#"<@mesh, [{"a":(1)2, "b"}, {"a":(2)8}], replicated={"c":(2)2}>"#)], &[None]);
    assert_eq!(
        p.operands[0],
        tensor([(0, closed("a:(1)2 b").minor_most()), (1, closed("a:(2)2")), (2, closed("a:(4)4").minor_most()),])
            .with_replicated(axes("c:(2)2"))
    );
}

#[test]
fn build_reshape_merge_dim() {
    let m = mesh(r#""a"=2, "b"=2"#);
    let r = rule(RESHAPE_4X4_TO_16);
    let p = project(&m, &r, &[Some(r#"<@mesh, [{"a", ?}, {"b"}]>"#)], &[None]);
    assert_eq!(p.operands[0], tensor([(0, open("a").minor_most()), (1, closed("b").minor_most())]));
    assert_eq!(p.results[0], tensor([(0, open("")), (1, open("").minor_most())]));
}

#[test]
fn build_reshape_with_size_one_dims() {
    let m = mesh(r#""a"=2"#);
    // reshape 4x2x1 -> 8: the size-1 factor is in the operand only.
    let r = rule("([i, j, k])->([ij]) {i=4, j=2, k=1}");
    let p = project(&m, &r, &[Some(r#"<@mesh, [{"a"}, {}, {}]>"#)], &[None]);
    assert_eq!(
        p.operands[0],
        tensor([(0, closed("a").minor_most()), (1, closed("").minor_most()), (2, closed("").minor_most())])
    );
    assert_eq!(p.results[0], tensor([(0, open("")), (1, open("").minor_most())]));
}

#[test]
fn build_add_single_factor_non_divisible() {
    let m = mesh(r#""a"=3"#);
    let r = rule(ADD_2X4);
    let p = project(&m, &r, &[Some(r#"<@mesh, [{}, {"a"}]>"#), None], &[None]);
    assert_eq!(p.operands[0], tensor([(0, closed("").minor_most()), (1, closed("a").minor_most())]));
    assert_eq!(p.operands[1], tensor([(0, open("").minor_most()), (1, open("").minor_most())]));
}

#[test]
fn build_single_factor_overflows() {
    let m = mesh(r#""a"=2, "b"=4"#);
    let r = rule(ADD_2X4);
    let p = project(&m, &r, &[Some(r#"<@mesh, [{}, {"a", "b"}]>"#), None], &[None]);
    assert_eq!(p.operands[0], tensor([(0, closed("").minor_most()), (1, closed("a b").minor_most())]));
}

#[test]
fn build_factor_with_smaller_size_than_dim_overflows() {
    let m = mesh(r#""a"=2, "b"=4, "c"=2, "d"=4, "e"=2"#);
    // slice 32x4x16 -> 32x1x2 [0:32, 1:2, 4:6]
    let r = rule("([i, j, k])->([i, j, k]) {i=32, j=4, k=16} permutation={j, k}");
    let p = project(&m, &r, &[Some(r#"<@mesh, [{"a", ?}, {"c", ?}, {"b", "d":(2)2, "e"}]>"#)], &[None]);
    assert_eq!(
        p.operands[0],
        tensor([(0, open("a").minor_most()), (1, open("c").minor_most()), (2, closed("b d:(2)2 e").minor_most()),])
    );
}

#[test]
fn build_reshape_minor_most_factor_non_divisible() {
    let m = mesh(r#""a"=6"#);
    let p = project(&m, &rule(RESHAPE_8_TO_2X4), &[Some(r#"<@mesh, [{"a"}]>"#)], &[None]);
    assert_eq!(p.operands[0], tensor([(0, closed("a:(1)2")), (1, closed("a:(2)3").minor_most())]));
}

#[test]
fn build_reshape_minor_most_factor_overflows() {
    let m = mesh(r#""a"=16"#);
    let p = project(&m, &rule(RESHAPE_8_TO_2X4), &[Some(r#"<@mesh, [{"a"}]>"#)], &[None]);
    assert_eq!(p.operands[0], tensor([(0, closed("a:(1)2")), (1, closed("a:(2)8").minor_most())]));
}

#[test]
fn build_reshape_minor_most_factor_overflows_size_one_axes() {
    let m = mesh(r#""a"=16, "b"=1, "c"=1"#);
    let p = project(&m, &rule(RESHAPE_8_TO_2X4), &[Some(r#"<@mesh, [{"a", "b", "c"}]>"#)], &[None]);
    assert_eq!(p.operands[0], tensor([(0, closed("a:(1)2")), (1, closed("a:(2)8 b c").minor_most())]));
}

#[test]
fn build_reshape_non_minor_most_factor_non_divisible() {
    let m = mesh(r#""a"=3"#);
    let p = project(&m, &rule(RESHAPE_16_TO_4X4), &[Some(r#"<@mesh, [{"a", ?}]>"#)], &[None]);
    assert_eq!(p.operands[0], tensor([(0, open("").with_overflow(axes("a"))), (1, closed("").minor_most())]));
}

#[test]
fn build_reshape_non_minor_most_factor_non_divisible_sub_axis() {
    let m = mesh(r#""a"=6"#);
    let p = project(&m, &rule(RESHAPE_16_TO_4X4), &[Some(r#"<@mesh, [{"a"}]>"#)], &[None]);
    assert_eq!(
        p.operands[0],
        tensor([(0, closed("a:(1)2").with_overflow(axes("a:(2)3"))), (1, closed("").minor_most())])
    );
}

#[test]
fn build_reshape_non_minor_most_factor_non_divisible_multiple_axes() {
    let m = mesh(r#""a"=2, "b"=3"#);
    let p = project(&m, &rule(RESHAPE_16_TO_4X4), &[Some(r#"<@mesh, [{"a", "b"}]>"#)], &[None]);
    assert_eq!(p.operands[0], tensor([(0, closed("a").with_overflow(axes("b"))), (1, closed("").minor_most())]));
    assert_eq!(p.results[0], tensor([(0, open("").minor_most()), (1, open("").minor_most())]));
}

#[test]
fn build_reshape_minor_most_factor_size_one_axes() {
    let m = mesh(r#""a"=1, "b"=2, "c"=1"#);
    let p = project(&m, &rule(RESHAPE_8_TO_2X4), &[Some(r#"<@mesh, [{"a", "b", "c"}]>"#)], &[None]);
    assert_eq!(p.operands[0], tensor([(0, closed("a b c")), (1, closed("").minor_most())]));
}

#[test]
fn build_from_axes_per_factor_dot_general() {
    let r = rule(DOT_2X8_8X4);
    let p = ShardingProjection::from_axes_per_factor(&[axes("a"), axes("b"), axes("c d")], &r).unwrap();
    assert_eq!(p.operands[0], tensor([(0, closed("a").minor_most()), (2, closed("c d").minor_most())]));
    assert_eq!(p.operands[1], tensor([(2, closed("c d").minor_most()), (1, closed("b").minor_most())]));
    assert_eq!(p.results[0], tensor([(0, closed("a").minor_most()), (1, closed("b").minor_most())]));
}

#[test]
fn build_from_axes_per_factor_reshape() {
    let r = rule(RESHAPE_8_TO_2X4);
    let p = ShardingProjection::from_axes_per_factor(&[axes("a"), axes("b c")], &r).unwrap();
    assert_eq!(p.operands[0], tensor([(0, closed("a")), (1, closed("b c").minor_most())]));
    assert_eq!(p.results[0], tensor([(0, closed("a").minor_most()), (1, closed("b c").minor_most())]));
}

const DOT_CASE: [&str; 3] = [
    r#"<@mesh, [{"b"}, {"a"}]>"#,
    r#"<@mesh, [{"a", "c"}, {"d"}], replicated={"b"}>"#,
    r#"<@mesh, [{}, {"d", "e"}], replicated={"a", "c"}>"#,
];

#[test]
fn build_from_greatest_common_prefix_axes_dot_general() {
    let m = mesh(r#""a"=4, "b"=2, "c"=2, "d"=2, "e"=2"#);
    let r = rule(DOT_2X8_8X4);
    let initial = project(&m, &r, &[Some(DOT_CASE[0]), Some(DOT_CASE[1])], &[Some(DOT_CASE[2])]);
    let gcp = initial.greatest_common_prefix_axes(3);
    assert_eq!(gcp, vec![axes(""), axes("d"), axes("a")]);
    let p = ShardingProjection::from_axes_per_factor(&gcp, &r).unwrap();
    assert_eq!(p.operands[0], tensor([(0, closed("").minor_most()), (2, closed("a").minor_most())]));
    assert_eq!(p.operands[1], tensor([(1, closed("d").minor_most()), (2, closed("a").minor_most())]));
    assert_eq!(p.results[0], tensor([(0, closed("").minor_most()), (1, closed("d").minor_most())]));
}

#[test]
fn build_closed_if_missing() {
    let m = mesh(r#""a"=2"#);
    let r = rule(ADD_2X4);
    let s = sharding(r#"<@mesh, [{"a"}, {?}]>"#);
    let p = ShardingProjection::build(&[Some(&s), None], &[None], &r, &m, true).unwrap();
    assert_eq!(p.operands[1], tensor([(0, closed("").minor_most()), (1, closed("").minor_most())]));
    assert_eq!(p.results[0], p.operands[1]);
    assert_eq!(p.operands[0], tensor([(0, closed("a").minor_most()), (1, open("").minor_most())]));
}

// ------------------------------------------------------------------ expand

#[test]
fn expand_sharding_dot_general() {
    let m = mesh(r#""a"=4, "b"=4, "c"=4, "d"=4, "e"=4, "f"=4"#);
    let r = rule("([i, k], [k, j])->([i, j]) {i=256, j=128, k=512} reduction={k}");
    let mut p = project(
        &m,
        &r,
        &[Some(r#"<@mesh, [{"a", "b"}, {"c", ?}]>"#), Some(r#"<@mesh, [{"e"}, {"d", ?}], replicated={"f":(2)2}>"#)],
        &[Some(r#"<@mesh, [{"a", "b":(1)2, ?}, {"d", "f", ?}]>"#)],
    );
    // Factor 0: the lhs already has ["a", "b"]; the rhs lacks the factor; the result's
    // ["a", "b":(1)2] is a strict prefix, so it grows.
    let up = p.expand_sharding(0, &axes("a b"));
    assert_eq!((up.operands.to_vec(), up.results.to_vec()), (vec![], vec![0]));
    // Factor 1: the rhs grows; the result's ["d", "f"] is longer than the new axes.
    let up = p.expand_sharding(1, &axes("d f:(1)2"));
    assert_eq!((up.operands.to_vec(), up.results.to_vec()), (vec![1], vec![]));
    // Factor 2: nothing is a strict prefix of [].
    let up = p.expand_sharding(2, &[]);
    assert!(!up.any());
    // Closedness, minor-mostness and overflow axes are untouched.
    assert_eq!(p.operands[0], tensor([(0, closed("a b").minor_most()), (2, open("c").minor_most())]));
    assert_eq!(
        p.operands[1],
        tensor([(1, open("d f:(1)2").minor_most()), (2, closed("e").minor_most())]).with_replicated(axes("f:(2)2"))
    );
    assert_eq!(p.results[0], tensor([(0, open("a b").minor_most()), (1, open("d f").minor_most())]));
}

// ------------------------------------------------------------------ prefixes

#[test]
fn axis_list_prefix_statuses() {
    let same = ["", "a", "a:(2)4", "a b:(1)2"];
    for s in same {
        assert_eq!(axis_list_prefix_status(&axes(s), &axes(s)), PrefixStatus::Equal, "{s}");
    }
    let strict = [("", "a"), ("a", "a b"), ("a:(1)4", "a b"), ("a b:(1)2", "a b"), ("a b:(1)2", "a b:(1)8")];
    for (prefix, longer) in strict {
        assert_eq!(
            axis_list_prefix_status(&axes(prefix), &axes(longer)),
            PrefixStatus::StrictPrefix,
            "{prefix} / {longer}"
        );
        assert_eq!(
            axis_list_prefix_status(&axes(longer), &axes(prefix)),
            PrefixStatus::NotAPrefix,
            "{longer} / {prefix}"
        );
    }
    let unrelated =
        [("a", "b"), ("a", "b:(1)2"), ("a b", "a c"), ("a b", "b a"), ("a b:(2)4", "a b"), ("a", "a:(1)4 b")];
    for (x, y) in unrelated {
        assert_eq!(axis_list_prefix_status(&axes(x), &axes(y)), PrefixStatus::NotAPrefix, "{x} / {y}");
        assert_eq!(axis_list_prefix_status(&axes(y), &axes(x)), PrefixStatus::NotAPrefix, "{y} / {x}");
    }
}

// ------------------------------------------------------------------ projecting back

#[test]
fn to_tensor_sharding_merges_consecutive_sub_axes() {
    let m = mesh(r#""a"=8, "b"=2, "c"=2"#);
    let r = rule(RESHAPE_4X4_TO_16);
    let t = tensor([(0, open("b a:(2)2")), (1, open("a:(4)2"))]).with_replicated(axes("c"));
    assert_eq!(
        back(&t, &r.result_mappings[0], &r, &m),
        r#"#sdy.sharding<@mesh, [{"b", "a":(2)4, ?}], replicated={"c"}>"#
    );
}

#[test]
fn to_tensor_sharding_merges_overflow_sub_axis() {
    let m = mesh(r#""a"=6, "b"=2"#);
    let r = rule(RESHAPE_8_TO_2X4);
    // Factor 1 is closed, but the overflow of factor 0 ends the dimension before it.
    let t = tensor([(0, open("a:(1)2").with_overflow(axes("a:(2)3"))), (1, closed(""))]).with_replicated(axes("b"));
    assert_eq!(back(&t, &r.operand_mappings[0], &r, &m), r#"#sdy.sharding<@mesh, [{"a", ?}], replicated={"b"}>"#);
}

#[test]
fn to_tensor_sharding_non_minor_most_factor_fully_sharded() {
    let m = mesh(r#""a"=2, "b"=2, "c"=4, "d"=2"#);
    let r = rule(RESHAPE_4X4_TO_16);
    let t = tensor([(0, open("a b")), (1, open("c"))]).with_replicated(axes("d"));
    assert_eq!(
        back(&t, &r.result_mappings[0], &r, &m),
        r#"#sdy.sharding<@mesh, [{"a", "b", "c", ?}], replicated={"d"}>"#
    );
}

#[test]
fn to_tensor_sharding_non_minor_most_factor_partially_sharded() {
    let m = mesh(r#""a"=2, "b"=2"#);
    let r = rule(RESHAPE_4X4_TO_16);
    // "b" would need a strided view.
    let t = tensor([(0, open("a")), (1, open("b"))]);
    assert_eq!(back(&t, &r.result_mappings[0], &r, &m), r#"#sdy.sharding<@mesh, [{"a", ?}]>"#);
}

#[test]
fn to_tensor_sharding_minor_most_factor_not_divisible() {
    let m = mesh(r#""a"=3, "b"=4"#);
    let r = rule(RESHAPE_4X4_TO_16);
    let t = tensor([(0, open("b")), (1, open("a"))]);
    assert_eq!(back(&t, &r.result_mappings[0], &r, &m), r#"#sdy.sharding<@mesh, [{"b", "a", ?}]>"#);
}

#[test]
fn expand_sharding_axes_expands() {
    let m = mesh(r#""a"=3, "b"=2, "c"=2"#);
    let r = rule(RESHAPE_4X4_TO_16);
    let mut t = tensor([(0, open("b")), (1, open("a"))]);
    assert!(t.expand_sharding_axes(0, &axes("b c")));
    assert_eq!(back(&t, &r.result_mappings[0], &r, &m), r#"#sdy.sharding<@mesh, [{"b", "c", "a", ?}]>"#);
}

#[test]
fn expand_sharding_axes_does_not_expand() {
    let mut t = tensor([(0, open("b")), (1, open("a"))]);
    assert!(!t.expand_sharding_axes(0, &axes("c b")));
    assert!(!t.expand_sharding_axes(5, &axes("b c")), "a factor the tensor lacks");
    assert_eq!(t, tensor([(0, open("b")), (1, open("a"))]));
}

#[test]
fn update_sharding_axes_updates() {
    let m = mesh(r#""a"=2, "b"=4, "c"=4"#);
    let r = rule(RESHAPE_4X4_TO_16);
    let mut t = tensor([(0, open("b")), (1, open("a"))]);
    assert!(t.update_sharding_axes(0, &axes("c"), &[]));
    assert_eq!(back(&t, &r.operand_mappings[0], &r, &m), r#"#sdy.sharding<@mesh, [{"c", ?}, {"a", ?}]>"#);
    assert_eq!(back(&t, &r.result_mappings[0], &r, &m), r#"#sdy.sharding<@mesh, [{"c", "a", ?}]>"#);
}

#[test]
fn update_sharding_axes_does_not_update() {
    let mut t = tensor([(0, open("b")), (1, open("a"))]);
    assert!(!t.update_sharding_axes(0, &axes("b"), &[]));
}

#[test]
fn projection_update_sharding_sets_overflow_too() {
    let r = rule(RESHAPE_8_TO_2X4);
    let mut p = ShardingProjection::from_axes_per_factor(&[axes(""), axes("")], &r).unwrap();
    let up = p.update_sharding(0, &axes("x"), &axes("y"));
    assert_eq!((up.operands.to_vec(), up.results.to_vec()), (vec![0], vec![0]));
    assert_eq!(p.operands[0].get(0).unwrap().overflow_axes, axes("y"));
    assert!(p.operands[0].get(0).unwrap().closed, "closedness is kept");
    assert_eq!(p.tensors_containing_overflow_axes().operands.to_vec(), vec![0]);
    assert!(!p.update_sharding(0, &axes("x"), &axes("y")).any());
}

// ------------------------------------------------------------------ greatest common prefix

#[test]
fn greatest_common_prefix_dot_general() {
    let m = mesh(r#""a"=4, "b"=2, "c"=2, "d"=2, "e"=2"#);
    let p = project(&m, &rule(DOT_2X8_8X4), &[Some(DOT_CASE[0]), Some(DOT_CASE[1])], &[Some(DOT_CASE[2])]);
    assert_eq!(p.greatest_common_prefix_axes(3), vec![axes(""), axes("d"), axes("a")]);
}

#[test]
fn greatest_common_prefix_dot_conflict_on_non_contracting_dim() {
    let m = mesh(r#""a"=4, "b"=2"#);
    let r = rule("([i, k],[k, j])->([i, j]) {i=8, j=32, k=16}");
    let p = project(
        &m,
        &r,
        &[Some(r#"<@mesh, [{"a"}, {"b"}]>"#), Some(r#"<@mesh, [{"b"}, {"a"}]>"#)],
        &[Some(r#"<@mesh, [{"a"}, {}]>"#)],
    );
    assert_eq!(p.greatest_common_prefix_axes(3), vec![axes("a"), axes(""), axes("b")]);
}

#[test]
fn greatest_common_prefix_sub_axes() {
    let m = mesh(r#""a"=24, "b"=16, "c"=2, "d"=2"#);
    let r = rule("([i])->([i]) {i=1536}");
    let p = project(
        &m,
        &r,
        &[Some(r#"<@mesh, [{"a":(2)6, "b":(2)4, "c", "d"}]>"#)],
        &[Some(r#"<@mesh, [{"a":(2)6, "b":(2)8, "c"}]>"#)],
    );
    assert_eq!(p.greatest_common_prefix_axes(1), vec![axes("a:(2)6 b:(2)4")]);
}

#[test]
fn greatest_common_prefix_different_sub_axis_prefixes() {
    let m = mesh(r#""a"=24, "b"=16, "c"=2, "d"=2"#);
    let r = rule("([i])->([i]) {i=1536}");
    let p = project(
        &m,
        &r,
        &[Some(r#"<@mesh, [{"b", "a":(2)4, "c"}]>"#)],
        &[Some(r#"<@mesh, [{"b", "a":(4)2, "c", "d"}]>"#)],
    );
    assert_eq!(p.greatest_common_prefix_axes(1), vec![axes("b")]);
}

// ------------------------------------------------------------------ other helpers

#[test]
fn sharding_size_counts_axes_and_overflow() {
    let m = mesh(r#""a"=2, "b"=3, "c"=4"#);
    let t = tensor([(0, open("a").with_overflow(axes("b"))), (3, open("c:(1)2"))]);
    assert_eq!(t.sharding_size(&m).unwrap(), 12);
    assert_eq!(t.factor_bound(), 4);
}

#[test]
fn equality_ignores_trailing_missing_factors() {
    let mut a = tensor([(0, open("a"))]);
    a.factors.resize(6, None);
    assert_eq!(a, tensor([(0, open("a"))]));
    assert_ne!(a, tensor([(1, open("a"))]));
}

#[test]
fn distribute_axes_spans_factor_boundaries() {
    let m = mesh(r#""x"=4, "y"=3"#);
    // Factors of sizes 2 and 6: "x" splits over both, "y" goes to the second.
    let mut fs = vec![FactorSharding::default(), FactorSharding::default().minor_most()];
    distribute_axes_across_factors(&mut fs, &[2, 6], &axes("x y"), &m).unwrap();
    assert_eq!(fs[0].axes, axes("x:(1)2"));
    assert_eq!(fs[1].axes, axes("x:(2)2 y"));
    assert!(fs[1].overflow_axes.is_empty());

    // A factor that shares no divisor with an axis is skipped ("y" goes to the second factor);
    // what no factor can take overflows into the last one ("x":(2)2 once the first is full).
    let mut fs = vec![FactorSharding::default(), FactorSharding::default()];
    distribute_axes_across_factors(&mut fs, &[2, 3], &axes("y x"), &m).unwrap();
    assert_eq!(fs[0].axes, axes("x:(1)2"));
    assert_eq!(fs[1].axes, axes("y"));
    assert_eq!(fs[1].overflow_axes, axes("x:(2)2"));
    // The first axis nobody takes overflows with every axis after it.
    let mut fs2 = vec![FactorSharding::default(), FactorSharding::default()];
    distribute_axes_across_factors(&mut fs2, &[2, 3], &axes("x y"), &m).unwrap();
    assert_eq!(fs2[0].axes, axes("x:(1)2"));
    assert_eq!(fs2[1].overflow_axes, axes("x:(2)2 y"));
    assert!(distribute_axes_across_factors(&mut fs2, &[2], &axes("x"), &m).is_err());
}

// ------------------------------------------------------------------ errors

#[test]
fn build_rejects_different_meshes() {
    let m = mesh(r#""a"=2"#);
    let r = rule(ADD_2X4);
    let x = sharding(r#"<@mesh, [{"a"}, {}]>"#);
    let y = sharding(r#"<@other, [{}, {}]>"#);
    let e = ShardingProjection::build(&[Some(&x), Some(&y)], &[None], &r, &m, false).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Mesh);
    assert!(e.message.contains("@other") && e.message.contains("@mesh"), "{}", e.message);

    let inline = sharding(r#"<mesh<["a"=4]>, [{"a"}, {}]>"#);
    let e = ShardingProjection::build(&[Some(&inline), None], &[None], &r, &m, false).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Mesh);

    // The same mesh inline, and shardings on the empty mesh, are fine.
    let same = sharding(r#"<mesh<["a"=2]>, [{"a"}, {}]>"#);
    let empty = sharding(r#"<mesh<[]>, [{}, {}]>"#);
    ShardingProjection::build(&[Some(&x), Some(&same)], &[Some(&empty)], &r, &m, false).unwrap();
}

#[test]
fn build_rejects_malformed_inputs() {
    let m = mesh(r#""a"=2"#);
    let r = rule(ADD_2X4);
    let rank1 = sharding(r#"<@mesh, [{"a"}]>"#);
    let e = ShardingProjection::build(&[Some(&rank1), None], &[None], &r, &m, false).unwrap_err();
    assert_eq!(e.rule(), Some("projection-rank-mismatch"), "{}", e.message);

    let e = ShardingProjection::build(&[None], &[None], &r, &m, false).unwrap_err();
    assert_eq!(e.rule(), Some("projection-tensor-count"), "{}", e.message);

    let unknown = sharding(r#"<@mesh, [{"z"}, {}]>"#);
    let e = ShardingProjection::build(&[Some(&unknown), None], &[None], &r, &m, false).unwrap_err();
    assert_eq!(e.rule(), Some("unknown-axis"), "{}", e.message);

    let mut bad = sharding(r#"<@mesh, [{}, {}]>"#);
    bad.dims[0].axes.push(AxisRef::sub("a", 0, 2));
    let e = ShardingProjection::build(&[Some(&bad), None], &[None], &r, &m, false).unwrap_err();
    assert_eq!(e.rule(), Some("sub-axis-pre-size"), "{}", e.message);

    let mut broken = r.clone();
    broken.operand_mappings[0][0] = vec![7];
    let e = ShardingProjection::build(&[None, None], &[None], &broken, &m, false).unwrap_err();
    assert_eq!(e.rule(), Some("projection-factor-out-of-range"), "{}", e.message);
    let e = ShardingProjection::from_axes_per_factor(&[axes("a")], &r).unwrap_err();
    assert_eq!(e.rule(), Some("projection-factor-out-of-range"), "{}", e.message);
}

#[test]
fn to_tensor_sharding_rejects_missing_factor() {
    let m = mesh(r#""a"=2"#);
    let r = rule(ADD_2X4);
    let t = tensor([(0, open("a"))]);
    let e = t.to_tensor_sharding(&r.operand_mappings[0], &r.factor_sizes, &mesh_ref(), &m).unwrap_err();
    assert_eq!(e.rule(), Some("projection-missing-factor"), "{}", e.message);
}

#[test]
fn reshape_round_trip_through_factor_shardings() {
    // The example of the module documentation: reshape 8 -> 4x2 on ["x"=8].
    let m = mesh(r#""x"=8"#);
    let r = rule("([ij])->([i, j]) {i=4, j=2}");
    let mut p = project(&m, &r, &[Some(r#"<@mesh, [{"x"}]>"#)], &[None]);
    assert_eq!(p.operands[0], tensor([(0, closed("x:(1)4")), (1, closed("x:(4)2").minor_most())]));
    for f in 0..2 {
        let axes = p.operands[0].get(f).unwrap().axes.clone();
        p.expand_sharding(f, &axes);
    }
    let (ops, res) = p.to_tensor_shardings(&r, &mesh_ref(), &m).unwrap();
    assert_eq!(print_sharding(&ops[0]), r#"#sdy.sharding<@mesh, [{"x"}]>"#);
    assert_eq!(print_sharding(&res[0]), r#"#sdy.sharding<@mesh, [{"x":(1)4, ?}, {"x":(4)2, ?}]>"#);
}
