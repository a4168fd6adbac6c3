//! Python exception classes and the mapping from the core's error kinds.

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::error::{Error, ErrorKind};

create_exception!(shardwise, ShardwiseError, PyValueError, "Base of every shardwise error (a ValueError).");
create_exception!(
    shardwise,
    ShardingError,
    ShardwiseError,
    "A mesh or sharding is malformed, invalid or not convertible."
);
create_exception!(
    shardwise,
    ShardingParseError,
    ShardingError,
    "Malformed sharding or mesh text; `offset` is where parsing stopped."
);
create_exception!(shardwise, InvalidShardingError, ShardingError, "A sharding breaks an invariant; `rule` names it.");
create_exception!(shardwise, MeshError, ShardingError, "A mesh is malformed, or a named mesh is missing.");
create_exception!(
    shardwise,
    ConversionError,
    ShardingError,
    "A conversion to or from another format cannot express the value."
);

create_exception!(
    shardwise,
    MlirReadError,
    ShardwiseError,
    "The native MLIR reader could not read the text: `line`, `column`, and `unsupported` (valid \
     MLIR it has no grammar for, which jaxlib may read)."
);

create_exception!(
    shardwise,
    MlirVerifyError,
    ShardwiseError,
    "A module breaks a rule of the native verifier (`crate::mlir::verify`): `op_index` (in a \
     pre-order walk from the module op), `op_name` and `location` name the op, `detail` says \
     what is wrong."
);

/// Longest message handed to Python; longer ones keep their head and tail.
const MAX_MESSAGE: usize = 600;

/// `message` cut to about [`MAX_MESSAGE`] characters: the head and the tail, with how much was
/// left out between them (a bad axis name in a 6 MB sharding once gave a 10 MB message).
fn bounded(message: &str) -> String {
    let n = message.chars().count();
    if n <= MAX_MESSAGE {
        return message.to_string();
    }
    let head: String = message.chars().take(MAX_MESSAGE / 2).collect();
    let tail: String = message.chars().skip(n - MAX_MESSAGE / 3).collect();
    format!("{head} ... ({} characters left out) ... {tail}", n - MAX_MESSAGE / 2 - MAX_MESSAGE / 3)
}

/// Converts a core error into the matching Python exception, with `rule` / `offset` attributes;
/// the message is bounded ([`bounded`]).
pub fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let message = bounded(&e.message);
    let err = match e.kind {
        ErrorKind::Parse { .. } => ShardingParseError::new_err(message),
        ErrorKind::Invariant { .. } => InvalidShardingError::new_err(message),
        ErrorKind::Mesh => MeshError::new_err(message),
        ErrorKind::Conversion => ConversionError::new_err(message),
        ErrorKind::Program => python_error(py, "ProgramError", message),
        ErrorKind::OpInfo => python_error(py, "OpInfoError", message),
    };
    let value = err.value(py);
    let _ = value.setattr("rule", e.rule());
    if let ErrorKind::Parse { pos } = e.kind {
        let _ = value.setattr("offset", pos);
    }
    err
}

/// The class `name` of `shardwise.errors` with `message`: `ProgramError` (a Python class: it
/// is the base of the executor's and the launcher's errors too) and `OpInfoError`.
fn python_error(py: Python<'_>, name: &str, message: String) -> PyErr {
    match py.import("shardwise.errors").and_then(|m| m.getattr(name)) {
        Ok(class) => PyErr::from_value(match class.call1((message,)) {
            Ok(value) => value,
            Err(e) => return e,
        }),
        Err(e) => e,
    }
}

/// `Result<T, Error>` into `PyResult<T>`.
pub trait IntoPyResult<T> {
    fn py(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for crate::error::Result<T> {
    fn py(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("ShardwiseError", py.get_type::<ShardwiseError>())?;
    m.add("ShardingError", py.get_type::<ShardingError>())?;
    m.add("ShardingParseError", py.get_type::<ShardingParseError>())?;
    m.add("InvalidShardingError", py.get_type::<InvalidShardingError>())?;
    m.add("MeshError", py.get_type::<MeshError>())?;
    m.add("ConversionError", py.get_type::<ConversionError>())?;
    m.add("MlirReadError", py.get_type::<MlirReadError>())?;
    m.add("MlirVerifyError", py.get_type::<MlirVerifyError>())?;
    Ok(())
}
