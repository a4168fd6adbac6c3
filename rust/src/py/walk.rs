//! `walk_program`: the ops and values of a program IR module (`shardwise.ir.core`, Python
//! objects) numbered and laid out as the flat arrays of a frozen program
//! (`rust/src/graph.rs`), for `shardwise.ir.freeze`. Walking here instead of in Python reads
//! each attribute once through the C API, with no interpreter loop per op or value.
//!
//! Order (as `freeze` documents it): ops in pre-order over the module's top-level ops; an op's
//! results are numbered when the op is met, then the arguments of the blocks of its regions,
//! each block's arguments before its ops.

use std::collections::{HashMap, HashSet};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::fast_hash::FastMap;
use crate::graph::{GraphInput, NONE};

/// The deepest nesting of regions the walk follows (it recurses once per level): deeper
/// programs get a `RecursionError` instead of overflowing the thread's stack.
const MAX_NESTING: usize = 2048;

/// The flat arrays of a walked program, waiting for its rules (`FrozenGraph.from_walk`).
#[pyclass(frozen, module = "shardwise._native", name = "ProgramWalk")]
pub struct PyProgramWalk {
    /// The graph's arrays, without rules (`rules` and `op_rule` empty).
    pub graph: GraphInput,
    /// Per op, its signature class: ops of one class have the same name, equal attributes and
    /// equal operand and result types, so one sharding rule serves them all (ops
    /// named in `walk_program`'s `singletons` are alone in theirs).
    pub op_class: Vec<u32>,
    /// Per class, its first op.
    pub class_rep: Vec<u32>,
    /// Op results whose ``sharding`` is set (values).
    pub sharded_results: Vec<u32>,
    /// Every block argument (values).
    pub block_args: Vec<u32>,
    /// Values whose type is no tensor type (the ``tensor_type`` given to the walk).
    pub non_tensor_values: Vec<u32>,
    /// Ops other than functions and calls with an attribute whose text has a ``@`` (a symbol
    /// reference, perhaps).
    pub symbol_ops: Vec<u32>,
}

#[pymethods]
impl PyProgramWalk {
    /// Per class, the index of its first op (classes numbered in order of first op).
    #[getter]
    fn class_reps(&self) -> Vec<u32> {
        self.class_rep.clone()
    }

    /// Per op, its class.
    #[getter]
    fn op_classes(&self) -> Vec<u32> {
        self.op_class.clone()
    }

    /// The op results whose ``sharding`` is not None, in index order.
    #[getter]
    fn sharded_results(&self) -> Vec<u32> {
        self.sharded_results.clone()
    }

    /// Every block argument, in index order.
    #[getter]
    fn block_args(&self) -> Vec<u32> {
        self.block_args.clone()
    }

    /// The values whose type is not an instance of the walk's ``tensor_type``.
    #[getter]
    fn non_tensor_values(&self) -> Vec<u32> {
        self.non_tensor_values.clone()
    }

    /// The ops (not ``func.func`` or ``func.call``) with an attribute text holding ``@``.
    #[getter]
    fn symbol_ops(&self) -> Vec<u32> {
        self.symbol_ops.clone()
    }

    #[getter]
    fn num_ops(&self) -> usize {
        self.graph.op_name.len()
    }

    #[getter]
    fn num_values(&self) -> usize {
        self.graph.ranks.len()
    }
}

/// The walk in progress. Python objects are told apart by address: every object met stays
/// alive (the module holds it) until the walk ends, so no address is reused meanwhile.
struct Walker<'py> {
    py: Python<'py>,
    out: PyProgramWalk,
    ops: Bound<'py, PyList>,
    values: Bound<'py, PyList>,
    value_index: FastMap<usize, u32>,
    name_by_object: FastMap<usize, u32>,
    name_by_text: HashMap<String, u32>,
    shape_by_type: FastMap<usize, Vec<i64>>,
    /// Per value, the number of its type (equal types, one number: `canonical_type`).
    value_type: Vec<u32>,
    type_class: FastMap<usize, u32>,
    types_by_hash: HashMap<isize, Vec<(u32, Bound<'py, PyAny>)>>,
    num_types: u32,
    /// Op names (as `name_by_text` numbers them) that get a class of their own.
    singleton_names: HashSet<String>,
    is_singleton: Vec<bool>,
    /// Per op name, whether its attributes are not scanned for symbols (functions, calls).
    skips_symbols: Vec<bool>,
    tensor_type: Bound<'py, pyo3::types::PyType>,
    is_tensor_by_type: FastMap<usize, bool>,
    /// (name, operand count, operand and result type numbers, hash of the attributes) ->
    /// the classes with that key (their attributes told apart by equality).
    classes: FastMap<(u32, u32, Vec<u32>, u64), Vec<u32>>,
    class_attrs: Vec<Bound<'py, PyAny>>,
    /// `(op, operand)`: the first operand found not defined before its op.
    undefined: Option<(u32, u32)>,
    /// How many regions deep the walk is.
    depth: usize,
}

