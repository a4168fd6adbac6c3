//! Bindings for the frozen program.

use std::sync::Arc;

use pyo3::prelude::*;

use super::errors::IntoPyResult;
use super::rule::PyRule;
use super::walk::PyProgramWalk;
use crate::graph::{Graph, GraphInput};

/// A frozen program (``rust/src/graph.rs``): flat arrays of values and ops, read by the solver.
#[pyclass(frozen, module = "shardwise._native", name = "FrozenGraph")]
pub struct PyGraph {
    pub inner: Arc<Graph>,
}

#[pymethods]
impl PyGraph {
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        names: Vec<String>,
        op_name: Vec<u32>,
        op_parent: Vec<u32>,
        operand_counts: Vec<u32>,
        operands: Vec<u32>,
        result_counts: Vec<u32>,
        results: Vec<u32>,
        ranks: Vec<u32>,
        dims: Vec<i64>,
        value_block_owner: Vec<u32>,
        rules: Vec<PyRule>,
        op_rule: Vec<u32>,
    ) -> PyResult<Self> {
        let rules = rules.into_iter().map(|r| r.0).collect();
        let input = GraphInput {
            names,
            op_name,
            op_parent,
            operand_counts,
            operands,
            result_counts,
            results,
            ranks,
            dims,
            value_block_owner,
            rules,
            op_rule,
        };
        let g = py.detach(|| Graph::new(input)).py(py)?;
        Ok(PyGraph { inner: Arc::new(g) })
    }

    /// The graph of a walked program (``walk_program``) with its rules: ``rules`` (distinct
    /// rules) and ``class_rule`` (per signature class of the walk, an index into them or
    /// 2**32-1; empty: no rules), which each op takes from its class. Raises ``ValueError``
    /// for a class missing from ``class_rule`` and as the constructor does.
    #[staticmethod]
    fn from_walk(py: Python<'_>, walk: &PyProgramWalk, rules: Vec<PyRule>, class_rule: Vec<u32>) -> PyResult<Self> {
        let rules = rules.into_iter().map(|r| r.0).collect();
        let op_rule = if class_rule.is_empty() {
            Vec::new()
        } else {
            if class_rule.len() != walk.class_rep.len() {
                return Err(pyo3::exceptions::PyValueError::new_err(format!(
                    "class_rule has {} entries, the walk {} classes",
                    class_rule.len(),
                    walk.class_rep.len()
                )));
            }
            walk.op_class.iter().map(|&c| class_rule[c as usize]).collect()
        };
        let input = GraphInput { rules, op_rule, ..walk.graph.clone() };
        let g = py.detach(|| Graph::new(input)).py(py)?;
        Ok(PyGraph { inner: Arc::new(g) })
    }

    #[getter]
    fn num_ops(&self) -> usize {
        self.inner.num_ops()
    }

    #[getter]
    fn num_values(&self) -> usize {
        self.inner.num_values()
    }

    /// Bytes held by the flat arrays.
    #[getter]
    fn nbytes(&self) -> usize {
        self.inner.bytes()
    }

    fn op_name(&self, op: usize) -> PyResult<String> {
        self.check_op(op)?;
        Ok(self.inner.name(op).to_string())
    }

    fn operands(&self, op: usize) -> PyResult<Vec<u32>> {
        self.check_op(op)?;
        Ok(self.inner.operands.row(op).to_vec())
    }

    fn results(&self, op: usize) -> PyResult<Vec<u32>> {
        self.check_op(op)?;
        Ok(self.inner.results.row(op).to_vec())
    }

    fn users(&self, value: usize) -> PyResult<Vec<u32>> {
        self.check_value(value)?;
        Ok(self.inner.users.row(value).to_vec())
    }

    fn shape(&self, value: usize) -> PyResult<Vec<i64>> {
        self.check_value(value)?;
        Ok(self.inner.shape(value).to_vec())
    }

    /// The op defining ``value``, or None for a block argument.
    fn defining_op(&self, value: usize) -> PyResult<Option<u32>> {
        self.check_value(value)?;
        let d = self.inner.value_def[value];
        Ok((d != crate::graph::NONE).then_some(d))
    }

    /// The op's sharding rule as Shardy's text, or None.
    fn rule(&self, op: usize) -> PyResult<Option<String>> {
        self.check_op(op)?;
        Ok(self.inner.rule(op).map(crate::rule::print_rule))
    }

    /// Per op, the index of its rule among the distinct rules (2**32-1: none; every op when
    /// frozen without rules).
    #[getter]
    fn op_rules(&self) -> Vec<u32> {
        self.inner.op_rule.clone()
    }

    /// The ops named one of ``names``, in index (pre-)order.
    fn ops_named(&self, names: Vec<String>) -> Vec<u32> {
        let wanted: Vec<bool> = self.inner.names.iter().map(|n| names.contains(n)).collect();
        (0..self.inner.op_name.len() as u32).filter(|&op| wanted[self.inner.op_name[op as usize] as usize]).collect()
    }

    /// Number of distinct rules.
    #[getter]
    fn num_rules(&self) -> usize {
        self.inner.rules.len()
    }

    fn parent(&self, op: usize) -> PyResult<Option<u32>> {
        self.check_op(op)?;
        let p = self.inner.op_parent[op];
        Ok((p != crate::graph::NONE).then_some(p))
    }
}

impl PyGraph {
    fn check_op(&self, op: usize) -> PyResult<()> {
        if op >= self.inner.num_ops() {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "op {op} out of range ({} ops)",
                self.inner.num_ops()
            )));
        }
        Ok(())
    }
    fn check_value(&self, v: usize) -> PyResult<()> {
        if v >= self.inner.num_values() {
            return Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "value {v} out of range ({} values)",
                self.inner.num_values()
            )));
        }
        Ok(())
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyGraph>()
}
