//! The native passes without Python: the import passes and a propagation pass on a program
//! read from text, printed back.

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