impl<'py> Walker<'py> {
    fn list(&self, obj: &Bound<'py, PyAny>, attr: &Bound<'py, pyo3::types::PyString>) -> PyResult<Bound<'py, PyList>> {
        Ok(obj.getattr(attr)?.cast_into::<PyList>()?)
    }

    fn name(&mut self, op: &Bound<'py, PyAny>) -> PyResult<u32> {
        let name = op.getattr(intern!(self.py, "name"))?;
        if let Some(&i) = self.name_by_object.get(&(name.as_ptr() as usize)) {
            return Ok(i);
        }
        let text: String = name.extract()?;
        let next = self.name_by_text.len() as u32;
        let i = *self.name_by_text.entry(text.clone()).or_insert(next);
        if i == next {
            self.is_singleton.push(self.singleton_names.contains(&text));
            self.skips_symbols.push(text == "func.func" || text == "func.call");
            self.out.graph.names.push(text);
        }
        self.name_by_object.insert(name.as_ptr() as usize, i);
        Ok(i)
    }

    fn add_values(&mut self, vs: &Bound<'py, PyList>, owner: u32) -> PyResult<()> {
        for v in vs.iter() {
            let index = self.out.graph.ranks.len() as u32;
            self.value_index.insert(v.as_ptr() as usize, index);
            let t = v.getattr(intern!(self.py, "type"))?;
            let key = t.as_ptr() as usize;
            if !self.shape_by_type.contains_key(&key) {
                let shape: Vec<i64> = t.getattr(intern!(self.py, "shape"))?.extract()?;
                self.shape_by_type.insert(key, shape);
                self.is_tensor_by_type.insert(key, t.is_instance(&self.tensor_type)?);
                let canonical = self.canonical_type(&t)?;
                self.type_class.insert(key, canonical);
            }
            if !self.is_tensor_by_type[&key] {
                self.out.non_tensor_values.push(index);
            }
            if owner != NONE {
                self.out.block_args.push(index);
            } else if !v.getattr(intern!(self.py, "sharding"))?.is_none() {
                self.out.sharded_results.push(index);
            }
            self.value_type.push(self.type_class[&key]);
            let shape = &self.shape_by_type[&key];
            self.out.graph.ranks.push(shape.len() as u32);
            self.out.graph.dims.extend_from_slice(shape);
            self.out.graph.value_block_owner.push(owner);
            self.values.append(v)?;
        }
        Ok(())
    }

    /// Puts op `self.out.graph.op_name.len() - 1` (named `name`, with `n_operands` operands and
    /// its results numbered from `first_result`) in its class.
    fn classify(&mut self, op: &Bound<'py, PyAny>, name: u32, n_operands: usize, first_result: u32) -> PyResult<()> {
        let i = self.out.graph.op_name.len() as u32 - 1;
        let attrs = op.getattr(intern!(self.py, "attributes"))?;
        let dict = attrs.cast::<pyo3::types::PyDict>()?;
        if !self.skips_symbols[name as usize] {
            for v in dict.values().iter() {
                // A text that cannot be read here (not a str, not UTF-8) is listed: the caller
                // looks again.
                let maybe =
                    v.cast::<pyo3::types::PyString>().map_or(true, |t| t.to_cow().map_or(true, |t| t.contains('@')));
                if maybe {
                    self.out.symbol_ops.push(i);
                    break;
                }
            }
        }
        if self.is_singleton[name as usize] {
            self.new_class(i, None);
            return Ok(());
        }
        let ops_from = self.out.graph.operands.len() - n_operands;
        let mut types: Vec<u32> =
            self.out.graph.operands[ops_from..].iter().map(|&v| self.value_type[v as usize]).collect();
        types.extend_from_slice(&self.value_type[first_result as usize..]);
        // Order-insensitive, as dict equality is.
        let mut h: u64 = dict.len() as u64;
        for (k, v) in dict.iter() {
            let item = (k.hash()? as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (v.hash()? as u64).rotate_left(29);
            h = h.wrapping_add(item.wrapping_mul(0xBF58_476D_1CE4_E5B9));
        }
        let key = (name, n_operands as u32, types, h);
        if let Some(candidates) = self.classes.get(&key) {
            for &c in candidates {
                if self.class_attrs[c as usize].eq(&attrs)? {
                    self.out.op_class.push(c);
                    return Ok(());
                }
            }
        }
        let c = self.new_class(i, Some(attrs));
        self.classes.entry(key).or_default().push(c);
        Ok(())
    }

    fn new_class(&mut self, op: u32, attrs: Option<Bound<'py, PyAny>>) -> u32 {
        let c = self.out.class_rep.len() as u32;
        self.out.class_rep.push(op);
        self.class_attrs.push(attrs.unwrap_or_else(|| self.py.None().into_bound(self.py)));
        self.out.op_class.push(c);
        c
    }

    /// The number of the type equal (``==``) to `t` among those met so far: importers share
    /// one object per distinct type, but other code may build equal types apart.
    fn canonical_type(&mut self, t: &Bound<'py, PyAny>) -> PyResult<u32> {
        let h = t.hash()?;
        if let Some(candidates) = self.types_by_hash.get(&h) {
            for &(c, ref other) in candidates {
                if other.eq(t)? {
                    return Ok(c);
                }
            }
        }
        let c = self.num_types;
        self.num_types += 1;
        self.types_by_hash.entry(h).or_default().push((c, t.clone()));
        Ok(c)
    }

    /// Walks the ops of one block; `false` once an undefined operand stopped the walk.
    fn block(&mut self, block_ops: &Bound<'py, PyList>, parent: u32) -> PyResult<bool> {
        let py = self.py;
        for op in block_ops.iter() {
            let i = self.out.graph.op_name.len() as u32;
            let name = self.name(&op)?;
            self.out.graph.op_name.push(name);
            self.out.graph.op_parent.push(parent);
            self.ops.append(&op)?;
            let operands = self.list(&op, intern!(py, "operands"))?;
            for (k, v) in operands.iter().enumerate() {
                match self.value_index.get(&(v.as_ptr() as usize)) {
                    Some(&index) => self.out.graph.operands.push(index),
                    None => {
                        self.undefined = Some((i, k as u32));
                        return Ok(false);
                    }
                }
            }
            self.out.graph.operand_counts.push(operands.len() as u32);
            let results = self.list(&op, intern!(py, "results"))?;
            let first = self.out.graph.ranks.len() as u32;
            self.out.graph.results.extend(first..first + results.len() as u32);
            self.out.graph.result_counts.push(results.len() as u32);
            self.add_values(&results, NONE)?;
            self.classify(&op, name, operands.len(), first)?;
            let regions = self.list(&op, intern!(py, "regions"))?;
            if !regions.is_empty() && self.depth >= MAX_NESTING {
                return Err(pyo3::exceptions::PyRecursionError::new_err(format!(
                    "regions nested deeper than {MAX_NESTING} levels (at op {i}, {})",
                    self.out.graph.names[name as usize]
                )));
            }
            self.depth += 1;
            for region in regions.iter() {
                for block in self.list(&region, intern!(py, "blocks"))?.iter() {
                    let args = self.list(&block, intern!(py, "args"))?;
                    self.add_values(&args, i)?;
                    let inner = self.list(&block, intern!(py, "ops"))?;
                    if !self.block(&inner, i)? {
                        return Ok(false);
                    }
                }
            }
            self.depth -= 1;
        }
        Ok(true)
    }
}

