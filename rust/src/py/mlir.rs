//! `read_mlir`: the native MLIR reader (`crate::mlir`) for Python, returning the program's
//! flat tables (`ProgramTables`), from which `shardwise.importers.native` builds the IR.

use pyo3::prelude::*;

use super::errors::IntoPyResult;
use super::errors::{MlirReadError, MlirVerifyError};
use crate::ir::{Program, IMPLICIT_LOC};
use crate::mlir;
use crate::transforms::propagation::candidates;
use crate::transforms::WarningKind;

/// A read module as flat tables (see `crate::ir` for the layout). Ranges are given as offset
/// arrays: op `i`'s operands are `operands[operand_offsets[i]:operand_offsets[i + 1]]`, and
/// likewise for attributes (`attr_offsets`), regions (`region_offsets`, into `region_blocks`:
/// each region's first and end block), and block ops (`block_op_offsets`, into `block_ops`).
#[pyclass(frozen, module = "shardwise._native")]
pub struct ProgramTables {
    #[pyo3(get)]
    strings: Vec<String>,
    #[pyo3(get)]
    op_names: Vec<u32>,
    #[pyo3(get)]
    op_locs: Vec<u32>,
    #[pyo3(get)]
    operand_offsets: Vec<u32>,
    #[pyo3(get)]
    operands: Vec<u32>,
    #[pyo3(get)]
    result_offsets: Vec<u32>,
    #[pyo3(get)]
    attr_offsets: Vec<u32>,
    #[pyo3(get)]
    attr_names: Vec<u32>,
    #[pyo3(get)]
    attr_values: Vec<u32>,
    #[pyo3(get)]
    region_offsets: Vec<u32>,
    #[pyo3(get)]
    region_blocks: Vec<u32>,
    #[pyo3(get)]
    block_args: Vec<u32>,
    #[pyo3(get)]
    block_op_offsets: Vec<u32>,
    #[pyo3(get)]
    block_ops: Vec<u32>,
    #[pyo3(get)]
    value_types: Vec<u32>,
    #[pyo3(get)]
    funcs: Vec<FuncTables>,
}

/// What a `func.func` op carries besides its attributes: argument and result types (interned
/// strings) and attribute dictionaries (pairs of interned name and value).
#[pyclass(frozen, module = "shardwise._native")]
#[derive(Clone)]
pub struct FuncTables {
    #[pyo3(get)]
    op: u32,
    #[pyo3(get)]
    arg_types: Vec<u32>,
    #[pyo3(get)]
    result_types: Vec<u32>,
    #[pyo3(get)]
    arg_attrs: Vec<Vec<(u32, u32)>>,
    #[pyo3(get)]
    result_attrs: Vec<Vec<(u32, u32)>>,
}

