//! What the solver needs to know about a program beyond the flat arrays of the frozen
//! [`Graph`]: the kind of each op (derived from its name), which ops are elementwise or free of
//! side effects, the terminators and block arguments of region ops, the uses of each value in
//! the order MLIR keeps them, and the facts that live in op attributes (callees, manual axes,
//! sharding group ids, propagation barrier directions), handed over as [`ProgramFacts`].
//!
//! Op kinds and properties mirror Shardy's `isElementwise` (`transforms/common/
//! op_properties.cc`), the op interfaces it dispatches on (`ShardableDataFlowOpInterface` of
//! `sdy.manual_computation`, `sdy.named_computation`, `stablehlo.while`, `stablehlo.case` and
//! `stablehlo.optimization_barrier`; `ir/dialect.cc`, `ir/extensions/stablehlo_extensions.cc`)
//! and MLIR's trivially-dead rule (`wouldOpBeTriviallyDead`: no results in use and no memory
//! effects, looking into the regions of ops with recursive effects).

#![warn(missing_docs)]

use std::sync::{Arc, Mutex, OnceLock};

use super::factor_prop::PropagationDirection;
use crate::error::{Error, Result};
use crate::fast_hash::FastMap;
use crate::graph::{Csr, Graph, NONE};
use crate::rule::{OpShardingRule, RuleBuilder};

/// What an op is, as far as propagation is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// `func.func`.
    Func,
    /// `func.return`.
    FuncReturn,
    /// `func.call`.
    Call,
    /// Any other terminator (`stablehlo.return`, `sdy.return`, ...).
    Terminator,
    /// `sdy.data_flow_edge`.
    DataFlowEdge,
    /// `sdy.func_data_flow_edge`.
    FuncDataFlowEdge,
    /// `sdy.propagation_barrier`.
    PropagationBarrier,
    /// `sdy.sharding_constraint`.
    ShardingConstraint,
    /// `sdy.sharding_group`.
    ShardingGroup,
    /// `sdy.manual_computation`.
    ManualComputation,
    /// `sdy.named_computation`.
    NamedComputation,
    /// `stablehlo.while`.
    While,
    /// `stablehlo.case`.
    Case,
    /// `stablehlo.optimization_barrier`.
    OptimizationBarrier,
    /// `stablehlo.broadcast_in_dim`.
    BroadcastInDim,
    /// `stablehlo.reshape`.
    Reshape,
    /// `stablehlo.transpose`.
    Transpose,
    /// `stablehlo.dynamic_slice`.
    DynamicSlice,
    /// `stablehlo.dynamic_update_slice`.
    DynamicUpdateSlice,
    /// `stablehlo.async_start`.
    AsyncStart,
    /// `stablehlo.custom_call`.
    CustomCall,
    /// Anything else.
    Other,
}

impl OpKind {
    /// The kind of the op named `name`.
    pub fn of(name: &str) -> OpKind {
        match name {
            "func.func" => OpKind::Func,
            "func.return" => OpKind::FuncReturn,
            "func.call" => OpKind::Call,
            "stablehlo.return" | "sdy.return" | "mhlo.return" | "scf.yield" | "cf.br" | "cf.cond_br" => {
                OpKind::Terminator
            }
            "sdy.data_flow_edge" => OpKind::DataFlowEdge,
            "sdy.func_data_flow_edge" => OpKind::FuncDataFlowEdge,
            "sdy.propagation_barrier" => OpKind::PropagationBarrier,
            "sdy.sharding_constraint" => OpKind::ShardingConstraint,
            "sdy.sharding_group" => OpKind::ShardingGroup,
            "sdy.manual_computation" => OpKind::ManualComputation,
            "sdy.named_computation" => OpKind::NamedComputation,
            "stablehlo.while" => OpKind::While,
            "stablehlo.case" => OpKind::Case,
            "stablehlo.optimization_barrier" => OpKind::OptimizationBarrier,
            "stablehlo.broadcast_in_dim" => OpKind::BroadcastInDim,
            "stablehlo.reshape" => OpKind::Reshape,
            "stablehlo.transpose" => OpKind::Transpose,
            "stablehlo.dynamic_slice" => OpKind::DynamicSlice,
            "stablehlo.dynamic_update_slice" => OpKind::DynamicUpdateSlice,
            "stablehlo.async_start" => OpKind::AsyncStart,
            "stablehlo.custom_call" => OpKind::CustomCall,
            _ => OpKind::Other,
        }
    }

