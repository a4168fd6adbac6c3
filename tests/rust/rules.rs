//! Operation sharding rules of the pure Rust core: Shardy's text form, the invariants of
//! `verifyOpShardingRuleAttr`, the builder's semantics and JAX's einsum-like notation.

use shardwise::rule::{
    factor_symbol, parse_rule, print_rule, rule_from_einsum, EinsumOptions, EinsumSpec, FactorKind, OpShardingRule,
    RuleBuilder, NULL_DIM,
};
use shardwise::ErrorKind;

const MATMUL: &str = "#sdy.op_sharding_rule<([i, j], [j, k])->([i, k]) {i=8, j=8, k=8} reduction={j}>";

fn rule_id(text: &str) -> &'static str {
    parse_rule(text).unwrap_err().rule().expect("an invariant error")
}

fn shapes(s: &[&[i64]]) -> Vec<Option<Vec<i64>>> {
    s.iter().map(|d| Some(d.to_vec())).collect()
}

#[test]
fn factor_symbols_follow_shardy() {
    assert_eq!(factor_symbol(0), "i");
    assert_eq!(factor_symbol(17), "z");
    assert_eq!(factor_symbol(18), "z_1");
    assert_eq!(factor_symbol(30), "z_13");
}

#[test]
fn print_and_parse_round_trip() {
    for text in [
        MATMUL,
        "#sdy.op_sharding_rule<([], [])->([])>",
        "#sdy.op_sharding_rule<([ij, k])->([i, j, k]) {i=2, j=4, k=8}>",
        "#sdy.op_sharding_rule<([i, j])->([j, i]) {i=4, j=2}, custom>",
        "#sdy.op_sharding_rule<([i, j, k, l])->([i, k, l]) {i=2, j=3, k=5, l=7} reduction={j} need_replication={i, l} permutation={k}, custom>",
        "#sdy.op_sharding_rule<([i], [i])->([i]) {i=2} need_replication={i} blocked_propagation={i}>",
        "#sdy.op_sharding_rule<([i])->([i]) {i=8589934592}, custom>",
        "#sdy.op_sharding_rule<([i, j], [i, j])->([i, j]) {i=-9223372036854775808, j=4}>",
    ] {
        let r = parse_rule(text).unwrap();
        assert_eq!(print_rule(&r), text);
        assert_eq!(r.to_string(), text);
    }
    let r = parse_rule(MATMUL).unwrap();
    assert_eq!(r.factor_sizes, vec![8, 8, 8]);
    assert_eq!(r.operand_mappings, vec![vec![vec![0], vec![1]], vec![vec![1], vec![2]]]);
    assert_eq!(r.factor_kind(1), FactorKind::Reduction);
    assert_eq!(r.factor_kind(0), FactorKind::PassThrough);
    assert!(!r.is_custom && !r.is_blocked(1) && !r.has_compound_dims());
}

#[test]
fn symbols_past_z_and_compound_symbols() {
    let n = 21;
    let mut dims: Vec<Vec<i64>> = (0..n).map(|f| vec![f]).collect();
    dims[0] = vec![0, 19];
    dims.remove(19);
    let r = OpShardingRule {
        factor_sizes: vec![2; n as usize],
        operand_mappings: vec![dims.clone()],
        result_mappings: vec![dims],
        reduction_factors: vec![],
        need_replication_factors: vec![18],
        permutation_factors: vec![],
        blocked_propagation_factors: vec![],
        is_custom: false,
    };
    r.check_local().unwrap();
    let text = print_rule(&r);
    assert!(text.starts_with("#sdy.op_sharding_rule<([iz_2, j, "), "{text}");
    assert!(text.contains("z=2, z_1=2, z_2=2, z_3=2} need_replication={z_1}>"), "{text}");
    assert_eq!(parse_rule(&text).unwrap(), r);
}

#[test]
fn parse_errors_carry_offsets() {
    for (text, pos) in [
        ("#sdy.op_sharding_rule<([i])->([a]) {i=1}>", 31),
        ("#sdy.op_sharding_rule<([i])->([i]) {j=1}>", 36),
        ("#sdy.op_sharding_rule<([z_01])->([z_01])>", 24),
        ("#sdy.op_sharding_rule<([i])->([i]) {i=1}, costum>", 42),
        ("#sdy.op_sharding_rule<([i])([i]) {i=1}>", 27),
        ("<([i])->([i]) {i=1}> x", 21),
    ] {
        let e = parse_rule(text).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Parse { pos }, "{text}: {e}");
        assert!(e.message.contains(&format!("{text:?}")), "{e}");
    }
}

