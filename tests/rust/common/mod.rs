//! Helpers shared by the Rust tests: axes and factor shardings written compactly, and the
//! program builder of `program.rs`.
#![allow(dead_code)]

pub mod program;

use shardwise::propagation::{FactorSharding, TensorFactorShardings};
use shardwise::text::parse_mesh;
use shardwise::{AxisRef, Mesh};

/// `"a"` or `"a:(2)4"`.
pub fn ax(text: &str) -> AxisRef {
    match text.split_once(':') {
        None => AxisRef::full(text),
        Some((name, rest)) => {
            let (pre, size) = rest.trim_start_matches('(').split_once(')').unwrap();
            AxisRef::sub(name, pre.parse().unwrap(), size.parse().unwrap())
        }
    }
}

/// Whitespace-separated axes: `"a b:(1)2"`.
pub fn axes(text: &str) -> Vec<AxisRef> {
    text.split_whitespace().map(ax).collect()
}

/// An open, non-minor-most factor sharding (Shardy's `FactorSharding` defaults).
pub fn open(text: &str) -> FactorSharding {
    FactorSharding::open(axes(text))
}

pub fn closed(text: &str) -> FactorSharding {
    FactorSharding::closed(axes(text))
}

pub fn tensor<const N: usize>(factors: [(usize, FactorSharding); N]) -> TensorFactorShardings {
    TensorFactorShardings::from_factors(factors)
}

/// A mesh from its axes text: `"\"x\"=2, \"y\"=4"`.
pub fn mesh(axes: &str) -> Mesh {
    parse_mesh(&format!("<[{axes}]>")).unwrap()
}
