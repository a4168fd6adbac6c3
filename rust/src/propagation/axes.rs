//! Operations on axis references and axis lists that propagation needs beyond those of
//! [`AxisRef`]: prefixes without overlap, greatest common prefixes, merging at the end of a
//! list, total sizes. Semantics of Shardy's `AxisRefAttr::{canCoexist, getPrefixWithoutOverlap,
//! getGreatestCommonPrefix}` (`shardy/dialect/sdy/ir/dialect.cc`) and of `addAxisOrMerge`,
//! `getGreatestCommonPrefix`, `getTotalAxesSize`, `getPrefixWithoutOverlap`
//! (`shardy/dialect/sdy/ir/utils.{h,cc}`).
//!
//! The in-place forms (`*_in_place`) only ever change the sub-axis part of the reference they
//! are given, never its name, so they allocate nothing; propagation's inner loops use them.

use crate::axis::{AxisRef, SubAxis};
use crate::error::{Error, Result};
use crate::mesh::Mesh;

/// Greatest common divisor of `|a|` and `|b|` (`gcd(0, b) = |b|`), as `std::gcd` computes it
/// for the sizes Shardy's projection and propagation divide. Saturates at `i64::MAX` (only
/// reachable for `gcd(i64::MIN, i64::MIN)`, which no valid size produces).
pub fn gcd(a: i64, b: i64) -> i64 {
    let (mut x, mut y) = (a.unsigned_abs(), b.unsigned_abs());
    while y != 0 {
        (x, y) = (y, x % y);
    }
    i64::try_from(x).unwrap_or(i64::MAX)
}

/// The size of `axis`: a sub-axis knows its size; a full axis needs `mesh`. Errors when the
/// axis is unknown to the mesh, or when a full axis is sized without a mesh (Shardy's unit
/// tests run propagation without a mesh, and never need the size of a full axis then).
pub fn axis_size(axis: &AxisRef, mesh: Option<&Mesh>) -> Result<i64> {
    match (axis.sub, mesh) {
        (Some(s), _) => Ok(s.size),
        (None, Some(m)) => m.require_axis(&axis.name),
        (None, None) => Err(Error::invariant(
            "unknown-axis",
            format!("the size of full axis {axis} is needed but no mesh was given"),
        )),
    }
}

/// Product of the sizes of `axes` (Shardy `getTotalAxesSize`), saturating at `i64::MAX`.
pub fn total_axes_size(axes: &[AxisRef], mesh: Option<&Mesh>) -> Result<i64> {
    axes.iter().try_fold(1i64, |acc, a| Ok(acc.saturating_mul(axis_size(a, mesh)?)))
}

fn interval(s: Option<SubAxis>) -> Option<(i64, i64)> {
    s.map(|s| (s.pre_size, s.next_pre_size()))
}

/// Whether two references can be parts of one factorisation of their axis (Shardy
/// `AxisRefAttr::canCoexist`): references to different axes, or where one is a full axis,
/// always can; two sub-axes can when their overlapping and non-overlapping parts (or the gap
/// between them) are whole sub-axes.
pub fn can_coexist(a: &AxisRef, b: &AxisRef) -> bool {
    if a.name != b.name {
        return true;
    }
    let (Some((pa, na)), Some((pb, nb))) = (interval(a.sub), interval(b.sub)) else {
        return true;
    };
    let (min_pre, max_pre) = (pa.min(pb), pa.max(pb));
    let (min_next, max_next) = (na.min(nb), na.max(nb));
    if min_pre < 1 || min_next < 1 {
        return false; // malformed sub-axes never coexist (and must not divide by zero)
    }
    if min_next > max_pre {
        min_next % max_pre == 0 && max_pre % min_pre == 0 && max_next % min_next == 0
    } else {
        max_pre % min_next == 0
    }
}

/// Shrinks `axis` to its largest prefix that does not overlap `other` (Shardy
/// `AxisRefAttr::getPrefixWithoutOverlap`). Returns `false`, leaving `axis` unspecified, when
/// no such prefix exists (the two cannot coexist, or `other` overlaps the first part of
/// `axis`). Only `axis.sub` changes.
pub fn prefix_without_overlap_in_place(axis: &mut AxisRef, other: &AxisRef) -> bool {
    if !can_coexist(axis, other) {
        return false;
    }
    if !axis.overlaps(other) {
        return true;
    }
    let (pre, other_pre) = (axis.pre_size(), other.pre_size());
    if pre < 1 || pre >= other_pre {
        return false;
    }
    axis.sub = Some(SubAxis { pre_size: pre, size: other_pre / pre });
    true
}

/// [`prefix_without_overlap_in_place`] against every reference of `others` in turn (Shardy's
/// free function `getPrefixWithoutOverlap`).
pub fn prefix_without_overlap_list_in_place(axis: &mut AxisRef, others: &[AxisRef]) -> bool {
    others.iter().all(|o| prefix_without_overlap_in_place(axis, o))
}

/// The largest prefix of `axis` that overlaps none of `others`, if any.
pub fn prefix_without_overlap(axis: &AxisRef, others: &[AxisRef]) -> Option<AxisRef> {
    let mut a = axis.clone();
    prefix_without_overlap_list_in_place(&mut a, others).then_some(a)
}

