//! Bindings for operation sharding rules (`crate::rule`). A rule crosses the FFI as the frozen
//! `Rule` object (`PyRule`, fields by name: a mapping is a list of dimensions, a dimension a
//! list of factor indices); `shardwise/rules/rule.py`'s `OpShardingRule` holds one.
//!
//! Invariant errors of rules raise `InvalidRuleError` (a subclass of `InvalidShardingError`,
//! with `.rule`); malformed text raises `ShardingParseError` (with `.offset`).

use pyo3::create_exception;
use pyo3::prelude::*;

use super::errors::{self, InvalidShardingError};
use crate::error::{Error, ErrorKind};
use crate::rule::{self, EinsumOptions, FactorKind, OpShardingRule, RuleBuilder};

create_exception!(
    shardwise,
    InvalidRuleError,
    InvalidShardingError,
    "An operation sharding rule breaks an invariant, or cannot be built for the op; `rule` names it."
);

/// An operation sharding rule (`crate::rule::OpShardingRule`), immutable; built unchecked
/// (`check_local` and `validate` check it), as Shardy's builder does.
#[pyclass(frozen, from_py_object, eq, hash, module = "shardwise._native", name = "Rule")]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyRule(pub OpShardingRule);

#[pymethods]
impl PyRule {
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        factor_sizes: Vec<i64>,
        operand_mappings: Vec<Vec<Vec<i64>>>,
        result_mappings: Vec<Vec<Vec<i64>>>,
        reduction_factors: Vec<i64>,
        need_replication_factors: Vec<i64>,
        permutation_factors: Vec<i64>,
        blocked_propagation_factors: Vec<i64>,
        is_custom: bool,
    ) -> Self {
        PyRule(OpShardingRule {
            factor_sizes,
            operand_mappings,
            result_mappings,
            reduction_factors,
            need_replication_factors,
            permutation_factors,
            blocked_propagation_factors,
            is_custom,
        })
    }

    #[getter]
    fn factor_sizes(&self) -> Vec<i64> {
        self.0.factor_sizes.clone()
    }

    /// Per operand, per dimension, the factor indices (major to minor).
    #[getter]
    fn operand_mappings(&self) -> Vec<Vec<Vec<i64>>> {
        self.0.operand_mappings.clone()
    }

    #[getter]
    fn result_mappings(&self) -> Vec<Vec<Vec<i64>>> {
        self.0.result_mappings.clone()
    }

    #[getter]
    fn reduction_factors(&self) -> Vec<i64> {
        self.0.reduction_factors.clone()
    }

    #[getter]
    fn need_replication_factors(&self) -> Vec<i64> {
        self.0.need_replication_factors.clone()
    }

    #[getter]
    fn permutation_factors(&self) -> Vec<i64> {
        self.0.permutation_factors.clone()
    }

    #[getter]
    fn blocked_propagation_factors(&self) -> Vec<i64> {
        self.0.blocked_propagation_factors.clone()
    }

    #[getter]
    fn is_custom(&self) -> bool {
        self.0.is_custom
    }

    /// The type-free invariants (`InvalidRuleError`).
    fn check_local(&self, py: Python<'_>) -> PyResult<()> {
        self.0.check_local().py(py)
    }

    /// Checks the rule against operand and result shapes (None for a value that is not a
    /// tensor); `InvalidRuleError`.
    #[pyo3(signature = (operand_shapes, result_shapes, exact_sizes=false))]
    fn validate(
        &self,
        py: Python<'_>,
        operand_shapes: Vec<Option<Vec<i64>>>,
        result_shapes: Vec<Option<Vec<i64>>>,
        exact_sizes: bool,
    ) -> PyResult<()> {
        self.0.validate(&operand_shapes, &result_shapes, exact_sizes).py(py)
    }

    /// Shardy's text of the rule (no checks: a broken rule prints as it is).
    fn __str__(&self) -> String {
        rule::print_rule(&self.0)
    }
}

