//! Factor propagation strategies. The cases restate, in this crate's terms, the behaviour that
//! Shardy's `basic_factor_propagation_test.cc` and `aggressive_factor_propagation_test.cc`
//! check (factor shardings written directly, all factor sizes 1 and no mesh unless a case
//! needs them), plus cases of this crate: elementwise ops, blocked factors, a projection built
//! from shardings end to end, and errors.

use shardwise::propagation::{
    direction_with_blocked_factors, AggressiveFactorPropagation, BasicFactorPropagation, FactorPropagation,
    FactorSharding, OpInfo, PropagationDirection, ShardingProjection, TensorFactorShardings, UpdateTensorShardings,
};
use shardwise::rule::parse_rule;
use shardwise::text::{parse_sharding, print_sharding};
use shardwise::{AxisRef, MeshRef, TensorSharding};

use PropagationDirection as Dir;

// ------------------------------------------------------------------ helpers

#[path = "common/mod.rs"]
mod common;
use common::{axes, closed, mesh, open, tensor};

fn both(_: usize) -> Dir {
    Dir::Both
}

fn bits(up: &UpdateTensorShardings) -> (Vec<usize>, Vec<usize>) {
    (up.operands.to_vec(), up.results.to_vec())
}

/// Runs `strategy` with all factor sizes 1, no mesh, not conservative, no op.
fn run(
    strategy: &dyn FactorPropagation,
    p: &mut ShardingProjection,
    num_factors: usize,
    dir: &dyn Fn(usize) -> Dir,
) -> (Vec<usize>, Vec<usize>) {
    bits(&strategy.propagate_factor_shardings(p, dir, &vec![1; num_factors], None, false, OpInfo::default()).unwrap())
}

// ------------------------------------------------------------------ basic

#[test]
fn basic_full_axes_conflict_only_within_the_same_factor() {
    let mut p = ShardingProjection::new(
        vec![
            tensor([(0, open("a")), (3, open("h"))]),
            tensor([(0, open("")), (2, open("g")), (3, open("i"))]),
            tensor([(1, open("e"))]),
        ],
        vec![
            tensor([(0, open("a b c")), (1, open("e f"))]),
            tensor([(0, open("a b d")), (2, open("")), (3, open("i j"))]),
        ],
    );
    // Factor 0: ["a", "b"] is compatible with ["a"], [], ["a", "b", "c"], ["a", "b", "d"].
    // Factor 1: ["e", "f"]. Factor 2: ["g"]. Factor 3: nothing (["h"] vs ["i"]).
    let expected = ShardingProjection::new(
        vec![
            tensor([(0, open("a b")), (3, open("h"))]),
            tensor([(0, open("a b")), (2, open("g")), (3, open("i"))]),
            tensor([(1, open("e f"))]),
        ],
        vec![p.results[0].clone(), tensor([(0, open("a b d")), (2, open("g")), (3, open("i j"))])],
    );
    assert_eq!(run(&BasicFactorPropagation, &mut p, 4, &both), (vec![0, 1, 2], vec![1]));
    assert_eq!(p, expected);
}

