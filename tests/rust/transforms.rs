//! The native passes without Python: the import passes, a propagation pass and the whole
//! `sdy-propagation-pipeline` on programs read from text, printed back.

use shardwise::mlir;
use shardwise::transforms::{self, WarningKind};

const MLP: &str = r#"module {
  sdy.mesh @mesh = <["data"=2, "model"=4]>
  func.func @main(%arg0: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>}, %arg1: tensor<32x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}) -> tensor<16x64xf32> {
    %0 = call @layer(%arg0, %arg1) : (tensor<16x32xf32>, tensor<32x64xf32>) -> tensor<16x64xf32>
    return %0 : tensor<16x64xf32>
  }
  func.func private @layer(%arg0: tensor<16x32xf32>, %arg1: tensor<32x64xf32>) -> tensor<16x64xf32> {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<16x32xf32>, tensor<32x64xf32>) -> tensor<16x64xf32>
    %1 = stablehlo.custom_call @my_kernel(%0) : (tensor<16x64xf32>) -> tensor<16x64xf32>
    return %1 : tensor<16x64xf32>
  }
}
"#;

const IMPORT: &[&str] = &[
    "sdy-lift-inlined-meshes",
    "sdy-constant-or-scalar-splitter",
    "sdy-add-data-flow-edges",
    "sdy-flatten-call-graph",
    "sdy-import-func-calls",
    "symbol-dce",
    "sdy-apply-sharding-constraints",
    "sdy-sharding-group-import",
    "sdy-pre-order-funcs",
];

#[test]
fn user_priority_propagation_shards_the_called_layer_and_warns_for_an_unknown_custom_call() {
    let mut p = mlir::read(MLP).unwrap();
    let mut steps = IMPORT.to_vec();
    steps.push("sdy-user-priority-propagate{keep-sharding-rules=true}");
    let warnings = transforms::run(&mut p, &steps).unwrap();
    let text = mlir::print(&p);
    // The dot inside the inlined named computation is sharded data x model.
    assert!(
        text.contains(r#"sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data", ?}, {"model", ?}]>]>"#),
        "{text}"
    );
    assert!(text.contains("sdy.sharding_rule = #sdy.op_sharding_rule<([i, k], [k, j])->([i, j])"), "{text}");
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].0, WarningKind::UnknownOp);
    assert!(warnings[0].1.contains("custom call @my_kernel"), "{:?}", warnings);
}

#[test]
fn propagation_options_are_checked_before_any_pass_runs() {
    let mut p = mlir::read(MLP).unwrap();
    let before = mlir::print(&p);
    let e = transforms::run(&mut p, &["symbol-dce", "sdy-basic-propagate{strategy=x}"]).unwrap_err();
    assert!(e.to_string().contains("has no option \"strategy\""), "{e}");
    assert_eq!(mlir::print(&p), before);
    let e = transforms::run(&mut p, &["sdy-basic-propagate{keep-sharding-rules=yes}"]).unwrap_err();
    assert!(e.to_string().contains("takes true or false"), "{e}");
}

/// A called layer, two equal constants, a dead op and a no-op all-reduce: the export passes
/// merge the constants, and the canonicalizer erases the dead op and folds the all-reduce.
const UNREDUCED: &str = r#"module {
  sdy.mesh @mesh = <["data"=2, "model"=4]>
  func.func @main(%arg0: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {"model"}]>}, %arg1: tensor<32x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}) -> tensor<16x64xf32> {
    %c = stablehlo.constant dense<1.0> : tensor<16x64xf32>
    %0 = call @layer(%arg0, %arg1) : (tensor<16x32xf32>, tensor<32x64xf32>) -> tensor<16x64xf32>
    %c2 = stablehlo.constant dense<1.0> : tensor<16x64xf32>
    %1 = stablehlo.add %0, %c : tensor<16x64xf32>
    %2 = stablehlo.multiply %1, %c2 : tensor<16x64xf32>
    %3 = stablehlo.negate %2 : tensor<16x64xf32>
    %4 = sdy.all_reduce {} %2 out_sharding=<@mesh, [{"data"}, {}]> : tensor<16x64xf32>
    return %4 : tensor<16x64xf32>
  }
  func.func private @layer(%arg0: tensor<16x32xf32>, %arg1: tensor<32x64xf32>) -> tensor<16x64xf32> {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<16x32xf32>, tensor<32x64xf32>) -> tensor<16x64xf32>
    return %0 : tensor<16x64xf32>
  }
}
"#;