/// Which of Shardy's `OpShardingRuleBuilder` calls a `FactorStep` is, with its dimensions.
#[derive(Clone, PartialEq, Eq)]
enum StepMode {
    /// `addFactor`: explicit dimensions, one per operand and result (-1 skips a tensor).
    Dims { operand_dims: Vec<i64>, result_dims: Vec<i64> },
    /// The factor on this dimension of every tensor of rank >= 1.
    All(i64),
    /// The factor on this dimension of every operand of rank >= 1.
    Operands(i64),
    /// The factor on this dimension of every result of rank >= 1.
    Results(i64),
}

impl StepMode {
    fn name(&self) -> &'static str {
        match self {
            StepMode::Dims { .. } => "dims",
            StepMode::All(_) => "all",
            StepMode::Operands(_) => "operands",
            StepMode::Results(_) => "results",
        }
    }

    /// The operand dimensions (the one dimension of the modes for all tensors).
    fn operand_dims(&self) -> Vec<i64> {
        match self {
            StepMode::Dims { operand_dims, .. } => operand_dims.clone(),
            StepMode::All(d) | StepMode::Operands(d) | StepMode::Results(d) => vec![*d],
        }
    }

    /// The result dimensions (none for the modes for all tensors).
    fn result_dims(&self) -> Vec<i64> {
        match self {
            StepMode::Dims { result_dims, .. } => result_dims.clone(),
            _ => Vec::new(),
        }
    }
}

/// One step of a rule builder (Shardy `OpShardingRuleBuilder::addFactor` and the factors
/// added for all operands and results): made by `dims(operand_dims, result_dims, size, kind,
/// blocked)`, `for_all(dim, ...)`, `for_all_operands(dim, ...)` or `for_all_results(dim,
/// ...)`, run in order by `rule_build`. `kind` is one of `"pass_through"`, `"reduction"`,
/// `"need_replication"` and `"permutation"` (`ValueError` otherwise).
#[pyclass(frozen, from_py_object, module = "shardwise._native", name = "FactorStep")]
#[derive(Clone)]
pub struct PyFactorStep {
    mode: StepMode,
    size: i64,
    kind: FactorKind,
    blocked: bool,
}

impl PyFactorStep {
    fn of(mode: StepMode, size: i64, kind: &str, blocked: bool) -> PyResult<Self> {
        Ok(PyFactorStep { mode, size, kind: kind_of(kind)?, blocked })
    }
}

#[pymethods]
impl PyFactorStep {
    /// A factor of `size` mapped to `operand_dims[i]` of operand `i` and `result_dims[j]` of
    /// result `j` (-1: not mapped in that tensor).
    #[staticmethod]
    #[pyo3(signature = (operand_dims, result_dims, size, kind="pass_through", blocked=false))]
    fn dims(operand_dims: Vec<i64>, result_dims: Vec<i64>, size: i64, kind: &str, blocked: bool) -> PyResult<Self> {
        Self::of(StepMode::Dims { operand_dims, result_dims }, size, kind, blocked)
    }

    /// A factor mapped to dimension `dim` of every operand and result of rank >= 1.
    #[staticmethod]
    #[pyo3(signature = (dim, size, kind="pass_through", blocked=false))]
    fn for_all(dim: i64, size: i64, kind: &str, blocked: bool) -> PyResult<Self> {
        Self::of(StepMode::All(dim), size, kind, blocked)
    }

    /// A factor mapped to dimension `dim` of every operand of rank >= 1.
    #[staticmethod]
    #[pyo3(signature = (dim, size, kind="pass_through", blocked=false))]
    fn for_all_operands(dim: i64, size: i64, kind: &str, blocked: bool) -> PyResult<Self> {
        Self::of(StepMode::Operands(dim), size, kind, blocked)
    }

