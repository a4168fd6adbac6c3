//! Bindings for the builtin sharding rule registry (`crate::rules`): Python's `rule_for`
//! (`shardwise/rules/registry.py`) hands an `OpInfo` here after the user's rules.
//!
//! An `OpInfo` is read attribute by attribute. Only the ops whose rule reads more than the op
//! itself (`CONTEXT_OPS`) are read deep: the producers of their operands (one level, and
//! their operands' identities), their users, and their region (two levels, for the scatter's
//! reduction).

use pyo3::prelude::*;
use pyo3::types::{PyMapping, PyTuple};

use super::rule::{PyRule, RulePy};
use crate::rules::{self, Builtin, OpDesc, ValueDesc};

/// What the registry gives an op: `status` is `"rule"` (then `rule` holds it), `"none"`
/// (Shardy deliberately creates none) or `"unknown"` (Shardy creates none and warns).
#[pyclass(frozen, module = "shardwise._native")]
pub struct BuiltinRule {
    #[pyo3(get)]
    status: &'static str,
    #[pyo3(get)]
    rule: Option<PyRule>,
}

/// The registry's name lists.
#[pyclass(frozen, module = "shardwise._native")]
pub struct RuleRegistry {
    /// Op names with a builtin rule (`stablehlo.custom_call` included).
    #[pyo3(get)]
    builtin_ops: Vec<&'static str>,
    /// Custom-call targets with a builtin rule.
    #[pyo3(get)]
    custom_call_targets: Vec<&'static str>,
    /// Ops Shardy deliberately gives no rule, without a warning.
    #[pyo3(get)]
    no_rule_ops: Vec<&'static str>,
    /// Block terminators.
    #[pyo3(get)]
    terminator_ops: Vec<&'static str>,
    /// Custom-call targets Shardy deliberately gives no rule.
    #[pyo3(get)]
    no_rule_targets: Vec<&'static str>,
    /// Ops whose rule reads more than the op itself (never memoised by signature).
    #[pyo3(get)]
    context_ops: Vec<&'static str>,
}

/// Deepest producer level read (the op is level 0).
const MAX_DEPTH: u8 = 2;

fn value_desc(v: &Bound<'_, PyAny>, depth: u8, deep: bool) -> PyResult<ValueDesc> {
    let is_tensor: bool = v.getattr("is_tensor")?.extract()?;
    let mut desc = ValueDesc {
        shape: v.getattr("shape")?.extract()?,
        element_type: v.getattr("element_type")?.extract()?,
        is_tensor,
        identity: Some(v.as_ptr() as u64),
        value_id: v.getattr("value_id")?.extract()?,
        ..Default::default()
    };
    if deep {
        desc.users = v.getattr("users")?.extract()?;
        if depth < MAX_DEPTH {
            let defining = v.getattr("defining_op")?;
            if !defining.is_none() {
                desc.defining_op = Some(Box::new(op_desc(&defining, depth + 1, true)?));
            }
        }
    }
    Ok(desc)
}

fn values(t: &Bound<'_, PyAny>, depth: u8, deep: bool) -> PyResult<Vec<ValueDesc>> {
    t.try_iter()?.map(|v| value_desc(&v?, depth, deep)).collect()
}

fn op_desc(op: &Bound<'_, PyAny>, depth: u8, deep: bool) -> PyResult<OpDesc> {
    let attrs = op.getattr("attributes")?;
    let attrs = attrs.cast::<PyMapping>()?;
    let mut attributes = Vec::with_capacity(attrs.len()?);
    for item in attrs.items()?.iter() {
        let item = item.cast::<PyTuple>()?.clone();
        attributes.push((item.get_item(0)?.extract()?, item.get_item(1)?.extract()?));
    }
    let mut desc = OpDesc {
        name: op.getattr("name")?.extract()?,
        operands: values(&op.getattr("operands")?, depth, deep)?,
        results: values(&op.getattr("results")?, depth, deep)?,
        attributes,
        regions: Vec::new(),
    };
    if deep && depth == 0 {
        for region in op.getattr("regions")?.try_iter()? {
            let mut blocks = Vec::new();
            for block in region?.try_iter()? {
                let block = block?;
                let operations: PyResult<Vec<OpDesc>> =
                    block.getattr("operations")?.try_iter()?.map(|o| op_desc(&o?, depth + 1, true)).collect();
                blocks.push(rules::BlockDesc {
                    arguments: values(&block.getattr("arguments")?, depth + 1, false)?,
                    operations: operations?,
                });
            }
            desc.regions.push(blocks);
        }
    }
    Ok(desc)
}

/// The builtin rule of `op` (a `shardwise.rules.OpInfo`). Raises `OpInfoError` for a missing
/// or malformed attribute or shapes that do not fit the op, `InvalidRuleError` when the
/// builder rejects a dimension.
#[pyfunction]
#[pyo3(signature = (op, conservative = false))]
fn builtin_rule(py: Python<'_>, op: &Bound<'_, PyAny>, conservative: bool) -> PyResult<BuiltinRule> {
    let name: String = op.getattr("name")?.extract()?;
    let deep = rules::CONTEXT_OPS.contains(&name.as_str());
    let desc = op_desc(op, 0, deep)?;
    Ok(match rules::builtin_rule(&desc, conservative).py(py)? {
        Builtin::Rule(r) => BuiltinRule { status: "rule", rule: Some(PyRule(r)) },
        Builtin::NoRule => BuiltinRule { status: "none", rule: None },
        Builtin::Unknown => BuiltinRule { status: "unknown", rule: None },
    })
}

/// The target of a `stablehlo.custom_call` op named `name` with `attributes` (its
/// `call_target_name` string). Raises `OpInfoError` when it is missing or not a string.
#[pyfunction]
fn custom_call_target(py: Python<'_>, name: String, attributes: Vec<(String, String)>) -> PyResult<String> {
    let desc = OpDesc { name, attributes, ..Default::default() };
    rules::attrs::string(&desc, "call_target_name", None).py(py)
}

/// The registry's name lists.
#[pyfunction]
fn rule_registry() -> RuleRegistry {
    RuleRegistry {
        builtin_ops: rules::builtin_op_names(),
        custom_call_targets: rules::custom_call_targets(),
        no_rule_ops: rules::NO_RULE_OPS.to_vec(),
        terminator_ops: rules::TERMINATOR_OPS.to_vec(),
        no_rule_targets: rules::NO_RULE_TARGETS.to_vec(),
        context_ops: rules::CONTEXT_OPS.to_vec(),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<BuiltinRule>()?;
    m.add_class::<RuleRegistry>()?;
    m.add_function(wrap_pyfunction!(builtin_rule, m)?)?;
    m.add_function(wrap_pyfunction!(custom_call_target, m)?)?;
    m.add_function(wrap_pyfunction!(rule_registry, m)?)?;
    Ok(())
}