/// walk_program(top_ops, singletons, tensor_type) -> (walk, ops, values, undefined)
///
/// The ops nested in ``top_ops`` (a module's top-level ops, a list of ``Op``) and their
/// values, numbered as ``shardwise.ir.freeze`` documents: ``walk`` holds the flat arrays,
/// each op's signature class (ops named in ``singletons`` get a class each) and the lists
/// propagation reads (sharded results, block arguments, values whose type is no
/// ``tensor_type``, ops with symbol-like attributes); ``ops`` / ``values`` the objects in
/// index order. ``undefined`` is ``None``, or
/// ``(op, operand)`` for the first operand found that is not defined before its op (the walk
/// stops there). Raises ``AttributeError`` / ``TypeError`` for objects that are not IR ops,
/// blocks, regions or values, ``TypeError`` for a type whose ``shape`` is not a tuple of
/// ints, and ``RecursionError`` for regions nested more than 2048 deep.
#[pyfunction]
fn walk_program<'py>(
    py: Python<'py>,
    top_ops: Bound<'py, PyList>,
    singletons: HashSet<String>,
    tensor_type: Bound<'py, pyo3::types::PyType>,
) -> PyResult<(PyProgramWalk, Bound<'py, PyList>, Bound<'py, PyList>, Option<(u32, u32)>)> {
    let out = PyProgramWalk {
        graph: GraphInput::default(),
        op_class: Vec::new(),
        class_rep: Vec::new(),
        sharded_results: Vec::new(),
        block_args: Vec::new(),
        non_tensor_values: Vec::new(),
        symbol_ops: Vec::new(),
    };
    let mut w = Walker {
        py,
        out,
        ops: PyList::empty(py),
        values: PyList::empty(py),
        value_index: FastMap::default(),
        name_by_object: FastMap::default(),
        name_by_text: HashMap::new(),
        shape_by_type: FastMap::default(),
        value_type: Vec::new(),
        type_class: FastMap::default(),
        types_by_hash: HashMap::new(),
        num_types: 0,
        singleton_names: singletons,
        is_singleton: Vec::new(),
        skips_symbols: Vec::new(),
        tensor_type,
        is_tensor_by_type: FastMap::default(),
        classes: FastMap::default(),
        class_attrs: Vec::new(),
        undefined: None,
        depth: 0,
    };
    w.block(&top_ops, NONE)?;
    Ok((w.out, w.ops, w.values, w.undefined))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyProgramWalk>()?;
    m.add_function(wrap_pyfunction!(walk_program, m)?)
}
