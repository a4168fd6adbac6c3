//! References to mesh axes and sub-axes (Shardonnay RFC "Axis splitting and sub-axes";
//! semantics of Shardy's `AxisRefAttr` in `shardy/dialect/sdy/ir/dialect.cc`).
//!
//! A sub-axis `"x":(m)k` of a full axis `"x"` of size `n` is the middle dimension of the reshape
//! `n -> [m, k, n/(m*k)]`: `m` is its pre-size, `k` its size, `m*k` its next pre-size. A full
//! axis behaves like the sub-axis `(1)n`. Two references to the same axis are compared as the
//! intervals `[pre, next_pre)` of that factorisation.

use std::cmp::Ordering;

use crate::error::{Error, Result};
use crate::mesh::Mesh;
use crate::name::Name;

/// `(pre_size, size)` of a sub-axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SubAxis {
    pub pre_size: i64,
    pub size: i64,
}

impl SubAxis {
    pub fn next_pre_size(&self) -> i64 {
        self.pre_size.saturating_mul(self.size)
    }
}

/// A full axis `"x"` or a sub-axis `"x":(m)k`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AxisRef {
    pub name: Name,
    pub sub: Option<SubAxis>,
}

impl AxisRef {
    pub fn full(name: impl Into<Name>) -> AxisRef {
        AxisRef { name: name.into(), sub: None }
    }

    pub fn sub(name: impl Into<Name>, pre_size: i64, size: i64) -> AxisRef {
        AxisRef { name: name.into(), sub: Some(SubAxis { pre_size, size }) }
    }

    pub fn is_sub_axis(&self) -> bool {
        self.sub.is_some()
    }

    /// Size of this reference; the mesh must have the axis.
    pub fn size(&self, mesh: &Mesh) -> Result<i64> {
        match self.sub {
            Some(s) => Ok(s.size),
            None => mesh.require_axis(&self.name),
        }
    }

    pub fn pre_size(&self) -> i64 {
        self.sub.map_or(1, |s| s.pre_size)
    }

    /// Next pre-size of a sub-axis, or the full axis size.
    pub fn next_pre_size(&self, mesh: &Mesh) -> Result<i64> {
        match self.sub {
            Some(s) => Ok(s.next_pre_size()),
            None => mesh.require_axis(&self.name),
        }
    }

    /// Checks what needs no mesh: a sub-axis has pre-size >= 1 and size > 1.
    pub fn check_local(&self) -> Result<()> {
        let Some(s) = self.sub else { return Ok(()) };
        if s.pre_size < 1 {
            return Err(Error::invariant(
                "sub-axis-pre-size",
                format!("sub-axis {self}: pre-size must be at least 1, got {}", s.pre_size),
            ));
        }
        if s.size <= 1 {
            return Err(Error::invariant(
                "sub-axis-size",
                format!("sub-axis {self}: size must be greater than 1, got {}", s.size),
            ));
        }
        Ok(())
    }

    /// Checks the reference against its mesh: the axis exists; a sub-axis also passes
    /// [`AxisRef::check_local`], `pre*size` divides the axis size, and it is smaller than the axis
    /// (Shardy `verifySubAxes`).
    pub fn check(&self, mesh: &Mesh) -> Result<()> {
        let axis_size = mesh.require_axis(&self.name)?;
        self.check_local()?;
        let Some(s) = self.sub else { return Ok(()) };
        let me = self.to_string();
        let next = s.pre_size.checked_mul(s.size);
        if next.is_none_or(|n| axis_size % n != 0) {
            return Err(Error::invariant(
                "sub-axis-divisibility",
                format!(
                    "sub-axis {me}: pre-size x size = {} x {} must divide the size {axis_size} of axis \"{}\"",
                    s.pre_size, s.size, self.name
                ),
            ));
        }
        if s.size == axis_size {
            return Err(Error::invariant(
                "sub-axis-is-full-axis",
                format!("sub-axis {me} spans the whole axis \"{}\"; write the full axis instead", self.name),
            ));
        }
        Ok(())
    }