#[test]
fn the_whole_propagation_pipeline_runs_natively_text_to_text() {
    let mut p = mlir::read(UNREDUCED).unwrap();
    let warnings = transforms::run(&mut p, transforms::PROPAGATION_PIPELINE).unwrap();
    // Collectives before propagation have no sharding rule (as in the Python pass).
    assert!(warnings.iter().all(|(k, m)| *k == WarningKind::UnknownOp && m.contains("sdy.all_reduce")), "{warnings:?}");
    let text = mlir::print(&p);
    // The call is back (unflattened), the dot inside it sharded along "data".
    assert!(text.contains("call @layer("), "{text}");
    assert!(
        text.contains(r#"stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"data"}, {}]>]>}"#),
        "{text}"
    );
    // Rules dropped; the constants merged; the dead negate and the no-op all-reduce gone.
    assert!(!text.contains("sdy.sharding_rule"), "{text}");
    assert_eq!(text.matches("sdy.constant").count(), 1, "{text}");
    assert!(!text.contains("stablehlo.negate") && !text.contains("sdy.all_reduce"), "{text}");
    // The output reads back and runs through the pipeline again.
    let mut again = mlir::read(&text).unwrap();
    transforms::run(&mut again, transforms::PROPAGATION_PIPELINE).unwrap();
}

/// An MLP step with one function and no calls: every argument and result can take a
/// candidate sharding.
const CANDIDATES: &str = r#"module {
  sdy.mesh @mesh = <["data"=2, "model"=4]>
  func.func @main(%arg0: tensor<16x32xf32>, %arg1: tensor<32x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}, %arg2: tensor<64x32xf32>) -> tensor<16x32xf32> {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<16x32xf32>, tensor<32x64xf32>) -> tensor<16x64xf32>
    %1 = stablehlo.tanh %0 : tensor<16x64xf32>
    %2 = stablehlo.dot_general %1, %arg2, contracting_dims = [1] x [0] : (tensor<16x64xf32>, tensor<64x32xf32>) -> tensor<16x32xf32>
    return %2 : tensor<16x32xf32>
  }
}
"#;

