//! A small builder of programs for the solver (flat `GraphInput` arrays and the `SolverInput`
//! beside them), shared by the solver tests (`tests/rust/solver.rs`) and the solver's criterion
//! benchmark (`benches/rust/solver.rs`), with the benchmark's generated program.

use std::collections::HashMap;

use shardwise::graph::{Graph, GraphInput, NONE};
use shardwise::propagation::{propagate, DebugOptions, PassOptions, ProgramFacts, SolverInput, SolverOutput};
use shardwise::rule::parse_rule;
use shardwise::text::{parse_mesh, parse_sharding};
use shardwise::{Mesh, TensorSharding};

/// A program for the solver, built op by op: the flat arrays of `GraphInput` and the
/// `SolverInput` beside them.
pub struct Builder {
    pub g: GraphInput,
    pub shardings: Vec<Option<TensorSharding>>,
    pub func_results: Vec<(u32, Vec<Option<TensorSharding>>)>,
    pub facts: ProgramFacts,
    pub debug: Option<DebugOptions>,
}

pub fn empty_input() -> GraphInput {
    GraphInput {
        names: vec![],
        op_name: vec![],
        op_parent: vec![],
        operand_counts: vec![],
        operands: vec![],
        result_counts: vec![],
        results: vec![],
        ranks: vec![],
        dims: vec![],
        value_block_owner: vec![],
        rules: vec![],
        op_rule: vec![],
    }
}

pub fn sharding(text: &str) -> TensorSharding {
    parse_sharding(text).unwrap()
}

impl Builder {
    pub fn new() -> Builder {
        Builder {
            g: empty_input(),
            shardings: vec![],
            func_results: vec![],
            facts: ProgramFacts::default(),
            debug: None,
        }
    }

    pub fn value(&mut self, shape: &[i64], owner: u32) -> u32 {
        self.g.ranks.push(shape.len() as u32);
        self.g.dims.extend_from_slice(shape);
        self.g.value_block_owner.push(owner);
        self.shardings.push(None);
        (self.g.ranks.len() - 1) as u32
    }

    /// An op named `name` nested in `parent`, with `operands`, results of `results` shapes and
    /// an optional rule in Shardy's text.
    pub fn op(
        &mut self,
        name: &str,
        parent: Option<u32>,
        operands: &[u32],
        results: &[&[i64]],
        rule: Option<&str>,
    ) -> (u32, Vec<u32>) {
        let op = self.g.op_name.len() as u32;
        let k = match self.g.names.iter().position(|n| n == name) {
            Some(k) => k,
            None => {
                self.g.names.push(name.to_string());
                self.g.names.len() - 1
            }
        };
        self.g.op_name.push(k as u32);
        self.g.op_parent.push(parent.unwrap_or(NONE));
        self.g.operand_counts.push(operands.len() as u32);
        self.g.operands.extend_from_slice(operands);
        let vs: Vec<u32> = results.iter().map(|s| self.value(s, NONE)).collect();
        self.g.result_counts.push(vs.len() as u32);
        self.g.results.extend_from_slice(&vs);
        match rule {
            Some(text) => {
                self.g.rules.push(parse_rule(text).unwrap());
                self.g.op_rule.push((self.g.rules.len() - 1) as u32);
            }
            None => self.g.op_rule.push(NONE),
        }
        (op, vs)
    }

    /// A block argument of `op`.
    pub fn arg(&mut self, op: u32, shape: &[i64]) -> u32 {
        self.value(shape, op)
    }

    /// A function with arguments of `shapes` (and `num_results` results, set up at return).
    pub fn func(&mut self, shapes: &[&[i64]]) -> (u32, Vec<u32>) {
        let (f, _) = self.op("func.func", None, &[], &[], None);
        let args = shapes.iter().map(|s| self.arg(f, s)).collect();
        (f, args)
    }

