//! Moves over atom layouts: the collectives a plan is made of, before they are turned back into
//! axis references. Each move knows how it changes a [`Layout`], whether it is exact on the
//! padded shards, and what it costs.

use super::atoms::{Atoms, Layout};
use super::cost::{CollectiveKind, ResolvedCost, StepCost};

/// One collective over atoms.
#[derive(Debug, Clone, PartialEq)]
pub enum Move {
    /// Removes, per dimension, the given minor-most atoms (a suffix) by gathering.
    Gather(Vec<Vec<usize>>),
    /// Appends, per dimension, the given free atoms (minor-most) by a local slice.
    Slice(Vec<Vec<usize>>),
    /// Moves the minor-most `atoms` of dimension `src` to the minor end of dimension `tgt`.
    AllToAll { src: usize, tgt: usize, atoms: Vec<usize> },
    /// Reassigns shards to devices: the layout becomes the given one (same shard counts per
    /// dimension).
    Permute(Layout),
    /// Reduces the given unreduced atoms; the result is replicated along them.
    AllReduce(Vec<usize>),
    /// Reduces, per dimension, the given unreduced atoms and scatters the result along them
    /// (appended minor-most).
    ReduceScatter(Vec<Vec<usize>>),
}

impl Move {
    pub fn kind(&self) -> CollectiveKind {
        match self {
            Move::Gather(_) => CollectiveKind::AllGather,
            Move::Slice(_) => CollectiveKind::AllSlice,
            Move::AllToAll { .. } => CollectiveKind::AllToAll,
            Move::Permute(_) => CollectiveKind::CollectivePermute,
            Move::AllReduce(_) => CollectiveKind::AllReduce,
            Move::ReduceScatter(_) => CollectiveKind::ReduceScatter,
        }
    }
}

/// The padded length of a dimension of `size` split into `count` shards:
/// `count * ceil(size / count)`. Two shard counts of one dimension lay out their shards on the
/// same padded index space exactly when their padded lengths agree.
pub fn padded(size: i64, count: i64) -> i64 {
    if count <= 1 {
        return size;
    }
    count.saturating_mul(size / count + i64::from(size % count != 0))
}

/// Whether changing a dimension of `size` from `from` shards to `to` shards (one dividing the
/// other) keeps every shard a block of the other layout: true when either side is unsharded
/// (a whole dimension is sliced or truncated locally) or both pad to the same length.
pub fn exact_change(size: i64, from: i64, to: i64) -> bool {
    from == to || from == 1 || to == 1 || padded(size, from) == padded(size, to)
}

/// Everything a plan is evaluated against.
pub struct Ctx<'a> {
    pub atoms: &'a Atoms,
    pub shape: &'a [i64],
    pub dtype_bytes: i64,
    pub cost: &'a ResolvedCost,
}

impl Ctx<'_> {
    /// Bytes of one device's padded local buffer under `layout`.
    pub fn local_bytes(&self, layout: &Layout) -> f64 {
        let mut b = self.dtype_bytes as f64;
        for (d, ids) in layout.dims.iter().enumerate() {
            let (size, count) = (self.shape[d], self.atoms.count(ids));
            b *= (size / count + i64::from(size % count != 0)) as f64;
        }
        b
    }

    fn count(&self, ids: &[usize]) -> i64 {
        self.atoms.count(ids)
    }

    /// Applies `m` to `cur`; `None` when the move does not fit the layout or is not exact on
    /// the padded shards.
    pub fn apply(&self, cur: &Layout, m: &Move) -> Option<Layout> {
        let mut out = cur.clone();
        match m {
            Move::Gather(per_dim) | Move::Slice(per_dim) | Move::ReduceScatter(per_dim) => {
                if per_dim.len() != cur.dims.len() {
                    return None;
                }
                for (d, ids) in per_dim.iter().enumerate() {
                    let dim = &mut out.dims[d];
                    let before = self.count(dim);
                    match m {
                        Move::Gather(_) => {
                            if !dim.ends_with(ids) {
                                return None;
                            }
                            dim.truncate(dim.len() - ids.len());
                        }
                        Move::Slice(_) => {
                            if ids.iter().any(|&a| cur.uses(a)) {
                                return None;
                            }
                            dim.extend_from_slice(ids);
                        }
                        _ => {
                            if ids.iter().any(|a| !cur.unreduced.contains(a)) {
                                return None;
                            }
                            out.unreduced.retain(|a| !ids.contains(a));
                            out.dims[d].extend_from_slice(ids);
                        }
                    }
                    if !exact_change(self.shape[d], before, self.count(&out.dims[d])) {
                        return None;
                    }
                }
            }
            Move::AllToAll { src, tgt, atoms } => {
                let (s, t) = (*src, *tgt);
                if s == t
                    || s >= cur.dims.len()
                    || t >= cur.dims.len()
                    || !cur.dims[s].ends_with(atoms)
                    || atoms.is_empty()
                {
                    return None;
                }
                let n = self.count(atoms);
                let (cs, ct) = (self.count(&cur.dims[s]), self.count(&cur.dims[t]));
                if !exact_change(self.shape[s], cs, cs / n) || !exact_change(self.shape[t], ct, ct * n) {
                    return None;
                }
                out.dims[s].truncate(cur.dims[s].len() - atoms.len());
                out.dims[t].extend_from_slice(atoms);
            }
            Move::Permute(to) => {
                let same_counts = to.dims.len() == cur.dims.len()
                    && to.dims.iter().zip(&cur.dims).all(|(a, b)| self.count(a) == self.count(b));
                if !same_counts || to.unreduced != cur.unreduced {
                    return None;
                }
                out = to.clone();
            }
            Move::AllReduce(ids) => {
                if ids.is_empty() || ids.iter().any(|a| !cur.unreduced.contains(a)) {
                    return None;
                }
                out.unreduced.retain(|a| !ids.contains(a));
            }
        }
        Some(out)
    }

    /// Cost of `m` applied to `cur` (the layout before it).
    pub fn cost(&self, cur: &Layout, m: &Move) -> StepCost {
        let local = self.local_bytes(cur);
        let group: Vec<usize> = match m {
            Move::Gather(p) | Move::Slice(p) | Move::ReduceScatter(p) => p.iter().flatten().copied().collect(),
            Move::AllToAll { atoms, .. } | Move::AllReduce(atoms) => atoms.clone(),
            Move::Permute(to) => moved_atoms(cur, to),
        };
        self.cost.cost(m.kind(), &self.atoms.group(&group), local)
    }
}

/// Atoms whose (dimension, position) differ between two layouts: the axes a permute crosses.
pub fn moved_atoms(a: &Layout, b: &Layout) -> Vec<usize> {
    let mut out = Vec::new();
    for (x, y) in [(a, b), (b, a)] {
        for (d, ids) in x.dims.iter().enumerate() {
            for (p, &id) in ids.iter().enumerate() {
                if y.dims.get(d).and_then(|v| v.get(p)) != Some(&id) && !out.contains(&id) {
                    out.push(id);
                }
            }
        }
    }
    out
}
