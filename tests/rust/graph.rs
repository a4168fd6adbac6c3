//! The frozen program's flat arrays.

use shardwise::graph::{Csr, Graph, GraphInput, NONE};
use shardwise::rule::parse_rule;

fn input() -> GraphInput {
    // op 0: func (block args v0, v1); op 1: add(v0, v1) -> v2; op 2: return(v2, v2)
    GraphInput {
        names: vec!["func.func".into(), "stablehlo.add".into(), "func.return".into()],
        op_name: vec![0, 1, 2],
        op_parent: vec![NONE, 0, 0],
        operand_counts: vec![0, 2, 2],
        operands: vec![0, 1, 2, 2],
        result_counts: vec![0, 1, 0],
        results: vec![2],
        ranks: vec![2, 2, 2],
        dims: vec![8, 16, 8, 16, 8, 16],
        value_block_owner: vec![0, 0, NONE],
        rules: vec![parse_rule("#sdy.op_sharding_rule<([i, j], [i, j])->([i, j]) {i=8, j=16}>").unwrap()],
        op_rule: vec![NONE, 0, NONE],
    }
}

#[test]
fn builds_csr_lists_and_users() {
    let g = Graph::new(input()).unwrap();
    assert_eq!((g.num_ops(), g.num_values()), (3, 3));
    assert_eq!(g.operands.row(1), &[0, 1]);
    assert_eq!(g.results.row(1), &[2]);
    assert_eq!(g.users.row(2), &[2, 2]); // used twice by the return
    assert_eq!(g.users.row(0), &[1]);
    assert_eq!(g.shape(1), &[8, 16]);
    assert_eq!(g.value_def, vec![NONE, NONE, 1]);
    assert_eq!(g.name(1), "stablehlo.add");
    assert_eq!(g.rule(1).map(|r| r.factor_sizes.clone()), Some(vec![8, 16]));
    assert!(g.rule(0).is_none() && g.rule(2).is_none());
    assert!(g.bytes() > 0);
}

#[test]
fn rejects_inconsistent_input() {
    let mut bad = input();
    bad.operands[0] = 9;
    assert!(Graph::new(bad).unwrap_err().message.contains("out of range"));
    let mut bad = input();
    bad.results = vec![0];
    assert!(Graph::new(bad).unwrap_err().message.contains("defined twice"));
    let mut bad = input();
    bad.op_parent[1] = 2;
    assert!(Graph::new(bad).unwrap_err().message.contains("not an earlier op"));
    let mut bad = input();
    bad.operand_counts[2] = 3;
    assert!(Graph::new(bad).unwrap_err().message.contains("add up to"));
    let mut bad = input();
    bad.rules = vec![parse_rule("#sdy.op_sharding_rule<([i], [i])->([i]) {i=8}>").unwrap()];
    assert!(Graph::new(bad).unwrap_err().message.contains("does not fit"));
    let mut bad = input();
    bad.op_rule[0] = 3;
    assert!(Graph::new(bad).unwrap_err().message.contains("uses rule 3"));
    let mut bad = input();
    bad.value_block_owner[2] = 5;
    bad.results = vec![];
    bad.result_counts = vec![0, 0, 0];
    assert!(Graph::new(bad).is_err());
}

#[test]
fn transpose_lists_rows_per_target() {
    let c = Csr::from_lengths(&[2, 0, 1], vec![1, 0, 1], "t").unwrap();
    let t = c.transpose(2);
    assert_eq!(t.row(0), &[0]);
    assert_eq!(t.row(1), &[0, 2]);
}
