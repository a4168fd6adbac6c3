//! Sharding propagation (Shardy's propagation algorithm, `shardy/dialect/sdy/transforms/
//! propagation/`): projection of dimension shardings onto an op's factors ([`projection`]),
//! operations on axis lists it needs ([`axes`]), and the factor propagation strategies
//! ([`factor_prop`]), and the fixed-point solver over a frozen program ([`solver`], with the
//! program structure it derives in [`program`], the sharding rewrites of [`transforms`] and the
//! pass layers basic < aggressive < op-priority < user-priority in [`layers`]), which can record
//! where each propagated axis came from ([`debug`]) and, for `shardwise.explain`, which layer
//! took each step and why axes were dropped ([`explain`]). The solver skips op visits known to
//! change nothing (`visit_cache`), looks up the outcome of a step through an op with its rule by
//! what the step reads, wherever in the program it met that step before ([`step_cache`]), keeps
//! each op's directions by the policy's signature ([`direction_table`]), and many solves of one
//! program ([`batch`]) replay the steps of a base solve where their inputs recur
//! ([`step_memo`]).

pub mod axes;
pub mod batch;
pub mod debug;
pub mod direction_table;
pub mod explain;
pub mod factor_prop;
pub mod layers;
pub mod program;
pub mod projection;
pub mod solver;
pub mod step_cache;
pub mod step_memo;
pub mod transforms;
mod visit_cache;

pub use batch::{propagate_candidates, Candidate, CandidateBatch, CandidateOutput};
pub use debug::{DebugOptions, EdgeNode, EdgeNodeKind, Origin, OriginKind, PropagationEdge, ShardingDebug};
pub use factor_prop::{
    direction_with_blocked_factors, AggressiveFactorPropagation, BasicFactorPropagation, FactorPropagation, OpInfo,
    PropagationDirection,
};
pub use layers::{
    propagate, FactorLayer, Layer, OpPriorityLayer, Pass, PassOptions, SolveCaches, StrategyKind, UserPriorityLayer,
};
pub use program::{OpKind, Program, ProgramFacts};
pub use projection::{
    axis_list_prefix_status, common_mesh_ref, distribute_axes_across_factors, is_strict_prefix, BitSet, FactorSharding,
    PrefixStatus, ShardingProjection, TensorFactorShardings, UpdateTensorShardings,
};
pub use solver::{AnyDirection, DirectionPolicy, GroupConflict, Solver, SolverInput, SolverOutput, SolverStats};
