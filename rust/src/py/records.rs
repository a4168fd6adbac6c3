//! The propagation solver's debugging records as objects of the extension module: what
//! `PropagationResult`'s `debug_*` getters and `group_conflicts` give, and what
//! `propagation_edges_text` takes. Each is a frozen class with named fields, made from the
//! core's record of the same meaning:
//!
//! * `Origin`: the user sharding an axis came from (`crate::propagation::debug::Origin`, Shardy
//!   `OriginSharding`);
//! * `Edge`: an axis moving from an operand or result of a step to another
//!   (`crate::propagation::debug::PropagationEdge`, Shardy `PropagationEdge`);
//! * `Layer`, `Step`, `Node`, `Hop`, `ConflictWith` and `Conflict`: the records behind
//!   `shardwise.explain` (`crate::propagation::explain`);
//! * `GroupConflict`: a sharding group whose members' shardings conflict
//!   (`crate::propagation::solver`).
//!
//! Indices of ops and values are those of the frozen program the solver ran on.

use pyo3::prelude::*;

use super::repr::{axis_objects, PyAxis, PySharding};
use crate::propagation::debug::{EdgeNode, EdgeNodeKind, Origin, PropagationEdge};
use crate::propagation::explain::{Conflict, Hop, LayerTag, StepRecord};

/// The user sharding an axis came from: `kind` (`"input"`, `"constraint"`, `"output"`,
/// `"mc_input"` or `"mc_output"`), the argument, result or in/out sharding `index` (0 for a
/// constraint) and `source_id`, the module-wide number of the constraint or manual
/// computation (0 otherwise). `str()` is Shardy's text: `input: 0`, `constraint_2`,
/// `mc_0_output: 1`.
#[pyclass(frozen, eq, hash, module = "shardwise._native", name = "Origin")]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyOrigin(pub Origin);

#[pymethods]
impl PyOrigin {
    #[getter]
    fn kind(&self) -> &'static str {
        self.0.kind.name()
    }

    #[getter]
    fn index(&self) -> i64 {
        self.0.index
    }

    #[getter]
    fn source_id(&self) -> i64 {
        self.0.source_id
    }

    fn __str__(&self) -> String {
        self.0.to_string()
    }
}

/// A propagation edge: the axis moved from operand or result `source_index` (`source_kind`,
/// `"operand"` or `"result"`) of the op to `target_index` (`target_kind`) at step `step`.
/// Built from Python for `propagation_edges_text`: raises `ValueError` for another kind.
#[pyclass(frozen, from_py_object, eq, hash, module = "shardwise._native", name = "Edge")]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyEdge(pub PropagationEdge);

fn node_kind(kind: &str) -> PyResult<EdgeNodeKind> {
    EdgeNodeKind::from_name(kind).ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(format!(
            "unknown edge node kind {kind:?}; expected \"operand\" or \"result\""
        ))
    })
}

#[pymethods]
impl PyEdge {
    #[new]
    fn new(source_kind: &str, source_index: i64, target_kind: &str, target_index: i64, step: i64) -> PyResult<Self> {
        Ok(PyEdge(PropagationEdge {
            source: EdgeNode { kind: node_kind(source_kind)?, index: source_index },
            target: EdgeNode { kind: node_kind(target_kind)?, index: target_index },
            step,
        }))
    }

    #[getter]
    fn source_kind(&self) -> &'static str {
        self.0.source.kind.name()
    }

    #[getter]
    fn source_index(&self) -> i64 {
        self.0.source.index
    }

    #[getter]
    fn target_kind(&self) -> &'static str {
        self.0.target.kind.name()
    }

    #[getter]
    fn target_index(&self) -> i64 {
        self.0.target.index
    }

    #[getter]
    fn step(&self) -> i64 {
        self.0.step
    }
}

/// The propagation layer of a round: `user_priority` (`None` outside
/// `sdy-user-priority-propagate`), `op_priority` step (0 to 4; `None` outside
/// `sdy-op-priority-propagate`) and the factor propagation `strategy` (`"basic"` or
/// `"aggressive"`).
#[pyclass(frozen, get_all, eq, module = "shardwise._native", name = "Layer")]
#[derive(Clone, PartialEq)]
pub struct PyLayer {
    user_priority: Option<i64>,
    op_priority: Option<u8>,
    strategy: &'static str,
}

impl PyLayer {
    pub fn of(l: &LayerTag) -> Self {
        PyLayer { user_priority: l.user_priority, op_priority: l.op_priority, strategy: l.strategy.name() }
    }
}