    pub fn ret(&mut self, func: u32, values: &[u32], result_shardings: Vec<Option<&str>>) {
        self.op("func.return", Some(func), values, &[], None);
        self.func_results.push((func, result_shardings.into_iter().map(|s| s.map(sharding)).collect()));
        if self.facts.main_func.is_none() {
            self.facts.main_func = Some(func);
        }
    }

    pub fn shard(&mut self, v: u32, text: &str) {
        self.shardings[v as usize] = Some(sharding(text));
    }

    pub fn build(self, meshes: &[(&str, &str)]) -> (Graph, SolverInput) {
        let graph = Graph::new(self.g).unwrap();
        let meshes: HashMap<String, Mesh> =
            meshes.iter().map(|(n, m)| (n.to_string(), parse_mesh(m).unwrap())).collect();
        let input = SolverInput {
            meshes,
            value_shardings: self.shardings,
            func_results: self.func_results,
            facts: self.facts,
            debug: self.debug,
        };
        (graph, input)
    }

    pub fn run(self, meshes: &[(&str, &str)], options: PassOptions) -> (Graph, SolverOutput) {
        let (graph, input) = self.build(meshes);
        let out = propagate(&graph, input, &options).unwrap();
        (graph, out)
    }
}

/// A stack of `layers` MLP blocks, as a transformer's feed-forward halves are written: per layer
/// `h = tanh(x @ w1)`, `y = h @ w2`, `x = x + y` (4 ops: two dots, tanh, add; the layer's
/// weights are function arguments), plus the func and its return. On a 2x4 mesh
/// `("data", "model")` with the input batch-split on `data` and the weights Megatron-style
/// (`w1` column-split, `w2` row-split on `model`), as `shardwise.testing.programs` shards the
/// transformer steps it lowers from JAX.
pub fn mlp_stack(layers: usize) -> (Graph, SolverInput) {
    const B: i64 = 64;
    const D: i64 = 256;
    const F: i64 = 1024;
    let dot1 = format!("#sdy.op_sharding_rule<([i, k], [k, j])->([i, j]) {{i={B}, j={F}, k={D}}} reduction={{k}}>");
    let dot2 = format!("#sdy.op_sharding_rule<([i, k], [k, j])->([i, j]) {{i={B}, j={D}, k={F}}} reduction={{k}}>");
    let tanh = format!("#sdy.op_sharding_rule<([i, j])->([i, j]) {{i={B}, j={F}}}>");
    let add = format!("#sdy.op_sharding_rule<([i, j], [i, j])->([i, j]) {{i={B}, j={D}}}>");
    let mut shapes: Vec<&[i64]> = vec![&[B, D]];
    for _ in 0..layers {
        shapes.push(&[D, F]);
        shapes.push(&[F, D]);
    }
    let mut b = Builder::new();
    let (f, args) = b.func(&shapes);
    b.shard(args[0], r#"<@mesh, [{"data"}, {}]>"#);
    let mut x = args[0];
    for l in 0..layers {
        let (w1, w2) = (args[1 + 2 * l], args[2 + 2 * l]);
        b.shard(w1, r#"<@mesh, [{}, {"model"}]>"#);
        b.shard(w2, r#"<@mesh, [{"model"}, {}]>"#);
        let (_, h) = b.op("stablehlo.dot_general", Some(f), &[x, w1], &[&[B, F]], Some(&dot1));
        let (_, t) = b.op("stablehlo.tanh", Some(f), &[h[0]], &[&[B, F]], Some(&tanh));
        let (_, y) = b.op("stablehlo.dot_general", Some(f), &[t[0], w2], &[&[B, D]], Some(&dot2));
        let (_, s) = b.op("stablehlo.add", Some(f), &[x, y[0]], &[&[B, D]], Some(&add));
        x = s[0];
    }
    b.ret(f, &[x], vec![None]);
    b.build(&[("mesh", r#"<["data"=2, "model"=4]>"#)])
}