/// The greatest common prefix of two references (Shardy
/// `AxisRefAttr::getGreatestCommonPrefix`): the one that is a prefix of the other, if any.
pub fn greatest_common_prefix_axis(a: &AxisRef, b: &AxisRef) -> Option<AxisRef> {
    if !can_coexist(a, b) {
        return None;
    }
    if a.prefix_of(b) {
        Some(a.clone())
    } else if b.prefix_of(a) {
        Some(b.clone())
    } else {
        None
    }
}

/// The greatest common prefix of two axis lists (Shardy's free function
/// `getGreatestCommonPrefix`): equal leading references, then at most one reference that is
/// the common prefix of the first pair that differs.
pub fn greatest_common_prefix(first: &[AxisRef], second: &[AxisRef]) -> Vec<AxisRef> {
    let mut out = Vec::with_capacity(first.len().min(second.len()));
    for (a, b) in first.iter().zip(second) {
        if a == b {
            out.push(a.clone());
            continue;
        }
        if let Some(p) = greatest_common_prefix_axis(a, b) {
            out.push(p);
        }
        break;
    }
    out
}

/// Appends `axis` to `axes`, merging it into the last reference when the two are adjacent
/// sub-axes of one axis (Shardy `addAxisOrMerge`); the merge gives the full axis when it
/// covers all of it.
pub fn add_axis_or_merge(axes: &mut Vec<AxisRef>, axis: AxisRef, mesh: &Mesh) -> Result<()> {
    match axes.last_mut() {
        Some(last) if last.can_merge(&axis) => {
            *last = last.merge(&axis, mesh)?;
        }
        _ => axes.push(axis),
    }
    Ok(())
}

/// The largest suffix of `axis` that does not overlap `other` (Shardy
/// `AxisRefAttr::getSuffixWithoutOverlap`): `axis` itself when the two do not overlap, `None`
/// when they cannot coexist or `other` reaches the end of `axis`. Errors when a full axis is
/// unknown to `mesh`.
pub fn suffix_without_overlap(axis: &AxisRef, other: &AxisRef, mesh: &Mesh) -> Result<Option<AxisRef>> {
    if !can_coexist(axis, other) {
        return Ok(None);
    }
    if !axis.overlaps(other) {
        return Ok(Some(axis.clone()));
    }
    let (next, other_next) = (axis.next_pre_size(mesh)?, other.next_pre_size(mesh)?);
    if next <= other_next || other_next < 1 {
        return Ok(None);
    }
    Ok(Some(AxisRef::sub(axis.name, other_next, next / other_next)))
}

/// Shardy's `AxisRefAttr::operator<` as a key: by name, then sub-axes by pre-size and size,
/// a full axis sorting as pre-size 1 and an infinite size.
fn shardy_key(a: &AxisRef) -> (&'static str, i64, i64) {
    match a.sub {
        Some(s) => (a.name.as_str(), s.pre_size, s.size),
        None => (a.name.as_str(), 1, i64::MAX),
    }
}

/// The parts of the axes `a` that are not in the axes `b` (Shardy `getAxisSetDiff`,
/// `shardy/dialect/sdy/ir/utils.cc`): each reference of `a` in turn, minus the references of
/// `b` it overlaps (the one found by binary search in Shardy's order, and the next overlap
/// of what is left after it), keeping the prefix before each overlap. Errors when a full
/// axis is unknown to `mesh`.
pub fn axis_set_diff(a: &[AxisRef], b: &[AxisRef], mesh: &Mesh) -> Result<Vec<AxisRef>> {
    if a.is_empty() || a == b {
        return Ok(Vec::new());
    }
    if b.is_empty() {
        return Ok(a.to_vec());
    }
    let mut set_b = b.to_vec();
    set_b.sort_by(|x, y| shardy_key(x).cmp(&shardy_key(y)));
    let first_overlapping = |cur: &AxisRef| -> Option<&AxisRef> {
        let i = set_b.partition_point(|x| shardy_key(x) < shardy_key(cur));
        if i > 0 && cur.overlaps(&set_b[i - 1]) {
            return Some(&set_b[i - 1]);
        }
        set_b.get(i).filter(|x| cur.overlaps(x))
    };
    let mut out = Vec::with_capacity(a.len());
    for x in a {
        let mut cur = Some(x.clone());
        while let Some(c) = cur {
            let Some(other) = first_overlapping(&c) else {
                out.push(c);
                break;
            };
            if let Some(p) = prefix_without_overlap(&c, std::slice::from_ref(other)) {
                out.push(p);
            }
            cur = suffix_without_overlap(&c, other, mesh)?;
        }
    }
    Ok(out)
}

/// `axes` in mesh order with adjacent sub-axes merged (Shardy `sortAndMergeAxes`). Errors
/// when a merged axis is unknown to `mesh`.
pub fn sort_and_merge_axes(axes: &[AxisRef], mesh: &Mesh) -> Result<Vec<AxisRef>> {
    let mut sorted = axes.to_vec();
    sorted.sort_by(|x, y| x.mesh_cmp(y, mesh));
    let mut out: Vec<AxisRef> = Vec::with_capacity(sorted.len());
    for a in sorted {
        add_axis_or_merge(&mut out, a, mesh)?;
    }
    Ok(out)
}
