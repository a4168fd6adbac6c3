//! Mesh axes split into pieces, and the reverse: recognising an explicit device array as an
//! iota reshape/transpose and naming its pieces as (sub-)axes of a mesh.

use crate::axis::AxisRef;
use crate::error::{Error, Result};
use crate::mesh::{Mesh, MeshAxis};

/// One piece of a mesh axis: the sub-axis `(pre_size)size` of axis `axis` (mesh index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub axis: usize,
    pub pre_size: i64,
    pub size: i64,
}

/// All mesh axes split into pieces, in mesh order and major to minor within an axis.
#[derive(Debug, Clone)]
pub struct Pieces {
    pub pieces: Vec<Piece>,
}

impl Pieces {
    /// Splits every axis at the boundaries of `refs` (which must be valid for `mesh`), so that
    /// each ref is a run of consecutive pieces. Axes of size 1 become one piece of size 1.
    pub fn split(mesh: &Mesh, refs: &[&AxisRef]) -> Result<Pieces> {
        let mut pieces = Vec::new();
        for (ai, axis) in mesh.axes().iter().enumerate() {
            let mut cuts = vec![1, axis.size];
            for r in refs.iter().filter(|r| r.name == axis.name) {
                cuts.push(r.pre_size());
                cuts.push(r.next_pre_size(mesh)?);
            }
            cuts.sort_unstable();
            cuts.dedup();
            if cuts.len() == 1 {
                pieces.push(Piece { axis: ai, pre_size: 1, size: 1 });
            }
            for w in cuts.windows(2) {
                if w[1] % w[0] != 0 {
                    return Err(Error::conversion(format!(
                        "the sub-axes of axis \"{}\" do not split it into whole pieces (cut at {} then {})",
                        axis.name, w[0], w[1]
                    )));
                }
                pieces.push(Piece { axis: ai, pre_size: w[0], size: w[1] / w[0] });
            }
        }
        Ok(Pieces { pieces })
    }

    /// Indices of the pieces that make up `r`, major to minor.
    pub fn of(&self, r: &AxisRef, mesh: &Mesh) -> Result<Vec<usize>> {
        let ai = mesh.axis_index(&r.name).ok_or_else(|| Error::conversion(format!("unknown axis {r}")))?;
        let (lo, hi) = (r.pre_size(), r.next_pre_size(mesh)?);
        Ok((0..self.pieces.len())
            .filter(|&i| {
                let p = self.pieces[i];
                p.axis == ai && p.pre_size >= lo && p.pre_size * p.size <= hi && (p.size > 1 || axis_size_one(mesh, ai))
            })
            .collect())
    }

    pub fn sizes(&self) -> Vec<i64> {
        self.pieces.iter().map(|p| p.size).collect()
    }
}

fn axis_size_one(mesh: &Mesh, ai: usize) -> bool {
    mesh.axes()[ai].size == 1
}

/// A run of tile indices with a constant device stride: `size` consecutive steps of `stride`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StridedPiece {
    pub size: i64,
    pub stride: i64,
}

