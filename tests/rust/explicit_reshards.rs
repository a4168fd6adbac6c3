//! `sdy-insert-explicit-reshards`' decisions (`shardwise::export`): the axis-list helpers of
//! Shardy's `utils.cc`, `findCommonAxes`, the per-op plans and the unreduced collectives. The
//! Python suite compares the whole pass with jaxlib on many programs
//! (`tests/python/test_explicit_reshards.py`); these cases pin the pieces.

use shardwise::export::{
    all_reduce_to_replicated, find_common_axes, plan_op, unreduced_collectives, OpShardings, Version,
};
use shardwise::propagation::axes::{axis_set_diff, sort_and_merge_axes};
use shardwise::propagation::ShardingProjection;
use shardwise::rule::{parse_rule, OpShardingRule};
use shardwise::text::{parse_sharding, print_sharding};
use shardwise::{ErrorKind, Mesh, TensorSharding};

#[path = "common/mod.rs"]
mod common;
use common::{axes, mesh};

fn rule(text: &str) -> OpShardingRule {
    parse_rule(&format!("<{text}>")).unwrap()
}

fn sharding(text: &str) -> Option<TensorSharding> {
    Some(parse_sharding(&format!("#sdy.sharding<@mesh, {text}>")).unwrap())
}

fn printed(s: &Option<TensorSharding>) -> Option<String> {
    s.as_ref().map(print_sharding)
}

fn xy() -> Mesh {
    mesh("\"x\"=4, \"y\"=2")
}

#[test]
fn axis_set_diff_keeps_the_parts_not_covered() {
    let m = xy();
    assert_eq!(axis_set_diff(&axes("x"), &axes("x:(1)2"), &m).unwrap(), axes("x:(2)2"));
    assert_eq!(axis_set_diff(&axes("x"), &axes("x:(2)2"), &m).unwrap(), axes("x:(1)2"));
    assert_eq!(axis_set_diff(&axes("x:(1)2 y"), &axes("x"), &m).unwrap(), axes("y"));
    assert_eq!(axis_set_diff(&axes("x y"), &axes("x y"), &m).unwrap(), axes(""));
    assert_eq!(axis_set_diff(&axes("x y"), &axes(""), &m).unwrap(), axes("x y"));
}

#[test]
fn sort_and_merge_orders_by_mesh_and_merges_adjacent_sub_axes() {
    let m = xy();
    assert_eq!(sort_and_merge_axes(&axes("y x:(2)2 x:(1)2"), &m).unwrap(), axes("x y"));
    assert_eq!(sort_and_merge_axes(&axes("x:(2)2 y"), &m).unwrap(), axes("x:(2)2 y"));
}

fn common(rule_text: &str, operands: &[&str], results: &[&str], sizes: &[i64]) -> Vec<Vec<shardwise::AxisRef>> {
    let r = rule(rule_text);
    let ins: Vec<Option<TensorSharding>> = operands.iter().map(|t| sharding(t)).collect();
    let outs: Vec<Option<TensorSharding>> = results.iter().map(|t| sharding(t)).collect();
    let ins: Vec<Option<&TensorSharding>> = ins.iter().map(Option::as_ref).collect();
    let outs: Vec<Option<&TensorSharding>> = outs.iter().map(Option::as_ref).collect();
    let proj = ShardingProjection::build_on_mesh(&ins, &outs, &r, &xy(), true).unwrap();
    find_common_axes(&proj, &r, sizes, &xy()).unwrap()
}

#[test]
fn agreeing_tensors_keep_their_factor_shardings() {
    let c = common(
        "([i, j], [i, j])->([i, j]) {i=8, j=8}",
        &["[{\"x\"}, {}]", "[{\"x\"}, {}]"],
        &["[{\"x\"}, {}]"],
        &[64, 64, 64],
    );
    assert_eq!(c, vec![axes("x"), axes("")]);
}