/// A propagation step: its number `step`, the `op` propagated through (for a function's
/// results, the function) and the `layer` that ran it.
#[pyclass(frozen, get_all, eq, module = "shardwise._native", name = "Step")]
#[derive(PartialEq)]
pub struct PyStep {
    step: i64,
    op: u32,
    layer: PyLayer,
}

impl PyStep {
    pub fn of(s: &StepRecord) -> Self {
        PyStep { step: s.step, op: s.op, layer: PyLayer::of(&s.layer) }
    }
}

/// An operand (`kind` `"operand"`) or result (`"result"`) of a step, by position `index`
/// among the step's tensors, and the `value` holding its sharding (`None` when none).
#[pyclass(frozen, get_all, eq, module = "shardwise._native", name = "Node")]
#[derive(Clone, PartialEq)]
pub struct PyNode {
    kind: &'static str,
    index: i64,
    value: Option<u32>,
}

impl PyNode {
    fn of(n: &EdgeNode, value: Option<u32>) -> Self {
        PyNode { kind: n.kind.name(), index: n.index, value }
    }
}

/// Axis `axis` moving through `op` from `source` to `target` at step `step`, along `factor`
/// of the op's rule (`None` when the axis merges sub-axes that no single factor holds).
#[pyclass(frozen, get_all, eq, module = "shardwise._native", name = "Hop")]
#[derive(PartialEq)]
pub struct PyHop {
    step: i64,
    op: u32,
    axis: PyAxis,
    factor: Option<usize>,
    source: PyNode,
    target: PyNode,
}

impl PyHop {
    pub fn of(h: &Hop) -> Self {
        PyHop {
            step: h.step,
            op: h.op,
            axis: PyAxis(h.axis.clone()),
            factor: h.factor,
            source: PyNode::of(&h.source, h.source_value),
            target: PyNode::of(&h.target, h.target_value),
        }
    }
}

/// What an axis conflicted with: `tensor` of the op, its `factor` and `axis` involved
/// (`None` where no single one is).
#[pyclass(frozen, get_all, eq, module = "shardwise._native", name = "ConflictWith")]
#[derive(Clone, PartialEq)]
pub struct PyConflictWith {
    tensor: PyNode,
    factor: Option<usize>,
    axis: Option<PyAxis>,
}

/// Axes `axes` (the first not taken, then those after it in the source) of `factor` that
/// `target` could not take from `source` when `op` was visited, in `layer`, for `reason`
/// (`crate::propagation::explain::ConflictReason::name`), conflicting with `with_`. `visit`
/// orders conflicts (each is kept at its last visit); `step` is that visit's step when it
/// changed a sharding.
#[pyclass(frozen, get_all, eq, module = "shardwise._native", name = "Conflict")]
#[derive(PartialEq)]
pub struct PyConflict {
    visit: u64,
    step: Option<i64>,
    op: u32,
    layer: PyLayer,
    factor: usize,
    target: PyNode,
    source: PyNode,
    axes: Vec<PyAxis>,
    reason: &'static str,
    with_: Option<PyConflictWith>,
}

impl PyConflict {
    pub fn of(c: &Conflict) -> Self {
        let s = &c.conflict;
        PyConflict {
            visit: c.visit,
            step: c.step,
            op: c.op,
            layer: PyLayer::of(&c.layer),
            factor: s.factor,
            target: PyNode::of(&s.target, c.target_value),
            source: PyNode::of(&s.source, c.source_value),
            axes: axis_objects(&s.axes),
            reason: s.reason.name(),
            with_: s.with.as_ref().map(|w| PyConflictWith {
                tensor: PyNode::of(&w.tensor, c.with_value),
                factor: w.factor,
                axis: w.axis.clone().map(PyAxis),
            }),
        }
    }
}

/// A sharding group `group_id` whose `members` (values) have conflicting shardings, and the
/// first member's `sharding`.
#[pyclass(frozen, get_all, eq, module = "shardwise._native", name = "GroupConflict")]
#[derive(PartialEq)]
pub struct PyGroupConflict {
    group_id: i64,
    members: Vec<u32>,
    sharding: PySharding,
}

impl PyGroupConflict {
    pub fn new(group_id: i64, members: Vec<u32>, sharding: PySharding) -> Self {
        PyGroupConflict { group_id, members, sharding }
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyOrigin>()?;
    m.add_class::<PyEdge>()?;
    m.add_class::<PyLayer>()?;
    m.add_class::<PyStep>()?;
    m.add_class::<PyNode>()?;
    m.add_class::<PyHop>()?;
    m.add_class::<PyConflictWith>()?;
    m.add_class::<PyConflict>()?;
    m.add_class::<PyGroupConflict>()?;
    Ok(())
}