#[test]
fn invariants_of_shardys_verifier() {
    assert_eq!(rule_id("<([i, j])->([i]) {i=2}>"), "rule-factor-out-of-range");
    assert_eq!(rule_id("<([i, i])->([i]) {i=2}>"), "rule-factor-reused");
    assert_eq!(rule_id("<([ij])->([i, j]) {i=1, j=2}>"), "rule-size-one-in-compound");
    assert_eq!(rule_id("<([i])->([i]) {i=2, j=3}>"), "rule-unused-factor");
    assert_eq!(rule_id("<([i, j])->([i, j]) {i=2, j=3} reduction={j, i}>"), "rule-special-unsorted");
    assert_eq!(rule_id("<([i, j])->([i, j]) {i=2, j=3} permutation={i, i}>"), "rule-special-duplicate");
    assert_eq!(rule_id("<([i, j])->([i, j]) {i=2, j=3} reduction={i} permutation={i}>"), "rule-factor-in-two-kinds");
    assert_eq!(rule_id("<([i, j])->([i]) {i=2, j=3} reduction={i}>"), "rule-reduction-in-result");
    assert_eq!(rule_id("<([i])->([i]) {i=2} blocked_propagation={j}>"), "rule-special-out-of-range");
    // A broken rule built by hand is reported, not a panic.
    let r = OpShardingRule { factor_sizes: vec![2], operand_mappings: vec![vec![vec![]]], ..Default::default() };
    assert_eq!(r.check_local().unwrap_err().rule(), Some("rule-empty-dim-mapping"));
    let r = OpShardingRule { factor_sizes: vec![2], operand_mappings: vec![vec![vec![-1]]], ..Default::default() };
    let e = r.check_local().unwrap_err();
    assert_eq!(e.rule(), Some("rule-factor-out-of-range"));
    assert!(e.message.contains("#-1"), "{e}");
}

#[test]
fn validation_against_types() {
    let r = parse_rule(MATMUL).unwrap();
    r.validate(&shapes(&[&[8, 8], &[8, 8]]), &shapes(&[&[8, 8]]), true).unwrap();
    let err = |o: Vec<Option<Vec<i64>>>, res: Vec<Option<Vec<i64>>>, exact: bool| {
        r.validate(&o, &res, exact).unwrap_err().rule().unwrap()
    };
    assert_eq!(err(shapes(&[&[8, 8]]), shapes(&[&[8, 8]]), false), "rule-mapping-count");
    assert_eq!(err(shapes(&[&[8, 8], &[8]]), shapes(&[&[8, 8]]), false), "rule-rank-mismatch");
    assert_eq!(err(shapes(&[&[8, -1], &[8, 8]]), shapes(&[&[8, 8]]), false), "rule-not-static-tensor");
    assert_eq!(err(vec![Some(vec![8, 8]), None], shapes(&[&[8, 8]]), false), "rule-not-static-tensor");
    assert_eq!(err(shapes(&[&[8, 8], &[8, 4]]), shapes(&[&[8, 8]]), true), "rule-dim-size");
    // Shardy's own rules are not size-exact: a pad maps a 4 and a 6 to one factor.
    let pad = parse_rule("<([i, j], [])->([i, j]) {i=4, j=4} permutation={j}>").unwrap();
    pad.validate(&shapes(&[&[4, 4], &[]]), &shapes(&[&[4, 6]]), false).unwrap();
    let none = OpShardingRule { result_mappings: vec![vec![]], ..Default::default() };
    assert_eq!(none.validate(&[], &shapes(&[&[]]), false).unwrap_err().rule(), Some("rule-no-mappings"));
}