    /// Terminators (MLIR's `IsTerminator` trait).
    pub fn is_terminator(self) -> bool {
        matches!(self, OpKind::FuncReturn | OpKind::Terminator)
    }

    /// Ops implementing Shardy's `ShardableDataFlowOpInterface`: their results (and, for
    /// manual and named computations, their body arguments) own data flow edges.
    pub fn is_shardable_data_flow(self) -> bool {
        matches!(
            self,
            OpKind::ManualComputation
                | OpKind::NamedComputation
                | OpKind::While
                | OpKind::Case
                | OpKind::OptimizationBarrier
        )
    }
}

/// StableHLO ops with MLIR's `Elementwise` or `BroadcastingElementwise` trait.
const ELEMENTWISE: &[&str] = &[
    "abs",
    "add",
    "and",
    "atan2",
    "cbrt",
    "ceil",
    "clamp",
    "compare",
    "complex",
    "convert",
    "cosine",
    "count_leading_zeros",
    "divide",
    "exponential",
    "exponential_minus_one",
    "floor",
    "imag",
    "is_finite",
    "log",
    "log_plus_one",
    "logistic",
    "maximum",
    "minimum",
    "multiply",
    "negate",
    "not",
    "or",
    "popcnt",
    "power",
    "real",
    "reduce_precision",
    "remainder",
    "round_nearest_afz",
    "round_nearest_even",
    "rsqrt",
    "select",
    "shift_left",
    "shift_right_arithmetic",
    "shift_right_logical",
    "sign",
    "sine",
    "sqrt",
    "subtract",
    "tan",
    "tanh",
    "uniform_dequantize",
    "uniform_quantize",
    "xor",
];

/// StableHLO ops without memory effects (`Pure` or `NoMemoryEffect`).
const PURE: &[&str] = &[
    "abs",
    "add",
    "after_all",
    "and",
    "atan2",
    "batch_norm_grad",
    "batch_norm_inference",
    "batch_norm_training",
    "bitcast_convert",
    "broadcast",
    "broadcast_in_dim",
    "cbrt",
    "ceil",
    "cholesky",
    "clamp",
    "compare",
    "complex",
    "concatenate",
    "constant",
    "convert",
    "convolution",
    "cosine",
    "count_leading_zeros",
    "create_token",
    "divide",
    "dot",
    "dot_general",
    "dynamic_broadcast_in_dim",
    "dynamic_conv",
    "dynamic_gather",
    "dynamic_iota",
    "dynamic_pad",
    "dynamic_reshape",
    "dynamic_slice",
    "dynamic_update_slice",
    "einsum",
    "exponential",
    "exponential_minus_one",
    "fft",
    "floor",
    "gather",
    "get_dimension_size",
    "get_tuple_element",
    "imag",
    "iota",
    "is_finite",
    "log",
    "log_plus_one",
    "logistic",
    "maximum",
    "minimum",
    "multiply",
    "negate",
    "not",
    "optimization_barrier",
    "or",
    "pad",
    "partition_id",
    "popcnt",
    "power",
    "real",
    "real_dynamic_slice",
    "reduce_precision",
    "remainder",
    "replica_id",
    "reshape",
    "return",
    "reverse",
    "rng_bit_generator",
    "round_nearest_afz",
    "round_nearest_even",
    "rsqrt",
    "select",
    "set_dimension_size",
    "shift_left",
    "shift_right_arithmetic",
    "shift_right_logical",
    "sign",
    "sine",
    "slice",
    "sqrt",
    "subtract",
    "tan",
    "tanh",
    "torch_index_select",
    "transpose",
    "triangular_solve",
    "tuple",
    "unary_einsum",
    "uniform_dequantize",
    "uniform_quantize",
    "xor",
];

/// StableHLO ops whose memory effects are those of the ops in their regions.
const RECURSIVE: &[&str] =
    &["case", "if", "map", "reduce", "reduce_window", "scatter", "select_and_scatter", "sort", "while"];