#[test]
fn basic_sub_axes_conflict_only_within_the_same_factor() {
    let mut p = ShardingProjection::new(
        vec![
            tensor([(0, open("a b")), (1, open("c:(2)2 d")), (4, open("j:(1)4")), (5, open("k:(1)8"))]),
            tensor([(0, open("")), (1, open("c:(2)4")), (3, open("g h:(1)8")), (5, closed("k:(1)4"))]),
        ],
        vec![
            tensor([(0, open("a:(1)2")), (2, open("e:(2)4 f:(4)2")), (3, open("g h:(1)4 i")), (5, open("k:(1)2"))]),
            tensor([(1, open("c:(2)4 d")), (2, open("e:(2)4 f:(4)8")), (4, open("j:(2)4")), (5, open(""))]),
        ],
    );
    // Factor 0: ["a", "b"]. Factor 1: ["c":(2)2] (no tensor grows). Factor 2:
    // ["e":(2)4, "f":(4)8]. Factor 3: ["g", "h":(1)4] (no tensor grows). Factor 4: nothing
    // ("j":(1)4 vs "j":(2)4). Factor 5: ["k":(1)8], cut to ["k":(1)4] by the closed operand 1.
    let expected = ShardingProjection::new(
        vec![
            p.operands[0].clone(),
            tensor([(0, open("a b")), (1, open("c:(2)4")), (3, open("g h:(1)8")), (5, closed("k:(1)4"))]),
        ],
        vec![
            tensor([(0, open("a b")), (2, open("e:(2)4 f:(4)8")), (3, open("g h:(1)4 i")), (5, open("k:(1)4"))]),
            tensor([(1, open("c:(2)4 d")), (2, open("e:(2)4 f:(4)8")), (4, open("j:(2)4")), (5, open("k:(1)4"))]),
        ],
    );
    assert_eq!(run(&BasicFactorPropagation, &mut p, 6, &both), (vec![1], vec![0, 1]));
    assert_eq!(p, expected);
}

/// The input shared by the basic and aggressive cases on conflicts with other factors and with
/// replicated (and, for the aggressive one, unreduced) axes.
fn conflicts_with_other_factors_and_replicated(unreduced_c_in_operand_0: bool) -> ShardingProjection {
    let mut op0 = tensor([(0, open("a")), (3, open("h:(1)2 i"))]);
    if unreduced_c_in_operand_0 {
        op0 = op0.with_unreduced(axes("c"));
    }
    ShardingProjection::new(
        vec![
            op0,
            tensor([(1, open("b")), (2, closed("f"))]).with_replicated(axes("h:(1)2")),
            tensor([(0, open("")), (4, open("j:(1)8 k:(2)4"))]),
        ],
        vec![
            tensor([(0, open("a b c d")), (3, open(""))]).with_replicated(axes("h:(2)4 i:(2)2")),
            tensor([(0, open("a b c e")), (2, closed("f g"))]),
            tensor([(4, open("j:(1)4")), (5, open("k:(1)4"))]),
        ],
    )
}

#[test]
fn basic_conflicts_between_different_factors_and_replicated_axes() {
    let mut p = conflicts_with_other_factors_and_replicated(false);
    // Factor 0: ["a", "b", "c"], but "b" shards factor 1 of operand 1: ["a"].
    // Factor 1: ["b"], but "b" shards factor 0 elsewhere: nothing.
    // Factor 2: ["f", "g"], but operand 1 is closed at ["f"]: ["f"].
    // Factor 3: ["h":(1)2, "i"], but result 0 replicates "i":(2)2: ["h":(1)2, "i":(1)2].
    // Factor 4: ["j":(1)8, "k":(2)4], but "k":(1)4 shards factor 5: ["j":(1)8].
    // Factor 5: ["k":(1)4], but "k":(2)4 shards factor 4: ["k":(1)2], which grows nothing.
    let mut expected = p.clone();
    expected.operands[2] = tensor([(0, open("a")), (4, open("j:(1)8 k:(2)4"))]);
    expected.results[0] =
        tensor([(0, open("a b c d")), (3, open("h:(1)2 i:(1)2"))]).with_replicated(axes("h:(2)4 i:(2)2"));
    expected.results[2] = tensor([(4, open("j:(1)8")), (5, open("k:(1)4"))]);
    assert_eq!(run(&BasicFactorPropagation, &mut p, 6, &both), (vec![2], vec![0, 2]));
    assert_eq!(p, expected);
}

#[test]
fn basic_conflicts_with_overflow_axes() {
    let mut p = ShardingProjection::new(
        vec![tensor([(0, open("a b")), (1, open("c"))])],
        vec![tensor([(0, open("")), (1, open("").with_overflow(axes("b:(1)2")))])],
    );
    // Factor 0: ["a", "b"], but the result overflows into "b":(1)2 in factor 1: ["a"].
    // Factor 1: ["c"], but factor 1 of the result has overflow axes: nothing.
    let expected = ShardingProjection::new(
        vec![p.operands[0].clone()],
        vec![tensor([(0, open("a")), (1, open("").with_overflow(axes("b:(1)2")))])],
    );
    assert_eq!(run(&BasicFactorPropagation, &mut p, 2, &both), (vec![], vec![0]));
    assert_eq!(p, expected);
}

