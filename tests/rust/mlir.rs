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
    assert_eq!(p.loc_text(p.ops[dot as usize].loc), "loc(\"-\":5:10)");
}

#[test]
fn generic_form_and_location_aliases() {
    let text = "\"builtin.module\"() ({\n  \"func.func\"() <{function_type = (tensor<4xf32>) -> tensor<4xf32>, sym_name = \"f\"}> ({\n  ^bb0(%a: tensor<4xf32>):\n    %0 = \"stablehlo.abs\"(%a) : (tensor<4xf32>) -> tensor<4xf32> loc(#loc1)\n    \"func.return\"(%0) : (tensor<4xf32>) -> ()\n  }) : () -> ()\n}) : () -> ()\n#loc0 = loc(\"a.py\":3:4)\n#loc1 = loc(callsite(#loc0 at \"b\"))\n";
    let p = read(text).expect("reads");
    assert_eq!(p.op_name(0), "builtin.module");
    let abs = find(&p, "stablehlo.abs");
    assert_eq!(p.loc_text(p.ops[abs as usize].loc), "loc(callsite(\"a.py\":3:4 at \"b\"))");
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

#[test]
fn numbered_names_are_scoped_like_the_others() {
    // `%N` names are kept by number: each function's body is its own scope, a region's names
    // are gone after it, `%01` is not `%1`, and a number far beyond the text is still a name.
    let two = "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.abs %a : tensor<4xf32>\n  \
               return %0 : tensor<4xf32>\n}\nfunc.func @g(%a: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.negate \
               %a : tensor<4xf32>\n  %01 = stablehlo.abs %0 : tensor<4xf32>\n  %999999999 = stablehlo.abs %01 : \
               tensor<4xf32>\n  return %999999999 : tensor<4xf32>\n}\n";
    let p = read(two).expect("reads");
    let ret = (0..p.ops.len() as u32).filter(|&i| p.op_name(i) == "func.return").collect::<Vec<_>>();
    let (f, g) = (p.op_operands(ret[0])[0], p.op_operands(ret[1])[0]);
    assert_ne!(f, g);
    let abs: Vec<u32> = (0..p.ops.len() as u32).filter(|&i| p.op_name(i) == "stablehlo.abs").collect();
    // `%01` uses `%0` of @g (the negate), and `%999999999` uses `%01`.
    let negate = find(&p, "stablehlo.negate");
    assert_eq!(p.op_operands(abs[1])[0], p.op_results(negate).start);
    assert_eq!(p.op_operands(abs[2])[0], p.op_results(abs[1]).start);
    let e = err("func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.abs %a : tensor<4xf32>\n  \
                 return %0 : tensor<4xf32>\n}\nfunc.func @g(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %0 : \
                 tensor<4xf32>\n}\n");
    assert!(e.message.contains("use of undefined value %0") && e.line == 6, "{e}");
    let e = err("func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = stablehlo.abs %a : tensor<4xf32>\n  \
                 return %01 : tensor<4xf32>\n}\n");
    assert!(e.message.contains("use of undefined value %01"), "{e}");
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

/// Reads `text` and checks the verifier's verdict: accepted when `want` is empty, else refused
/// with a message containing `want`.
fn verifies_as(text: &str, want: &str) {
    let p = read(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    match shardwise::mlir::verify(&p) {
        Ok(()) => assert!(want.is_empty(), "{text} verified"),
        Err(e) => assert!(!want.is_empty() && e.to_string().contains(want), "{text}: {e}"),
    }
}

#[test]
fn the_verifier_checks_shapes_of_common_ops() {
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
        ("%0 = \"stablehlo.optimization_barrier\"(%a) : (tensor<2x3xf32>) -> tensor<2x3xf32>", ""),
        ("%0 = \"stablehlo.optimization_barrier\"(%a) : (tensor<2x3xf32>) -> tensor<3x2xf32>", "result 0 has type tensor<3x2xf32>, its operand tensor<2x3xf32>"),
        ("%0 = \"stablehlo.optimization_barrier\"(%a) : (tensor<2x3xf32>) -> tensor<2x3xf16>", "result 0 has type tensor<2x3xf16>"),
    ];
    for (body, want) in cases {
        verifies_as(&module(body), want);
    }
}

#[test]
fn the_verifier_infers_the_shapes_of_slicing_and_windowed_ops() {
    // Each pair: a line (in the forms jax 0.10.2 emits) and the text the refusal contains, or ""
    // where it verifies; the shapes are StableHLO's type inference (TypeInference.cpp).
    let module = |body: &str| {
        format!(
            "func.func @f(%x: tensor<8x12xf32>, %s: tensor<f32>, %i: tensor<i32>, %n: tensor<4x16x16x3xf32>, \
             %k: tensor<3x3x3x16xf32>, %d: tensor<4x8x8x16xf32>, %w: tensor<3x3x1x16xf32>, %t: tensor<4x10xf32>, \
             %j: tensor<4x1x1xi32>, %e: tensor<100x32xf32>, %ids: tensor<2x8x1xi32>, %u: tensor<4x1xf32>, \
             %v: tensor<4x2xf32>, %y: tensor<4xf32>, %z: tensor<4x1x10xf32>, %zz: tensor<4x1x11xf32>) -> tensor<f32> {{\n{body}\n  return %s : tensor<f32>\n}}\n"
        )
    };
    let reduce_window = |pad: &str, out: &str| {
        format!(
            "%0 = \"stablehlo.reduce_window\"(%n, %s) <{{padding = {pad}, window_dimensions = array<i64: 1, 3, 3, 1>, \
             window_strides = array<i64: 1, 2, 2, 1>}}> ({{\n  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n    \
             %1 = stablehlo.maximum %a, %b : tensor<f32>\n    stablehlo.return %1 : tensor<f32>\n  }}) : \
             (tensor<4x16x16x3xf32>, tensor<f32>) -> {out}"
        )
    };
    let conv = |window: &str, groups: &str, lhs: &str, rhs: &str, out: &str| {
        format!(
            "%0 = stablehlo.convolution({lhs}) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {{{window}}} \
             {{batch_group_count = 1 : i64, feature_group_count = {groups} : i64}} : ({rhs}) -> {out}"
        )
    };
    let scatter = |numbers: &str, types: &str| {
        let update = match types.split(", ").nth(2).unwrap_or("") {
            u if u.starts_with("tensor<4x2x") => "%v",
            u if u.starts_with("tensor<4xf") => "%y",
            u if u.starts_with("tensor<4x1x10x") => "%z",
            u if u.starts_with("tensor<4x1x11x") => "%zz",
            _ => "%u",
        };
        format!(
            "%0 = \"stablehlo.scatter\"(%t, %j, {update}) <{{indices_are_sorted = false, scatter_dimension_numbers = \
             #stablehlo.scatter<{numbers}>, unique_indices = false}}> ({{\n  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n    \
             %1 = stablehlo.add %a, %b : tensor<f32>\n    stablehlo.return %1 : tensor<f32>\n  }}) : {types}"
        )
    };
    let batched = "inserted_window_dims = [1], input_batching_dims = [0], scatter_indices_batching_dims = [0], \
                   scatter_dims_to_operand_dims = [1], index_vector_dim = 2";
    let sort = |dimension: &str, types: &str| {
        format!(
            "%0 = \"stablehlo.sort\"(%x) <{{dimension = {dimension} : i64, is_stable = true}}> ({{\n  \
             ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n    %1 = stablehlo.compare LT, %a, %b, FLOAT : \
             (tensor<f32>, tensor<f32>) -> tensor<i1>\n    stablehlo.return %1 : tensor<i1>\n  }}) : {types}"
        )
    };
    let k = "tensor<4x16x16x3xf32>, tensor<3x3x3x16xf32>";
    let dw = "tensor<4x8x8x16xf32>, tensor<3x3x1x16xf32>";
    let gather = |numbers: &str, sizes: &str, operands: &str, out: &str| {
        format!(
            "%0 = \"stablehlo.gather\"({operands}) <{{dimension_numbers = #stablehlo.gather<{numbers}>, \
             indices_are_sorted = false, slice_sizes = array<i64: {sizes}>}}> : {out}"
        )
    };
    let cases: Vec<(String, &str)> = vec![
        ("%0 = stablehlo.slice %x [1:8:2, 0:12:3] : (tensor<8x12xf32>) -> tensor<4x4xf32>".into(), ""),
        ("%0 = stablehlo.slice %x [1:8:2, 0:12:3] : (tensor<8x12xf32>) -> tensor<4x5xf32>".into(), "is not the [4, 4] of the slice"),
        ("%0 = stablehlo.slice %x [0:9, 0:12] : (tensor<8x12xf32>) -> tensor<9x12xf32>".into(), "slice [0, 9) of dimension 0 is out of range"),
        ("%0 = stablehlo.slice %x [0:8] : (tensor<8x12xf32>) -> tensor<8xf32>".into(), "has 1 start indices for an operand of rank 2"),
        ("%0 = stablehlo.pad %x, %s, low = [1, -1], high = [2, 0], interior = [1, 0] : (tensor<8x12xf32>, tensor<f32>) -> tensor<18x11xf32>".into(), ""),
        ("%0 = stablehlo.pad %x, %s, low = [1, -1], high = [2, 0], interior = [1, 0] : (tensor<8x12xf32>, tensor<f32>) -> tensor<18x12xf32>".into(), "is not the [18, 11] of the padded operand"),
        ("%0 = stablehlo.pad %x, %s, low = [0, 0], high = [0, 0], interior = [-1, 0] : (tensor<8x12xf32>, tensor<f32>) -> tensor<1x12xf32>".into(), "interior padding -1 of dimension 0 is negative"),
        ("%0 = stablehlo.pad %x, %x, low = [0, 0], high = [0, 0], interior = [0, 0] : (tensor<8x12xf32>, tensor<8x12xf32>) -> tensor<8x12xf32>".into(), "expected a scalar"),
        ("%0 = stablehlo.dynamic_slice %x, %i, %i, sizes = [2, 4] : (tensor<8x12xf32>, tensor<i32>, tensor<i32>) -> tensor<2x4xf32>".into(), ""),
        ("%0 = stablehlo.dynamic_slice %x, %i, %i, sizes = [2, 4] : (tensor<8x12xf32>, tensor<i32>, tensor<i32>) -> tensor<2x5xf32>".into(), "is not the [2, 4] of the slice sizes"),
        ("%0 = stablehlo.dynamic_slice %x, %i, %i, sizes = [9, 4] : (tensor<8x12xf32>, tensor<i32>, tensor<i32>) -> tensor<9x4xf32>".into(), "slice size 9 of dimension 0 is out of range"),
        ("%0 = stablehlo.iota dim = 1 : tensor<8x12xi32>".into(), ""),
        ("%0 = stablehlo.iota dim = 2 : tensor<8x12xi32>".into(), "iota dimension 2 is out of range"),
        ("%0 = stablehlo.reduce(%x init: %s) applies stablehlo.add across dimensions = [1] : (tensor<8x12xf32>, tensor<f32>) -> tensor<8xf32>".into(), ""),
        ("%0 = stablehlo.reduce(%x init: %s) applies stablehlo.add across dimensions = [1] : (tensor<8x12xf32>, tensor<f32>) -> tensor<12xf32>".into(), "is not the [8] of the input without its reduced dimensions"),
        ("%0 = stablehlo.reduce(%x init: %s) applies stablehlo.add across dimensions = [1, 1] : (tensor<8x12xf32>, tensor<f32>) -> tensor<8xf32>".into(), "are not distinct dimensions"),
        (reduce_window("dense<[[0, 0], [1, 1], [1, 1], [0, 0]]> : tensor<4x2xi64>", "tensor<4x8x8x3xf32>"), ""),
        (reduce_window("dense<0> : tensor<4x2xi64>", "tensor<4x7x7x3xf32>"), ""),
        (reduce_window("dense<0> : tensor<4x2xi64>", "tensor<4x8x8x3xf32>"), "is not the [4, 7, 7, 3] of the windowed input"),
        (reduce_window("dense<0> : tensor<3x2xi64>", "tensor<4x7x7x3xf32>"), "padding has shape [3, 2], expected [4, 2]"),
        (conv("stride = [2, 2], pad = [[0, 1], [0, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]", "1", "%n, %k", k, "tensor<4x8x8x16xf32>"), ""),
        (conv("stride = [2, 2], pad = [[0, 1], [0, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1]", "1", "%n, %k", k, "tensor<4x9x8x16xf32>"), "is not the [4, 8, 8, 16] of the convolution"),
        (conv("stride = [1, 1], pad = [[2, 1], [2, 1]], lhs_dilate = [2, 2], rhs_dilate = [1, 1]", "1", "%n, %k", k, "tensor<4x32x32x16xf32>"), ""),
        (conv("stride = [1, 1], pad = [[0, 0], [0, 0]], lhs_dilate = [1, 1], rhs_dilate = [2, 2]", "1", "%n, %k", k, "tensor<4x12x12x16xf32>"), ""),
        (conv("stride = [0, 1]", "1", "%n, %k", k, "tensor<4x14x14x16xf32>"), "window_strides 0 of window dimension 0 is not positive"),
        (conv("stride = [1, 1], pad = [[1, 2], [0, 1]]", "16", "%d, %w", dw, "tensor<4x9x7x16xf32>"), ""),
        (conv("stride = [1, 1], pad = [[1, 2], [0, 1]]", "8", "%d, %w", dw, "tensor<4x9x7x16xf32>"), "is not feature_group_count 8 times the kernel's input features 1"),
        (gather("collapsed_slice_dims = [1], operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 2", "1, 1", "%t, %j", "(tensor<4x10xf32>, tensor<4x1x1xi32>) -> tensor<4x1xf32>"), ""),
        (gather("collapsed_slice_dims = [1], operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 2", "1, 1", "%t, %j", "(tensor<4x10xf32>, tensor<4x1x1xi32>) -> tensor<4x2xf32>"), "is not the [4, 1] of the gather"),
        (gather("collapsed_slice_dims = [1], operand_batching_dims = [0], start_indices_batching_dims = [0], start_index_map = [1], index_vector_dim = 2", "1, 2", "%t, %j", "(tensor<4x10xf32>, tensor<4x1x1xi32>) -> tensor<4x1xf32>"), "slice size 2 of collapsed or batching dimension 1 is above 1"),
        // An embedding lookup: index_vector_dim left out (0 is not printed), then the implied trailing 1.
        (gather("offset_dims = [2], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 2", "1, 32", "%e, %ids", "(tensor<100x32xf32>, tensor<2x8x1xi32>) -> tensor<2x8x32xf32>"), ""),
        (gather("offset_dims = [0], collapsed_slice_dims = [1], start_index_map = [1]", "8, 1", "%x, %i", "(tensor<8x12xf32>, tensor<i32>) -> tensor<8xf32>"), ""),
        (gather("offset_dims = [2], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 2", "1, 32", "%e, %ids", "(tensor<100x32xf32>, tensor<2x8x1xi32>) -> tensor<2x32x8xf32>"), "is not the [2, 8, 32] of the gather"),
        (gather("offset_dims = [2], collapsed_slice_dims = [0], start_index_map = [0, 1], index_vector_dim = 2", "1, 32", "%e, %ids", "(tensor<100x32xf32>, tensor<2x8x1xi32>) -> tensor<2x8x32xf32>"), "start_index_map has 2 entries"),
        (sort("-2", "(tensor<8x12xf32>) -> tensor<8x12xf32>"), ""),
        (sort("2", "(tensor<8x12xf32>) -> tensor<8x12xf32>"), "dimension 2 is out of range [-2, 2)"),
        (sort("1", "(tensor<8x12xf32>) -> tensor<12x8xf32>"), "result 0 has type tensor<12x8xf32>, its operand tensor<8x12xf32>"),
        (scatter(batched, "(tensor<4x10xf32>, tensor<4x1x1xi32>, tensor<4x1xf32>) -> tensor<4x10xf32>"), ""),
        (scatter(batched, "(tensor<4x10xf32>, tensor<4x1x1xi32>, tensor<4x1xf32>) -> tensor<4x11xf32>"), "result 0 has shape [4, 11], its input [4, 10]"),
        (scatter(batched, "(tensor<4x10xf32>, tensor<4x1x1xi32>, tensor<4x2xf32>) -> tensor<4x10xf32>"), "update scatter dimension 1 has size 2"),
        (scatter(batched, "(tensor<4x10xf32>, tensor<4x1x1xi32>, tensor<4xf32>) -> tensor<4x10xf32>"), "update 0 has rank 1, expected 2"),
        (scatter(&batched.replace("inserted_window_dims = [1]", "inserted_window_dims = [0]"), "(tensor<4x10xf32>, tensor<4x1x1xi32>, tensor<4x1xf32>) -> tensor<4x10xf32>"), "must each be distinct"),
        (scatter("update_window_dims = [2], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 2", "(tensor<4x10xf32>, tensor<4x1x1xi32>, tensor<4x1x10xf32>) -> tensor<4x10xf32>"), ""),
        (scatter("update_window_dims = [2], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 2", "(tensor<4x10xf32>, tensor<4x1x1xi32>, tensor<4x1x11xf32>) -> tensor<4x10xf32>"), "update window dimension 2 has size 11, above the input's 10"),
    ];
    for (body, want) in cases {
        verifies_as(&module(&body), want);
    }
}

#[test]
fn extreme_attribute_values_verify_without_overflow_or_huge_allocations() {
    // Debug builds panic on overflow: each line verifies or is refused, never panics, and a
    // splat padding of a billion rows is not expanded.
    let lines = [
        "%0 = stablehlo.slice %q [0:9223372036854775807:9223372036854775807] : (tensor<?xf32>) -> tensor<1xf32>",
        "%0 = stablehlo.slice %q [9223372036854775807:9223372036854775807:1] : (tensor<?xf32>) -> tensor<0xf32>",
        "%0 = stablehlo.pad %q, %s, low = [9223372036854775807], high = [9223372036854775807], interior = [9223372036854775807] : (tensor<?xf32>, tensor<f32>) -> tensor<?xf32>",
        "%0 = stablehlo.pad %x, %s, low = [9223372036854775807], high = [1], interior = [0] : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>",
        "%0 = \"stablehlo.reduce_window\"(%x, %s) <{padding = dense<0> : tensor<1000000000x2xi64>, window_dimensions = array<i64: 1>}> ({\n  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n    stablehlo.return %a : tensor<f32>\n  }) : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>",
        "%0 = \"stablehlo.reduce_window\"(%x, %s) <{padding = dense<[[9223372036854775807, 9223372036854775807]]> : tensor<1x2xi64>, base_dilations = array<i64: 9223372036854775807>, window_dimensions = array<i64: 9223372036854775807>}> ({\n  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n    stablehlo.return %a : tensor<f32>\n  }) : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>",
        "%0 = stablehlo.dynamic_slice %x, %i, sizes = [-9223372036854775808] : (tensor<8xf32>, tensor<i32>) -> tensor<8xf32>",
    ];
    for line in lines {
        let text = format!(
            "func.func @f(%x: tensor<8xf32>, %q: tensor<?xf32>, %s: tensor<f32>, %i: tensor<i32>) -> tensor<f32> {{\n  {line}\n  return %s : tensor<f32>\n}}\n"
        );
        let p = read(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let _ = shardwise::mlir::verify(&p); // verified or refused: either, without a panic
    }
}

#[test]
fn the_verifier_checks_the_local_shapes_of_manual_computations() {
    // Shardy's verifyManualComputationValue: the region's values have the global shapes divided
    // by the manual axes of their dimension shardings, which come before the free axes.
    let module = |global: &str, dims: &str, local: &str| {
        format!(
            "sdy.mesh @mesh = <[\"x\"=2, \"y\"=4]>\n\
             func.func @f(%a: tensor<{global}xf32>) -> tensor<{global}xf32> {{\n  \
             %0 = sdy.manual_computation(%a) in_shardings=[<@mesh, [{dims}]>] out_shardings=[<@mesh, [{dims}]>] \
             manual_axes={{\"x\"}} (%b: tensor<{local}xf32>) {{\n    sdy.return %b : tensor<{local}xf32>\n  }} : \
             (tensor<{global}xf32>) -> tensor<{global}xf32>\n  return %0 : tensor<{global}xf32>\n}}\n"
        )
    };
    let cases = [
        ("8x4", "{\"x\"}, {}", "4x4", ""),
        ("8x4", "{\"x\", \"y\"}, {}", "4x4", ""),
        ("8x4", "{}, {\"y\"}", "8x4", ""),
        ("8x4", "{\"x\"}, {}", "8x4", "region operand 0 has type tensor<8x4xf32>, expected the local shape [4, 4]"),
        ("8x4", "{\"y\", \"x\"}, {}", "4x4", "manual axis \"x\" comes after a free axis in dimension 0"),
        ("9x4", "{\"x\"}, {}", "4x4", "dimension 0 of size 9 does not divide by its manual axes' size 2"),
    ];
    for (global, dims, local, want) in cases {
        let text = module(global, dims, local);
        verifies_as(&text, want);
    }
}

/// Modules whose manual computation binds "a" (the inner op's text is `inner`), for
/// `the_verifier_refuses_axes_bound_by_a_parent_manual_computation`.
fn bound_axis_case(inner: &str) -> String {
    format!(
        "sdy.mesh @mesh = <[\"a\"=2, \"b\"=2]>\n\
         func.func @f(%arg0: tensor<16x32xf32>) -> tensor<16x32xf32> {{\n  \
         %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{{\"a\", ?}}, {{?}}]>] \
         out_shardings=[<@mesh, [{{\"a\", ?}}, {{?}}]>] manual_axes={{\"a\"}} (%arg1: tensor<8x32xf32>) {{\n    \
         {inner}\n    sdy.return %1 : tensor<8x32xf32>\n  }} : (tensor<16x32xf32>) -> tensor<16x32xf32>\n  \
         return %0 : tensor<16x32xf32>\n}}\n"
    )
}

/// (inner op, the refusal's text or "" for a valid module): Shardy's lit cases
/// (`sharding_bound_manual_computation`, `constraint_*_inside_bound_manual_computation`,
/// `manual_computation_nested_same_manual_axis`) and their valid twins; jaxlib 0.10.2 accepts
/// or refuses each as this list says (checked once, as the other verifier cases were).
pub const BOUND_AXIS_CASES: [(&str, &str); 8] = [
    (
        "%1 = stablehlo.add %arg1, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{\"a\"}, {}]>]>} : tensor<8x32xf32>",
        "result sharding 0: operates on axis \"a\"",
    ),
    ("%1 = stablehlo.add %arg1, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{\"b\"}, {}]>]>} : tensor<8x32xf32>", ""),
    ("%1 = sdy.sharding_constraint %arg1 <@mesh, [{\"a\"}, {}]> : tensor<8x32xf32>", "sharding: operates on axis \"a\""),
    ("%1 = sdy.sharding_constraint %arg1 <@mesh, [{}, {}], replicated={\"a\"}> : tensor<8x32xf32>", "operates on axis \"a\""),
    ("%1 = sdy.sharding_constraint %arg1 <@mesh, [{}, {}], replicated={\"b\"}> : tensor<8x32xf32>", ""),
    ("%1 = sdy.reshard %arg1 <@mesh, [{}, {\"a\"}]> : tensor<8x32xf32>", "operates on axis \"a\""),
    (
        "%1 = sdy.manual_computation(%arg1) in_shardings=[<@mesh, [{}, {}]>] out_shardings=[<@mesh, [{}, {}]>] manual_axes={\"a\"} (%arg2: tensor<8x32xf32>) {\n      sdy.return %arg2 : tensor<8x32xf32>\n    } : (tensor<8x32xf32>) -> tensor<8x32xf32>",
        "manual_axes: operates on axis \"a\"",
    ),
    (
        "%1 = sdy.manual_computation(%arg1) in_shardings=[<@mesh, [{\"b\"}, {}]>] out_shardings=[<@mesh, [{\"b\"}, {}]>] manual_axes={\"b\"} (%arg2: tensor<4x32xf32>) {\n      sdy.return %arg2 : tensor<4x32xf32>\n    } : (tensor<8x32xf32>) -> tensor<8x32xf32>",
        "",
    ),
];

#[test]
fn the_verifier_refuses_axes_bound_by_a_parent_manual_computation() {
    for (inner, want) in BOUND_AXIS_CASES {
        let text = bound_axis_case(inner);
        verifies_as(&text, want);
    }
}

/// (operand sharding or "", collective, the refusal's text or "" for a valid module):
/// jaxlib 0.10.2 accepts or refuses each as this list says (checked once).
const COLLECTIVE_CASES: [(&str, &str, &str); 30] = [
    ("[{\"x\"}, {}]", "sdy.all_reduce {\"y\"} %arg0 out_sharding=<@mesh, [{\"x\"}, {}]>", ""),
    ("[{\"x\"}, {}]", "sdy.all_reduce {\"y\"} %arg0 out_sharding=<@mesh, [{}, {\"x\"}]>", "not equivalent"),
    (
        "[{\"x\"}, {}]",
        "sdy.all_reduce {\"x\"} %arg0 out_sharding=<@mesh, [{\"x\"}, {}]>",
        "reduction axis \"x\" overlaps",
    ),
    ("[{\"x\"}, {}]", "sdy.all_reduce {\"y\"} %arg0 out_sharding=<@mesh, [{\"x\", ?}, {}], replicated={\"z\"}>", ""),
    (
        "[{\"x\"}, {}], replicated={\"y\"}",
        "sdy.all_reduce {\"y\"} %arg0 out_sharding=<@mesh, [{\"x\"}, {}]>",
        "reduction axis \"y\" overlaps",
    ),
    ("[{\"x\"}, {}], unreduced={\"y\"}", "sdy.all_reduce {\"y\"} %arg0 out_sharding=<@mesh, [{\"x\"}, {}]>", ""),
    ("", "sdy.all_reduce {\"y\"} %arg0 out_sharding=<@mesh, [{}, {}]>", ""),
    ("", "sdy.all_reduce {\"y\"} %arg0 out_sharding=<@mesh, [{\"x\"}, {}]>", "not equivalent"),
    (
        "[{\"x\"}, {\"y\"}]",
        "sdy.all_reduce {\"z\"} %arg0 out_sharding=<@other, [{\"x\"}, {\"y\"}]>",
        "mesh does not match",
    ),
    ("[{\"x\", \"y\"}, {}]", "sdy.all_gather [{\"y\"}, {}] %arg0 out_sharding=<@mesh, [{\"x\"}, {}]>", ""),
    (
        "[{\"x\", \"y\"}, {}]",
        "sdy.all_gather [{\"x\"}, {}] %arg0 out_sharding=<@mesh, [{\"y\"}, {}]>",
        "can't apply gathering axis \"x\"",
    ),
    (
        "[{\"x\", \"y\"}, {}]",
        "sdy.all_gather [{\"y\"}, {}] %arg0 out_sharding=<@mesh, [{\"x\", \"y\"}, {}]>",
        "expected sharding [\"x\"] on dimension 0",
    ),
    ("", "sdy.all_gather [{}, {}] %arg0 out_sharding=<@mesh, [{}, {}]>", "operand without sharding"),
    ("[{\"x\"}, {}]", "sdy.all_slice [{\"y\"}, {}] %arg0 out_sharding=<@mesh, [{\"x\", \"y\"}, {}]>", ""),
    (
        "[{\"x\"}, {}]",
        "sdy.all_slice [{\"y\"}, {}] %arg0 out_sharding=<@mesh, [{\"x\"}, {\"y\"}]>",
        "expected sharding [\"x\", \"y\"] on dimension 0",
    ),
    ("", "sdy.all_slice [{\"y\"}, {}] %arg0 out_sharding=<@mesh, [{\"y\"}, {}]>", ""),
    (
        "[{\"x\"}, {}]",
        "sdy.all_slice [{\"y\"}, {}] %arg0 out_sharding=<@other, [{\"x\", \"y\"}, {}]>",
        "mesh does not match",
    ),
    (
        "[{\"x\"}, {}]",
        "sdy.reduce_scatter [{}, {\"y\"}] %arg0 out_sharding=<@mesh, [{\"x\", \"y\"}, {}]>",
        "expected sharding [\"x\"] on dimension 0",
    ),
    ("", "sdy.reduce_scatter [{\"y\"}, {}] %arg0 out_sharding=<@mesh, [{\"y\"}, {}]>", ""),
    ("[{\"x\"}, {}]", "sdy.collective_permute %arg0 out_sharding=<@mesh, [{\"y\"}, {}]>", ""),
    (
        "[{\"x\"}, {}]",
        "sdy.collective_permute %arg0 out_sharding=<@mesh, [{\"x\", \"y\"}, {}]>",
        "sharded size of result doesn't match operand on dimension 0: 4 != 2",
    ),
    ("[{\"x\"}, {}]", "sdy.collective_permute %arg0 out_sharding=<@other, [{\"x\"}, {}]>", ""),
    ("", "sdy.collective_permute %arg0 out_sharding=<@mesh, [{}, {}]>", "operand without sharding"),
    ("[{\"x\"}, {}]", "sdy.all_to_all [{\"x\"}: 0->1] %arg0 out_sharding=<@mesh, [{}, {\"x\"}]>", ""),
    (
        "[{\"x\"}, {}]",
        "sdy.all_to_all [{\"x\"}: 0->1] %arg0 out_sharding=<@mesh, [{\"x\"}, {}]>",
        "expected sharding [] on dimension 0",
    ),
    (
        "[{\"x\"}, {}]",
        "sdy.all_to_all [{\"x\"}: 0->0] %arg0 out_sharding=<@mesh, [{}, {\"x\"}]>",
        "overlapping source/target dimensions",
    ),
    (
        "[{\"x\"}, {}]",
        "sdy.replicated_to_unreduced {\"y\"} %arg0 out_sharding=<@mesh, [{\"x\"}, {}], unreduced={\"y\"}>",
        "",
    ),
    (
        "[{\"x\"}, {}]",
        "sdy.replicated_to_unreduced {\"y\"} %arg0 out_sharding=<@mesh, [{}, {}], unreduced={\"y\"}>",
        "same dimension shardings",
    ),
    (
        "[{\"x\", \"y\"}, {}]",
        "sdy.sharded_to_unreduced [{\"y\"}, {}] %arg0 out_sharding=<@mesh, [{\"x\"}, {}], unreduced={\"y\"}>",
        "",
    ),
    (
        "[{\"x\", \"y\"}, {}]",
        "sdy.sharded_to_unreduced [{\"y\"}, {}] %arg0 out_sharding=<@mesh, [{}, {}], unreduced={\"y\"}>",
        "expected sharding [\"x\"] on dimension 0",
    ),
];

#[test]
fn the_verifier_checks_collectives_against_their_operand_sharding() {
    for (arg, body, want) in COLLECTIVE_CASES {
        let attr =
            if arg.is_empty() { String::new() } else { format!(" {{sdy.sharding = #sdy.sharding<@mesh, {arg}>}}") };
        let text = format!(
            "sdy.mesh @mesh = <[\"x\"=2, \"y\"=2, \"z\"=2]>\n\
             sdy.mesh @other = <[\"x\"=2, \"y\"=2, \"z\"=2], device_ids=[7, 6, 5, 4, 3, 2, 1, 0]>\n\
             func.func @f(%arg0: tensor<16x8xf32>{attr}) -> tensor<16x8xf32> {{\n  \
             %0 = {body} : tensor<16x8xf32>\n  return %0 : tensor<16x8xf32>\n}}\n"
        );
        verifies_as(&text, want);
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

/// (element-wise op with its types, the refusal's text or "" for a valid module): jaxlib 0.10.2
/// accepts or refuses each as this list says (checked once).
const ELEMENT_TYPE_CASES: [(&str, &str); 14] = [
    ("%r = stablehlo.add %a, %a : tensor<4xf32>", ""),
    (
        "%r = stablehlo.add %a, %h : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>",
        "operands: element type f16 differs from f32",
    ),
    ("%r = stablehlo.add %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf16>", "result: element type f16"),
    ("%r = stablehlo.compare GT, %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>", ""),
    ("%r = stablehlo.compare GT, %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>", "must be i1"),
    ("%r = stablehlo.select %p, %a, %a : tensor<4xi1>, tensor<4xf32>", ""),
    ("%r = stablehlo.select %a, %a, %a : tensor<4xf32>, tensor<4xf32>", "predicate's element type must be i1"),
    ("%r = stablehlo.convert %a : (tensor<4xf32>) -> tensor<4xi32>", ""),
    ("%r = stablehlo.abs %c : (tensor<4xcomplex<f32>>) -> tensor<4xf32>", ""),
    ("%r = stablehlo.abs %c : (tensor<4xcomplex<f32>>) -> tensor<4xf64>", "must be f32"),
    ("%r = stablehlo.real %c : (tensor<4xcomplex<f32>>) -> tensor<4xf32>", ""),
    ("%r = stablehlo.complex %a, %a : tensor<4xcomplex<f32>>", ""),
    (
        "%r = stablehlo.complex %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xcomplex<f64>>",
        "must be complex<f32>",
    ),
    ("%r = stablehlo.is_finite %a : (tensor<4xf32>) -> tensor<4xi1>", ""),
];

#[test]
fn the_verifier_checks_element_types_of_elementwise_ops() {
    for (body, want) in ELEMENT_TYPE_CASES {
        let text = format!(
            "func.func @f(%a: tensor<4xf32>, %h: tensor<4xf16>, %p: tensor<4xi1>, %c: tensor<4xcomplex<f32>>) {{\n  \
             {body}\n  return\n}}\n"
        );
        verifies_as(&text, want);
    }
}

#[test]
fn dynamic_dimensions_and_scalars_are_found_as_the_shape_reader_finds_them() {
    use shardwise::ir::types::{has_dynamic_dim, is_scalar, tensor_shape};
    for ty in [
        "tensor<5>",
        "tensor<xf32>",
        "tensor<?>",
        "tensor<*>",
        "tensor<i1>",
        "tensor<complex<f32>>",
        "tensor<f32, #stablehlo.bounds<?>>",
        "tensor<>",
        "tensor<",
        "f32",
        "tensor<4x8xf32>",
        "tensor<?x8xf32>",
        "tensor<4x?xbf16>",
        "tensor<f32>",
        "tensor<*xf32>",
        "tensor<?x8xf32, #stablehlo.bounds<16, ?>>",
        "tensor<8xf32, #stablehlo.bounds<?>>",
        "tensor<99999999999999999999x?xf32>",
        "tensor<4xcomplex<f32>>",
        "!stablehlo.token",
        "tuple<tensor<?xf32>>",
    ] {
        assert_eq!(has_dynamic_dim(ty), tensor_shape(ty).is_some_and(|s| s.contains(&-1)), "{ty}");
        assert_eq!(is_scalar(ty), tensor_shape(ty).is_some_and(|s| s.is_empty()), "{ty}");
    }
}
