//! The conflict diagnosis behind `shardwise.explain` (`propagation::explain::diagnose`): each
//! projection is propagated with a strategy, then the axes a tensor did not take are named with
//! the reason Shardy's factor propagation had.

use shardwise::propagation::debug::{EdgeNode, EdgeNodeKind};
use shardwise::propagation::explain::{diagnose, ConflictReason, StepConflict, StrategyTag, VisitInfo};
use shardwise::propagation::{
    AggressiveFactorPropagation, BasicFactorPropagation, FactorPropagation, OpInfo, PropagationDirection,
    ShardingProjection,
};
use shardwise::Mesh;

#[path = "common/mod.rs"]
mod common;
use common::{ax, closed, mesh, open, tensor};

const OPERAND_0: EdgeNode = EdgeNode { kind: EdgeNodeKind::Operand, index: 0 };
const OPERAND_1: EdgeNode = EdgeNode { kind: EdgeNodeKind::Operand, index: 1 };
const RESULT_0: EdgeNode = EdgeNode { kind: EdgeNodeKind::Result, index: 0 };

fn run(
    p: &ShardingProjection,
    sizes: &[i64],
    dir: PropagationDirection,
    strategy: StrategyTag,
    m: &Mesh,
) -> Vec<StepConflict> {
    let mut after = p.clone();
    let direction = move |_: usize| dir;
    let s: &dyn FactorPropagation = match strategy {
        StrategyTag::Basic => &BasicFactorPropagation,
        StrategyTag::Aggressive => &AggressiveFactorPropagation,
    };
    s.propagate_factor_shardings(&mut after, &direction, sizes, Some(m), false, OpInfo::default()).unwrap();
    let info = VisitInfo {
        factor_sizes: sizes,
        direction: &direction,
        blocked: &|_| false,
        mesh: m,
        conservative: false,
        strategy,
        elementwise: false,
    };
    diagnose(p, &after, &info).unwrap()
}

fn find(cs: &[StepConflict], target: EdgeNode, axis: &str) -> StepConflict {
    cs.iter()
        .find(|c| c.target == target && c.axes[0] == ax(axis))
        .cloned()
        .unwrap_or_else(|| panic!("no conflict for {axis} at {target}: {cs:?}"))
}

#[test]
fn operands_disagreeing_on_a_factor() {
    let m = mesh("\"a\"=2, \"b\"=2");
    // A dot's contracting factor 0: the lhs has "a", the rhs "b"; the result lacks it.
    let p = ShardingProjection::new(
        vec![tensor([(0, open("a"))]), tensor([(0, open("b"))])],
        vec![tensor([(1, open(""))])],
    );
    for strategy in [StrategyTag::Basic, StrategyTag::Aggressive] {
        let cs = run(&p, &[4, 4], PropagationDirection::Both, strategy, &m);
        let c = find(&cs, OPERAND_1, "a");
        assert_eq!((c.source, c.reason, c.factor), (OPERAND_0, ConflictReason::IncompatibleSharding, 0));
        let with = c.with.unwrap();
        assert_eq!((with.tensor, with.axis), (OPERAND_1, Some(ax("b"))));
        assert_eq!(find(&cs, OPERAND_0, "b").reason, ConflictReason::IncompatibleSharding);
        assert_eq!(cs.len(), 2);
    }
}

#[test]
fn axis_used_by_another_factor_closed_dimensions_and_directions() {
    let m = mesh("\"a\"=2, \"b\"=2");
    // Factor 0 wants "a" from operand 0, but operand 1 uses "a" for factor 1.
    let p = ShardingProjection::new(
        vec![tensor([(0, open("a"))]), tensor([(1, open("a"))])],
        vec![tensor([(0, open("")), (1, open(""))])],
    );
    let cs = run(&p, &[4, 4], PropagationDirection::Both, StrategyTag::Basic, &m);
    let c = find(&cs, RESULT_0, "a");
    assert_eq!(c.reason, ConflictReason::OverlapsOtherFactor);
    let with = c.with.unwrap();
    assert_eq!((with.tensor, with.factor, with.axis), (OPERAND_1, Some(1), Some(ax("a"))));
    // A closed result dimension.
    let p = ShardingProjection::new(vec![tensor([(0, open("a b"))])], vec![tensor([(0, closed(""))])]);
    let cs = run(&p, &[4], PropagationDirection::Both, StrategyTag::Aggressive, &m);
    let c = find(&cs, RESULT_0, "a");
    assert_eq!((c.reason, c.axes.clone()), (ConflictReason::Closed, vec![ax("a"), ax("b")]));
    // Backward only: the operand's axes are not propagated.
    let p = ShardingProjection::new(vec![tensor([(0, open("a"))])], vec![tensor([(0, open(""))])]);
    let cs = run(&p, &[4], PropagationDirection::Backward, StrategyTag::Aggressive, &m);
    assert_eq!(find(&cs, RESULT_0, "a").reason, ConflictReason::Direction);
    // Nothing is dropped where everything propagates.
    assert!(run(&p, &[4], PropagationDirection::Both, StrategyTag::Aggressive, &m).is_empty());
}

#[test]
fn non_divisible_factor() {
    let m = mesh("\"a\"=4");
    // Factor 0 (size 2, not minor-most) cannot take "a" (size 4) whole: the result keeps
    // "a":(1)2, and the drop of "a" is reported as not divisible.
    let mut r = tensor([(0, open("")), (1, open(""))]);
    r.factors[0].as_mut().unwrap().minor_most = false;
    let p = ShardingProjection::new(vec![tensor([(0, open("a"))])], vec![r]);
    let cs = run(&p, &[2, 4], PropagationDirection::Both, StrategyTag::Aggressive, &m);
    assert_eq!(find(&cs, RESULT_0, "a").reason, ConflictReason::NotDivisible);
}
