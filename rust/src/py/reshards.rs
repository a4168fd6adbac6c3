//! Bindings of `export::explicit_reshards`: the plans of `sdy-insert-explicit-reshards` as
//! frozen classes, read by `shardwise/passes/explicit_reshards.py`, which inserts the ops.
//! Shardings, meshes and rules cross in the plain-tuple forms of `wire.rs` and `rule.rs`.

use pyo3::prelude::*;

use super::errors::IntoPyResult;
use super::rule::RuleW;
use super::wire::{AxisW, MeshW, ShardingW};
use crate::axis::AxisRef;
use crate::error::Result;
use crate::export::{self, OpShardings, Version};
use crate::rule::OpShardingRule;
use crate::sharding::TensorSharding;

fn shardings(ws: Vec<Option<ShardingW>>) -> Result<Vec<Option<TensorSharding>>> {
    ws.into_iter().map(|w| w.map(ShardingW::into_sharding).transpose()).collect()
}

fn wires(ss: &[Option<TensorSharding>]) -> Vec<Option<ShardingW>> {
    ss.iter().map(|s| s.as_ref().map(ShardingW::from)).collect()
}

fn axes(ws: Vec<AxisW>) -> Vec<AxisRef> {
    ws.into_iter().map(AxisRef::from).collect()
}

fn axis_wires(axes: &[AxisRef]) -> Vec<AxisW> {
    axes.iter().map(AxisW::from).collect()
}

/// What `sdy-insert-explicit-reshards` inserts around one op with a sharding rule
/// (`export::OpReshards`).
#[pyclass(frozen, module = "shardwise._native", name = "OpReshards")]
pub struct PyOpReshards {
    /// Per operand: the sharding it is resharded to before the op, or None.
    #[pyo3(get)]
    operands: Vec<Option<ShardingW>>,
    /// Per result: the sharding the op now produces (a reshard restores the old one), or None.
    #[pyo3(get)]
    results: Vec<Option<ShardingW>>,
    /// Axes of an all-reduce of every result after the op; empty for none.
    #[pyo3(get)]
    all_reduce_axes: Vec<AxisW>,
}

/// Plans the reshards and all-reduce around one op (`export::plan_op`). `version` is `"full"`,
/// `"dot"` or `"basic"`; `sizes` and `other_device_order` list the operands, then the results.
/// Raises `ProgramError` where Shardy fails the op, `ShardingError` for a sharding that does
/// not fit the rule or the mesh.
#[pyfunction]
#[pyo3(signature = (*, rule, operands, results, mesh_name, mesh, sizes, other_device_order, version, is_reshape, direct_operands=None, direct_other_device_order=None))]
#[allow(clippy::too_many_arguments)]
fn explicit_reshards_plan(
    py: Python<'_>,
    rule: RuleW,
    operands: Vec<Option<ShardingW>>,
    results: Vec<Option<ShardingW>>,
    mesh_name: String,
    mesh: MeshW,
    sizes: Vec<i64>,
    other_device_order: Vec<bool>,
    version: &str,
    is_reshape: bool,
    direct_operands: Option<Vec<Option<ShardingW>>>,
    direct_other_device_order: Option<Vec<bool>>,
) -> PyResult<PyOpReshards> {
    let version = match version {
        "full" => Version::Full,
        "dot" => Version::Dot,
        "basic" => Version::Basic,
        other => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "version must be \"full\", \"dot\" or \"basic\", got {other:?}"
            )))
        }
    };
    let rule = OpShardingRule::from(rule);
    let mesh = mesh.to_mesh().py(py)?;
    let operands = shardings(operands).py(py)?;
    let results = shardings(results).py(py)?;
    let direct = direct_operands.map(shardings).transpose().py(py)?;
    let op = OpShardings {
        rule: &rule,
        operands: &operands,
        results: &results,
        direct_operands: direct.as_deref(),
        mesh_name: &mesh_name,
        mesh: &mesh,
        sizes: &sizes,
        other_device_order: &other_device_order,
        direct_other_device_order: direct_other_device_order.as_deref(),
        version,
        is_reshape,
    };
    let plan = export::plan_op(&op).py(py)?;
    Ok(PyOpReshards {
        operands: wires(&plan.operands),
        results: wires(&plan.results),
        all_reduce_axes: axis_wires(&plan.all_reduce_axes),
    })
}

/// An all-reduce of `axes` whose result has `sharding`.
#[pyclass(frozen, module = "shardwise._native", name = "AllReducePlan")]
pub struct PyAllReducePlan {
    #[pyo3(get)]
    axes: Vec<AxisW>,
    #[pyo3(get)]
    sharding: ShardingW,
}

