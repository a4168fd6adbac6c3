//! shardwise core: the Shardonnay sharding representation (meshes, axis references, dimension
//! and tensor shardings), its text form, invariants, per-device view and conversions.
//!
//! Pure Rust; the PyO3 bindings live in `py/` behind the `python` feature so that `cargo test`
//! builds and runs without Python.

pub mod axis;
pub mod convert;
pub mod error;
pub mod export;
pub mod fast_hash;
pub mod graph;
pub mod ir;
mod lexer;
pub mod mesh;
pub mod mlir;
pub mod name;
pub mod parallel;
pub mod propagation;
pub mod redistribution;
pub mod rule;
pub mod rules;
pub mod search;
pub mod sharding;
pub mod text;
pub mod transforms;

#[cfg(feature = "python")]
mod py;

pub use axis::{AxisRef, SubAxis};
pub use error::{Error, ErrorKind, Result};
pub use mesh::{Mesh, MeshAxis};
pub use name::Name;
pub use sharding::{DimSharding, MeshRef, Reduction, TensorSharding};
