//! The native MLIR reader: StableHLO + sdy text, in MLIR's generic op form and in the custom
//! (pretty) forms jaxlib prints for the ops JAX and Shardy emit, read into a [`Program`] with
//! every op in its generic shape (operands, result types, attributes as jaxlib prints them in
//! the generic form, regions), so that it equals what jaxlib's parser hands the Python
//! importer (`shardwise.importers.mlir`). Op formats follow the declarative assembly formats and
//! custom printers of openxla/stablehlo (`StablehloOps.td`, `AssemblyFormat.cpp`) and
//! openxla/shardy (`dialect/sdy/ir/ops.td`, `parsers.cc`).
//!
//! A construct the reader does not know (an op's custom form it has no grammar for, a
//! successor list, an attribute alias) is a [`ReadError`] with `unsupported` set, so that the
//! caller can hand the text to jaxlib instead; malformed text is one with `unsupported` unset.
//! Every walk is a loop over an explicit stack: deep nesting cannot overflow the stack.

pub(crate) mod attr;
mod cursor;
mod locations;
mod names;
mod ops;
mod printer;
mod reader;
mod sdy;
mod sdy_print;
mod stablehlo_print;
mod verify;

pub use printer::{print, print_checked};
pub use verify::{verify, VerifyError};

use std::fmt;

use crate::ir::Program;

/// Why text could not be read: where (1-based line and column, byte offset), what, and whether
/// the text may be valid MLIR that this reader does not know (`unsupported`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError {
    pub line: usize,
    pub column: usize,
    pub offset: usize,
    pub unsupported: bool,
    pub message: String,
}

impl ReadError {
    fn at(src: &str, offset: usize, unsupported: bool, message: String) -> Self {
        let offset = offset.min(src.len());
        let before = &src.as_bytes()[..offset];
        let line = before.iter().filter(|&&c| c == b'\n').count() + 1;
        let line_start = before.iter().rposition(|&c| c == b'\n').map_or(0, |i| i + 1);
        ReadError { line, column: offset - line_start + 1, offset, unsupported, message }
    }

    pub(crate) fn syntax(src: &str, offset: usize, message: impl Into<String>) -> Self {
        Self::at(src, offset, false, message.into())
    }

    pub(crate) fn unsupported(src: &str, offset: usize, message: impl Into<String>) -> Self {
        Self::at(src, offset, true, message.into())
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}: {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for ReadError {}

/// Reads a module from MLIR text: `module [@name] [attributes {...}] { ops }`, or top-level ops
/// (an implicit module), followed by location aliases (`#loc1 = loc(...)`).
///
/// Ops without a `loc(...)` get `loc("-":line:column)` of their name, as jaxlib's parser gives
/// them. Errors: [`ReadError`].
pub fn read(text: &str) -> Result<Program, ReadError> {
    read_named(text, "-")
}

/// [`read`], with `source_name` (a file path) in the implicit locations instead of `-`.
pub fn read_named(text: &str, source_name: &str) -> Result<Program, ReadError> {
    let mut r = reader::Reader::new(text);
    r.p.implicit_locs.source = crate::mlir::reader::quote(source_name);
    r.module()
}

/// How deeply `text` nests braces (`{`: regions and attribute dictionaries) and brackets of all
/// kinds together (`{ [ ( <`, the `>` of `->` aside), outside string literals and `//`
/// comments: for each, the deepest depth and the 1-based line where it first exceeds `limits`
/// (0 when it never does). One pass over the bytes.
pub fn nesting(text: &str, limits: (usize, usize)) -> [(usize, usize); 2] {
    let b = text.as_bytes();
    let (mut braces, mut brackets) = (0usize, 0usize);
    let mut out = [(0usize, 0usize); 2];
    let mut line = 1;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\n' => line += 1,
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    } else if b[i] == b'\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i + 1 < b.len() && b[i + 1] != b'\n' {
                    i += 1;
                }
            }
            c @ (b'{' | b'[' | b'(' | b'<') => {
                brackets += 1;
                if c == b'{' {
                    braces += 1;
                }
                for (k, depth) in [(0, braces), (1, brackets)] {
                    out[k].0 = out[k].0.max(depth);
                    let limit = if k == 0 { limits.0 } else { limits.1 };
                    if depth > limit && out[k].1 == 0 {
                        out[k].1 = line;
                    }
                }
            }
            b'>' if i > 0 && b[i - 1] == b'-' => {}
            c @ (b'}' | b']' | b')' | b'>') => {
                brackets = brackets.saturating_sub(1);
                if c == b'}' {
                    braces = braces.saturating_sub(1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}