    /// Whether `other` lies within this reference (same axis, interval containment).
    pub fn contains(&self, other: &AxisRef) -> bool {
        if self.name != other.name {
            return false;
        }
        match (self.sub, other.sub) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(a), Some(b)) => a.pre_size <= b.pre_size && a.next_pre_size() >= b.next_pre_size(),
        }
    }

    pub fn strictly_contains(&self, other: &AxisRef) -> bool {
        self != other && self.contains(other)
    }

    /// `self` is the major part of `other`.
    pub fn prefix_of(&self, other: &AxisRef) -> bool {
        other.contains(self) && self.pre_size() == other.pre_size()
    }

    /// `self` is the minor part of `other`.
    pub fn suffix_of(&self, other: &AxisRef, mesh: &Mesh) -> Result<bool> {
        Ok(other.contains(self) && self.next_pre_size(mesh)? == other.next_pre_size(mesh)?)
    }

    /// Whether the two references share devices of the same axis.
    pub fn overlaps(&self, other: &AxisRef) -> bool {
        if self.name != other.name {
            return false;
        }
        match (self.sub, other.sub) {
            (Some(a), Some(b)) => a.pre_size < b.next_pre_size() && b.pre_size < a.next_pre_size(),
            _ => true,
        }
    }

    /// Two adjacent sub-axes of one axis, `self` major to `other`: `"x":(1)2, "x":(2)4`.
    pub fn can_merge(&self, other: &AxisRef) -> bool {
        match (self.name == other.name, self.sub, other.sub) {
            (true, Some(a), Some(b)) => a.next_pre_size() == b.pre_size,
            _ => false,
        }
    }

    /// Merges two adjacent sub-axes (see [`AxisRef::can_merge`]); the full axis when they cover
    /// all of it.
    pub fn merge(&self, other: &AxisRef, mesh: &Mesh) -> Result<AxisRef> {
        if !self.can_merge(other) {
            return Err(Error::invariant(
                "cannot-merge",
                format!("{self} and {other} are not adjacent sub-axes of one axis"),
            ));
        }
        let (a, b) = (
            self.sub.unwrap_or(SubAxis { pre_size: 1, size: 1 }),
            other.sub.unwrap_or(SubAxis { pre_size: 1, size: 1 }),
        );
        let size = a.size.saturating_mul(b.size);
        if a.pre_size == 1 && Some(size) == mesh.axis_size(&self.name) {
            Ok(AxisRef::full(self.name))
        } else {
            Ok(AxisRef::sub(self.name, a.pre_size, size))
        }
    }

    /// The overlap of two references to one axis, if they overlap in a representable way.
    pub fn overlap(&self, other: &AxisRef) -> Option<AxisRef> {
        if self.name != other.name {
            return None;
        }
        let (a, b) = match (self.sub, other.sub) {
            (None, _) => return Some(other.clone()),
            (_, None) => return Some(self.clone()),
            (Some(a), Some(b)) => (a, b),
        };
        let (min_pre, max_pre) = (a.pre_size.min(b.pre_size), a.pre_size.max(b.pre_size));
        let (min_next, max_next) = (a.next_pre_size().min(b.next_pre_size()), a.next_pre_size().max(b.next_pre_size()));
        if min_next <= max_pre || !can_coexist(min_pre, max_pre, min_next, max_next) {
            return None;
        }
        Some(AxisRef::sub(self.name, max_pre, min_next / max_pre))
    }

    /// Orders references as Shardy's mesh comparator: by axis position in the mesh, then full
    /// axis vs sub-axes by pre-size, then sub-axes by `(pre_size, size)`. Unknown axes sort last
    /// by name.
    pub fn mesh_cmp(&self, other: &AxisRef, mesh: &Mesh) -> Ordering {
        if self.name != other.name {
            let key = |r: &AxisRef| (mesh.axis_index(&r.name).unwrap_or(usize::MAX), r.name);
            return key(self).cmp(&key(other));
        }
        match (self.sub, other.sub) {
            (None, None) => Ordering::Equal,
            (None, Some(b)) => {
                if b.pre_size > 1 {
                    Ordering::Less
                } else {
                    Ordering::Greater
                }
            }
            (Some(a), None) => {
                if a.pre_size == 1 {
                    Ordering::Less
                } else {
                    Ordering::Greater
                }
            }
            (Some(a), Some(b)) => a.cmp(&b),
        }
    }
}

fn can_coexist(min_pre: i64, max_pre: i64, min_next: i64, max_next: i64) -> bool {
    if min_next > max_pre {
        min_next % max_pre == 0 && max_pre % min_pre == 0 && max_next % min_next == 0
    } else {
        max_pre % min_next == 0
    }
}

impl std::fmt::Display for AxisRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::text::print_axis_ref(self))
    }
}