/// Recognises `devices` (row-major over `dims`, device ids `0..n`) as
/// `iota(n).reshape(..).transpose(..).reshape(dims)`. Returns, per tile dim, its strided
/// pieces major to minor, or None when the array is no such reshape.
pub fn decompose_iota(devices: &[i64], dims: &[i64]) -> Option<Vec<Vec<StridedPiece>>> {
    let n: i64 = dims.iter().product();
    if n as usize != devices.len()
        || devices.first().copied().unwrap_or(0) != 0
        || devices.iter().any(|&d| !(0..n).contains(&d))
    {
        return None;
    }
    let mut out = Vec::with_capacity(dims.len());
    for j in 0..dims.len() {
        let step: i64 = dims[j + 1..].iter().product();
        let v = |k: i64| devices[(k * step) as usize];
        let mut minor_first = Vec::new();
        let mut unit = 1i64;
        while unit < dims[j] {
            let left = dims[j] / unit;
            let stride = v(unit);
            let mut run = 1;
            while run < left && v(unit * run) == run * stride {
                run += 1;
            }
            let size = (2..=run).rev().find(|m| left % m == 0)?;
            minor_first.push(StridedPiece { size, stride });
            unit *= size;
        }
        minor_first.reverse();
        out.push(minor_first);
    }
    // The strides must chain like a row-major reshape, and the whole array must match.
    let mut all: Vec<StridedPiece> = out.iter().flatten().copied().collect();
    all.sort_by_key(|p| p.stride);
    let mut expect = 1;
    for p in &all {
        if p.stride != expect {
            return None;
        }
        expect *= p.size;
    }
    if expect != n {
        return None;
    }
    let mut coords = vec![0i64; dims.len()];
    for &d in devices {
        let mut want = 0;
        for (j, pieces) in out.iter().enumerate() {
            let mut c = coords[j];
            for p in pieces.iter().rev() {
                want += (c % p.size) * p.stride;
                c /= p.size;
            }
        }
        if want != d {
            return None;
        }
        for j in (0..dims.len()).rev() {
            coords[j] += 1;
            if coords[j] < dims[j] {
                break;
            }
            coords[j] = 0;
        }
    }
    Some(out)
}

/// Names a strided piece of the flattened (row-major) device order of `mesh` as (sub-)axes of
/// it, major to minor. Errors when the piece cuts an axis at a point that is no sub-axis.
pub fn piece_axes(p: StridedPiece, mesh: &Mesh) -> Result<Vec<AxisRef>> {
    let (lo, hi) = (p.stride, p.stride * p.size);
    let mut out = Vec::new();
    for (ai, axis) in mesh.axes().iter().enumerate() {
        let (a_lo, a_hi) = (mesh.axis_stride(ai), mesh.axis_stride(ai) * axis.size);
        let (l, h) = (lo.max(a_lo), hi.min(a_hi));
        if l >= h {
            continue;
        }
        if h % l != 0 || l % a_lo != 0 || a_hi % h != 0 {
            return Err(Error::conversion(format!(
                "a run of {} devices with stride {} cuts mesh axis \"{}\"={} at no sub-axis boundary",
                p.size, p.stride, axis.name, axis.size
            )));
        }
        let size = h / l;
        let pre = a_hi / h;
        out.push(if size == axis.size {
            AxisRef::full(axis.name.clone())
        } else {
            AxisRef::sub(axis.name.clone(), pre, size)
        });
    }
    Ok(out)
}

/// Merges consecutive mergeable sub-axes (`"x":(1)2, "x":(2)2` -> `"x"`).
pub fn merge_adjacent(axes: Vec<AxisRef>, mesh: &Mesh) -> Result<Vec<AxisRef>> {
    let mut out: Vec<AxisRef> = Vec::with_capacity(axes.len());
    for a in axes {
        match out.last() {
            Some(prev) if prev.can_merge(&a) => {
                let merged = prev.merge(&a, mesh)?;
                *out.last_mut().unwrap_or_else(|| unreachable!()) = merged;
            }
            _ => out.push(a),
        }
    }
    Ok(out)
}

/// A mesh whose axes are the given sizes, named `names` (or `axis_0`, `axis_1`, …).
pub fn mesh_of_sizes(sizes: &[i64], names: Option<Vec<String>>, device_ids: Vec<i64>) -> Result<Mesh> {
    let names = names.unwrap_or_else(|| (0..sizes.len()).map(|i| format!("axis_{i}")).collect());
    if names.len() != sizes.len() {
        return Err(Error::conversion(format!("expected {} axis names, got {}", sizes.len(), names.len())));
    }
    Mesh::new(names.into_iter().zip(sizes).map(|(name, &size)| MeshAxis { name, size }).collect(), device_ids)
}
