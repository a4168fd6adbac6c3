//! The native MLIR reader (`shardwise::mlir`): custom forms read into the generic shape,
//! attributes as jaxlib prints them, errors with line and column, no panics on malformed text,
//! no stack overflow on deep nesting. Equality with jaxlib's parse over the conformance corpus
//! and real JAX programs is checked in `tests/python/test_native_reader.py`.

use shardwise::ir::Program;
use shardwise::mlir::{read, ReadError};

fn attrs(p: &Program, op: u32) -> Vec<(String, String)> {
    let (a, b) = p.ops[op as usize].attrs;
    p.attrs[a as usize..b as usize]
        .iter()
        .map(|&(n, v)| (p.strings.get(n).to_string(), p.strings.get(v).to_string()))
        .collect()
}

fn find(p: &Program, name: &str) -> u32 {
    (0..p.ops.len() as u32).find(|&i| p.op_name(i) == name).unwrap_or_else(|| panic!("no {name}"))
}

const STEP: &str = r#"module @jit_f attributes {mhlo.num_partitions = 8 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  func.func public @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %arg1: tensor<16x4xf32>) -> (tensor<8x4xf32> {jax.result_info = "result"}) {
    %cst = stablehlo.constant dense<0.0> : tensor<f32>
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    %1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<8x4xf32>
    %2 = stablehlo.maximum %0, %1 : tensor<8x4xf32>
    %3 = stablehlo.reduce(%2 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<8x4xf32>, tensor<f32>) -> tensor<8xf32>
    %4 = sdy.sharding_constraint %2 <@mesh, [{"x"}, {?}]> : tensor<8x4xf32>
    %5 = func.call @g(%4) : (tensor<8x4xf32>) -> tensor<8x4xf32>
    return %5 : tensor<8x4xf32>
  }
  func.func private @g(%arg0: tensor<8x4xf32>) -> tensor<8x4xf32> {
    %0:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %arg0) : tensor<8x4xf32>, tensor<8x4xf32>
    cond {
      %c = stablehlo.constant dense<true> : tensor<i1>
      stablehlo.return %c : tensor<i1>
    } do {
      %1 = stablehlo.add %iterArg, %iterArg_0 : tensor<8x4xf32>
      stablehlo.return %1, %iterArg_0 : tensor<8x4xf32>, tensor<8x4xf32>
    }
    return %0#0 : tensor<8x4xf32>
  }
}
"#;

#[test]
fn custom_forms_read_into_the_generic_shape() {
    let p = read(STEP).expect("reads");
    assert_eq!(p.op_name(0), "builtin.module");
    assert_eq!(
        attrs(&p, 0),
        [("sym_name".into(), "\"jit_f\"".into()), ("mhlo.num_partitions".into(), "8 : i32".into())]
    );
    let dot = find(&p, "stablehlo.dot_general");
    assert_eq!(
        p.attr(dot, "dot_dimension_numbers"),
        Some("#stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>")
    );
    assert_eq!(p.attr(dot, "precision_config"), Some("[#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]"));
    assert_eq!(p.attr(find(&p, "stablehlo.broadcast_in_dim"), "broadcast_dimensions"), Some("array<i64>"));
    // The hand-written float is printed as MLIR prints it.
    assert_eq!(p.attr(find(&p, "stablehlo.constant"), "value"), Some("dense<0.000000e+00> : tensor<f32>"));
    assert_eq!(p.attr(find(&p, "sdy.sharding_constraint"), "sharding"), Some("#sdy.sharding<@mesh, [{\"x\"}, {?}]>"));
    assert_eq!(p.attr(find(&p, "func.call"), "callee"), Some("@g"));
    assert_eq!(p.attr(find(&p, "sdy.mesh"), "mesh"), Some("#sdy.mesh<[\"x\"=2, \"y\"=4]>"));
    // reduce's `applies` form has its body made up: two 0-d arguments, the op, a return.
    let reduce = find(&p, "stablehlo.reduce");
    let (r0, _) = p.ops[reduce as usize].regions;
    let (b0, _) = p.regions[r0 as usize];
    let block = p.blocks[b0 as usize];
    assert_eq!(block.args.1 - block.args.0, 2);
    let body: Vec<&str> =
        p.block_ops[block.ops.0 as usize..block.ops.1 as usize].iter().map(|&o| p.op_name(o)).collect();
    assert_eq!(body, ["stablehlo.add", "stablehlo.return"]);
    // while: two regions, each with the loop variables as block arguments.
    let w = find(&p, "stablehlo.while");
    let (ra, rb) = p.ops[w as usize].regions;
    assert_eq!(rb - ra, 2);
    assert_eq!(p.ops[w as usize].results.1 - p.ops[w as usize].results.0, 2);
    // Functions: argument types, attributes, visibility.
    assert_eq!(p.funcs.len(), 2);
    let main = &p.funcs[0];
    assert_eq!(main.arg_types.len(), 2);
    let (a, b) = main.arg_attrs[0];
    assert_eq!(b - a, 1);
    assert_eq!(p.attr(main.op, "sym_visibility"), Some("\"public\""));
    // Ops without a location get the one jaxlib's parser gives them.
    assert_eq!(p.strings.get(p.ops[dot as usize].loc), "loc(\"-\":5:10)");
}

