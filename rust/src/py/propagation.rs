//! Bindings for the propagation solver (`crate::propagation::{solver, layers}`): one function,
//! `propagate_shardings`, that runs one of Shardy's four propagation passes over a frozen
//! program, and the `PropagationResult` it returns. Shardings cross as the wire tuples of
//! `wire.rs`; the GIL is released while the solver runs.

use std::collections::HashMap;

use pyo3::prelude::*;

use super::errors::IntoPyResult;
use super::graph::PyGraph;
use super::wire::{MeshW, ShardingW};
use crate::error::Error;
use crate::propagation::layers::{direction_from_name, propagate, Pass, PassOptions, StrategyKind};
use crate::propagation::program::ProgramFacts;
use crate::propagation::solver::{SolverInput, SolverOutput};
use crate::sharding::TensorSharding;

type FuncResultsW = Vec<(u32, Vec<Option<ShardingW>>)>;

/// What a propagation pass computed (see `propagate_shardings`).
#[pyclass(frozen, module = "shardwise._native", name = "PropagationResult")]
pub struct PyPropagationResult {
    out: SolverOutput,
}

fn wire(s: &Option<TensorSharding>) -> Option<ShardingW> {
    s.as_ref().map(ShardingW::from)
}

#[pymethods]
impl PyPropagationResult {
    /// The stored sharding of each value after propagation, indexed like the input.
    #[getter]
    fn shardings(&self) -> Vec<Option<ShardingW>> {
        self.out.value_shardings.iter().map(wire).collect()
    }

    /// ``(func op, result shardings)`` for each function given.
    #[getter]
    fn func_results(&self) -> FuncResultsW {
        self.out.func_results.iter().map(|(f, r)| (*f, r.iter().map(wire).collect())).collect()
    }

    /// Ops erased because their results were unused and they have no side effects.
    #[getter]
    fn erased_ops(&self) -> Vec<u32> {
        self.out.erased_ops.clone()
    }

    /// Ops that propagated with their sharding rule (where Shardy sets the rule on the op).
    #[getter]
    fn rule_ops(&self) -> Vec<u32> {
        self.out.rule_ops.clone()
    }

    /// ``(group id, member values, first sharding)`` of each sharding group whose members'
    /// shardings conflict; when not empty, nothing was propagated.
    #[getter]
    fn group_conflicts(&self) -> Vec<(i64, Vec<u32>, ShardingW)> {
        self.out.group_conflicts.iter().map(|c| (c.group_id, c.members.clone(), ShardingW::from(&c.sharding))).collect()
    }

    /// Fixed-point rounds run.
    #[getter]
    fn rounds(&self) -> u32 {
        self.out.stats.rounds
    }

    /// Ops popped from the worklist and propagated through.
    #[getter]
    fn visits(&self) -> u64 {
        self.out.stats.visits
    }

    /// Shardings changed by propagation.
    #[getter]
    fn updates(&self) -> u64 {
        self.out.stats.updates
    }
}

fn shardings_of(py: Python<'_>, ws: Vec<Option<ShardingW>>) -> PyResult<Vec<Option<TensorSharding>>> {
    ws.into_iter().map(|w| w.map(ShardingW::into_sharding).transpose()).collect::<crate::error::Result<_>>().py(py)
}

/// Runs Shardy's propagation pass `pass_name` (``"basic"``, ``"aggressive"``,
/// ``"op-priority"``, ``"user-priority"``) over `graph`; see `shardwise.propagation` for the
/// meaning of each argument.
#[pyfunction]
#[pyo3(signature = (
    graph, meshes, shardings, func_results, *, pass_name="basic", strategy="aggressive",
    conservative=false, run_op_priority=true, main_func=None, callees=vec![], symbol_users=vec![],
    manual_axes=vec![], sharding_groups=vec![], barrier_directions=vec![], side_effecting_ops=vec![],
    offload_ops=vec![], non_tensor_values=vec![], forward_use_order_values=vec![]
))]
#[allow(clippy::too_many_arguments)]
fn propagate_shardings(
    py: Python<'_>,
    graph: &Bound<'_, PyGraph>,
    meshes: HashMap<String, MeshW>,
    shardings: Vec<Option<ShardingW>>,
    func_results: FuncResultsW,
    pass_name: &str,
    strategy: &str,
    conservative: bool,
    run_op_priority: bool,
    main_func: Option<u32>,
    callees: Vec<(u32, u32)>,
    symbol_users: Vec<u32>,
    manual_axes: Vec<(u32, Vec<String>)>,
    sharding_groups: Vec<(u32, i64)>,
    barrier_directions: Vec<(u32, String)>,
    side_effecting_ops: Vec<u32>,
    offload_ops: Vec<u32>,
    non_tensor_values: Vec<u32>,
    forward_use_order_values: Vec<u32>,
) -> PyResult<PyPropagationResult> {
    let pass = Pass::from_name(pass_name).ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(format!(
            "unknown propagation pass {pass_name:?}; expected \"basic\", \"aggressive\", \"op-priority\" or \"user-priority\""
        ))
    })?;
    let strategy = StrategyKind::from_name(strategy).ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(format!(
            "unknown propagation strategy {strategy:?}; expected \"basic\", \"aggressive\" or \"basic-then-aggressive\""
        ))
    })?;
    let meshes = meshes
        .into_iter()
        .map(|(k, m)| Ok((k, m.to_mesh()?)))
        .collect::<crate::error::Result<HashMap<_, _>>>()
        .py(py)?;
    let value_shardings = shardings_of(py, shardings)?;
    let func_results = func_results
        .into_iter()
        .map(|(f, rs)| Ok((f, shardings_of(py, rs)?)))
        .collect::<PyResult<Vec<_>>>()?;
    let barrier_directions = barrier_directions
        .into_iter()
        .map(|(op, d)| Ok((op, direction_from_name(&d)?)))
        .collect::<Result<Vec<_>, Error>>()
        .py(py)?;
    let facts = ProgramFacts {
        main_func,
        callees,
        symbol_users,
        manual_axes,
        sharding_groups,
        barrier_directions,
        side_effecting_ops,
        offload_ops,
        non_tensor_values,
        forward_use_order_values,
    };
    let input = SolverInput { meshes, value_shardings, func_results, facts };
    let options = PassOptions { pass, strategy, conservative, run_op_priority };
    let g = graph.get().inner.clone();
    let out = py.detach(|| propagate(&g, input, &options)).py(py)?;
    Ok(PyPropagationResult { out })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyPropagationResult>()?;
    m.add_function(wrap_pyfunction!(propagate_shardings, m)?)?;
    Ok(())
}