    /// A factor mapped to dimension `dim` of every result of rank >= 1.
    #[staticmethod]
    #[pyo3(signature = (dim, size, kind="pass_through", blocked=false))]
    fn for_all_results(dim: i64, size: i64, kind: &str, blocked: bool) -> PyResult<Self> {
        Self::of(StepMode::Results(dim), size, kind, blocked)
    }

    /// `"dims"`, `"all"`, `"operands"` or `"results"`.
    #[getter]
    fn mode(&self) -> &'static str {
        self.mode.name()
    }

    #[getter]
    fn operand_dims(&self) -> Vec<i64> {
        self.mode.operand_dims()
    }

    #[getter]
    fn result_dims(&self) -> Vec<i64> {
        self.mode.result_dims()
    }

    #[getter]
    fn size(&self) -> i64 {
        self.size
    }

    #[getter]
    fn kind(&self) -> &'static str {
        self.kind.name()
    }

    #[getter]
    fn blocked(&self) -> bool {
        self.blocked
    }
}

/// Core error into a Python exception: invariant errors become `InvalidRuleError`.
pub(super) fn to_py(py: Python<'_>, e: Error) -> PyErr {
    match e.kind {
        ErrorKind::Invariant { rule } => {
            let err = InvalidRuleError::new_err(e.message);
            let _ = err.value(py).setattr("rule", rule);
            err
        }
        _ => errors::to_py(py, e),
    }
}