#[test]
fn generic_form_and_location_aliases() {
    let text = "\"builtin.module\"() ({\n  \"func.func\"() <{function_type = (tensor<4xf32>) -> tensor<4xf32>, sym_name = \"f\"}> ({\n  ^bb0(%a: tensor<4xf32>):\n    %0 = \"stablehlo.abs\"(%a) : (tensor<4xf32>) -> tensor<4xf32> loc(#loc1)\n    \"func.return\"(%0) : (tensor<4xf32>) -> ()\n  }) : () -> ()\n}) : () -> ()\n#loc0 = loc(\"a.py\":3:4)\n#loc1 = loc(callsite(#loc0 at \"b\"))\n";
    let p = read(text).expect("reads");
    assert_eq!(p.op_name(0), "builtin.module");
    let abs = find(&p, "stablehlo.abs");
    assert_eq!(p.strings.get(p.ops[abs as usize].loc), "loc(callsite(\"a.py\":3:4 at \"b\"))");
    assert_eq!(p.funcs[0].arg_types.len(), 1);
}

fn err(text: &str) -> ReadError {
    read(text).expect_err("malformed")
}

#[test]
fn errors_give_line_column_and_whether_jaxlib_may_read_it() {
    let e = err("func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %b : tensor<4xf32>\n}\n");
    assert_eq!((e.line, e.column, e.unsupported), (2, 10, false));
    assert!(e.message.contains("%b"), "{e}");
    let e = err("func.func @f(%a: tensor<4xf32>) {\n  %0 = stablehlo.sort_of_new %a : tensor<4xf32>\n  return\n}\n");
    assert!(e.unsupported && e.line == 2, "{e}");
    let e = err("func.func @f(%a: tensor<4xf32>) {\n  %0 = stablehlo.abs %a : tensor<8xf32>\n  return\n}\n");
    assert!(!e.unsupported && e.message.contains("tensor<4xf32>"), "{e}");
}

/// A small deterministic generator (xorshift) for the fuzzing below.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn mangled_text_is_an_error_never_a_panic() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let pieces =
        ["{", "}", "(", ")", "<", ">", "[", "]", "\"", "%0", "#", "^bb1:", ":", ",", "->", "=", "é", "\\", "//"];
    for _ in 0..4000 {
        let mut text = STEP.to_string();
        for _ in 0..1 + rng.below(4) {
            let mut at = rng.below(text.len() + 1).min(text.len().saturating_sub(1));
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            match rng.below(3) {
                0 => text.insert_str(at, pieces[rng.below(pieces.len())]),
                1 => {
                    let mut end = (at + 1 + rng.below(12)).min(text.len());
                    while !text.is_char_boundary(end) {
                        end += 1;
                    }
                    text.replace_range(at..end, "");
                }
                _ => text.truncate(at),
            }
        }
        // Neither reading nor verifying what was read may panic.
        if let Ok(p) = read(&text) {
            let _ = shardwise::mlir::verify(&p);
        }
    }
}

