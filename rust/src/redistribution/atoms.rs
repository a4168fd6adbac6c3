//! Atoms: the finest sub-axes that every axis reference of a source and a target sharding is
//! made of (Shardonnay RFC "Axis splitting and sub-axes"). For each mesh axis the pre-sizes and
//! next pre-sizes of all its references cut the axis into consecutive sub-axes; every reference
//! is then a run of atoms, major to minor, and a sharding is a list of atom ids per dimension.
//! This lets the planner move, gather and slice parts of axes (`"x":(2)2` of `"x"`) exactly as
//! whole axes.

use crate::axis::AxisRef;
use crate::mesh::Mesh;

/// One atom: sub-axis `(pre)size` of mesh axis `axis` (an index into `mesh.axes()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Atom {
    pub axis: usize,
    pub pre: i64,
    pub size: i64,
}

/// The atoms of one (source, target) pair, ordered by mesh axis then pre-size (mesh order).
#[derive(Debug, Clone)]
pub struct Atoms {
    pub atoms: Vec<Atom>,
}

/// A sharding over atoms: atom ids per dimension (major to minor) and the unreduced atoms
/// (sorted by id).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Layout {
    pub dims: Vec<Vec<usize>>,
    pub unreduced: Vec<usize>,
}

impl Layout {
    /// Whether atom `a` is used anywhere (a dimension or unreduced).
    pub fn uses(&self, a: usize) -> bool {
        self.dims.iter().any(|d| d.contains(&a)) || self.unreduced.contains(&a)
    }

    /// The dimension holding atom `a` and its position there.
    pub fn find(&self, a: usize) -> Option<(usize, usize)> {
        self.dims.iter().enumerate().find_map(|(d, v)| v.iter().position(|&x| x == a).map(|p| (d, p)))
    }
}

impl Atoms {
    /// Cuts every mesh axis at the boundaries of `refs`. `None` when two references split one
    /// axis incompatibly (the cut points do not form a chain where each divides the next, e.g.
    /// `"x":(1)2` and `"x":(1)3` of an axis of size 6): such pairs have no common atoms.
    pub fn new<'a>(mesh: &Mesh, refs: impl Iterator<Item = &'a AxisRef> + Clone) -> Option<Atoms> {
        let mut atoms = Vec::new();
        for (i, axis) in mesh.axes().iter().enumerate() {
            let mut cuts = vec![1, axis.size];
            for r in refs.clone().filter(|r| r.name == axis.name) {
                let (pre, next) = match r.sub {
                    Some(s) => (s.pre_size, s.next_pre_size()),
                    None => (1, axis.size),
                };
                cuts.push(pre);
                cuts.push(next);
            }
            cuts.sort_unstable();
            cuts.dedup();
            if cuts.windows(2).any(|w| w[0] <= 0 || w[1] % w[0] != 0) {
                return None;
            }
            for w in cuts.windows(2) {
                atoms.push(Atom { axis: i, pre: w[0], size: w[1] / w[0] });
            }
        }
        Some(Atoms { atoms })
    }

    /// The atom ids of reference `r`, major to minor (empty if `r` is not on the mesh).
    pub fn of(&self, mesh: &Mesh, r: &AxisRef) -> Vec<usize> {
        let Some(axis) = mesh.axis_index(&r.name) else { return Vec::new() };
        let (pre, next) = match r.sub {
            Some(s) => (s.pre_size, s.next_pre_size()),
            None => (1, mesh.axes()[axis].size),
        };
        (0..self.atoms.len())
            .filter(|&i| {
                let a = self.atoms[i];
                a.axis == axis && a.pre >= pre && a.pre * a.size <= next
            })
            .collect()
    }

    /// The atom ids of a list of references, major to minor.
    pub fn of_list(&self, mesh: &Mesh, refs: &[AxisRef]) -> Vec<usize> {
        refs.iter().flat_map(|r| self.of(mesh, r)).collect()
    }

    /// Size of an atom list: the product of the atom sizes.
    pub fn count(&self, ids: &[usize]) -> i64 {
        ids.iter().map(|&i| self.atoms[i].size).product()
    }

    /// `(mesh axis, size)` per atom, for [`super::cost::ResolvedCost::cost`].
    pub fn group(&self, ids: &[usize]) -> Vec<(usize, i64)> {
        ids.iter().map(|&i| (self.atoms[i].axis, self.atoms[i].size)).collect()
    }

    /// Axis references of an atom list: consecutive atoms of one axis (major to minor) merge,
    /// into the full axis when they cover it.
    pub fn refs(&self, mesh: &Mesh, ids: &[usize]) -> Vec<AxisRef> {
        let mut out: Vec<(usize, i64, i64)> = Vec::new(); // (axis, pre, size)
        for &i in ids {
            let a = self.atoms[i];
            match out.last_mut() {
                Some(last) if last.0 == a.axis && last.1 * last.2 == a.pre => last.2 *= a.size,
                _ => out.push((a.axis, a.pre, a.size)),
            }
        }
        out.into_iter()
            .map(|(axis, pre, size)| {
                let m = &mesh.axes()[axis];
                if pre == 1 && size == m.size {
                    AxisRef::full(m.name.clone())
                } else {
                    AxisRef::sub(m.name.clone(), pre, size)
                }
            })
            .collect()
    }
}