#[test]
fn two_tensors_prefer_the_larger_and_cut_the_other_where_it_overlaps() {
    // A transpose-like op with equal sizes: the more sharded tensor (the result) is preferred.
    let c = common("([i, j])->([i, j]) {i=8, j=8}", &["[{\"x\"}, {}]"], &["[{}, {\"x\", \"y\"}]"], &[64, 64]);
    assert_eq!(c, vec![axes(""), axes("x y")]);
    // A larger operand is preferred and keeps its factor shardings, `j` included.
    let c = common("([i, j])->([i, j]) {i=8, j=8}", &["[{\"x\"}, {}]"], &["[{}, {\"x\", \"y\"}]"], &[128, 64]);
    assert_eq!(c, vec![axes("x"), axes("")]);
    // A factor the preferred tensor lacks comes from the other one, cut where it overlaps the
    // preferred tensor's axes ("y", "x" without "x").
    let c = common("([i])->([i, j]) {i=8, j=8}", &["[{\"x\"}]"], &["[{}, {\"y\", \"x\"}]"], &[128, 64]);
    assert_eq!(c, vec![axes("x"), axes("y")]);
}

#[test]
fn the_heuristic_takes_the_factor_sharding_most_elements_agree_on() {
    // Operand 0 and the result shard `i` on "x" (128 elements), operand 1 shards `j` on "x"
    // (64): `i` gets "x", and `j`'s candidate, cut by the overlap, is dropped.
    let c = common(
        "([i, j], [i, j])->([i, j]) {i=8, j=8}",
        &["[{\"x\"}, {}]", "[{}, {\"x\"}]"],
        &["[{\"x\"}, {}]"],
        &[64, 64, 64],
    );
    assert_eq!(c, vec![axes("x"), axes("")]);
}

fn plan(
    rule_text: &str,
    operands: &[&str],
    results: &[&str],
    sizes: &[i64],
    version: Version,
) -> shardwise::Result<shardwise::export::OpReshards> {
    let r = rule(rule_text);
    let ins: Vec<Option<TensorSharding>> = operands.iter().map(|t| sharding(t)).collect();
    let outs: Vec<Option<TensorSharding>> = results.iter().map(|t| sharding(t)).collect();
    let m = xy();
    let order = vec![false; ins.len() + outs.len()];
    plan_op(&OpShardings {
        rule: &r,
        operands: &ins,
        results: &outs,
        direct_operands: None,
        mesh_name: "mesh",
        mesh: &m,
        sizes,
        other_device_order: &order,
        direct_other_device_order: None,
        version,
        is_reshape: false,
    })
}

#[test]
fn the_full_version_reshards_the_operand_that_disagrees() {
    let p = plan(
        "([i, j], [i, j])->([i, j]) {i=8, j=8}",
        &["[{\"x\"}, {}]", "[{}, {\"x\"}]"],
        &["[{\"x\"}, {}]"],
        &[64, 64, 64],
        Version::Full,
    )
    .unwrap();
    assert_eq!(
        p.operands.iter().map(printed).collect::<Vec<_>>(),
        vec![None, Some("#sdy.sharding<@mesh, [{\"x\"}, {}]>".into())]
    );
    assert_eq!(p.results, vec![None]);
    assert!(p.all_reduce_axes.is_empty());
}

#[test]
fn a_sharded_contracting_factor_is_all_reduced_on_the_full_version() {
    let p = plan(
        "([i, k], [k, j])->([i, j]) {i=8, j=8, k=8} reduction={k}",
        &["[{}, {\"y\"}]", "[{\"y\"}, {}]"],
        &["[{}, {}]"],
        &[64, 64, 64],
        Version::Full,
    )
    .unwrap();
    assert_eq!(p.operands, vec![None, None]);
    assert_eq!(p.all_reduce_axes, axes("y"));
}