#[test]
fn builder_matches_shardys_semantics() {
    // dot_general [8,16] x [16,4]: non-contracting factors first, then the contracting one.
    let mut b = RuleBuilder::new(&[2, 2], &[2]);
    b.add_factor(&[0, NULL_DIM], &[0], 8, FactorKind::PassThrough, false).unwrap();
    b.add_factor(&[NULL_DIM, 1], &[1], 4, FactorKind::PassThrough, false).unwrap();
    b.add_factor(&[1, 0], &[NULL_DIM], 16, FactorKind::Reduction, false).unwrap();
    assert_eq!(
        b.build().to_string(),
        "#sdy.op_sharding_rule<([i, k], [k, j])->([i, j]) {i=8, j=4, k=16} reduction={k}>"
    );

    // A size-1 factor is not appended to a mapped dimension (and stays unused); the
    // all-tensor variants skip scalars; build() fills empty dimensions with size-1 factors.
    let mut b = RuleBuilder::new(&[2, 0], &[3]);
    b.add_factor(&[0, NULL_DIM], &[0], 4, FactorKind::PassThrough, false).unwrap();
    b.add_factor(&[0, NULL_DIM], &[NULL_DIM], 1, FactorKind::PassThrough, false).unwrap();
    b.add_factor_for_all(1, 3, FactorKind::NeedReplication, true).unwrap();
    let r = b.build();
    assert_eq!(
        r.to_string(),
        "#sdy.op_sharding_rule<([i, k], [])->([i, k, l]) {i=4, j=1, k=3, l=1} need_replication={k} blocked_propagation={k}>"
    );
    assert_eq!(r.check_local().unwrap_err().rule(), Some("rule-unused-factor"));
    assert_eq!(b.num_factors(), 3, "build() leaves the builder unchanged");

    let e = RuleBuilder::new(&[2], &[2])
        .add_factor(&[0, 1], &[0], 2, FactorKind::PassThrough, false)
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.rule(), Some("builder-dim-count"));
    let e =
        RuleBuilder::new(&[2], &[1]).add_factor_for_all(1, 2, FactorKind::PassThrough, false).map(|_| ()).unwrap_err();
    assert_eq!(e.rule(), Some("builder-dim-out-of-range"));

    let mut b = RuleBuilder::new(&[2], &[2]);
    b.add_pointwise_with_diff_type_for_mismatch(&[4, 6], &[4, 9], FactorKind::Permutation, true).unwrap();
    assert_eq!(
        b.build().to_string(),
        "#sdy.op_sharding_rule<([i, j])->([i, j]) {i=4, j=6} permutation={j} blocked_propagation={j}>"
    );
    let mut b = RuleBuilder::new(&[3, 0], &[3]);
    b.add_pointwise(
        &[2, 3, 4],
        |d| if d == 2 { FactorKind::Permutation } else { FactorKind::PassThrough },
        |k| k == FactorKind::Permutation,
    )
    .unwrap();
    b.add_pointwise_if(&[5], |_| false, |_| FactorKind::PassThrough).unwrap();
    assert_eq!(
        b.build().to_string(),
        "#sdy.op_sharding_rule<([i, j, k], [])->([i, j, k]) {i=2, j=3, k=4} permutation={k} blocked_propagation={k}>"
    );
    assert_eq!(
        RuleBuilder::pointwise(&[2, 0], &[2], &[3, 4]).unwrap().to_string(),
        "#sdy.op_sharding_rule<([i, j], [])->([i, j]) {i=3, j=4}>"
    );
    assert!(RuleBuilder::pointwise(&[3], &[2], &[3, 4]).is_err());
    assert_eq!(
        RuleBuilder::identity(&[2, 5], 2, 1).to_string(),
        "#sdy.op_sharding_rule<([i, j], [i, j])->([i, j]) {i=2, j=5}>"
    );
}

fn opts(reduction: &[&str], sizes: &[(&str, i64)]) -> EinsumOptions {
    EinsumOptions {
        reduction_factors: reduction.iter().map(|s| s.to_string()).collect(),
        factor_sizes: sizes.iter().map(|(n, s)| (n.to_string(), *s)).collect(),
        ..EinsumOptions::default()
    }
}

