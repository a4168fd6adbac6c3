//! Shape-changing ops without data movement across elements: `reshape` (compound factors),
//! `broadcast_in_dim` and `transpose` (Shardy `op_sharding_rule_registry.cc`).

use super::{attrs, list, tuple, OpDesc};
use crate::error::Result;
use crate::rule::{FactorKind, OpShardingRule, NULL_DIM};

fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a as i64
}

/// Walks the input and output dimensions together, splitting them into the largest common
/// factors (GCDs); where no common factor exists the two sides get their own factors until
/// their products meet again. Size-1 dimensions get their own size-1 factors. No rule for a
/// reshape of zero elements.
pub(super) fn reshape(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    let (ins, outs) = (op.operand_shape(0, "")?, op.result_shape(0, "")?);
    if ins.contains(&0) {
        return Ok(None);
    }
    if ins.iter().chain(&outs).any(|&d| d < 0) {
        return Err(op.error(format_args!("expected static shapes, got {} -> {}", tuple(&ins), tuple(&outs))));
    }
    // Element counts beyond i64 are refused: every product below stays within them.
    let prod = |s: &[i64]| s.iter().try_fold(1i64, |a, &d| a.checked_mul(d));
    let (Some(in_count), Some(out_count)) = (prod(&ins), prod(&outs)) else {
        return Err(op.error(format_args!(
            "expected at most 2^63 - 1 elements, got {} -> {}",
            tuple(&ins),
            tuple(&outs)
        )));
    };
    if in_count != out_count {
        return Err(op.error(format_args!(
            "expected the same number of elements, got {} -> {}",
            tuple(&ins),
            tuple(&outs)
        )));
    }
    let pass = FactorKind::PassThrough;
    let mut b = op.builder();
    let (in_rank, out_rank) = (ins.len(), outs.len());
    let (mut i, mut o) = (0usize, 0usize);
    let (mut dims_in, mut dims_out) = (1i64, 1i64); // product of the dimension sizes reached so far
    let (mut fac_in, mut fac_out) = (1i64, 1i64); // product of the factors added so far
    let (ii, oo) = (|i: usize| i as i64, |o: usize| o as i64);
    while i < in_rank || o < out_rank {
        if i < in_rank && ins[i] == 1 {
            b.add_factor(&[ii(i)], &[NULL_DIM], 1, pass, false)?;
            i += 1;
            continue;
        }
        if o < out_rank && outs[o] == 1 {
            b.add_factor(&[NULL_DIM], &[oo(o)], 1, pass, false)?;
            o += 1;
            continue;
        }
        if i < in_rank && dims_in == fac_in {
            dims_in *= ins[i];
        }
        if o < out_rank && dims_out == fac_out {
            dims_out *= outs[o];
        }
        let (mut next_in, mut next_out) = (dims_in / fac_in, dims_out / fac_out);
        let g = gcd(next_in, next_out);
        // A factor that makes both sides meet again, else one that keeps the GCD.
        let diverged = |next: i64, smaller: i64, larger: i64| -> i64 {
            if larger % smaller == 0 && next % (larger / smaller) == 0 {
                larger / smaller
            } else if next > g {
                next / g
            } else {
                next
            }
        };
        let (di, doo) = (ii(i), oo(o));
        if fac_in == fac_out {
            if g > 1 {
                b.add_factor(&[di], &[doo], g, pass, false)?;
                fac_in *= g;
                fac_out *= g;
            } else {
                b.add_factor(&[di], &[NULL_DIM], next_in, pass, false)?;
                fac_in *= next_in;
                b.add_factor(&[NULL_DIM], &[doo], next_out, pass, false)?;
                fac_out *= next_out;
            }
        } else if fac_in < fac_out {
            next_in = diverged(next_in, fac_in, fac_out);
            b.add_factor(&[di], &[NULL_DIM], next_in, pass, false)?;
            fac_in *= next_in;
        } else {
            next_out = diverged(next_out, fac_out, fac_in);
            b.add_factor(&[NULL_DIM], &[doo], next_out, pass, false)?;
            fac_out *= next_out;
        }
        if i < in_rank && dims_in == fac_in {
            i += 1;
        }
        if o < out_rank && dims_out == fac_out {
            o += 1;
        }
    }
    Ok(Some(b.build()))
}

/// One factor per output dimension, shared with the input dimension mapped to it unless that
/// one has size 1 and is expanded (it then gets its own size-1 factor).
pub(super) fn broadcast_in_dim(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    let (ins, outs) = (op.operand_shape(0, "")?, op.result_shape(0, "")?);
    let bdims = attrs::ints(op, "broadcast_dimensions", None)?;
    if bdims.len() != ins.len() || bdims.iter().any(|&d| !(0..outs.len() as i64).contains(&d)) {
        return Err(op.error(format_args!(
            "broadcast_dimensions {} do not fit {} -> {}",
            list(&bdims),
            tuple(&ins),
            tuple(&outs)
        )));
    }
    let mut out_to_in = vec![NULL_DIM; outs.len()];
    for (in_dim, &out_dim) in bdims.iter().enumerate() {
        out_to_in[out_dim as usize] = in_dim as i64;
    }
    let mut b = op.builder();
    for (out_dim, &out_size) in outs.iter().enumerate() {
        let mut in_dim = out_to_in[out_dim];
        if in_dim != NULL_DIM && ins[in_dim as usize] == 1 && out_size != 1 {
            b.add_factor(&[in_dim], &[NULL_DIM], 1, FactorKind::PassThrough, false)?;
            in_dim = NULL_DIM;
        }
        b.add_factor(&[in_dim], &[out_dim as i64], out_size, FactorKind::PassThrough, false)?;
    }
    Ok(Some(b.build()))
}

pub(super) fn transpose(op: &OpDesc, _conservative: bool) -> Result<Option<OpShardingRule>> {
    let ins = op.operand_shape(0, "")?;
    let perm = attrs::ints(op, "permutation", None)?;
    let mut sorted = perm.clone();
    sorted.sort_unstable();
    if sorted.iter().enumerate().any(|(i, &p)| p != i as i64) || sorted.len() != ins.len() {
        return Err(op.error(format_args!("expected a permutation of range({}), got {}", ins.len(), list(&perm))));
    }
    let mut b = op.builder();
    for (out_dim, &in_dim) in perm.iter().enumerate() {
        b.add_factor(&[in_dim], &[out_dim as i64], ins[in_dim as usize], FactorKind::PassThrough, false)?;
    }
    Ok(Some(b.build()))
}
