//! The fixed-point propagation solver over frozen programs. Programs are built by hand with a
//! small builder; the expected shardings are Shardy's (the same programs as lit cases of
//! `shardy/dialect/sdy/transforms/propagation/test/`, whose outputs jaxlib's Shardy printed),
//! plus the solver's own rules: dead ops, sharding groups, manual axes, user priorities,
//! worklist cost and errors.

mod common;

use std::collections::HashMap;
use std::sync::Arc;

use common::program::{sharding, Builder};

use shardwise::graph::Graph;
use shardwise::propagation::debug::{origins_dict_text, propagation_edges_text, shardy_axis_order, AxisMap};
use shardwise::propagation::layers::{intersection, union};
use shardwise::propagation::transforms::{
    add_free_axes, erase_manual_axes, initialized_for_priorities, nonzero_priorities, updated_for_priority,
};
use shardwise::propagation::{
    propagate, propagate_candidates, Candidate, CandidateBatch, DebugOptions, Origin, OriginKind, Pass, PassOptions,
    PropagationDirection as Dir, PropagationEdge, ShardingDebug, SolverInput, SolverOutput, StrategyKind,
};
use shardwise::text::{parse_mesh, print_sharding};
use shardwise::AxisRef;
use shardwise::ErrorKind;

// ------------------------------------------------------------------ helpers (the builder: common/program.rs)

fn pass(pass: Pass) -> PassOptions {
    PassOptions { pass, ..PassOptions::default() }
}

fn text(out: &SolverOutput, v: u32) -> Option<String> {
    out.value_shardings[v as usize].as_ref().map(print_sharding)
}

fn result_text(out: &SolverOutput, k: usize) -> Option<String> {
    out.func_results[0].1[k].as_ref().map(print_sharding)
}