#[test]
fn einsum_notation_like_jax() {
    let r = rule_from_einsum("i j, j k -> i k", opts(&["j"], &[]), &[vec![8, 16], vec![16, 4]], &[vec![8, 4]]).unwrap();
    assert_eq!(
        r.to_string(),
        "#sdy.op_sharding_rule<([i, j], [j, k])->([i, k]) {i=8, j=16, k=4} reduction={j}, custom>"
    );
    let r = rule_from_einsum(
        "... i j, ... j k -> ... i k",
        opts(&[], &[]),
        &[vec![2, 3, 4], vec![2, 4, 5]],
        &[vec![2, 3, 5]],
    )
    .unwrap();
    assert_eq!(
        r.to_string(),
        "#sdy.op_sharding_rule<([i, j, k], [i, k, l])->([i, j, l]) {i=2, j=3, k=4, l=5}, custom>"
    );
    let r =
        rule_from_einsum("(a b) c -> c (b a)", opts(&[], &[("a", 2), ("b", 3)]), &[vec![6, 4]], &[vec![4, 6]]).unwrap();
    assert_eq!(r.to_string(), "#sdy.op_sharding_rule<([ij, k])->([k, ji]) {i=2, j=3, k=4}, custom>");
    let r = rule_from_einsum("i -> i", opts(&[], &[]), &[vec![8]], &[vec![4]]).unwrap();
    assert_eq!(r.factor_sizes, vec![4], "the smallest size wins");
    let spec = EinsumSpec::parse("...1 x, ...2 y -> ...1 x y", EinsumOptions::default()).unwrap();
    assert_eq!(spec.operands[0].batching.as_deref(), Some("1"));
    let r = spec.build(&[vec![2, 3, 4], vec![5, 6]], &[vec![2, 3, 4, 6]]).unwrap();
    assert_eq!(
        r.to_string(),
        "#sdy.op_sharding_rule<([i, j, k], [l, m])->([i, j, k, m]) {i=2, j=3, k=4, l=5, m=6}, custom>"
    );

    let parse_pos = |s: &str| match EinsumSpec::parse(s, EinsumOptions::default()).unwrap_err().kind {
        ErrorKind::Parse { pos } => pos,
        k => panic!("{s}: {k:?}"),
    };
    assert_eq!(parse_pos("i j"), 3);
    assert_eq!(parse_pos("i -> (i)"), 7);
    assert_eq!(parse_pos("i ... -> i"), 2);
    assert_eq!(parse_pos("i -> 1i"), 5);
    let rule = |s: &str, o: EinsumOptions, i: &[Vec<i64>], r: &[Vec<i64>]| {
        rule_from_einsum(s, o, i, r).unwrap_err().rule().unwrap()
    };
    assert_eq!(rule("(i j) -> i", opts(&[], &[]), &[vec![6]], &[vec![2]]), "einsum-missing-size");
    assert_eq!(rule("i -> i", opts(&[], &[("i", 2)]), &[vec![2]], &[vec![2]]), "einsum-inferable-size");
    assert_eq!(rule("i -> i", opts(&["k"], &[]), &[vec![2]], &[vec![2]]), "einsum-special-unknown");
    assert_eq!(rule("i j -> i", opts(&[], &[]), &[vec![2]], &[vec![2]]), "einsum-rank-mismatch");
    assert_eq!(rule("(i j) -> i j", opts(&[], &[]), &[vec![7]], &[vec![2, 3]]), "einsum-compound-size");
    assert_eq!(
        rule("... i, ... i -> i", opts(&[], &[]), &[vec![2, 3], vec![4, 3]], &[vec![3]]),
        "einsum-batching-size"
    );
    assert_eq!(rule("i -> i", opts(&["i"], &[]), &[vec![2]], &[vec![2]]), "rule-reduction-in-result");
}

/// Every rule in the FileCheck'd output of Shardy's registry lit test prints back byte for
/// byte (when the conformance corpus is beside the repository).
#[test]
fn lit_corpus_rules_round_trip() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance/lit");
    let Ok(text) = std::fs::read_to_string(dir.join("op_sharding_rule_registry__000.out.mlir")) else {
        eprintln!("skipped: ../shared/conformance is absent");
        return;
    };
    let mut seen = 0;
    for line in text.lines() {
        let Some(start) = line.find("#sdy.op_sharding_rule<") else { continue };
        let bytes = line.as_bytes();
        let (mut depth, mut end) = (0, start);
        for (i, &c) in bytes.iter().enumerate().skip(start) {
            if c == b'<' {
                depth += 1;
            } else if c == b'>' && bytes[i - 1] != b'-' {
                depth -= 1;
                if depth == 0 {
                    end = i + 1;
                    break;
                }
            }
        }
        let rule = &line[start..end];
        assert_eq!(parse_rule(rule).unwrap().to_string(), rule);
        seen += 1;
    }
    assert!(seen > 100, "only {seen} rules found");
}
