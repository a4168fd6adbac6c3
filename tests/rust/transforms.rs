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