/// The tables of `p` (its strings copied: `NativeProgram` keeps the program).
fn tables(p: &Program) -> ProgramTables {
    let n = p.ops.len();
    let mut t = ProgramTables {
        strings: Vec::new(),
        op_names: Vec::with_capacity(n),
        op_locs: Vec::with_capacity(n),
        operand_offsets: Vec::with_capacity(n + 1),
        operands: Vec::with_capacity(p.operands.len()),
        result_offsets: Vec::with_capacity(2 * n),
        attr_offsets: Vec::with_capacity(n + 1),
        attr_names: Vec::new(),
        attr_values: Vec::new(),
        region_offsets: Vec::with_capacity(n + 1),
        region_blocks: Vec::new(),
        block_args: Vec::with_capacity(2 * p.blocks.len()),
        block_op_offsets: Vec::with_capacity(2 * p.blocks.len()),
        block_ops: p.block_ops.clone(),
        value_types: p.value_types.clone(),
        funcs: Vec::new(),
    };
    t.operand_offsets.push(0);
    t.attr_offsets.push(0);
    t.region_offsets.push(0);
    for op in &p.ops {
        t.op_names.push(op.name);
        t.op_locs.push(op.loc); // implicit locations are given their text below
        t.operands.extend_from_slice(&p.operands[op.operands.0 as usize..op.operands.1 as usize]);
        t.operand_offsets.push(t.operands.len() as u32);
        t.result_offsets.push(op.results.0);
        t.result_offsets.push(op.results.1);
        for &(k, v) in &p.attrs[op.attrs.0 as usize..op.attrs.1 as usize] {
            t.attr_names.push(k);
            t.attr_values.push(v);
        }
        t.attr_offsets.push(t.attr_names.len() as u32);
        for &(b0, b1) in &p.regions[op.regions.0 as usize..op.regions.1 as usize] {
            t.region_blocks.push(b0);
            t.region_blocks.push(b1);
        }
        t.region_offsets.push(t.region_blocks.len() as u32 / 2);
    }
    for b in &p.blocks {
        t.block_args.push(b.args.0);
        t.block_args.push(b.args.1);
        t.block_op_offsets.push(b.ops.0);
        t.block_op_offsets.push(b.ops.1);
    }
    let span = |s: &(u32, u32)| p.attrs[s.0 as usize..s.1 as usize].to_vec();
    t.funcs = p
        .funcs
        .iter()
        .map(|f| FuncTables {
            op: f.op,
            arg_types: f.arg_types.clone(),
            result_types: f.result_types.clone(),
            arg_attrs: f.arg_attrs.iter().map(span).collect(),
            result_attrs: f.result_attrs.iter().map(span).collect(),
        })
        .collect();
    t.strings = p.strings.strings.clone();
    // Implicit locations (`ir::IMPLICIT_LOC`) as texts after the interned strings.
    for loc in t.op_locs.iter_mut().filter(|l| **l & IMPLICIT_LOC != 0) {
        let text = p.loc_text(*loc).into_owned();
        *loc = t.strings.len() as u32;
        t.strings.push(text);
    }
    t
}

/// Reads MLIR text natively (no jaxlib) with the GIL released; ops without a location get
/// `loc("SOURCE_NAME":line:column)`. With `verify`, the module read is checked by the native
/// verifier (`crate::mlir::verify`). Raises `MlirReadError` with `line`, `column` and
/// `unsupported` (valid MLIR this reader has no grammar for) set, and `MlirVerifyError` as
/// `print_mlir`.
#[pyfunction]
#[pyo3(signature = (text, source_name="-", *, verify=false))]
fn read_mlir(py: Python<'_>, text: &str, source_name: &str, verify: bool) -> PyResult<ProgramTables> {
    let read = py.detach(|| {
        let p = mlir::read_named(text, source_name).map_err(PrintFailure::Read)?;
        if verify {
            mlir::verify(&p).map_err(PrintFailure::Verify)?;
        }
        Ok(tables(&p))
    });
    read.map_err(|f| failure(py, f))
}

/// The Python `MlirReadError` of `e`, with `line`, `column` and `unsupported`.
fn read_error(py: Python<'_>, e: mlir::ReadError) -> PyErr {
    let err = MlirReadError::new_err(e.to_string());
    let value = err.value(py);
    for (k, v) in [("line", e.line), ("column", e.column)] {
        if let Err(x) = value.setattr(k, v) {
            return x;
        }
    }
    if let Err(x) = value.setattr("unsupported", e.unsupported) {
        return x;
    }
    err
}

/// Why `read_mlir` or `print_mlir` gave no result.
pub(super) enum PrintFailure {
    Read(mlir::ReadError),
    /// A native pass refused the program.
    Pass(crate::error::Error),
    Verify(mlir::VerifyError),
    /// The program the native passes left does not verify.
    VerifyAfterPasses(mlir::VerifyError),
    /// An op jaxlib would print in its custom form had to be printed in the generic form.
    Generic(String),
}

