//! `sdy-close-shardings` (Shardy's `close_shardings.cc`): every dimension of every sharding is
//! closed (priorities kept) and replicated axes are dropped (`getClosedLike`).

use super::super::PassContext;
use crate::error::Result;
use crate::ir::Program;
use crate::sharding::TensorSharding;

/// Shardy's `getClosedLike`: every dimension closed (priorities kept), replicated axes
/// dropped.
pub fn closed_like(s: &TensorSharding) -> TensorSharding {
    let mut out = s.clone();
    for d in &mut out.dims {
        d.closed = true;
    }
    out.replicated.clear();
    out
}

pub fn run(p: &mut Program, _cx: &mut PassContext) -> Result<()> {
    // Each distinct sharding text is closed once (`map_shardings`): reading them was most of
    // the pass.
    p.map_shardings(&mut |s| {
        let closed = closed_like(s);
        // An open empty dimension with a priority cannot be closed (refused with an
        // `InvalidShardingError`).
        closed.check_local()?;
        Ok((closed != *s).then_some(closed))
    })
}