/// A function whose body nests `depth` regions, one op deep each.
fn nested(depth: usize) -> String {
    let mut text = String::from("func.func @f(%a: tensor<i32>) -> tensor<i32> {\n");
    for _ in 0..depth {
        text.push_str("%r = \"test.wrap\"(%a) ({\n");
    }
    text.push_str("\"test.yield\"(%a) : (tensor<i32>) -> ()\n");
    for _ in 0..depth {
        text.push_str("}) : (tensor<i32>) -> tensor<i32>\n\"test.yield\"(%r) : (tensor<i32>) -> ()\n");
    }
    text.push_str("return %a : tensor<i32>\n}\n");
    text
}

#[test]
fn ten_thousand_nested_regions_read_without_recursion() {
    let depth = 10_000;
    let p = read(&nested(depth)).expect("reads");
    assert_eq!(p.ops.len(), 1 + 1 + 2 * depth + 1 + 1);
}

#[test]
fn floats_print_as_mlir_prints_them() {
    // Values and texts from jaxlib 0.10.2's printer.
    let cases = [
        ("0.7", "f32", "0.699999988"),
        ("1e-5", "f32", "9.99999974E-6"),
        ("9.765625E-4", "f32", "9.765625E-4"),
        ("1.0", "f32", "1.000000e+00"),
        ("-2.5", "f64", "-2.500000e+00"),
        ("0.797884583", "f32", "0.797884583"),
        ("-3.40282347E+38", "f32", "-3.40282347E+38"),
        ("0.1", "f64", "1.000000e-01"),
    ];
    for (lit, ty, want) in cases {
        let text = format!("func.func @f() {{\n  %0 = stablehlo.constant dense<{lit}> : tensor<{ty}>\n  return\n}}\n");
        let p = read(&text).expect("reads");
        let got = p.attr(find(&p, "stablehlo.constant"), "value").expect("value").to_string();
        assert_eq!(got, format!("dense<{want}> : tensor<{ty}>"), "{lit} {ty}");
    }
}

#[test]
fn the_verifier_accepts_a_valid_step_and_names_each_broken_rule() {
    use shardwise::mlir::verify;
    verify(&read(STEP).expect("reads")).expect("the step verifies");
    // (what is replaced, by what, a fragment of the error); each edit keeps the text readable.
    let cases = [
        (
            "%2 = stablehlo.maximum %0, %1 : tensor<8x4xf32>",
            "%2 = \"stablehlo.maximum\"(%0) : (tensor<8x4xf32>) -> tensor<8x4xf32>",
            "'stablehlo.maximum' op expects 2 operands, got 1",
        ),
        (
            "%1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<8x4xf32>",
            "%1 = stablehlo.broadcast_in_dim %cst, dims = [0] : (tensor<f32>) -> tensor<8x4xf32>",
            "broadcast_dimensions [0] has 1 entries for an operand of rank 0",
        ),
        (
            "contracting_dims = [1] x [0]",
            "contracting_dims = [0] x [0]",
            "contracting dimension sizes differ: lhs dimension 0 is 8, rhs dimension 0 is 16",
        ),
        (
            "return %5 : tensor<8x4xf32>\n  }\n  func.func private",
            "return %0 : tensor<8x4xf32>\n  }\n  func.func private",
            "",
        ),
        ("@mesh, [{\"x\"}, {?}]", "@mesh, [{\"x\"}]", "sharding: invalid sharding"),
        ("@mesh, [{\"x\"}, {}]>}", "@other, [{\"x\"}, {}]>}", "argument 0: unknown mesh @other"),
        ("@mesh, [{\"x\"}, {}]>}", "@mesh, [{\"q\"}, {}]>}", "argument 0: invalid sharding"),
        ("func.call @g(%4)", "func.call @h(%4)", "calls @h, which is not a function of the module"),
        (
            "stablehlo.return %1, %iterArg_0 : tensor<8x4xf32>, tensor<8x4xf32>",
            "\"stablehlo.foo\"(%1) : (tensor<8x4xf32>) -> ()",
            "has a block that does not end in 'stablehlo.return'",
        ),
        ("func.func private @g(", "func.func private @main(", "redefinition of symbol @main"),
        (
            "%5 = func.call @g(%4)",
            "%9 = \"sdy.reshard\"(%2) <{sharding = #sdy.sharding<@mesh, [{\"x\"}, {?}]>}> : (tensor<8x4xf32>) -> tensor<8x4xf16>\n    %5 = func.call @g(%4)",
            "requires the same type for its operand and result",
        ),
        (
            "stablehlo.return %1, %iterArg_0 : tensor<8x4xf32>, tensor<8x4xf32>",
            "stablehlo.return %1 : tensor<8x4xf32>",
            "region 1 of 'stablehlo.while' returns (tensor<8x4xf32>), expected (tensor<8x4xf32>, tensor<8x4xf32>)",
        ),
    ];
    for (from, to, want) in cases {
        assert!(STEP.contains(from), "{from}");
        let text = STEP.replace(from, to);
        let p = read(&text).unwrap_or_else(|e| panic!("{to}: {e}"));
        if want.is_empty() {
            verify(&p).expect(to); // a valid change
            continue;
        }
        let e = verify(&p).expect_err(to);
        assert!(e.to_string().contains(want), "{to}: {e}");
        assert!(e.to_string().starts_with("loc("), "{e}");
    }
}