/// Reads MLIR text natively and prints it as jaxlib prints it (custom forms, MLIR's value
/// names, no locations), with the GIL released.
///
/// With `verify`, the module is first checked by the native verifier (`crate::mlir::verify`:
/// op arities, the shapes of common ops, terminators, calls, shardings against their meshes).
/// With `strict`, an op of a dialect jaxlib knows that this printer has no custom form for is
/// an error instead of being printed in the generic form.
///
/// Raises `MlirReadError` as `read_mlir` (and with `unsupported` set for `strict`), and
/// `MlirVerifyError` (`op_index`: the op's place in a pre-order walk from the module op,
/// `op_name`, `location`, `detail`: what is wrong) when the module does not verify.
#[pyfunction]
#[pyo3(signature = (text, *, verify=false, strict=false))]
fn print_mlir(py: Python<'_>, text: &str, verify: bool, strict: bool) -> PyResult<String> {
    let printed = py.detach(|| {
        let p = mlir::read(text).map_err(PrintFailure::Read)?;
        if verify {
            mlir::verify(&p).map_err(PrintFailure::Verify)?;
        }
        let (out, generic) = mlir::print_checked(&p);
        match generic {
            Some(op) if strict => Err(PrintFailure::Generic(p.op_name(op).to_string())),
            _ => Ok(out),
        }
    });
    printed.map_err(|f| failure(py, f))
}

/// Reads and verifies MLIR text natively, runs the native passes `passes`
/// (`crate::transforms`, by Shardy's names, each `name` or `name{key=value ...}`) on it,
/// verifies and prints it as `print_mlir` does, with the GIL released; the passes' warnings
/// are issued as `PassWarning`, `UnknownOpWarning` or `ShardingGroupWarning`.
/// Raises `MlirReadError`, `ProgramError` (an unknown pass or option, or a pass refusing the
/// program), `MlirVerifyError`, or what the sharding rules and propagation raise.
///
/// `name` (a file path) goes into the implicit locations of ops without one, as `read_mlir`'s.
/// A module that does not verify after the passes raises `MlirVerifyError` with
/// `after_passes` set.
#[pyfunction]
#[pyo3(signature = (text, passes, name="-"))]
fn run_native_passes(py: Python<'_>, text: &str, passes: Vec<String>, name: &str) -> PyResult<String> {
    let names: Vec<&str> = passes.iter().map(String::as_str).collect();
    let (text, warnings) = py.detach(|| run_text(text, name, &names)).map_err(|f| failure(py, f))?;
    issue_warnings(py, warnings)?;
    Ok(text)
}

/// `run_native_passes` for each of `texts`, on at most `threads` scoped threads (one per text
/// at most) with the GIL released throughout: the printed texts in order. The warnings are
/// issued afterwards, text by text. The first text (in order) that fails raises what
/// `run_native_passes` raises for it, with a note naming its index; the warnings of the texts
/// before it are issued first.
///
/// `nesting` (`(max_braces, max_brackets)`): each text is first checked as `mlir_nesting`
/// checks it, on its thread; one nested deeper raises `ProgramError` ("MLIR nests regions 300
/// levels deep (line 12); at most 256 are read", as `shardwise.importers.mlir.check_nesting`).
#[pyfunction]
#[pyo3(signature = (texts, passes, threads, *, nesting=None))]
fn run_native_passes_many(
    py: Python<'_>,
    texts: Vec<String>,
    passes: Vec<String>,
    threads: usize,
    nesting: Option<(usize, usize)>,
) -> PyResult<Vec<String>> {
    let names: Vec<&str> = passes.iter().map(String::as_str).collect();
    let n = texts.len();
    let results = py.detach(|| {
        crate::parallel::map(n, threads, |i| {
            if let Some(limits) = nesting {
                nested_too_deep(&texts[i], limits)?;
            }
            run_text(&texts[i], "-", &names)
        })
    });
    collect_many(py, results, "text", |text| text)
}

/// `ProgramError` (as a pass failure) when `text` nests braces or brackets deeper than
/// `limits` (see `mlir_nesting`); braces are reported first.
fn nested_too_deep(text: &str, limits: (usize, usize)) -> Result<(), PrintFailure> {
    let found = mlir::nesting(text, limits);
    for ((deepest, line), (limit, what)) in found.into_iter().zip([(limits.0, "regions"), (limits.1, "brackets")]) {
        if deepest > limit {
            let message = format!("MLIR nests {what} {deepest} levels deep (line {line}); at most {limit} are read");
            return Err(PrintFailure::Pass(crate::error::Error::program(message)));
        }
    }
    Ok(())
}

/// The passes' warnings, by kind.
type Warnings = Vec<(WarningKind, String)>;