/// How an op's memory effects decide whether it may be erased once its results are unused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Effects {
    /// No memory effects (MLIR `Pure` / `NoMemoryEffect`).
    None,
    /// The effects of the ops nested in its regions (`RecursiveMemoryEffects`).
    Recursive,
    /// Side effects, or unknown ones: never erased.
    Some,
}

fn effects_of(name: &str, kind: OpKind) -> Effects {
    if let Some(op) = name.strip_prefix("stablehlo.") {
        if PURE.contains(&op) || (kind == OpKind::CustomCall) {
            return Effects::None;
        }
        if RECURSIVE.contains(&op) {
            return Effects::Recursive;
        }
        return Effects::Some;
    }
    match name {
        "sdy.reshard" | "sdy.constant" | "sdy.propagation_barrier" | "sdy.return" => Effects::None,
        "sdy.manual_computation" | "sdy.named_computation" => Effects::Recursive,
        _ => Effects::Some,
    }
}

/// Facts about a program that its op attributes hold (the frozen graph keeps only names,
/// operands, results, shapes and rules). Every index is an op or value index of the graph.
#[derive(Debug, Clone, Default)]
pub struct ProgramFacts {
    /// The function Shardy treats as main (`getMainFuncOrDie`: the only function, else
    /// `@main`); its results' shardings are propagated to and from its return values.
    pub main_func: Option<u32>,
    /// `(call op, func op)` for each `func.call` whose callee is a function of the module.
    pub callees: Vec<(u32, u32)>,
    /// Functions that some op other than a `func.call` refers to by symbol (for example a
    /// custom call's `called_computations`): they count as having users.
    pub symbol_users: Vec<u32>,
    /// `(op, manual axis names)` of each `sdy.manual_computation`.
    pub manual_axes: Vec<(u32, Vec<String>)>,
    /// `(op, group id)` of each `sdy.sharding_group`.
    pub sharding_groups: Vec<(u32, i64)>,
    /// `(op, allowed direction)` of each `sdy.propagation_barrier`.
    pub barrier_directions: Vec<(u32, PropagationDirection)>,
    /// Custom calls with `has_side_effect = true` (never erased).
    pub side_effecting_ops: Vec<u32>,
    /// Custom calls moving data between host and device (`MoveToDevice`, `MoveToHost`),
    /// which the op-priority schedule treats as pass-through ops.
    pub offload_ops: Vec<u32>,
    /// Values that are not ranked tensors (tokens, tuples, ...).
    pub non_tensor_values: Vec<u32>,
    /// Values whose use list MLIR keeps in program order rather than reversed (the results
    /// of sharding constraints inserted for conflicting sharding groups, whose uses were moved
    /// over one by one).
    pub forward_use_order_values: Vec<u32>,
}

/// The program as the solver sees it: the graph plus derived and attribute-held facts.
#[derive(Debug)]
pub struct Program<'g> {
    /// The frozen program.
    pub graph: &'g Graph,
    /// Each op's kind.
    pub kind: Vec<OpKind>,
    /// Whether each op is elementwise (Shardy `isElementwise`).
    pub elementwise: Vec<bool>,
    /// Each op's memory effects.
    pub effects: Vec<Effects>,
    /// Whether each op is a host offloading custom call.
    pub offload: Vec<bool>,
    /// Direct children of each op (the ops of its regions' blocks), in program order.
    pub children: Csr,
    /// Block arguments of each op's regions, in order.
    pub block_args: Csr,
    /// The terminators among each op's direct children, one per region, in order.
    pub terminators: Csr,
    /// Position of a value among its defining op's results or its owner's block arguments.
    pub value_pos: Vec<u32>,
    /// Uses of each value as `(op, operand index)`, in MLIR's use-list order.
    pub uses: Vec<Vec<(u32, u32)>>,
    /// Whether each value is not a ranked tensor.
    pub non_tensor: Vec<bool>,
    /// The callee (func op) of each `func.call`.
    pub callee: FastMap<u32, u32>,
    /// Per func op, its `func.call` callers in program order.
    pub callers: FastMap<u32, Vec<u32>>,
    /// Whether a function is referred to by an op other than a call.
    pub symbol_used: Vec<bool>,
    /// The manual axes of each manual computation.
    pub manual_axes: FastMap<u32, Vec<String>>,
    /// The allowed direction of each propagation barrier.
    pub barrier_direction: FastMap<u32, PropagationDirection>,
    /// Sharding group of each grouped value, and the members of each group in program order.
    pub group_of: FastMap<u32, usize>,
    /// `(group id, members)` by increasing id.
    pub groups: Vec<(i64, Vec<u32>)>,
    /// The main function (see [`ProgramFacts::main_func`]).
    pub main_func: Option<u32>,
    /// Identity rules built so far, by the value giving their shape and their number of
    /// operands (see [`Program::identity_rule`]); shared by every solve of the program.
    identity_rules: Mutex<FastMap<(u32, usize), Arc<OpShardingRule>>>,
    /// Per value, where its sharding is stored while no op is erased (`NONE` for nowhere),
    /// filled by the first solve (see `Solver::shardable`).
    pub(crate) initial_shardable: OnceLock<Vec<u32>>,
}