pub(super) trait RulePy<T> {
    fn py(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> RulePy<T> for crate::error::Result<T> {
    fn py(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}

fn kind_of(name: &str) -> PyResult<FactorKind> {
    FactorKind::from_name(name).ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(format!(
            "unknown factor kind {name:?}; expected one of \"pass_through\", \"reduction\", \"need_replication\", \"permutation\""
        ))
    })
}

/// Ranks above this are refused (rather than allocating mappings for them).
const MAX_RANK: usize = 1 << 16;

fn ranks(py: Python<'_>, kind: &str, ranks: &[i64]) -> PyResult<Vec<usize>> {
    ranks
        .iter()
        .enumerate()
        .map(|(i, &r)| {
            usize::try_from(r).ok().filter(|&r| r <= MAX_RANK).ok_or_else(|| {
                to_py(
                    py,
                    Error::invariant(
                        "builder-dim-out-of-range",
                        format!("{kind} {i}: expected a rank in [0, {MAX_RANK}], got {r}"),
                    ),
                )
            })
        })
        .collect()
}

/// Parses `#sdy.op_sharding_rule<...>` (or the bare `<...>`) and checks its local invariants.
#[pyfunction]
fn rule_parse(py: Python<'_>, text: &str) -> PyResult<PyRule> {
    Ok(PyRule(rule::parse_rule(text).py(py)?))
}

/// Runs builder steps (`FactorStep`s, in order) and builds; a step that fails names its index,
/// mode, dimensions and size (`InvalidRuleError`).
#[pyfunction]
fn rule_build(
    py: Python<'_>,
    operand_ranks: Vec<i64>,
    result_ranks: Vec<i64>,
    steps: Vec<PyFactorStep>,
) -> PyResult<PyRule> {
    let mut b = RuleBuilder::new(&ranks(py, "operand", &operand_ranks)?, &ranks(py, "result", &result_ranks)?);
    for (i, step) in steps.iter().enumerate() {
        let PyFactorStep { mode, size, kind, blocked } = step;
        let (size, kind, blocked) = (*size, *kind, *blocked);
        let done = match mode {
            StepMode::Dims { operand_dims, result_dims } => {
                b.add_factor(operand_dims, result_dims, size, kind, blocked).map(|_| ())
            }
            StepMode::All(d) => b.add_factor_for_all(*d, size, kind, blocked).map(|_| ()),
            StepMode::Operands(d) => b.add_factor_for_all_operands(*d, size, kind, blocked).map(|_| ()),
            StepMode::Results(d) => b.add_factor_for_all_results(*d, size, kind, blocked).map(|_| ()),
        };
        done.map_err(|e| {
            let (name, a, r) = (mode.name(), mode.operand_dims(), mode.result_dims());
            e.context(format!("builder step {i} ({name} {a:?} {r:?} size {size})"))
        })
        .py(py)?;
    }
    Ok(PyRule(b.build()))
}

/// Shardy's pointwise rule: factor `d` of size `shape[d]` is dimension `d` of every value.
#[pyfunction]
fn rule_pointwise(
    py: Python<'_>,
    operand_ranks: Vec<i64>,
    result_ranks: Vec<i64>,
    shape: Vec<i64>,
) -> PyResult<PyRule> {
    let r =
        RuleBuilder::pointwise(&ranks(py, "operand", &operand_ranks)?, &ranks(py, "result", &result_ranks)?, &shape)
            .py(py)?;
    Ok(PyRule(r))
}

fn einsum_options(
    reduction: Vec<String>,
    need_replication: Vec<String>,
    permutation: Vec<String>,
    blocked: Vec<String>,
    factor_sizes: Vec<(String, i64)>,
) -> EinsumOptions {
    EinsumOptions {
        reduction_factors: reduction,
        need_replication_factors: need_replication,
        permutation_factors: permutation,
        blocked_propagation_factors: blocked,
        factor_sizes,
    }
}

/// Parses and checks a rule in JAX's einsum-like notation without binding it to shapes.
#[pyfunction]
#[pyo3(signature = (spec, reduction=vec![], need_replication=vec![], permutation=vec![], blocked=vec![], factor_sizes=vec![]))]
fn einsum_check(
    py: Python<'_>,
    spec: &str,
    reduction: Vec<String>,
    need_replication: Vec<String>,
    permutation: Vec<String>,
    blocked: Vec<String>,
    factor_sizes: Vec<(String, i64)>,
) -> PyResult<()> {
    rule::EinsumSpec::parse(spec, einsum_options(reduction, need_replication, permutation, blocked, factor_sizes))
        .py(py)?;
    Ok(())
}

/// A custom rule from JAX's einsum-like notation bound to the op's shapes.
#[pyfunction]
#[pyo3(signature = (spec, operand_shapes, result_shapes, reduction=vec![], need_replication=vec![], permutation=vec![], blocked=vec![], factor_sizes=vec![]))]
#[allow(clippy::too_many_arguments)]
fn rule_from_einsum(
    py: Python<'_>,
    spec: &str,
    operand_shapes: Vec<Vec<i64>>,
    result_shapes: Vec<Vec<i64>>,
    reduction: Vec<String>,
    need_replication: Vec<String>,
    permutation: Vec<String>,
    blocked: Vec<String>,
    factor_sizes: Vec<(String, i64)>,
) -> PyResult<PyRule> {
    let options = einsum_options(reduction, need_replication, permutation, blocked, factor_sizes);
    let r = rule::rule_from_einsum(spec, options, &operand_shapes, &result_shapes).py(py)?;
    Ok(PyRule(r))
}

/// `i`, `j`, ..., `z`, `z_1`, ...: Shardy's symbol of a factor index.
#[pyfunction]
fn factor_symbol(index: i64) -> String {
    rule::factor_symbol(index)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("InvalidRuleError", py.get_type::<InvalidRuleError>())?;
    m.add_function(wrap_pyfunction!(rule_parse, m)?)?;
    m.add_class::<PyRule>()?;
    m.add_class::<PyFactorStep>()?;
    m.add_function(wrap_pyfunction!(rule_build, m)?)?;
    m.add_function(wrap_pyfunction!(rule_pointwise, m)?)?;
    m.add_function(wrap_pyfunction!(einsum_check, m)?)?;
    m.add_function(wrap_pyfunction!(rule_from_einsum, m)?)?;
    m.add_function(wrap_pyfunction!(factor_symbol, m)?)?;
    Ok(())
}