/// The all-reduce that makes the unreduced axes of `source` that `target_unreduced` lacks
/// replicated (`export::all_reduce_to_replicated`), or None.
#[pyfunction]
fn all_reduce_to_replicated(
    py: Python<'_>,
    source: ShardingW,
    target_unreduced: Vec<AxisW>,
    mesh: MeshW,
) -> PyResult<Option<PyAllReducePlan>> {
    let (source, mesh) = (source.into_sharding().py(py)?, mesh.to_mesh().py(py)?);
    let plan = export::all_reduce_to_replicated(&source, &axes(target_unreduced), &mesh).py(py)?;
    Ok(plan.map(|(a, s)| PyAllReducePlan { axes: axis_wires(&a), sharding: ShardingW::from(&s) }))
}

/// The collectives that make a value unreduced as its user expects
/// (`export::UnreducedCollectives`), in order; None fields are not inserted.
#[pyclass(frozen, module = "shardwise._native", name = "UnreducedCollectives")]
pub struct PyUnreducedCollectives {
    /// A reshard to this sharding first.
    #[pyo3(get)]
    reshard: Option<ShardingW>,
    /// Then `sdy.replicated_to_unreduced` of these axes (empty: none) ...
    #[pyo3(get)]
    replicated_to_unreduced_axes: Vec<AxisW>,
    /// ... to this sharding.
    #[pyo3(get)]
    replicated_to_unreduced: Option<ShardingW>,
    /// Then `sdy.sharded_to_unreduced` of these axes per dimension (empty: none) ...
    #[pyo3(get)]
    sharded_to_unreduced_axes: Vec<Vec<AxisW>>,
    /// ... to this sharding.
    #[pyo3(get)]
    sharded_to_unreduced: Option<ShardingW>,
}

/// Plans the collectives from `input` to `output` (`export::unreduced_collectives`), or None.
/// Raises `ProgramError` when each has unreduced axes the other lacks.
#[pyfunction]
fn unreduced_collectives(
    py: Python<'_>,
    input: ShardingW,
    output: ShardingW,
    mesh: MeshW,
) -> PyResult<Option<PyUnreducedCollectives>> {
    let (input, output, mesh) = (input.into_sharding().py(py)?, output.into_sharding().py(py)?, mesh.to_mesh().py(py)?);
    let Some(plan) = export::unreduced_collectives(&input, &output, &mesh).py(py)? else { return Ok(None) };
    if plan.last().is_none() {
        return Ok(None);
    }
    let (r2u_axes, r2u) = plan
        .replicated_to_unreduced
        .as_ref()
        .map_or((Vec::new(), None), |(a, s)| (axis_wires(a), Some(ShardingW::from(s))));
    let (s2u_axes, s2u) = plan
        .sharded_to_unreduced
        .as_ref()
        .map_or((Vec::new(), None), |(a, s)| (a.iter().map(|d| axis_wires(d)).collect(), Some(ShardingW::from(s))));
    Ok(Some(PyUnreducedCollectives {
        reshard: plan.reshard.as_ref().map(ShardingW::from),
        replicated_to_unreduced_axes: r2u_axes,
        replicated_to_unreduced: r2u,
        sharded_to_unreduced_axes: s2u_axes,
        sharded_to_unreduced: s2u,
    }))
}

/// Shardy's `getAxisSetDiff`: the parts of `a` not in `b` (`propagation::axes::axis_set_diff`).
#[pyfunction]
fn axes_set_diff(py: Python<'_>, a: Vec<AxisW>, b: Vec<AxisW>, mesh: MeshW) -> PyResult<Vec<AxisW>> {
    let mesh = mesh.to_mesh().py(py)?;
    Ok(axis_wires(&crate::propagation::axes::axis_set_diff(&axes(a), &axes(b), &mesh).py(py)?))
}

/// Shardy's `sortAndMergeAxes`: mesh order, adjacent sub-axes merged.
#[pyfunction]
fn axes_sort_and_merge(py: Python<'_>, a: Vec<AxisW>, mesh: MeshW) -> PyResult<Vec<AxisW>> {
    let mesh = mesh.to_mesh().py(py)?;
    Ok(axis_wires(&crate::propagation::axes::sort_and_merge_axes(&axes(a), &mesh).py(py)?))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyOpReshards>()?;
    m.add_class::<PyAllReducePlan>()?;
    m.add_class::<PyUnreducedCollectives>()?;
    m.add_function(wrap_pyfunction!(explicit_reshards_plan, m)?)?;
    m.add_function(wrap_pyfunction!(all_reduce_to_replicated, m)?)?;
    m.add_function(wrap_pyfunction!(unreduced_collectives, m)?)?;
    m.add_function(wrap_pyfunction!(axes_set_diff, m)?)?;
    m.add_function(wrap_pyfunction!(axes_sort_and_merge, m)?)?;
    Ok(())
}