fn check_index(what: &str, i: u32, n: usize) -> Result<()> {
    if i as usize >= n {
        return Err(Error::invariant("propagation-bad-index", format!("{what} index {i} is out of range ({n})")));
    }
    Ok(())
}

impl<'g> Program<'g> {
    /// Derives the program structure from `graph` and `facts`. Errors on indices out of range
    /// and on facts about ops of the wrong kind.
    pub fn new(graph: &'g Graph, facts: &ProgramFacts) -> Result<Program<'g>> {
        let n_ops = graph.num_ops();
        let n_values = graph.num_values();
        let kind: Vec<OpKind> = (0..n_ops).map(|op| OpKind::of(graph.name(op))).collect();
        let mut effects: Vec<Effects> = (0..n_ops).map(|op| effects_of(graph.name(op), kind[op])).collect();
        for &op in &facts.side_effecting_ops {
            check_index("op", op, n_ops)?;
            effects[op as usize] = Effects::Some;
        }
        let elementwise = (0..n_ops)
            .map(|op| {
                let name = graph.name(op);
                match name {
                    "sdy.propagation_barrier" | "sdy.sharding_constraint" | "sdy.reshard" => true,
                    "stablehlo.bitcast_convert" => {
                        let (o, r) = (graph.operands.row(op), graph.results.row(op));
                        o.len() == 1 && r.len() == 1 && graph.shape(o[0] as usize) == graph.shape(r[0] as usize)
                    }
                    _ => name.strip_prefix("stablehlo.").is_some_and(|n| ELEMENTWISE.contains(&n)),
                }
            })
            .collect();
        let mut offload = vec![false; n_ops];
        for &op in &facts.offload_ops {
            check_index("op", op, n_ops)?;
            offload[op as usize] = true;
        }

        // Children, block arguments and terminators per op.
        let mut child_counts = vec![0u32; n_ops];
        for op in 0..n_ops {
            if graph.op_parent[op] != NONE {
                child_counts[graph.op_parent[op] as usize] += 1;
            }
        }
        let child_items: Vec<u32> = {
            let mut rows: Vec<Vec<u32>> = vec![Vec::new(); n_ops];
            for op in 0..n_ops {
                if graph.op_parent[op] != NONE {
                    rows[graph.op_parent[op] as usize].push(op as u32);
                }
            }
            rows.into_iter().flatten().collect()
        };
        let children = Csr::from_lengths(&child_counts, child_items, "children")?;
        let mut arg_rows: Vec<Vec<u32>> = vec![Vec::new(); n_ops];
        let mut value_pos = vec![0u32; n_values];
        for (v, &owner) in graph.value_block_owner.iter().enumerate() {
            if owner != NONE {
                value_pos[v] = arg_rows[owner as usize].len() as u32;
                arg_rows[owner as usize].push(v as u32);
            }
        }
        for op in 0..n_ops {
            for (i, &v) in graph.results.row(op).iter().enumerate() {
                value_pos[v as usize] = i as u32;
            }
        }
        let block_args = Csr::from_lengths(
            &arg_rows.iter().map(|r| r.len() as u32).collect::<Vec<_>>(),
            arg_rows.into_iter().flatten().collect(),
            "block arguments",
        )?;
        let term_rows: Vec<Vec<u32>> = (0..n_ops)
            .map(|op| children.row(op).iter().copied().filter(|&c| kind[c as usize].is_terminator()).collect())
            .collect();
        let terminators = Csr::from_lengths(
            &term_rows.iter().map(|r| r.len() as u32).collect::<Vec<_>>(),
            term_rows.into_iter().flatten().collect(),
            "terminators",
        )?;

        // MLIR creates an op after the ops of its regions (post-order), each operand adding a
        // use at the front of its value's use list.
        let post = post_order(graph);
        let mut forward = vec![false; n_values];
        for &v in &facts.forward_use_order_values {
            check_index("value", v, n_values)?;
            forward[v as usize] = true;
        }
        let mut uses: Vec<Vec<(u32, u32)>> = vec![Vec::new(); n_values];
        for op in 0..n_ops {
            for (k, &v) in graph.operands.row(op).iter().enumerate() {
                uses[v as usize].push((op as u32, k as u32));
            }
        }
        for (v, u) in uses.iter_mut().enumerate() {
            u.sort_by_key(|&(op, k)| (post[op as usize], k));
            if !forward[v] {
                u.reverse();
            }
        }

        let mut non_tensor = vec![false; n_values];
        for &v in &facts.non_tensor_values {
            check_index("value", v, n_values)?;
            non_tensor[v as usize] = true;
        }
        let mut callee = FastMap::default();
        let mut callers: FastMap<u32, Vec<u32>> = FastMap::default();
        let mut calls = facts.callees.clone();
        calls.sort_unstable();
        for &(call, func) in &calls {
            check_index("op", call, n_ops)?;
            check_index("op", func, n_ops)?;
            if kind[call as usize] != OpKind::Call || kind[func as usize] != OpKind::Func {
                return Err(Error::invariant(
                    "propagation-bad-callee",
                    format!(
                        "op {call} ({}) is given callee op {func} ({}); expected a func.call and a func.func",
                        graph.name(call as usize),
                        graph.name(func as usize)
                    ),
                ));
            }
            callee.insert(call, func);
            callers.entry(func).or_default().push(call);
        }
        let mut symbol_used = vec![false; n_ops];
        for &f in &facts.symbol_users {
            check_index("op", f, n_ops)?;
            symbol_used[f as usize] = true;
        }
        let mut manual_axes = FastMap::default();
        for (op, axes) in &facts.manual_axes {
            check_index("op", *op, n_ops)?;
            manual_axes.insert(*op, axes.clone());
        }
        let mut barrier_direction = FastMap::default();
        for &(op, d) in &facts.barrier_directions {
            check_index("op", op, n_ops)?;
            barrier_direction.insert(op, d);
        }
        // Shardy's `ShardingGroupMap`: the input of each `sdy.sharding_group`, by group id.
        let mut group_of: FastMap<u32, usize> = FastMap::default();
        let mut groups: Vec<(i64, Vec<u32>)> = Vec::new();
        let mut group_index: FastMap<i64, usize> = FastMap::default();
        let mut ops_with_groups = facts.sharding_groups.clone();
        ops_with_groups.sort_unstable();
        for &(op, id) in &ops_with_groups {
            check_index("op", op, n_ops)?;
            let Some(&v) = graph.operands.row(op as usize).first() else {
                return Err(Error::invariant(
                    "propagation-bad-group",
                    format!("sharding group op {op} has no operand"),
                ));
            };
            let g = *group_index.entry(id).or_insert_with(|| {
                groups.push((id, Vec::new()));
                groups.len() - 1
            });
            match group_of.get(&v) {
                Some(&other) if other != g => {
                    return Err(Error::invariant(
                        "propagation-value-in-two-groups",
                        format!(
                            "value {v} is in sharding groups {} and {id}; a value can be in one group only",
                            groups[other].0
                        ),
                    ))
                }
                Some(_) => {}
                None => {
                    group_of.insert(v, g);
                }
            }
            groups[g].1.push(v);
        }
        // Shardy indexes groups by id (0..N after import): process them in id order.
        let mut order: Vec<usize> = (0..groups.len()).collect();
        order.sort_by_key(|&g| groups[g].0);
        let remap: FastMap<usize, usize> = order.iter().enumerate().map(|(new, &old)| (old, new)).collect();
        let groups: Vec<(i64, Vec<u32>)> = order.iter().map(|&g| groups[g].clone()).collect();
        let group_of = group_of.into_iter().map(|(v, g)| (v, remap[&g])).collect();
        if let Some(m) = facts.main_func {
            check_index("op", m, n_ops)?;
        }
        Ok(Program {
            graph,
            kind,
            elementwise,
            effects,
            offload,
            children,
            block_args,
            terminators,
            value_pos,
            uses,
            non_tensor,
            callee,
            callers,
            symbol_used,
            manual_axes,
            barrier_direction,
            group_of,
            groups,
            main_func: facts.main_func,
            identity_rules: Mutex::new(FastMap::default()),
            initial_shardable: OnceLock::new(),
        })
    }

    /// The op defining `v`, if `v` is an op result.
    pub fn def(&self, v: u32) -> Option<u32> {
        let d = self.graph.value_def[v as usize];
        (d != NONE).then_some(d)
    }

    /// The op whose region declares the block argument `v`, if it is one.
    pub fn block_owner(&self, v: u32) -> Option<u32> {
        let o = self.graph.value_block_owner[v as usize];
        (o != NONE).then_some(o)
    }

    /// The op defining `v`, or owning the block that declares it.
    pub fn owning_op(&self, v: u32) -> u32 {
        self.def(v).or_else(|| self.block_owner(v)).unwrap_or(NONE)
    }

    /// The operands of `op`.
    pub fn operands(&self, op: u32) -> &[u32] {
        self.graph.operands.row(op as usize)
    }

    /// The results of `op`.
    pub fn results(&self, op: u32) -> &[u32] {
        self.graph.results.row(op as usize)
    }

    /// The op whose region holds `op`.
    pub fn parent(&self, op: u32) -> Option<u32> {
        let p = self.graph.op_parent[op as usize];
        (p != NONE).then_some(p)
    }

    /// The dimension sizes of `v` (-1 dynamic).
    pub fn shape(&self, v: u32) -> &[i64] {
        self.graph.shape(v as usize)
    }

    /// A ranked tensor with a static shape (Shardy `dynCastStaticShapedType`).
    pub fn is_static_tensor(&self, v: u32) -> bool {
        !self.non_tensor[v as usize] && self.shape(v).iter().all(|&d| d >= 0)
    }

    /// The identity rule of `num_operands` operands and one result of the shape of `v`
    /// (`RuleBuilder::identity`; what Shardy propagates data flow edges and function results
    /// with), built once per program.
    pub fn identity_rule(&self, v: u32, num_operands: usize) -> Arc<OpShardingRule> {
        let mut rules = self.identity_rules.lock().unwrap_or_else(|e| e.into_inner());
        rules
            .entry((v, num_operands))
            .or_insert_with(|| Arc::new(RuleBuilder::identity(self.shape(v), num_operands, 1)))
            .clone()
    }

    /// A rank-0 tensor (Shardy `isScalar`).
    pub fn is_scalar(&self, v: u32) -> bool {
        !self.non_tensor[v as usize] && self.shape(v).is_empty()
    }

    /// The terminator of region `region` of `op`.
    pub fn terminator(&self, op: u32, region: usize) -> Option<u32> {
        self.terminators.row(op as usize).get(region).copied()
    }

    /// The terminator of the body of `op`: region 1 of a while, region 0 otherwise (Shardy
    /// `getBodyTerminator`).
    pub fn body_terminator(&self, op: u32) -> Option<u32> {
        let region = usize::from(self.kind[op as usize] == OpKind::While);
        self.terminator(op, region)
    }

    /// The function `op` is nested in.
    pub fn enclosing_func(&self, mut op: u32) -> Option<u32> {
        loop {
            if self.kind[op as usize] == OpKind::Func {
                return Some(op);
            }
            op = self.parent(op)?;
        }
    }
}

/// Post-order number of each op (ops numbered in pre-order, each after its parent).
fn post_order(graph: &Graph) -> Vec<u32> {
    let n = graph.num_ops();
    let mut post = vec![0u32; n];
    let mut next = 0u32;
    let mut open: Vec<u32> = Vec::new();
    for op in 0..n {
        let parent = graph.op_parent[op];
        while let Some(&top) = open.last() {
            if top == parent {
                break;
            }
            post[top as usize] = next;
            next += 1;
            open.pop();
        }
        open.push(op as u32);
    }
    while let Some(top) = open.pop() {
        post[top as usize] = next;
        next += 1;
    }
    post
}