#[test]
fn basic_minor_most_factor_need_not_divide() {
    let m = mesh(r#""a"=3, "b"=3, "c"=3"#);
    let operand = tensor([(0, open("a b").minor_most()), (1, open("c").minor_most())]);
    let before = tensor([(0, open("")), (1, open("").minor_most())]);
    // Factor 1 is minor-most in the result, so "c" (3) goes there whatever its size; factor 0
    // is not, so it takes only the axes whose product divides its size.
    for (sizes, after) in [
        ([9, 4], tensor([(0, open("a b")), (1, open("c").minor_most())])),
        ([6, 19], tensor([(0, open("a")), (1, open("c").minor_most())])),
        ([4, 1], tensor([(0, open("")), (1, open("c").minor_most())])),
    ] {
        let mut p = ShardingProjection::new(vec![operand.clone()], vec![before.clone()]);
        let up = BasicFactorPropagation
            .propagate_factor_shardings(&mut p, &both, &sizes, Some(&m), false, OpInfo::default())
            .unwrap();
        assert_eq!(bits(&up), (vec![], vec![0]), "sizes {sizes:?}");
        assert_eq!(p, ShardingProjection::new(vec![operand.clone()], vec![after]), "sizes {sizes:?}");
    }
}

#[test]
fn basic_different_directions_for_different_factors() {
    let empty8 = || TensorFactorShardings::from_factors((0..8).map(|f| (f, open(""))));
    let with = |pairs: &[(usize, &str)]| {
        let mut t = empty8();
        for &(f, a) in pairs {
            t.insert(f, open(a));
        }
        t
    };
    let mut p = ShardingProjection::new(
        vec![with(&[(0, "a"), (1, "b"), (2, "c"), (3, "d")]), empty8()],
        vec![with(&[(4, "e"), (5, "f"), (6, "g"), (7, "h")]), empty8()],
    );
    // Factors 0 and 4 go both ways, 1 and 5 forward, 2 and 6 backward, 3 and 7 nowhere.
    let dir = |f: usize| match f {
        0 | 4 => Dir::Both,
        1 | 5 => Dir::Forward,
        2 | 6 => Dir::Backward,
        _ => Dir::None,
    };
    let others = with(&[(0, "a"), (1, "b"), (4, "e"), (6, "g")]);
    let expected = ShardingProjection::new(
        vec![with(&[(0, "a"), (1, "b"), (2, "c"), (3, "d"), (4, "e"), (6, "g")]), others.clone()],
        vec![with(&[(0, "a"), (1, "b"), (4, "e"), (5, "f"), (6, "g"), (7, "h")]), others],
    );
    assert_eq!(run(&BasicFactorPropagation, &mut p, 8, &dir), (vec![0, 1], vec![0, 1]));
    assert_eq!(p, expected);
}

#[test]
fn basic_unidirectional_propagation_with_conflict() {
    let mut p = ShardingProjection::new(
        vec![tensor([(0, open("a b")), (1, open("")), (2, open("d"))])],
        vec![tensor([(0, open("b")), (1, open("c d")), (2, open(""))])],
    );
    let dir = |f: usize| match f {
        0 => Dir::Forward,
        1 => Dir::Backward,
        _ => Dir::None,
    };
    // Factor 0 forward: the result's ["b"] conflicts with ["a", "b"]: nothing. Factor 1
    // backward: ["c", "d"], but "d" shards factor 2 of the operand: ["c"].
    let expected = ShardingProjection::new(
        vec![tensor([(0, open("a b")), (1, open("c")), (2, open("d"))])],
        vec![p.results[0].clone()],
    );
    assert_eq!(run(&BasicFactorPropagation, &mut p, 3, &dir), (vec![0], vec![]));
    assert_eq!(p, expected);
}

#[test]
fn basic_conservative_propagation_stops_at_sub_axes() {
    let mut p = ShardingProjection::new(
        vec![tensor([(0, open("a b:(1)2 c")), (1, open("b:(2)4"))])],
        vec![tensor([(0, open("")), (1, open(""))])],
    );
    let up = BasicFactorPropagation
        .propagate_factor_shardings(&mut p, &both, &[1, 1], None, true, OpInfo::default())
        .unwrap();
    assert_eq!(bits(&up), (vec![], vec![0]));
    assert_eq!(p.results[0], tensor([(0, open("a")), (1, open(""))]));
}

#[test]
fn basic_splits_an_axis_to_keep_a_non_minor_most_factor_divisible() {
    let m = mesh(r#""x"=4"#);
    let fresh = || ShardingProjection::new(vec![tensor([(0, open("x").minor_most())])], vec![tensor([(0, open(""))])]);
    let mut p = fresh();
    BasicFactorPropagation.propagate_factor_shardings(&mut p, &both, &[2], Some(&m), false, OpInfo::default()).unwrap();
    assert_eq!(p.results[0], tensor([(0, open("x:(1)2"))]));
    // Conservatively, the sub-axis is not propagated.
    let mut p = fresh();
    let up = BasicFactorPropagation
        .propagate_factor_shardings(&mut p, &both, &[2], Some(&m), true, OpInfo::default())
        .unwrap();
    assert!(!up.any());
}

// ------------------------------------------------------------------ aggressive

#[test]
fn aggressive_real_and_fake_conflicts() {
    let mut p = ShardingProjection::new(
        vec![
            tensor([
                (0, open("a")),
                (2, open("c")),
                (4, open("b")),
                (6, open("e")),
                (7, open("")),
                (8, open("f")),
                (10, open("g")),
            ]),
            tensor([
                (1, open("a")),
                (2, open("")),
                (3, open("c")),
                (4, open("")),
                (5, open("b")),
                (6, open("")),
                (7, open("e")),
                (9, open("g")),
                (10, open("f")),
            ]),
        ],
        vec![tensor([
            (0, open("")),
            (1, open("")),
            (2, open("").with_overflow(axes("d"))),
            (3, open("")),
            (4, closed("")),
            (5, open("")),
            (6, closed("")),
            (7, open("")),
            (8, open("")),
            (9, open("")),
        ])],
    );
    // "a" could go to the result along factor 0 or 1, a real conflict: factor 0 wins, its
    // source being the first operand (all tensors have the same size). The other conflicts are
    // only apparent: "c", "b", "e", "f", "g" go to the result along factors 3, 5, 7, 8, 9. That
    // "e" cannot go to operand 0 along factor 7 does not stop it reaching the result.
    let mut expected = p.clone();
    expected.results[0] = tensor([
        (0, open("a")),
        (1, open("")),
        (2, open("").with_overflow(axes("d"))),
        (3, open("c")),
        (4, closed("")),
        (5, open("b")),
        (6, closed("")),
        (7, open("e")),
        (8, open("f")),
        (9, open("g")),
    ]);
    assert_eq!(run(&AggressiveFactorPropagation, &mut p, 11, &both), (vec![], vec![0]));
    assert_eq!(p, expected);
}

#[test]
fn aggressive_two_factors_that_share_no_tensor() {
    let mut p = ShardingProjection::new(
        vec![tensor([(0, open("a"))]), tensor([(1, open("a"))])],
        vec![tensor([(0, open(""))]), tensor([(1, open(""))])],
    );
    // "a" goes along both factors: no tensor has both.
    let expected = ShardingProjection::new(p.operands.clone(), p.operands.clone());
    assert_eq!(run(&AggressiveFactorPropagation, &mut p, 2, &both), (vec![], vec![0, 1]));
    assert_eq!(p, expected);
}

#[test]
fn aggressive_conflicts_between_different_factors_and_replicated_or_unreduced_axes() {
    let mut p = conflicts_with_other_factors_and_replicated(true);
    // Each tensor takes what conflicts with nothing in it: operand 0 takes ["a", "b"] along
    // factor 0 ("c" is unreduced there), operand 2 ["a", "b", "c"].
    let mut expected = p.clone();
    expected.operands[0] = tensor([(0, open("a b")), (3, open("h:(1)2 i"))]).with_unreduced(axes("c"));
    expected.operands[2] = tensor([(0, open("a b c")), (4, open("j:(1)8 k:(2)4"))]);
    expected.results[0] =
        tensor([(0, open("a b c d")), (3, open("h:(1)2 i:(1)2"))]).with_replicated(axes("h:(2)4 i:(2)2"));
    expected.results[2] = tensor([(4, open("j:(1)8")), (5, open("k:(1)4"))]);
    assert_eq!(run(&AggressiveFactorPropagation, &mut p, 6, &both), (vec![0, 2], vec![0, 2]));
    assert_eq!(p, expected);
}

#[test]
fn aggressive_new_axes_conflict() {
    let mut p = ShardingProjection::new(
        vec![
            tensor([(0, open("a b c")), (1, open("")), (2, closed("")), (3, open(""))]).with_replicated(axes("d")),
            tensor([(0, open("")), (1, open("b a")), (2, open("")), (3, open("d"))]),
            tensor([(0, closed("")), (1, open("")), (2, open("c a")), (3, open(""))]),
        ],
        vec![
            tensor([(0, open("")), (1, closed("")), (2, open("")), (3, open(""))]),
            tensor([(0, open("a b d")), (1, open("")), (2, open("")), (3, open(""))]),
        ],
    );
    // "a" may go to result 0 along factor 0 or factor 2: factor 0 wins (its source is the
    // first operand; all tensors have the same size).
    let expected = ShardingProjection::new(
        vec![
            p.operands[0].clone(),
            tensor([(0, open("")), (1, open("b a")), (2, open("c")), (3, open("d"))]),
            tensor([(0, closed("")), (1, open("b")), (2, open("c a")), (3, open("d"))]),
        ],
        vec![
            tensor([(0, open("a b")), (1, closed("")), (2, open("c")), (3, open("d"))]),
            tensor([(0, open("a b d")), (1, open("")), (2, open("c")), (3, open(""))]),
        ],
    );
    assert_eq!(run(&AggressiveFactorPropagation, &mut p, 4, &both), (vec![1, 2], vec![0, 1]));
    assert_eq!(p, expected);
}

#[test]
fn aggressive_propagates_along_the_allowed_factors_only() {
    let factor0_sharded = tensor([(0, open("a")), (1, open(""))]);
    let factor1_sharded = tensor([(0, open("")), (1, open("a"))]);
    let replicated = tensor([(0, open("")), (1, open(""))]);
    let check = |dir: &dyn Fn(usize) -> Dir, expected_result: &TensorFactorShardings| {
        let mut p =
            ShardingProjection::new(vec![factor0_sharded.clone(), factor1_sharded.clone()], vec![replicated.clone()]);
        assert_eq!(run(&AggressiveFactorPropagation, &mut p, 2, dir), (vec![], vec![0]));
        let expected = ShardingProjection::new(
            vec![factor0_sharded.clone(), factor1_sharded.clone()],
            vec![expected_result.clone()],
        );
        assert_eq!(p, expected);
    };
    let only = |factor: usize| move |f: usize| if f == factor { Dir::Both } else { Dir::None };
    check(&only(0), &factor0_sharded);
    check(&only(1), &factor1_sharded);
    // Along every factor, factor 0 wins "a".
    check(&both, &factor0_sharded);
}

#[test]
fn aggressive_elementwise_does_not_propagate_sideways_past_results() {
    // %0 = add %arg0 [{"a", ?}], %arg1 [{?}] -> [{}]: the replicated result keeps "a" from
    // reaching %arg1 through an elementwise op; any other op lets it.
    let m = mesh(r#""a"=2"#);
    let rule = parse_rule("<([i], [i])->([i]) {i=8}>").unwrap();
    let ops = [parse_sharding(r#"<@mesh, [{"a", ?}]>"#).unwrap(), parse_sharding("<@mesh, [{?}]>").unwrap()];
    let res = parse_sharding("<@mesh, [{}]>").unwrap();
    let build = || ShardingProjection::build(&[Some(&ops[0]), Some(&ops[1])], &[Some(&res)], &rule, &m, false).unwrap();
    let mut p = build();
    let up = AggressiveFactorPropagation
        .propagate_factor_shardings(&mut p, &both, &rule.factor_sizes, Some(&m), false, OpInfo { elementwise: true })
        .unwrap();
    assert!(!up.any());
    let mut p = build();
    let up = AggressiveFactorPropagation
        .propagate_factor_shardings(&mut p, &both, &rule.factor_sizes, Some(&m), false, OpInfo::default())
        .unwrap();
    assert_eq!(bits(&up), (vec![1], vec![]));
    assert_eq!(p.operands[1].get(0).unwrap().axes, axes("a"));
}

#[test]
fn aggressive_elementwise_prefers_the_more_sharded_factor() {
    let m = mesh(r#""x"=2, "y"=2"#);
    let fresh = || {
        ShardingProjection::new(
            vec![tensor([(0, open("x").minor_most())]), tensor([(1, open("x y").minor_most())])],
            vec![tensor([(0, open("").minor_most()), (1, open("").minor_most())])],
        )
    };
    // Both sources have the same size; by default factor 0 (the first source) wins "x", as an
    // elementwise op factor 1 wins, being sharded 4 ways rather than 2.
    let mut p = fresh();
    AggressiveFactorPropagation
        .propagate_factor_shardings(&mut p, &both, &[4, 4], Some(&m), false, OpInfo::default())
        .unwrap();
    assert_eq!(p.results[0], tensor([(0, open("x").minor_most()), (1, open("").minor_most())]));
    let mut p = fresh();
    AggressiveFactorPropagation
        .propagate_factor_shardings(&mut p, &both, &[4, 4], Some(&m), false, OpInfo { elementwise: true })
        .unwrap();
    assert_eq!(p.results[0], tensor([(0, open("").minor_most()), (1, open("x y").minor_most())]));
}

#[test]
fn aggressive_prefers_the_larger_source_tensor() {
    // Operand 1 is larger (factor 1 has size 8), so its factor wins "a" in the result even
    // though operand 0 comes first.
    let mut p = ShardingProjection::new(
        vec![tensor([(0, open("a").minor_most())]), tensor([(1, open("a").minor_most())])],
        vec![tensor([(0, open("").minor_most()), (1, open("").minor_most())])],
    );
    AggressiveFactorPropagation
        .propagate_factor_shardings(&mut p, &both, &[2, 8], None, false, OpInfo::default())
        .unwrap();
    assert_eq!(p.results[0], tensor([(0, open("").minor_most()), (1, open("a").minor_most())]));
}

// ------------------------------------------------------------------ end to end and helpers

#[test]
fn propagation_through_a_projection_built_from_shardings() {
    // The example of Shardy's propagation guide: T0, T1 operands, T2 the result.
    let m = mesh(r#""a"=2, "b"=2, "c"=2, "d"=2, "e"=2, "f"=2, "g"=2"#);
    let rule = parse_rule("<([i, j, k], [i, j, k])->([i, j, k]) {i=16, j=16, k=16}>").unwrap();
    let t0 = parse_sharding(r#"<@mesh, [{"a", ?}, {?}, {"f", ?}]>"#).unwrap();
    let t1 = parse_sharding(r#"<@mesh, [{"a", "b", ?}, {"c", "d", ?}, {"g", ?}]>"#).unwrap();
    let t2 = parse_sharding(r#"<@mesh, [{?}, {"c", "e", ?}, {?}]>"#).unwrap();
    for strategy in [&BasicFactorPropagation as &dyn FactorPropagation, &AggressiveFactorPropagation] {
        let mut p = ShardingProjection::build(&[Some(&t0), Some(&t1)], &[Some(&t2)], &rule, &m, false).unwrap();
        let up = strategy
            .propagate_factor_shardings(&mut p, &both, &rule.factor_sizes, Some(&m), false, OpInfo::default())
            .unwrap();
        assert_eq!(bits(&up), (vec![0], vec![0]));
        let (ops, res) = p.to_tensor_shardings(&rule, &MeshRef::Named("mesh".into()), &m).unwrap();
        let texts: Vec<String> = ops.iter().chain(&res).map(print_sharding).collect();
        assert_eq!(
            texts,
            [
                r#"#sdy.sharding<@mesh, [{"a", "b", ?}, {"c", ?}, {"f", ?}]>"#,
                r#"#sdy.sharding<@mesh, [{"a", "b", ?}, {"c", "d", ?}, {"g", ?}]>"#,
                r#"#sdy.sharding<@mesh, [{"a", "b", ?}, {"c", "e", ?}, {?}]>"#,
            ]
        );
    }
}

#[test]
fn blocked_factors_do_not_propagate() {
    let rule = parse_rule("<([i, j])->([i, j]) {i=4, j=4} blocked_propagation={j}>").unwrap();
    let dir = direction_with_blocked_factors(&rule, |_| Dir::Forward);
    assert_eq!((dir(0), dir(1)), (Dir::Forward, Dir::None));

    let m = mesh(r#""a"=2, "b"=2"#);
    let s: TensorSharding = parse_sharding(r#"<@mesh, [{"a", ?}, {"b", ?}]>"#).unwrap();
    let mut p = ShardingProjection::build(&[Some(&s)], &[None], &rule, &m, false).unwrap();
    BasicFactorPropagation
        .propagate_factor_shardings(&mut p, &dir, &rule.factor_sizes, Some(&m), false, OpInfo::default())
        .unwrap();
    assert_eq!(p.results[0].get(0).unwrap().axes, axes("a"));
    assert_eq!(p.results[0].get(1).unwrap().axes, axes(""));
}

#[test]
fn errors_instead_of_panics() {
    let mut p = ShardingProjection::new(vec![tensor([(3, open("a"))])], vec![tensor([(3, open(""))])]);
    for strategy in [&BasicFactorPropagation as &dyn FactorPropagation, &AggressiveFactorPropagation] {
        let e =
            strategy.propagate_factor_shardings(&mut p, &both, &[1, 1], None, false, OpInfo::default()).unwrap_err();
        assert_eq!(e.rule(), Some("propagation-factor-out-of-range"), "{}", e.message);
    }
    // Sizing a full axis needs a mesh (elementwise ordering does).
    let e = AggressiveFactorPropagation
        .propagate_factor_shardings(&mut p, &both, &[1; 4], None, false, OpInfo { elementwise: true })
        .unwrap_err();
    assert!(e.message.contains("no mesh"), "{}", e.message);
    // An axis the mesh lacks, where divisibility must be checked.
    let m = mesh(r#""b"=2"#);
    let mut q = ShardingProjection::new(vec![tensor([(0, open("a").minor_most())])], vec![tensor([(0, open(""))])]);
    let e = BasicFactorPropagation
        .propagate_factor_shardings(&mut q, &both, &[4], Some(&m), false, OpInfo::default())
        .unwrap_err();
    assert_eq!(e.rule(), Some("unknown-axis"), "{}", e.message);
}

#[test]
fn default_direction_is_both() {
    assert_eq!(Dir::default(), Dir::Both);
}

/// A small deterministic generator for the robustness test below.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

#[test]
fn arbitrary_inputs_never_panic() {
    // Hand-built projections may hold anything a caller can construct: malformed sub-axes,
    // axes the mesh lacks, odd factor sizes. Strategies and projection must answer with a value
    // or an error, never a panic.
    let m = mesh(r#""a"=4, "b"=6, "c"=1"#);
    let names = ["a", "b", "c", "z"];
    let numbers = [-1i64, 0, 1, 2, 3, 4, 6, 12];
    let sizes = [0i64, 1, 2, 3, 4, 12, -1, i64::MIN, i64::MAX];
    let mut g = Lcg(7);
    let (mut built, mut propagated) = (0, 0);
    for _ in 0..3000 {
        let gen_axis = |g: &mut Lcg| {
            let name = names[g.next(names.len())];
            if g.next(2) == 0 {
                AxisRef::full(name)
            } else {
                AxisRef::sub(name, numbers[g.next(numbers.len())], numbers[g.next(numbers.len())])
            }
        };
        let num_factors = 1 + g.next(3);
        let gen_tensor = |g: &mut Lcg| {
            let mut t = TensorFactorShardings::default();
            for f in 0..num_factors {
                if g.next(3) == 0 {
                    continue;
                }
                let axes = (0..g.next(3)).map(|_| gen_axis(g)).collect();
                let overflow = (0..g.next(2)).map(|_| gen_axis(g)).collect();
                t.insert(
                    f,
                    FactorSharding {
                        axes,
                        closed: g.next(2) == 0,
                        minor_most: g.next(2) == 0,
                        overflow_axes: overflow,
                    },
                );
            }
            t.replicated = (0..g.next(2)).map(|_| gen_axis(g)).collect();
            t.unreduced = (0..g.next(2)).map(|_| gen_axis(g)).collect();
            t
        };
        let operands = (0..1 + g.next(2)).map(|_| gen_tensor(&mut g)).collect();
        let results = (0..1 + g.next(2)).map(|_| gen_tensor(&mut g)).collect();
        let p = ShardingProjection::new(operands, results);
        let factor_sizes: Vec<i64> = (0..num_factors).map(|_| sizes[g.next(sizes.len())]).collect();
        let mesh_opt = if g.next(2) == 0 { Some(&m) } else { None };
        let op = OpInfo { elementwise: g.next(2) == 0 };
        let conservative = g.next(2) == 0;
        for strategy in [&BasicFactorPropagation as &dyn FactorPropagation, &AggressiveFactorPropagation] {
            let mut q = p.clone();
            propagated += usize::from(
                strategy.propagate_factor_shardings(&mut q, &both, &factor_sizes, mesh_opt, conservative, op).is_ok(),
            );
        }
        let _ = p.greatest_common_prefix_axes(num_factors);
        let mapping = vec![(0..num_factors as i64).collect::<Vec<_>>()];
        let _ = p.operands[0].to_tensor_sharding(&mapping, &factor_sizes, &MeshRef::Named("mesh".into()), &m);
        let _ = p.operands[0].sharding_size(&m);

        // Projection of arbitrary tensor shardings onto an arbitrary compound rule.
        let rule = parse_rule("<([ij], [k])->([i, jk]) {i=2, j=3, k=4}>").unwrap();
        let mut rule = rule;
        rule.factor_sizes = (0..3).map(|_| sizes[g.next(sizes.len())]).collect();
        let gen_sharding = |g: &mut Lcg, rank: usize| {
            let mut s = TensorSharding::replicated(MeshRef::Named("mesh".into()), rank, g.next(2) == 0);
            for d in &mut s.dims {
                d.axes = (0..g.next(4)).map(|_| gen_axis(g)).collect();
            }
            s
        };
        let rank0 = 1 + g.next(2);
        let s0 = gen_sharding(&mut g, rank0);
        let s1 = gen_sharding(&mut g, 1);
        let r0 = gen_sharding(&mut g, 2);
        if let Ok(p) = ShardingProjection::build(&[Some(&s0), Some(&s1)], &[Some(&r0)], &rule, &m, g.next(2) == 0) {
            built += 1;
            let _ = p.to_tensor_shardings(&rule, &MeshRef::Named("mesh".into()), &m);
        }
    }
    // Enough of the inputs are well-formed for the successful paths to be exercised too.
    assert!(built > 100 && propagated > 1000, "built {built}, propagated {propagated}");
}