/// Reads, verifies, runs `passes` on, verifies and prints one text.
fn run_text(text: &str, name: &str, passes: &[&str]) -> Result<(String, Warnings), PrintFailure> {
    let (p, warnings) = run_program(read_verified(text, name)?, passes)?;
    Ok((mlir::print(&p), warnings))
}

/// Reads and verifies one text.
fn read_verified(text: &str, name: &str) -> Result<Program, PrintFailure> {
    let p = mlir::read_named(text, name).map_err(PrintFailure::Read)?;
    mlir::verify(&p).map_err(PrintFailure::Verify)?;
    Ok(p)
}

/// Runs `passes` on `p` and verifies what they leave.
pub(super) fn run_program(mut p: Program, passes: &[&str]) -> Result<(Program, Warnings), PrintFailure> {
    let warnings = crate::transforms::run(&mut p, passes).map_err(PrintFailure::Pass)?;
    mlir::verify(&p).map_err(PrintFailure::VerifyAfterPasses)?;
    Ok((p, warnings))
}

/// A verified module held by Rust (`crate::ir::Program`): what `shardwise.load_mlir` keeps
/// until Python asks for the module's ops, so that reading, the native passes and printing
/// never build the Python IR. Immutable: `run` gives a new program. About 0.2 KB of heap per
/// op, 0.6 KB resident (`benches/native_passes.md`, `docs/speed.md`).
#[pyclass(frozen, module = "shardwise._native")]
pub struct NativeProgram {
    pub(super) program: Program,
}

#[pymethods]
impl NativeProgram {
    /// Reads and verifies `text` as `read_mlir(text, source_name, verify=True)` does, with the
    /// GIL released. Raises `MlirReadError` and `MlirVerifyError` as `read_mlir`.
    #[staticmethod]
    #[pyo3(signature = (text, source_name="-"))]
    fn read(py: Python<'_>, text: &str, source_name: &str) -> PyResult<Self> {
        let program = py.detach(|| read_verified(text, source_name)).map_err(|f| failure(py, f))?;
        Ok(NativeProgram { program })
    }

    /// A new program: this one with the native `passes` run on it (as `run_native_passes`)
    /// and verified, with the GIL released; the passes' warnings are issued. Raises what
    /// `run_native_passes` raises after reading.
    fn run(&self, py: Python<'_>, passes: Vec<String>) -> PyResult<NativeProgram> {
        let names: Vec<&str> = passes.iter().map(String::as_str).collect();
        let (program, warnings) =
            py.detach(|| run_program(self.program.clone(), &names)).map_err(|f| failure(py, f))?;
        issue_warnings(py, warnings)?;
        Ok(NativeProgram { program })
    }

    /// The module printed as jaxlib prints it (custom forms, no locations), GIL released.
    /// With `strict`, an op of a dialect jaxlib knows that has no native custom form raises
    /// `MlirReadError` with `unsupported` set (as `print_mlir`) instead of being printed in
    /// the generic form.
    #[pyo3(signature = (*, strict=false))]
    fn print(&self, py: Python<'_>, strict: bool) -> PyResult<String> {
        let printed = py.detach(|| match mlir::print_checked(&self.program) {
            (_, Some(op)) if strict => Err(PrintFailure::Generic(self.program.op_name(op).to_string())),
            (out, _) => Ok(out),
        });
        printed.map_err(|f| failure(py, f))
    }

    /// The module as flat tables (as `read_mlir` gives), from which Python builds its IR.
    fn tables(&self, py: Python<'_>) -> ProgramTables {
        py.detach(|| tables(&self.program))
    }

    /// The top-level meshes as `(name, mesh attribute text)`, in definition order (what
    /// `Module.meshes` parses), read without building anything.
    fn meshes(&self) -> Vec<(String, String)> {
        let p = &self.program;
        crate::transforms::common::mesh_ops(p)
            .into_iter()
            .map(|op| (p.symbol_name(op).unwrap_or_default(), p.attr(op, "mesh").unwrap_or_default().to_string()))
            .collect()
    }

    /// The function Shardy propagates the results of (the only one, or @main): `(name,
    /// argument types, result types)`, types as MLIR text. Raises `ProgramError` when the
    /// module has no function, or several and none is @main.
    fn main_signature(&self, py: Python<'_>) -> PyResult<(String, Vec<String>, Vec<String>)> {
        let (name, args, results) = candidates::main_signature(&self.program).py(py)?;
        let owned = |ts: Vec<&str>| ts.into_iter().map(str::to_string).collect();
        Ok((name, owned(args), owned(results)))
    }

