//! The one error type of the core. No PyO3 here: `py/errors.rs` maps each kind to a Python
//! exception class (`ShardingParseError`, `InvalidShardingError`, `MeshError`, `ConversionError`).

use std::fmt;

/// What went wrong, coarse enough to pick an exception class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// Malformed text: `pos` is the byte offset into the input where parsing stopped.
    Parse { pos: usize },
    /// A representation invariant is broken; `rule` is a short stable identifier such as
    /// `"duplicate-axis"` (listed in `sharding.rs`).
    Invariant { rule: &'static str },
    /// A mesh is malformed (axis sizes, names, device ids) or a named mesh is missing.
    Mesh,
    /// A conversion to or from another format cannot express the value.
    Conversion,
    /// A program's ops and shardings contradict what a pass needs (Shardy's op-level checks,
    /// e.g. unreduced axes that a collective cannot produce); Python's `ProgramError`.
    Program,
    /// An op cannot be read by the sharding rule registry (`crate::rules`): an attribute is
    /// missing or malformed, or the shapes do not fit the op; Python's `OpInfoError`.
    OpInfo,
}

/// An error with a message that names the value, what was expected and what was got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn parse(pos: usize, message: impl Into<String>) -> Self {
        Error { kind: ErrorKind::Parse { pos }, message: message.into() }
    }
    pub fn invariant(rule: &'static str, message: impl Into<String>) -> Self {
        Error { kind: ErrorKind::Invariant { rule }, message: message.into() }
    }
    pub fn mesh(message: impl Into<String>) -> Self {
        Error { kind: ErrorKind::Mesh, message: message.into() }
    }
    pub fn conversion(message: impl Into<String>) -> Self {
        Error { kind: ErrorKind::Conversion, message: message.into() }
    }
    pub fn program(message: impl Into<String>) -> Self {
        Error { kind: ErrorKind::Program, message: message.into() }
    }
    pub fn op_info(message: impl Into<String>) -> Self {
        Error { kind: ErrorKind::OpInfo, message: message.into() }
    }
    /// The invariant rule, if this is an invariant error.
    pub fn rule(&self) -> Option<&'static str> {
        match self.kind {
            ErrorKind::Invariant { rule } => Some(rule),
            _ => None,
        }
    }
    /// Prefix the message with context (e.g. the sharding text it came from).
    pub fn context(mut self, ctx: impl fmt::Display) -> Self {
        self.message = format!("{ctx}: {}", self.message);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}