#[test]
fn the_verifier_checks_shapes_of_common_ops() {
    use shardwise::mlir::verify;
    let module = |body: &str| {
        format!(
            "func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>, %i: tensor<i32>) -> tensor<2x3xf32> {{\n{body}\n  return %a : tensor<2x3xf32>\n}}\n"
        )
    };
    let cases = [
        ("%0 = stablehlo.reshape %a : (tensor<2x3xf32>) -> tensor<6xf32>", ""),
        ("%0 = stablehlo.reshape %a : (tensor<2x3xf32>) -> tensor<5xf32>", "different element counts"),
        // An element count beyond i64 is not compared (it overflowed, a panic in debug builds).
        ("%0 = stablehlo.reshape %a : (tensor<2x3xf32>) -> tensor<4294967296x4294967296x4xf32>", ""),
        ("%0 = stablehlo.transpose %a, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>", ""),
        ("%0 = stablehlo.transpose %a, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<2x3xf32>", "is not the operand's"),
        ("%0 = stablehlo.transpose %a, dims = [1, 1] : (tensor<2x3xf32>) -> tensor<3x3xf32>", "is not a permutation"),
        ("%0 = stablehlo.concatenate %a, %a, dim = 0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>", ""),
        ("%0 = stablehlo.concatenate %a, %a, dim = 0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<5x3xf32>", "add up to 4"),
        ("%0 = stablehlo.dot %a, %b : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>", ""),
        ("%0 = stablehlo.dot %b, %a : (tensor<3x4xf32>, tensor<2x3xf32>) -> tensor<3x3xf32>", "contracting dimension sizes differ: lhs 4, rhs 2"),
        ("%0 = stablehlo.dynamic_slice %a, %i, %i, sizes = [1, 1] : (tensor<2x3xf32>, tensor<i32>, tensor<i32>) -> tensor<1x1xf32>", ""),
        ("%0 = stablehlo.dynamic_slice %a, %i, sizes = [1, 1] : (tensor<2x3xf32>, tensor<i32>) -> tensor<1x1xf32>", "expects 2 start indices"),
        ("%0 = stablehlo.add %a, %b : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>", "operand 1 has shape [3, 4]"),
        ("%0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>", ""),
        ("%0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4x1xf32>", "result shape [2, 4, 1] is not the [2, 4]"),
        ("%0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x5xf32>", "is not the [2, 4]"),
    ];
    for (body, want) in cases {
        let p = read(&module(body)).unwrap_or_else(|e| panic!("{body}: {e}"));
        match verify(&p) {
            Ok(()) => assert!(want.is_empty(), "{body} verified"),
            Err(e) => assert!(!want.is_empty() && e.to_string().contains(want), "{body}: {e}"),
        }
    }
}

#[test]
fn ten_thousand_nested_regions_verify_and_print_without_recursion() {
    let depth = 10_000;
    let p = read(&nested(depth)).expect("reads");
    shardwise::mlir::verify(&p).expect("verifies");
    let printed = shardwise::mlir::print(&p);
    assert_eq!(printed.matches("test.wrap").count(), depth);
}