    /// The stored shardings of the function Shardy propagates the results of (the only one,
    /// or @main): one per argument and one per result (`None` for none). Raises
    /// `ProgramError` as `main_signature`, and for a sharding that does not parse.
    fn main_shardings(&self, py: Python<'_>) -> PyResult<super::candidates::MainShardingsW> {
        let (args, results) = candidates::main_shardings(&self.program).py(py)?;
        Ok((super::candidates::sharding_objects(args), super::candidates::sharding_objects(results)))
    }

    /// The arguments of @main whose candidate shardings the steps before propagation read,
    /// or `None` when no candidate set can be batched (see
    /// `crate::transforms::propagation::candidates::guarded_args`).
    fn guarded_args(&self, py: Python<'_>) -> PyResult<Option<Vec<usize>>> {
        py.detach(|| candidates::guarded_args(&self.program)).py(py)
    }

    /// A new program: this one with @main's shardings set by `annotations` (`Annotation`
    /// objects). Raises `ProgramError` for an index @main does not have or
    /// no function to propagate.
    fn annotated(&self, py: Python<'_>, annotations: Vec<super::candidates::PyAnnotation>) -> PyResult<NativeProgram> {
        let annotations = super::candidates::annotations_of(annotations);
        let mut program = self.program.clone();
        candidates::annotate(&mut program, &annotations).py(py)?;
        Ok(NativeProgram { program })
    }

    /// The number of ops in the module, the module op aside (as `Module.walk()` counts them
    /// once built; ops the passes erased are not counted).
    fn __len__(&self, py: Python<'_>) -> usize {
        py.detach(|| self.program.walk(0).len() - 1)
    }
}

/// `NativeProgram.run` for each of `programs`, on at most `threads` scoped threads with the
/// GIL released throughout: the new programs in order. Warnings and failures as
/// `run_native_passes_many` (the note says `in program i of n`).
#[pyfunction]
fn run_native_programs_many(
    py: Python<'_>,
    programs: Vec<Py<NativeProgram>>,
    passes: Vec<String>,
    threads: usize,
) -> PyResult<Vec<NativeProgram>> {
    let names: Vec<&str> = passes.iter().map(String::as_str).collect();
    let n = programs.len();
    let inputs: Vec<&Program> = programs.iter().map(|p| &p.get().program).collect();
    let results = py.detach(|| crate::parallel::map(n, threads, |i| run_program(inputs[i].clone(), &names)));
    collect_many(py, results, "program", |program| NativeProgram { program })
}

/// The results of a batch in order, each one's warnings issued before the next; the first
/// failure (in order) raised with a note naming its index (`in {what} i of n`).
fn collect_many<R, T>(
    py: Python<'_>,
    results: Vec<Result<(R, Warnings), PrintFailure>>,
    what: &str,
    wrap: impl Fn(R) -> T,
) -> PyResult<Vec<T>> {
    let n = results.len();
    let mut out = Vec::with_capacity(n);
    for (i, r) in results.into_iter().enumerate() {
        match r {
            Ok((value, warnings)) => {
                issue_warnings(py, warnings)?;
                out.push(wrap(value));
            }
            Err(f) => {
                let err = failure(py, f);
                err.value(py).call_method1("add_note", (format!("in {what} {i} of {n}"),))?;
                return Err(err);
            }
        }
    }
    Ok(out)
}

/// Issues the passes' warnings as `PassWarning`, `UnknownOpWarning` or `ShardingGroupWarning`.
pub(super) fn issue_warnings(py: Python<'_>, warnings: Vec<(WarningKind, String)>) -> PyResult<()> {
    for (kind, w) in warnings {
        let (module, name) = match kind {
            WarningKind::Pass => ("shardwise.errors", "PassWarning"),
            WarningKind::UnknownOp => ("shardwise.rules.exceptions", "UnknownOpWarning"),
            WarningKind::ShardingGroup => ("shardwise.propagation", "ShardingGroupWarning"),
            WarningKind::ShardingOrigin => ("shardwise.propagation", "ShardingOriginWarning"),
        };
        let class = py.import(module)?.getattr(name)?;
        let message = std::ffi::CString::new(w.replace('\0', " ")).unwrap_or_default();
        PyErr::warn(py, &class, &message, 1)?;
    }
    Ok(())
}