#[test]
fn candidates_solved_once_prepared_equal_the_whole_pipeline_on_each_annotated_program() {
    use shardwise::transforms::propagation::candidates::{self, Annotation, ProgramCandidates};
    let steps = transforms::PROPAGATION_PIPELINE;
    let k = steps.iter().position(|s| s.starts_with("sdy-user-priority-propagate")).unwrap();
    let (before, after) = (&steps[..k], &steps[k + 1..]);
    let p = mlir::read(CANDIDATES).unwrap();
    assert_eq!(candidates::guarded_args(&p).unwrap(), Some(vec![]));
    let s = |text: &str| Some(shardwise::text::parse_sharding(text).unwrap());
    let arg = |index, sharding| Annotation { result: false, index, sharding };
    let sets: Vec<Vec<Annotation>> = vec![
        vec![arg(0, s(r#"#sdy.sharding<@mesh, [{"data"}, {}]>"#))],
        vec![arg(0, s(r#"#sdy.sharding<@mesh, [{}, {"model"}]>"#)), arg(1, None)],
        vec![Annotation { result: true, index: 0, sharding: s(r#"#sdy.sharding<@mesh, [{"data"}, {"model"}]>"#) }],
        vec![],
    ];
    let (prepared, warnings) = ProgramCandidates::new(&p, before, false).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(prepared.main_arity(), (3, 1));
    let outs = prepared.propagate(&sets, 2);
    let mut texts = Vec::new();
    for (set, out) in sets.iter().zip(outs) {
        let out = out.unwrap();
        let mut got = prepared.materialize(set, &out).unwrap();
        transforms::run(&mut got, after).unwrap();
        let mut expected = p.clone();
        candidates::annotate(&mut expected, set).unwrap();
        transforms::run(&mut expected, steps).unwrap();
        assert_eq!(mlir::print(&got), mlir::print(&expected));
        // @main's arguments after the solve: the candidate's own sharding is kept.
        let (args, _) = prepared.main_shardings(&out);
        if let Some(Annotation { result: false, index, sharding: Some(s) }) = set.first() {
            assert_eq!(args[*index].as_ref(), Some(s));
        }
        texts.push(mlir::print(&got));
    }
    // The candidates differ from one another.
    assert!(texts[0] != texts[1] && texts[1] != texts[2], "{texts:?}");
    // An index @main does not have is refused, in that candidate only.
    let outs = prepared.propagate(&[vec![arg(3, None)], vec![]], 1);
    assert!(outs[0].as_ref().unwrap_err().to_string().contains("arg3: @main has 3 args"));
    assert!(outs[1].is_ok());
}

#[test]
fn candidates_are_not_batched_for_calls_size_one_axes_or_constrained_arguments() {
    use shardwise::transforms::propagation::candidates::guarded_args;
    assert_eq!(guarded_args(&mlir::read(MLP).unwrap()).unwrap(), None); // a call
    let size_one = CANDIDATES.replace(r#""model"=4]>"#, r#""model"=4, "one"=1]>"#);
    assert_eq!(guarded_args(&mlir::read(&size_one).unwrap()).unwrap(), None);
    let constrained = CANDIDATES.replace(
        "%1 = stablehlo.tanh %0",
        "%c = sdy.sharding_constraint %arg2 <@mesh, [{}, {}]> : tensor<64x32xf32>\n    %1 = stablehlo.tanh %0",
    );
    assert_eq!(guarded_args(&mlir::read(&constrained).unwrap()).unwrap(), Some(vec![2]));
}

/// Every op's post-order under `op`, children before their parent (the reference).
fn post_order(p: &shardwise::ir::Program, op: u32, out: &mut Vec<u32>) {
    let (a, b) = p.ops[op as usize].regions;
    for r in a..b {
        let (s, e) = p.regions[r as usize];
        for blk in s..e {
            for &o in p.block_ops(blk) {
                post_order(p, o, out);
            }
        }
    }
    out.push(op);
}

#[test]
fn post_order_of_puts_nested_ops_first_for_the_whole_program_subsets_and_detached_ops() {
    use shardwise::transforms::common::post_order_of;
    let text = r#"module {
  func.func @main(%arg0: tensor<i32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
    %0:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %arg1) : tensor<i32>, tensor<4xf32>
    cond {
      %c = stablehlo.constant dense<3> : tensor<i32>
      %1 = stablehlo.compare  LT, %iterArg, %c : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %1 = stablehlo.negate %iterArg_0 : tensor<4xf32>
      stablehlo.return %iterArg, %1 : tensor<i32>, tensor<4xf32>
    }
    %2 = stablehlo.abs %0#1 : tensor<4xf32>
    return %2 : tensor<4xf32>
  }
}
"#;
    let mut p = mlir::read(text).expect("reads");
    let mut want = Vec::new();
    post_order(&p, 0, &mut want);
    assert_eq!(post_order_of(&p, &p.walk(0)), want);
    // A subset in pre-order: the while, one op of its body, the op after it.
    let name = |p: &shardwise::ir::Program, n: &str| p.walk(0).into_iter().find(|&o| p.op_name(o) == n).unwrap();
    let (w, neg, abs, func) =
        (name(&p, "stablehlo.while"), name(&p, "stablehlo.negate"), name(&p, "stablehlo.abs"), name(&p, "func.func"));
    assert_eq!(post_order_of(&p, &[func, w, neg, abs]), vec![neg, w, abs, func]);
    // An op outside the module (made, not yet placed in a block) is ordered by walking.
    let ty = p.value_types[p.op_results(abs).start as usize];
    let loose = p.new_op("stablehlo.abs", &[p.op_results(abs).start], &[ty], &[], p.ops[abs as usize].loc);
    assert_eq!(post_order_of(&p, &[w, neg, loose]), vec![neg, w, loose]);
}

/// A chain of `n` adds whose shardings alternate between two axes, so that
/// `sdy-insert-explicit-reshards` reshards around every add.
fn alternating_chain(n: usize) -> String {
    let mut text = String::from(
        "module {\n  sdy.mesh @mesh = <[\"x\"=2, \"y\"=2]>\n  func.func @main(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {\n",
    );
    let mut prev = "%arg0".to_string();
    for k in 0..n {
        let dims = if k % 2 == 1 { "[{\"x\"}, {}]" } else { "[{}, {\"y\"}]" };
        text += &format!(
            "    %{k} = stablehlo.add {prev}, {prev} {{sdy.sharding = #sdy.sharding_per_value<[<@mesh, {dims}>]>}} : tensor<8x8xf32>\n"
        );
        prev = format!("%{k}");
    }
    text + &format!("    return {prev} : tensor<8x8xf32>\n  }}\n}}\n")
}

#[test]
fn inserting_reshards_one_at_a_time_leaves_no_copy_of_the_block_per_insertion() {
    // 300 adds, each resharding its operands: every insertion rewrote the block's list at the
    // end of the shared array, which grew to 676,653 entries for 1,204 ops.
    let mut p = mlir::read(&alternating_chain(300)).unwrap();
    transforms::run(&mut p, &["sdy-insert-explicit-reshards{enable-full-version=true}"]).unwrap();
    let text = mlir::print(&p);
    // Three per add, as jaxlib's Shardy inserts them (its output is the same text).
    assert_eq!(text.matches("sdy.reshard").count(), 900, "{text}");
    assert!(p.block_ops.len() <= 2 * p.ops.len() + 4096, "{} entries for {} ops", p.block_ops.len(), p.ops.len());
    // The program reads back as printed: the lists are intact.
    assert_eq!(mlir::print(&mlir::read(&text).unwrap()), text);
}

#[test]
fn block_lists_rewritten_in_any_order_read_back_and_the_array_stays_bounded() {
    // Three blocks (the function body and a while's two regions) whose lists are replaced in
    // turn by longer, shorter and equal lists (of made-up op ids: only the array is tested);
    // each reads back as set, and the shared array holds at most the compaction threshold
    // (twice the ops plus slack) or the most the lists ever held together, plus the longest
    // list. (In a program the lists hold each op once at most, so the threshold bounds it.)
    let text = "func.func @main(%arg0: tensor<i32>) -> tensor<i32> {
  %0 = stablehlo.while(%iterArg = %arg0) : tensor<i32>
   cond {
    %1 = stablehlo.compare LT, %iterArg, %iterArg : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %1 = stablehlo.add %iterArg, %iterArg : tensor<i32>
    stablehlo.return %1 : tensor<i32>
  }
  return %0 : tensor<i32>
}
";
    let mut p = mlir::read(text).unwrap();
    let blocks: Vec<u32> = (0..p.blocks.len() as u32).collect();
    let mut model: Vec<Vec<u32>> = blocks.iter().map(|&b| p.block_ops(b).to_vec()).collect();
    let mut seed = 12345u64;
    let mut next = |m: u64| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) % m
    };
    let (mut longest, mut peak) = (0, 0);
    for _ in 0..5000 {
        let b = next(blocks.len() as u64) as usize;
        let len = next(3000) as usize;
        let list: Vec<u32> = (0..len).map(|_| next(1 << 20) as u32).collect();
        longest = longest.max(len);
        p.set_block_ops(blocks[b], &list);
        model[b] = list;
        peak = peak.max(model.iter().map(Vec::len).sum());
        let bound = (2 * p.ops.len() + 4096).max(peak) + longest;
        assert!(p.block_ops.len() <= bound, "{} entries, bound {bound}", p.block_ops.len());
    }
    for (k, &b) in blocks.iter().enumerate() {
        assert_eq!(p.block_ops(b), &model[k][..], "block {b}");
    }
}