#[test]
fn an_unreduced_result_needs_agreeing_reduction_factors() {
    let e = plan(
        "([i, k], [k, j])->([i, j]) {i=8, j=8, k=8} reduction={k}",
        &["[{}, {\"y\"}]", "[{}, {}]"],
        &["[{}, {}], unreduced={\"y\"}"],
        &[64, 64, 64],
        Version::Basic,
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Program);
    assert!(e.message.contains("incompatible sharding along reduction factors"), "{}", e.message);
    // Agreeing operands: their axes are unreduced in the result already, no all-reduce.
    let p = plan(
        "([i, k], [k, j])->([i, j]) {i=8, j=8, k=8} reduction={k}",
        &["[{}, {\"y\"}]", "[{\"y\"}, {}]"],
        &["[{}, {}], unreduced={\"y\"}"],
        &[64, 64, 64],
        Version::Basic,
    )
    .unwrap();
    assert!(p.all_reduce_axes.is_empty());
}

#[test]
fn sharded_axes_become_unreduced_by_sharded_to_unreduced() {
    let m = xy();
    let input = sharding("[{\"x\"}, {}]").unwrap();
    let output = sharding("[{}, {}], unreduced={\"x\"}").unwrap();
    let p = unreduced_collectives(&input, &output, &m).unwrap().unwrap();
    assert_eq!(p.reshard, None);
    assert_eq!(p.replicated_to_unreduced, None);
    let (per_dim, s) = p.sharded_to_unreduced.clone().unwrap();
    assert_eq!(per_dim, vec![axes("x"), axes("")]);
    assert_eq!(s, output);
    // Replicated axes take replicated_to_unreduced.
    let output = sharding("[{\"x\"}, {}], unreduced={\"y\"}").unwrap();
    let p = unreduced_collectives(&input, &output, &m).unwrap().unwrap();
    let (a, s) = p.replicated_to_unreduced.clone().unwrap();
    assert_eq!(a, axes("y"));
    assert_eq!(print_sharding(&s), "#sdy.sharding<@mesh, [{\"x\"}, {}], unreduced={\"y\"}>");
    // Both ways: Shardy refuses.
    let input = sharding("[{}, {}], unreduced={\"x\"}").unwrap();
    let output = sharding("[{}, {}], unreduced={\"y\"}").unwrap();
    assert_eq!(unreduced_collectives(&input, &output, &m).unwrap_err().kind, ErrorKind::Program);
}

#[test]
fn unreduced_axes_the_user_lacks_are_all_reduced() {
    let m = xy();
    let source = sharding("[{}, {}], unreduced={\"x\", \"y\"}").unwrap();
    let (a, s) = all_reduce_to_replicated(&source, &axes("y"), &m).unwrap().unwrap();
    assert_eq!(a, axes("x"));
    assert_eq!(print_sharding(&s), "#sdy.sharding<@mesh, [{}, {}], unreduced={\"y\"}>");
    assert_eq!(all_reduce_to_replicated(&source, &axes("x y"), &m).unwrap(), None);
}

#[test]
fn inconsistent_inputs_are_errors_not_panics() {
    // One size too few.
    let e = plan(
        "([i, j], [i, j])->([i, j]) {i=8, j=8}",
        &["[{\"x\"}, {}]", "[{}, {\"x\"}]"],
        &["[{\"x\"}, {}]"],
        &[64, 64],
        Version::Full,
    );
    assert!(e.is_err());
    // A special factor out of range in a hand-built rule.
    let mut r = rule("([i, j])->([i]) {i=8, j=8} need_replication={j}");
    r.need_replication_factors.push(7);
    let ins = vec![sharding("[{\"x\"}, {\"y\"}]")];
    let outs = vec![sharding("[{\"y\"}]")];
    let m = xy();
    let _ = plan_op(&OpShardings {
        rule: &r,
        operands: &ins,
        results: &outs,
        direct_operands: None,
        mesh_name: "mesh",
        mesh: &m,
        sizes: &[64, 8],
        other_device_order: &[false, false],
        direct_other_device_order: None,
        version: Version::Full,
        is_reshape: false,
    });
}