const MESH_AB: (&str, &str) = ("mesh", r#"<["a"=2, "b"=2]>"#);
const MESH_ABC: (&str, &str) = ("mesh", r#"<["a"=2, "b"=2, "c"=2]>"#);
const POINTWISE_8X8: &str = "#sdy.op_sharding_rule<([i, j], [i, j])->([i, j]) {i=8, j=8}>";
const UNARY_8X8: &str = "#sdy.op_sharding_rule<([i, j])->([i, j]) {i=8, j=8}>";

fn s(t: &str) -> Option<String> {
    Some(t.to_string())
}

// ------------------------------------------------------------------ passes end to end

/// An argument's sharding reaches the other operand, the results and the function result;
/// closed dimensions stay closed.
#[test]
fn basic_propagates_through_a_chain_to_the_function_result() {
    let mut b = Builder::new();
    let (f, args) = b.func(&[&[8, 8], &[8, 8]]);
    b.shard(args[0], r#"<@mesh, [{"a"}, {"b"}]>"#);
    let (_, add) = b.op("stablehlo.add", Some(f), &[args[0], args[1]], &[&[8, 8]], Some(POINTWISE_8X8));
    let (_, abs) = b.op("stablehlo.abs", Some(f), &[add[0]], &[&[8, 8]], Some(UNARY_8X8));
    b.ret(f, &[abs[0]], vec![None]);
    let (_, out) = b.run(&[MESH_AB], pass(Pass::Basic));
    let open = s(r#"#sdy.sharding<@mesh, [{"a", ?}, {"b", ?}]>"#);
    assert_eq!(text(&out, args[0]), s(r#"#sdy.sharding<@mesh, [{"a"}, {"b"}]>"#));
    assert_eq!(text(&out, args[1]), open);
    assert_eq!(text(&out, add[0]), open);
    assert_eq!(text(&out, abs[0]), open);
    assert_eq!(result_text(&out, 0), open);
    assert!(out.erased_ops.is_empty() && out.group_conflicts.is_empty());
    assert_eq!(out.rule_ops.len(), 2);
}

/// Shardy's `multi_axes_conflict`: only the common prefix `"b"` reaches the first sum; the
/// second sum's operands conflict on the major axis and it gets nothing.
#[test]
fn basic_propagates_only_the_compatible_prefix() {
    let mut b = Builder::new();
    let (f, args) = b.func(&[&[8, 8], &[8, 8], &[8, 8]]);
    b.shard(args[0], r#"<@mesh, [{"b", "a"}, {}]>"#);
    b.shard(args[1], r#"<@mesh, [{"b", "c"}, {}]>"#);
    b.shard(args[2], r#"<@mesh, [{"a", "b"}, {}]>"#);
    let (_, x) = b.op("stablehlo.add", Some(f), &[args[0], args[1]], &[&[8, 8]], Some(POINTWISE_8X8));
    let (_, y) = b.op("stablehlo.add", Some(f), &[args[0], args[2]], &[&[8, 8]], Some(POINTWISE_8X8));
    b.ret(f, &[x[0], y[0]], vec![None, None]);
    let (_, out) = b.run(&[MESH_ABC], pass(Pass::Basic));
    assert_eq!(text(&out, x[0]), s(r#"#sdy.sharding<@mesh, [{"b", ?}, {?}]>"#));
    assert_eq!(text(&out, y[0]), None);
    assert_eq!(result_text(&out, 0), s(r#"#sdy.sharding<@mesh, [{"b", ?}, {?}]>"#));
    assert_eq!(result_text(&out, 1), None);
}

/// Shardy's `real_conflict_across_factors_diff_tensors_size`: basic propagation gives the
/// matmul result nothing, the aggressive strategy the larger operand's axes.
#[test]
fn aggressive_resolves_a_conflict_that_basic_leaves() {
    let build = || {
        let mut b = Builder::new();
        let (f, args) = b.func(&[&[8, 4], &[4, 16]]);
        b.shard(args[0], r#"<@mesh, [{"a", "b"}, {?}]>"#);
        b.shard(args[1], r#"<@mesh, [{?}, {"a", "c"}]>"#);
        let (_, dot) = b.op(
            "stablehlo.dot_general",
            Some(f),
            &[args[0], args[1]],
            &[&[8, 16]],
            Some("#sdy.op_sharding_rule<([i, k], [k, j])->([i, j]) {i=8, j=16, k=4} reduction={k}>"),
        );
        b.ret(f, &[dot[0]], vec![None]);
        (b, dot[0])
    };
    let (b, dot) = build();
    let (_, basic) = b.run(&[MESH_ABC], pass(Pass::Basic));
    assert_eq!(text(&basic, dot), None);
    let (b, dot) = build();
    let (_, aggressive) = b.run(&[MESH_ABC], pass(Pass::Aggressive));
    assert_eq!(text(&aggressive, dot), s(r#"#sdy.sharding<@mesh, [{?}, {"a", "c", ?}]>"#));
    assert_eq!(result_text(&aggressive, 0), s(r#"#sdy.sharding<@mesh, [{?}, {"a", "c", ?}]>"#));
}

/// Shardy's `defer_forward_propagation_for_multi_use_ops`: with op priorities the results'
/// sharding wins over the argument's for the ops behind a multi-use value.
#[test]
fn op_priority_defers_forward_propagation_through_multi_use_values() {
    let build = |b: &mut Builder| {
        let (f, args) = b.func(&[&[8, 8]]);
        b.shard(args[0], r#"<@mesh, [{"a"}, {}]>"#);
        let (_, sine) = b.op("stablehlo.sine", Some(f), &[args[0]], &[&[8, 8]], Some(UNARY_8X8));
        let (_, x) = b.op("stablehlo.add", Some(f), &[sine[0], sine[0]], &[&[8, 8]], Some(POINTWISE_8X8));
        let (_, y) = b.op("stablehlo.add", Some(f), &[sine[0], sine[0]], &[&[8, 8]], Some(POINTWISE_8X8));
        let (_, c1) = b.op("stablehlo.cosine", Some(f), &[x[0]], &[&[8, 8]], Some(UNARY_8X8));
        let (_, c2) = b.op("stablehlo.cosine", Some(f), &[y[0]], &[&[8, 8]], Some(UNARY_8X8));
        b.ret(f, &[c1[0], c2[0]], vec![Some(r#"<@mesh, [{}, {"a"}]>"#), Some(r#"<@mesh, [{}, {"a"}]>"#)]);
        (sine[0], x[0], c1[0])
    };
    let mut b = Builder::new();
    let (sine, x, c1) = build(&mut b);
    let (_, out) = b.run(&[MESH_AB], pass(Pass::OpPriority));
    assert_eq!(text(&out, sine), s(r#"#sdy.sharding<@mesh, [{"a", ?}, {?}]>"#));
    assert_eq!(text(&out, x), s(r#"#sdy.sharding<@mesh, [{?}, {"a", ?}]>"#));
    assert_eq!(text(&out, c1), s(r#"#sdy.sharding<@mesh, [{?}, {"a", ?}]>"#));
    assert_eq!(out.stats.rounds, 5);
    // The basic pass propagates forward first: the sums take the sine's sharding.
    let mut b = Builder::new();
    let (_, x, _) = build(&mut b);
    let (_, out) = b.run(&[MESH_AB], pass(Pass::Basic));
    assert_eq!(text(&out, x), s(r#"#sdy.sharding<@mesh, [{"a", ?}, {?}]>"#));
}

/// Shardy's `while_body_propagate_block_arg`: the body's sharding reaches the while operand
/// through the data flow edge, which the while's block arguments and result share.
#[test]
fn data_flow_edges_carry_shardings_across_a_while() {
    let mut b = Builder::new();
    let (f, args) = b.func(&[&[32, 96]]);
    let (_, c0) = b.op("stablehlo.constant", Some(f), &[], &[&[]], None);
    let (_, c1) = b.op("stablehlo.constant", Some(f), &[], &[&[]], None);
    let (w, res) = b.op("stablehlo.while", Some(f), &[args[0], c0[0]], &[&[32, 96], &[]], None);
    let cond_args = [b.arg(w, &[32, 96]), b.arg(w, &[])];
    let body_args = [b.arg(w, &[32, 96]), b.arg(w, &[])];
    let (_, cmp) = b.op(
        "stablehlo.compare",
        Some(w),
        &[cond_args[1], c1[0]],
        &[&[]],
        Some("#sdy.op_sharding_rule<([], [])->([])>"),
    );
    b.op("stablehlo.return", Some(w), &[cmp[0]], &[], None);
    let (_, inc) =
        b.op("stablehlo.add", Some(w), &[body_args[1], c1[0]], &[&[]], Some("#sdy.op_sharding_rule<([], [])->([])>"));
    let (_, sum) = b.op(
        "stablehlo.add",
        Some(w),
        &[body_args[0], body_args[0]],
        &[&[32, 96]],
        Some("#sdy.op_sharding_rule<([i, j], [i, j])->([i, j]) {i=32, j=96}>"),
    );
    b.shard(sum[0], r#"<@mesh, [{"a"}, {"b"}]>"#);
    let (_, cc) = b.op("stablehlo.custom_call", Some(w), &[sum[0]], &[&[32, 96]], None);
    b.op("stablehlo.return", Some(w), &[cc[0], inc[0]], &[], None);
    let (_, e0) = b.op("sdy.data_flow_edge", Some(f), &[res[0]], &[&[32, 96]], None);
    b.op("sdy.data_flow_edge", Some(f), &[res[1]], &[&[]], None);
    b.ret(f, &[e0[0]], vec![None]);
    let (_, out) = b.run(&[MESH_AB], pass(Pass::Basic));
    let open = s(r#"#sdy.sharding<@mesh, [{"a", ?}, {"b", ?}]>"#);
    assert_eq!(text(&out, args[0]), open);
    assert_eq!(text(&out, e0[0]), open);
    assert_eq!(text(&out, cc[0]), open);
    assert_eq!(text(&out, res[0]), None); // the edge holds the sharding of the while result
    assert_eq!(result_text(&out, 0), open);
}

/// A propagation barrier lets shardings through in its allowed direction only.
#[test]
fn propagation_barriers_block_one_direction() {
    let run = |dir: Dir| {
        let mut b = Builder::new();
        let (f, args) = b.func(&[&[8, 8]]);
        b.shard(args[0], r#"<@mesh, [{"a"}, {}]>"#);
        let (bar, r) = b.op("sdy.propagation_barrier", Some(f), &[args[0]], &[&[8, 8]], None);
        b.facts.barrier_directions.push((bar, dir));
        b.ret(f, &[r[0]], vec![None]);
        let (_, out) = b.run(&[MESH_AB], pass(Pass::Basic));
        text(&out, r[0])
    };
    assert_eq!(run(Dir::Forward), s(r#"#sdy.sharding<@mesh, [{"a", ?}, {?}]>"#));
    assert_eq!(run(Dir::Backward), None);
}

/// Ops whose results are unused and that have no side effects are erased, even after they
/// propagated; custom calls with side effects stay.
#[test]
fn dead_ops_are_erased() {
    let mut b = Builder::new();
    let (f, args) = b.func(&[&[8, 8]]);
    let (add, x) = b.op("stablehlo.add", Some(f), &[args[0], args[0]], &[&[8, 8]], Some(POINTWISE_8X8));
    let (abs, _) = b.op("stablehlo.abs", Some(f), &[x[0]], &[&[8, 8]], Some(UNARY_8X8));
    let (cc, _) = b.op("stablehlo.custom_call", Some(f), &[args[0]], &[&[8, 8]], None);
    b.facts.side_effecting_ops.push(cc);
    b.ret(f, &[args[0]], vec![None]);
    let (_, out) = b.run(&[MESH_AB], pass(Pass::Basic));
    assert_eq!(out.erased_ops, vec![add, abs]);
}

/// Members of a sharding group share the group's sharding; conflicting groups are reported.
#[test]
fn sharding_groups_are_synced_or_reported() {
    let build = |second: &str| {
        let mut b = Builder::new();
        let (f, args) = b.func(&[&[8, 8], &[8, 8]]);
        b.shard(args[0], r#"<@mesh, [{"a"}, {}]>"#);
        b.shard(args[1], second);
        let (g0, _) = b.op("sdy.sharding_group", Some(f), &[args[0]], &[], None);
        let (g1, _) = b.op("sdy.sharding_group", Some(f), &[args[1]], &[], None);
        b.facts.sharding_groups.extend([(g0, 3), (g1, 3)]);
        b.ret(f, &[args[0], args[1]], vec![None, None]);
        (b, args)
    };
    let (b, args) = build("<@mesh, [{?}, {?}]>");
    let (_, out) = b.run(&[MESH_AB], pass(Pass::Basic));
    assert_eq!(text(&out, args[1]), s(r#"#sdy.sharding<@mesh, [{"a"}, {}]>"#));
    let (b, args) = build(r#"<@mesh, [{"b"}, {}]>"#);
    let (_, out) = b.run(&[MESH_AB], pass(Pass::Basic));
    assert_eq!(out.group_conflicts.len(), 1);
    let c = &out.group_conflicts[0];
    assert_eq!((c.group_id, c.members.clone()), (3, args.clone()));
    assert_eq!(print_sharding(&c.sharding), r#"#sdy.sharding<@mesh, [{"a"}, {}]>"#);
    assert_eq!(out.stats.rounds, 0);
}

/// User priorities: the p0 argument wins over the p1 result.
#[test]
fn user_priorities_propagate_higher_priorities_first() {
    let mut b = Builder::new();
    let (f, args) = b.func(&[&[8, 8]]);
    b.shard(args[0], r#"<@mesh, [{"a"}p0, {}]>"#);
    let (_, x) = b.op("stablehlo.abs", Some(f), &[args[0]], &[&[8, 8]], Some(UNARY_8X8));
    b.ret(f, &[x[0]], vec![Some(r#"<@mesh, [{"b"}p1, {?}]>"#)]);
    let (_, out) = b.run(&[MESH_AB], pass(Pass::UserPriority));
    assert_eq!(text(&out, args[0]), s(r#"#sdy.sharding<@mesh, [{"a"}, {}]>"#));
    assert_eq!(text(&out, x[0]), s(r#"#sdy.sharding<@mesh, [{"a", ?}, {?}]>"#));
    assert_eq!(result_text(&out, 0), s(r#"#sdy.sharding<@mesh, [{"b"}, {?}]>"#));
    assert_eq!(out.stats.rounds, 10); // two priorities, five op-priority rounds each
}

/// Shardings on two mesh symbols that name the same mesh propagate together; a maximal mesh
/// never propagates.
#[test]
fn meshes_are_compared_by_content() {
    let mut b = Builder::new();
    let (f, args) = b.func(&[&[8, 8], &[8, 8]]);
    b.shard(args[0], r#"<@other, [{"a"}, {}]>"#);
    b.shard(args[1], "<@mesh, [{?}, {?}]>");
    let (_, x) = b.op("stablehlo.add", Some(f), &[args[0], args[1]], &[&[8, 8]], Some(POINTWISE_8X8));
    b.ret(f, &[x[0]], vec![None]);
    let (_, out) = b.run(&[MESH_AB, ("other", r#"<["a"=2, "b"=2]>"#)], pass(Pass::Basic));
    assert_eq!(text(&out, args[1]), s(r#"#sdy.sharding<@other, [{"a", ?}, {?}]>"#));

    let mut b = Builder::new();
    let (f, args) = b.func(&[&[8, 8]]);
    b.shard(args[0], "<@maximal, []>");
    let (_, x) = b.op("stablehlo.abs", Some(f), &[args[0]], &[&[8, 8]], Some(UNARY_8X8));
    b.ret(f, &[x[0]], vec![None]);
    let (_, out) = b.run(&[("maximal", "<[], device_ids=[0]>")], pass(Pass::Basic));
    assert_eq!(text(&out, x[0]), None);
}

/// A chain of n ops costs a number of visits linear in n (each op is re-visited only when a
/// neighbour changed).
#[test]
fn worklist_cost_is_linear_in_the_program() {
    for n in [100usize, 1000] {
        let mut b = Builder::new();
        let (f, args) = b.func(&[&[8, 8]]);
        let mut v = args[0];
        for _ in 0..n {
            v = b.op("stablehlo.tanh", Some(f), &[v], &[&[8, 8]], Some(UNARY_8X8)).1[0];
        }
        b.ret(f, &[v], vec![Some(r#"<@mesh, [{"a"}, {"b"}]>"#)]);
        let (_, out) = b.run(&[MESH_AB], pass(Pass::Basic));
        assert_eq!(text(&out, args[0]), s(r#"#sdy.sharding<@mesh, [{"a", ?}, {"b", ?}]>"#));
        assert!(out.stats.visits <= 3 * (n as u64 + 3), "{n} ops took {} visits", out.stats.visits);
        assert_eq!(out.stats.updates, n as u64 + 1);
    }
}

/// The strategies run by the aggressive pass.
#[test]
fn basic_then_aggressive_runs_two_rounds() {
    let mut b = Builder::new();
    let (f, args) = b.func(&[&[8, 8]]);
    b.ret(f, &[args[0]], vec![None]);
    let options =
        PassOptions { pass: Pass::Aggressive, strategy: StrategyKind::BasicThenAggressive, ..PassOptions::default() };
    let (_, out) = b.run(&[MESH_AB], options);
    assert_eq!(out.stats.rounds, 2);
    assert_eq!(StrategyKind::from_name("basic-then-aggressive"), Some(StrategyKind::BasicThenAggressive));
    assert_eq!(Pass::from_name("user-priority"), Some(Pass::UserPriority));
    assert_eq!(Pass::from_name("nope"), None);
}

// ------------------------------------------------------------------ building blocks

#[test]
fn manual_axes_move_in_and_out_of_manual_computation_shardings() {
    let manual = vec!["b".to_string(), "e".to_string()];
    let outer = sharding(r#"<@mesh, [{"b", "a", ?}, {"c"}], replicated={"d", "e"}>"#);
    let inner = erase_manual_axes(&outer, &manual);
    assert_eq!(print_sharding(&inner), r#"#sdy.sharding<@mesh, [{"a", ?}, {"c"}], replicated={"d"}>"#);
    let new = sharding(r#"<@mesh, [{"a", "c"}, {?}]>"#);
    assert_eq!(
        print_sharding(&add_free_axes(&outer, &new, &manual)),
        r#"#sdy.sharding<@mesh, [{"b", "a", "c"}, {?}], replicated={"d", "e"}>"#
    );
    assert_eq!(erase_manual_axes(&outer, &[]), outer);
}

#[test]
fn user_priority_views_of_a_sharding() {
    let mesh = parse_mesh(r#"<["a"=2, "b"=2, "c"=2]>"#).unwrap();
    let original = sharding(r#"<@mesh, [{"c"}p2, {"a"}p0, {?}p1], replicated={"b"}>"#);
    assert_eq!(nonzero_priorities(&original), vec![2, 1]);
    let first = initialized_for_priorities(&original, &mesh);
    assert_eq!(print_sharding(&first), r#"#sdy.sharding<@mesh, [{}, {"a"}, {}], replicated={"b", "c"}>"#);
    let second = updated_for_priority(&first, &original, 1);
    assert_eq!(print_sharding(&second), r#"#sdy.sharding<@mesh, [{}, {"a"}, {?}], replicated={"b", "c"}>"#);
    let third = updated_for_priority(&second, &original, 2);
    assert_eq!(print_sharding(&third), r#"#sdy.sharding<@mesh, [{"c"}, {"a"}, {?}], replicated={"b"}>"#);
}

#[test]
fn direction_algebra() {
    use Dir::*;
    assert_eq!(union(Forward, Backward), Both);
    assert_eq!(union(None, Forward), Forward);
    assert_eq!(union(Backward, Forward), Both);
    assert_eq!(union(Forward, Forward), Forward);
    assert_eq!(intersection(Forward, Backward), None);
    assert_eq!(intersection(Both, Backward), Backward);
    assert_eq!(intersection(None, Both), None);
}

// ------------------------------------------------------------------ errors

#[test]
fn errors_are_reported_not_panics() {
    // A result of dynamic shape.
    let mut b = Builder::new();
    let (f, args) = b.func(&[&[8, 8]]);
    let (_, x) = b.op("stablehlo.abs", Some(f), &[args[0]], &[&[-1, 8]], None);
    b.ret(f, &[x[0]], vec![None]);
    let graph = Graph::new(b.g).unwrap();
    let input = SolverInput {
        value_shardings: b.shardings,
        func_results: b.func_results,
        facts: b.facts,
        ..Default::default()
    };
    let e = propagate(&graph, input, &PassOptions::default()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invariant { rule: "propagation-dynamic-shape" });

    // One sharding too few.
    let mut b = Builder::new();
    let (f, args) = b.func(&[&[8, 8]]);
    b.ret(f, &[args[0]], vec![None]);
    let graph = Graph::new(b.g).unwrap();
    let input =
        SolverInput { value_shardings: vec![], func_results: b.func_results, facts: b.facts, ..Default::default() };
    let e = propagate(&graph, input, &PassOptions::default()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invariant { rule: "propagation-sharding-count" });

    // An unknown mesh.
    let mut b = Builder::new();
    let (f, args) = b.func(&[&[8, 8]]);
    b.shard(args[0], r#"<@nowhere, [{"a"}, {}]>"#);
    let (_, x) = b.op("stablehlo.abs", Some(f), &[args[0]], &[&[8, 8]], Some(UNARY_8X8));
    b.ret(f, &[x[0]], vec![None]);
    let graph = Graph::new(b.g).unwrap();
    let input = SolverInput {
        value_shardings: b.shardings,
        func_results: b.func_results,
        facts: b.facts,
        ..Default::default()
    };
    let e = propagate(&graph, input, &PassOptions::default()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Mesh);
    assert!(e.message.contains("nowhere"), "{}", e.message);

    // An axis unknown to the mesh.
    let mut b = Builder::new();
    let (f, args) = b.func(&[&[8, 8]]);
    b.shard(args[0], r#"<@mesh, [{"z"}, {}]>"#);
    let (_, x) = b.op("stablehlo.abs", Some(f), &[args[0]], &[&[8, 8]], Some(UNARY_8X8));
    b.ret(f, &[x[0]], vec![None]);
    let graph = Graph::new(b.g).unwrap();
    let meshes = HashMap::from([("mesh".to_string(), parse_mesh(MESH_AB.1).unwrap())]);
    let input =
        SolverInput { meshes, value_shardings: b.shardings, func_results: b.func_results, facts: b.facts, debug: None };
    let e = propagate(&graph, input, &PassOptions::default()).unwrap_err();
    assert!(e.message.contains("\"z\""), "{}", e.message);

    // Facts about the wrong ops.
    let mut b = Builder::new();
    let (f, args) = b.func(&[&[8, 8]]);
    b.ret(f, &[args[0]], vec![None]);
    b.facts.callees.push((f, f));
    let graph = Graph::new(b.g).unwrap();
    let input = SolverInput {
        value_shardings: b.shardings,
        func_results: b.func_results,
        facts: b.facts,
        ..Default::default()
    };
    let e = propagate(&graph, input, &PassOptions::default()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invariant { rule: "propagation-bad-callee" });
}

// ------------------------------------------------------------------ debugging records
//
// Expected attributes are those jaxlib's Shardy writes for the same programs with
// `debug-sharding-origins=true debug-propagation-edge-sharding=true`.

fn debug_all(first_step: i64) -> Option<DebugOptions> {
    Some(DebugOptions { origins: true, edges: true, first_step, skip_ops: vec![], explain: false })
}

fn origins_text(d: &ShardingDebug, v: u32) -> Option<String> {
    d.origins_of(v).map(|m| origins_dict_text(&m.iter().map(|(a, o)| (a.clone(), o.to_string())).collect::<Vec<_>>()))
}

fn edges_text(m: &AxisMap<Vec<PropagationEdge>>) -> Option<String> {
    propagation_edges_text(&m.iter().map(|(a, e)| (a.clone(), e.clone())).collect::<Vec<_>>())
}

const ADD_8X8X8: &str = "#sdy.op_sharding_rule<([i, j, k], [i, j, k])->([i, j, k]) {i=8, j=8, k=8}>";

/// `%0 = add %arg0, %arg1; return %0, %arg1` with "a" on arg 0, "c" on arg 1 and "b" on
/// result 0.
fn two_result_program(first_step: i64) -> (Builder, u32, Vec<u32>, u32) {
    let mut b = Builder::new();
    b.debug = debug_all(first_step);
    let (f, args) = b.func(&[&[8, 8, 8], &[8, 8, 8]]);
    b.shard(args[0], r#"#sdy.sharding<@mesh, [{"a", ?}, {?}, {?}]>"#);
    b.shard(args[1], r#"#sdy.sharding<@mesh, [{?}, {?}, {"c", ?}]>"#);
    let (add, r) = b.op("stablehlo.add", Some(f), &[args[0], args[1]], &[&[8, 8, 8]], Some(ADD_8X8X8));
    b.ret(
        f,
        &[r[0], args[1]],
        vec![Some(r#"#sdy.sharding<@mesh, [{?}, {"b", ?}, {?}]>"#), Some(r#"#sdy.sharding<@mesh, [{?}, {?}, {?}]>"#)],
    );
    (b, f, args, add)
}

const MESH_ABC8: (&str, &str) = ("mesh", r#"<["a"=2, "b"=2, "c"=8]>"#);

#[test]
fn debug_records_origins_and_edges_as_shardy_does() {
    let (b, f, args, add) = two_result_program(0);
    let r = b.g.results.clone()[0];
    let (_, out) = b.run(&[MESH_ABC8], pass(Pass::Aggressive));
    let d = out.debug.as_ref().expect("debug records");
    assert_eq!(origins_text(d, args[0]).unwrap(), r#"{a = "input: 0", b = "output: 0", c = "input: 1"}"#);
    assert_eq!(origins_text(d, args[1]).unwrap(), r#"{a = "input: 0", b = "output: 0", c = "input: 1"}"#);
    assert_eq!(origins_text(d, r).unwrap(), r#"{a = "input: 0", b = "output: 0", c = "input: 1"}"#);
    assert_eq!(
        edges_text(d.edges_of(add).unwrap()).unwrap(),
        r#"#sdy.propagation_edges<[{step-2 = [{"a" = operand-0 -> [operand-1, result-0]}, {"b" = result-0 -> [operand-0, operand-1]}, {"c" = operand-1 -> [operand-0, result-0]}]}]>"#
    );
    // Every function result's edges are under result 0, as Shardy records them.
    let (func, per_result) = &d.func_result_edges[0];
    assert_eq!(*func, f);
    assert_eq!(
        edges_text(&per_result[0]).unwrap(),
        r#"#sdy.propagation_edges<[{step-0 = [{"b" = result-0 -> [operand-0]}]}, {step-1 = [{"c" = operand-0 -> [result-0]}]}, {step-3 = [{"a" = operand-0 -> [result-0]}]}, {step-4 = [{"b" = operand-0 -> [result-0]}]}]>"#
    );
    assert!(per_result[1].is_empty());
    assert_eq!(d.next_step, 5);
    assert!(d.missing_origins.is_empty() && d.origin_names.is_empty());
    // The propagated shardings are those without debugging.
    let (b2, ..) = two_result_program(0);
    let mut b2 = b2;
    b2.debug = None;
    let (_, plain) = b2.run(&[MESH_ABC8], pass(Pass::Aggressive));
    assert_eq!(plain.value_shardings, out.value_shardings);
    assert!(plain.debug.is_none());
}

#[test]
fn debug_steps_start_after_those_in_the_module() {
    let (b, _, _, add) = two_result_program(7);
    let (_, out) = b.run(&[MESH_ABC8], pass(Pass::Aggressive));
    let d = out.debug.unwrap();
    assert!(edges_text(d.edges_of(add).unwrap()).unwrap().starts_with("#sdy.propagation_edges<[{step-9 = "));
    assert_eq!(d.next_step, 12);
}

#[test]
fn debug_merges_sub_axes_of_one_dimension() {
    // A reshape merging "c":(1)4 and "c":(4)2 into "c": one edge and one origin for "c",
    // looked up in the source by the sub-axis it contains.
    let mut b = Builder::new();
    b.debug = debug_all(0);
    let (f, args) = b.func(&[&[4, 4]]);
    b.shard(args[0], r#"#sdy.sharding<@mesh, [{"c":(1)4, ?}, {"c":(4)2, ?}]>"#);
    let (reshape, r) = b.op(
        "stablehlo.reshape",
        Some(f),
        &[args[0]],
        &[&[16]],
        Some("#sdy.op_sharding_rule<([i, j])->([ij]) {i=4, j=4}>"),
    );
    b.ret(f, &[r[0]], vec![None]);
    let (_, out) = b.run(&[("mesh", r#"<["c"=8]>"#)], pass(Pass::Basic));
    assert_eq!(text(&out, r[0]).unwrap(), r#"#sdy.sharding<@mesh, [{"c", ?}]>"#);
    let d = out.debug.unwrap();
    assert_eq!(
        edges_text(d.edges_of(reshape).unwrap()).unwrap(),
        r#"#sdy.propagation_edges<[{step-0 = [{"c" = operand-0 -> [result-0]}]}]>"#
    );
    assert_eq!(origins_text(&d, r[0]).unwrap(), r#"{c = "input: 0"}"#);
    assert_eq!(origins_text(&d, args[0]).unwrap(), r#"{"c:(1)4" = "input: 0", "c:(4)2" = "input: 0"}"#);
    assert_eq!(
        edges_text(&d.func_result_edges[0].1[0]).unwrap(),
        r#"#sdy.propagation_edges<[{step-1 = [{"c" = operand-0 -> [result-0]}]}]>"#
    );
}

#[test]
fn debug_names_constraints_and_lists_axes_without_origin() {
    // An op result with a sharding of its own is no user sharding: what propagates from it has
    // no origin (Shardy's behaviour is undefined there). A constraint's sharding is one, and so
    // is the sharding its operand has.
    const UNARY: &str = "#sdy.op_sharding_rule<([i, j])->([i, j]) {i=8, j=8}>";
    let mut b = Builder::new();
    b.debug = debug_all(0);
    let (f, args) = b.func(&[&[8, 8], &[8, 8]]);
    let (_, r1) = b.op("stablehlo.abs", Some(f), &[args[0]], &[&[8, 8]], Some(UNARY));
    b.shard(r1[0], r#"#sdy.sharding<@mesh, [{"a"}, {}]>"#);
    let (_, r2) = b.op("stablehlo.negate", Some(f), &[r1[0]], &[&[8, 8]], Some(UNARY));
    let (c, r3) = b.op("sdy.sharding_constraint", Some(f), &[args[1]], &[&[8, 8]], Some(UNARY));
    b.shard(args[1], r#"#sdy.sharding<@mesh, [{"a", ?}, {?}]>"#);
    b.shard(r3[0], r#"#sdy.sharding<@mesh, [{?}, {"b"}]>"#);
    b.ret(f, &[r2[0], r3[0]], vec![None, None]);
    let (_, out) = b.run(&[MESH_AB], pass(Pass::Basic));
    let d = out.debug.unwrap();
    assert_eq!(d.origin_names, vec![(c, "constraint_0".to_string())]);
    assert_eq!(origins_text(&d, r3[0]).unwrap(), r#"{a = "constraint_0", b = "constraint_0"}"#);
    assert_eq!(origins_text(&d, args[1]).unwrap(), r#"{a = "constraint_0", b = "constraint_0"}"#);
    assert!(d.missing_origins.contains(&(args[0], AxisRef::full("a"))));
    assert!(d.missing_origins.contains(&(r2[0], AxisRef::full("a"))));
    assert!(d.origins_of(args[0]).is_none() && d.origins_of(r1[0]).is_none());
}

#[test]
fn debug_attribute_text() {
    let origins = vec![
        (AxisRef::sub("c", 1, 2), "self".to_string()),
        (AxisRef::full("b"), Origin { kind: OriginKind::ManualInput, index: 1, source_id: 3 }.to_string()),
        (AxisRef::full("x-y"), Origin { kind: OriginKind::Constraint, index: 0, source_id: 2 }.to_string()),
    ];
    assert_eq!(origins_dict_text(&origins), r#"{b = "mc_3_input: 1", "c:(1)2" = "self", "x-y" = "constraint_2"}"#);
    assert_eq!(OriginKind::from_name("mc_output"), Some(OriginKind::ManualOutput));
    // Shardy's axis order: by name, a full axis after the sub-axes that start it.
    let mut axes = vec![AxisRef::sub("c", 2, 2), AxisRef::full("c"), AxisRef::sub("c", 1, 2), AxisRef::full("a")];
    axes.sort_by(shardy_axis_order);
    assert_eq!(axes, vec![AxisRef::full("a"), AxisRef::sub("c", 1, 2), AxisRef::full("c"), AxisRef::sub("c", 2, 2)]);
    assert_eq!(propagation_edges_text(&[]), None);
}

// ------------------------------------------------------------------ many candidates

/// `propagate_candidates` gives, for each candidate, what `propagate` gives on the input with
/// that candidate's overrides, on one thread or several; a bad index is an error, not a panic.
#[test]
fn candidates_equal_single_propagations_on_any_number_of_threads() {
    let mut b = Builder::new();
    let (f, args) = b.func(&[&[8, 8], &[8, 8], &[8, 8]]);
    let (_, add) = b.op("stablehlo.add", Some(f), &[args[0], args[1]], &[&[8, 8]], Some(POINTWISE_8X8));
    let (_, abs) = b.op("stablehlo.abs", Some(f), &[add[0]], &[&[8, 8]], Some(UNARY_8X8));
    // A part no candidate touches: its propagated shardings are the base result's.
    let (_, neg) = b.op("stablehlo.negate", Some(f), &[args[2]], &[&[8, 8]], Some(UNARY_8X8));
    b.ret(f, &[abs[0], neg[0]], vec![None, None]);
    let (graph, mut base) = b.build(&[MESH_AB]);
    base.value_shardings[args[2] as usize] = Some(sharding(r#"<@mesh, [{"a"}, {}]>"#));
    let options = pass(Pass::UserPriority);
    let candidates: Vec<Candidate> = [
        (Some(r#"<@mesh, [{"a"}, {"b"}]>"#), None),
        (Some(r#"<@mesh, [{"b"}, {}]>"#), Some(r#"<@mesh, [{}, {"a"}]>"#)),
        (None, Some(r#"<@mesh, [{"a", "b"}, {}]>"#)),
        (Some(r#"<@mesh, [{"a"}p1, {}]>"#), Some(r#"<@mesh, [{"b"}p0, {}]>"#)),
    ]
    .into_iter()
    .map(|(arg, result)| Candidate {
        values: vec![(args[0], arg.map(sharding))],
        func_results: result.map(|r| vec![(f, 0, Some(sharding(r)))]).unwrap_or_default(),
    })
    .collect();
    let expected: Vec<Vec<Option<String>>> = candidates
        .iter()
        .map(|c| {
            let mut input = base.clone();
            input.value_shardings[args[0] as usize] = c.values[0].1.clone();
            for (_, k, s) in &c.func_results {
                input.func_results[0].1[*k] = s.clone();
            }
            let out = propagate(&graph, input, &options).unwrap();
            let mut texts: Vec<Option<String>> =
                out.value_shardings.iter().map(|s| s.as_ref().map(print_sharding)).collect();
            texts.push(out.func_results[0].1[0].as_ref().map(print_sharding));
            texts
        })
        .collect();
    let base_texts: Vec<Option<String>> = propagate(&graph, base.clone(), &options)
        .unwrap()
        .value_shardings
        .iter()
        .map(|s| s.as_ref().map(print_sharding))
        .collect();
    for threads in [1, 3] {
        let outs = propagate_candidates(&graph, &base, &options, &candidates, threads);
        assert_eq!(outs.len(), candidates.len());
        for (out, want) in outs.into_iter().zip(&expected) {
            let out = out.unwrap();
            // Several candidates share the base result: only the differences are kept, and
            // reading a value through them gives the full result.
            assert_eq!(out.num_values(), want.len() - 1);
            let differ = want[..want.len() - 1].iter().zip(&base_texts).filter(|(w, b)| w != b).count();
            assert_eq!(out.num_changed(), differ, "{threads} threads: the compact form keeps the differences only");
            assert!(differ < out.num_values());
            let read: Vec<Option<String>> =
                (0..out.num_values() as u32).map(|v| out.value_sharding(v).map(print_sharding)).collect();
            assert_eq!(read[..], want[..want.len() - 1], "{threads} threads");
            assert_eq!(out.value_sharding(out.num_values() as u32), None);
            let out = out.into_output();
            let mut texts: Vec<Option<String>> =
                out.value_shardings.iter().map(|s| s.as_ref().map(print_sharding)).collect();
            texts.push(out.func_results[0].1[0].as_ref().map(print_sharding));
            assert_eq!(&texts, want, "{threads} threads");
        }
    }
    // A prepared batch, call after call in other orders and on other thread counts (its
    // workers keep what they computed from call to call): the same results.
    let batch = CandidateBatch::new(Arc::new(graph.clone()), base.clone(), options).unwrap();
    for (threads, order) in [(2, [0, 1, 2, 3]), (1, [3, 2, 1, 0]), (3, [1, 3, 0, 2]), (2, [2, 2, 0, 0])] {
        let picked: Vec<Candidate> = order.iter().map(|&i| candidates[i].clone()).collect();
        for (out, &i) in batch.propagate(&picked, threads).into_iter().zip(&order) {
            let out = out.unwrap().into_output();
            let mut texts: Vec<Option<String>> =
                out.value_shardings.iter().map(|s| s.as_ref().map(print_sharding)).collect();
            texts.push(out.func_results[0].1[0].as_ref().map(print_sharding));
            assert_eq!(texts, expected[i], "batch call on {threads} threads, candidate {i}");
        }
    }
    assert!(batch.propagate(&[], 2).is_empty());
    assert_ne!(expected[0], expected[1], "the candidates lead to different results");
    // One candidate: no base solve, the full result.
    let one = propagate_candidates(&graph, &base, &options, &candidates[1..2], 1).pop().unwrap().unwrap();
    assert_eq!(one.num_changed(), one.num_values());
    let read: Vec<Option<String>> =
        (0..one.num_values() as u32).map(|v| one.value_sharding(v).map(print_sharding)).collect();
    assert_eq!(read[..], expected[1][..expected[1].len() - 1]);
    let bad = Candidate { values: vec![(999, None)], func_results: vec![] };
    let outs = propagate_candidates(&graph, &base, &options, &[bad], 2);
    assert!(matches!(outs[0].as_ref().unwrap_err().kind, ErrorKind::Invariant { rule: "candidate-value" }));
    assert!(propagate_candidates(&graph, &base, &options, &[], 4).is_empty());
}

/// The benchmark's program (`common::program::mlp_stack`, benches/rust/solver.rs) propagates
/// as the Megatron plan says: every hidden activation is split on `data` and `model`, and the
/// residual stream and the function result on `data` only (the row-split dot's reduction over
/// `model` is not a dim sharding).
#[test]
fn the_benchmark_mlp_stack_propagates_the_megatron_plan() {
    let (graph, input) = common::program::mlp_stack(3);
    let n_values = input.value_shardings.len();
    let out = propagate(&graph, input, &pass(Pass::UserPriority)).unwrap();
    let texts: Vec<Option<String>> = (0..n_values as u32).map(|v| text(&out, v)).collect();
    let hidden = s(r#"#sdy.sharding<@mesh, [{"data", ?}, {"model", ?}]>"#);
    let stream = s(r#"#sdy.sharding<@mesh, [{"data", ?}, {?}]>"#);
    // Values: x, then (w1, w2) per layer, then per layer the results of dot, tanh, dot, add.
    let first = 1 + 2 * 3;
    for l in 0..3 {
        let v = first + 4 * l;
        assert_eq!(texts[v], hidden, "dot 1 of layer {l}");
        assert_eq!(texts[v + 1], hidden, "tanh of layer {l}");
        assert_eq!(texts[v + 2], stream, "dot 2 of layer {l}");
        assert_eq!(texts[v + 3], stream, "add of layer {l}");
    }
    assert_eq!(result_text(&out, 0), stream);
}