/// The names of the native passes (`crate::transforms::PASSES`), in their table's order.
#[pyfunction]
fn native_passes() -> Vec<&'static str> {
    crate::transforms::PASSES.iter().map(|(n, _, _)| *n).collect()
}

/// The op names of the native passes' op properties (`crate::transforms::op_properties`):
/// `"elementwise"` (Shardy's element-wise StableHLO ops) and `"no_memory_effect"` (ops
/// without memory effects, the element-wise ones included).
#[pyfunction]
fn op_properties() -> std::collections::HashMap<&'static str, Vec<&'static str>> {
    use crate::transforms::op_properties::{ELEMENTWISE_OPS, OTHER_NO_MEMORY_EFFECT_OPS};
    let all = ELEMENTWISE_OPS.iter().chain(OTHER_NO_MEMORY_EFFECT_OPS).copied().collect();
    [("elementwise", ELEMENTWISE_OPS.to_vec()), ("no_memory_effect", all)].into_iter().collect()
}

/// The options each native pass takes, by pass name (`crate::transforms::PASSES`): a step
/// setting another option is not run natively.
#[pyfunction]
fn native_pass_options() -> std::collections::HashMap<&'static str, Vec<&'static str>> {
    crate::transforms::PASSES.iter().map(|(n, _, o)| (*n, o.to_vec())).collect()
}

/// The Python exception of a failed read, verification or strict print.
pub(super) fn failure(py: Python<'_>, f: PrintFailure) -> PyErr {
    let after = matches!(f, PrintFailure::VerifyAfterPasses(_));
    match f {
        PrintFailure::Read(e) => read_error(py, e),
        PrintFailure::Pass(e) => super::errors::to_py(py, e),
        PrintFailure::Verify(e) | PrintFailure::VerifyAfterPasses(e) => {
            let err = MlirVerifyError::new_err(e.to_string());
            let value = err.value(py);
            let set = value
                .setattr("after_passes", after)
                .and_then(|_| value.setattr("op_index", e.op))
                .and_then(|_| value.setattr("op_name", &e.name))
                .and_then(|_| value.setattr("location", &e.loc))
                .and_then(|_| value.setattr("detail", &e.message));
            if let Err(x) = set {
                return x;
            }
            err
        }
        PrintFailure::Generic(name) => read_error(
            py,
            mlir::ReadError {
                line: 0,
                column: 0,
                offset: 0,
                unsupported: true,
                message: format!("the native printer has no custom form for '{name}'"),
            },
        ),
    }
}

/// `((deepest braces, line first over max_braces), (deepest brackets, line first over
/// max_brackets))` of `text` (lines 0 when never over); see `crate::mlir::nesting`.
#[pyfunction]
fn mlir_nesting(
    py: Python<'_>,
    text: &str,
    max_braces: usize,
    max_brackets: usize,
) -> ((usize, usize), (usize, usize)) {
    let [a, b] = py.detach(|| mlir::nesting(text, (max_braces, max_brackets)));
    (a, b)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ProgramTables>()?;
    m.add_class::<FuncTables>()?;
    m.add_class::<NativeProgram>()?;
    m.add_function(wrap_pyfunction!(read_mlir, m)?)?;
    m.add_function(wrap_pyfunction!(print_mlir, m)?)?;
    m.add_function(wrap_pyfunction!(mlir_nesting, m)?)?;
    m.add_function(wrap_pyfunction!(run_native_passes, m)?)?;
    m.add_function(wrap_pyfunction!(run_native_passes_many, m)?)?;
    m.add_function(wrap_pyfunction!(run_native_programs_many, m)?)?;
    m.add_function(wrap_pyfunction!(native_passes, m)?)?;
    m.add_function(wrap_pyfunction!(native_pass_options, m)?)?;
    m.add_function(wrap_pyfunction!(op_properties, m)?)?;
    Ok(())
}
