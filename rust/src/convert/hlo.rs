//! XLA HLO sharding strings, both ways.
//!
//! To HLO: the layout of JAX's `named_sharding_to_xla_hlo_sharding` (jax/_src/named_sharding.py)
//! canonicalised as XLA's `HloSharding::Subgroup` / `IotaTileAssignment` do (xla/hlo/ir/
//! hlo_sharding.cc, tile_assignment.cc), so the text equals `str(HloSharding)`:
//! `{devices=[2,1,4]<=[8] last_tile_dim_replicate}`, `{devices=[4,2]<=[2,4]T(1,0)}`,
//! `{replicated}`, `{maximal device=3}`; an explicit mesh device order prints the device list
//! (`{devices=[2,2]0,2,1,3}`). Mesh axes of size 1 are dropped, as JAX does; sub-axes split the
//! reshape dims. Open dims, priorities and explicitly replicated axes have no HLO counterpart
//! and are dropped (the layout is kept).
//!
//! From HLO: the device array is recognised as an iota reshape/transpose of the target mesh's
//! device order and its pieces named as (sub-)axes; without a target mesh, a mesh is derived
//! (one axis per piece, or one per tile dim with explicit device ids when the array is no iota).

use crate::axis::AxisRef;
use crate::convert::pieces::{decompose_iota, merge_adjacent, mesh_of_sizes, piece_axes, Pieces, StridedPiece};
use crate::error::{Error, Result};
use crate::lexer::Lexer;
use crate::mesh::Mesh;
use crate::sharding::{DimSharding, MeshRef, Reduction, TensorSharding};

/// The largest tensor rank accepted when reading HLO shardings.
pub const MAX_RANK: usize = 1 << 16;

/// XLA's canonical form of an iota reshape `(reshape_dims, transpose_perm)`.
pub fn canonicalize_iota(mut rd: Vec<i64>, mut perm: Vec<usize>) -> (Vec<i64>, Vec<usize>) {
    if rd.len() <= 1 {
        return (rd, perm);
    }
    loop {
        let keep: Vec<usize> = (0..rd.len()).filter(|&i| rd[i] != 1).collect();
        let mut new_index = vec![usize::MAX; rd.len()];
        for (n, &o) in keep.iter().enumerate() {
            new_index[o] = n;
        }
        perm = perm.iter().filter(|&&p| rd[p] != 1).map(|&p| new_index[p]).collect();
        rd = keep.iter().map(|&i| rd[i]).collect();
        let mut changed = false;
        let mut base = 0;
        for i in 1..rd.len() {
            if perm[base] + (i - base) == perm[i] {
                rd[perm[base]] *= rd[perm[i]];
                rd[perm[i]] = 1;
                changed = true;
            } else {
                base = i;
            }
        }
        if !changed {
            break;
        }
    }
    if rd.is_empty() {
        return (vec![1], vec![0]);
    }
    (rd, perm)
}

fn join(v: impl IntoIterator<Item = impl ToString>) -> String {
    v.into_iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",")
}

/// The HLO sharding text of `t` on `mesh` (see the module docs).
pub fn to_hlo(t: &TensorSharding, mesh: &Mesh) -> Result<String> {
    t.validate(mesh, None, false)?;
    if !t.unreduced.is_empty() && t.reduction != Reduction::Sum {
        return Err(Error::conversion(format!(
            "HLO shardings hold unreduced values as sums; {} is unreduced by {}",
            crate::text::print_sharding(t),
            t.reduction.name()
        )));
    }
    if let Some(d) = mesh.maximal_device() {
        return Ok(format!("{{maximal device={d}}}"));
    }
    if mesh.is_empty() {
        return Ok("{replicated}".into());
    }
    let refs: Vec<&AxisRef> = t.dims.iter().flat_map(|d| &d.axes).chain(&t.unreduced).collect();
    let pieces = Pieces::split(mesh, &refs)?;
    // Reshape dims: the pieces of size > 1, in mesh order.
    let kept: Vec<usize> = (0..pieces.pieces.len()).filter(|&i| pieces.pieces[i].size > 1).collect();
    let rd: Vec<i64> = kept.iter().map(|&i| pieces.pieces[i].size).collect();
    let slot = |i: usize| kept.iter().position(|&k| k == i);
    let group = |axes: &[AxisRef]| -> Result<Vec<usize>> {
        let mut g = Vec::new();
        for a in axes {
            g.extend(pieces.of(a, mesh)?.into_iter().filter_map(slot));
        }
        Ok(g)
    };
    let groups: Vec<Vec<usize>> = t.dims.iter().map(|d| group(&d.axes)).collect::<Result<_>>()?;
    let unreduced = group(&t.unreduced)?;
    let used: Vec<usize> = groups.iter().flatten().chain(&unreduced).copied().collect();
    let replicated: Vec<usize> = (0..rd.len()).filter(|i| !used.contains(i)).collect();
    let size = |g: &[usize]| g.iter().map(|&i| rd[i]).product::<i64>();
    let data: Vec<i64> = groups.iter().map(|g| size(g)).collect();
    let dp: i64 = data.iter().product();
    if groups.iter().all(Vec::is_empty) && unreduced.is_empty() {
        return Ok("{replicated}".into());
    }
    if dp == 1 && replicated.is_empty() {
        return Ok("{unreduced}".into());
    }
    let mut dims = data.clone();
    let mut suffix = String::new();
    match (unreduced.is_empty(), replicated.is_empty()) {
        (false, false) => {
            dims.extend([size(&unreduced), size(&replicated)]);
            suffix.push_str(" last_tile_dims={unreduced, replicated}");
        }
        (false, true) => {
            dims.push(size(&unreduced));
            suffix.push_str(" last_tile_dims={unreduced}");
        }
        (true, false) => {
            dims.push(size(&replicated));
            suffix.push_str(" last_tile_dim_replicate");
        }
        (true, true) => {}
    }
    let order: Vec<usize> = groups.iter().flatten().chain(&unreduced).chain(&replicated).copied().collect();
    if mesh.device_ids().is_empty() {
        let (crd, cperm) = canonicalize_iota(rd, order);
        let t_part = if crd.len() > 1 { format!("T({})", join(&cperm)) } else { String::new() };
        return Ok(format!("{{devices=[{}]<=[{}]{}{}}}", join(&dims), join(&crd), t_part, suffix));
    }
    // Explicit device order: the device list, transposed, replication groups sorted (V1).
    let stride: Vec<i64> = (0..rd.len()).map(|i| rd[i + 1..].iter().product()).collect();
    let n: i64 = rd.iter().product();
    let mut ids = Vec::with_capacity(n as usize);
    for k in 0..n {
        let (mut rest, mut linear) = (k, 0);
        for &p in order.iter().rev() {
            linear += (rest % rd[p]) * stride[p];
            rest /= rd[p];
        }
        ids.push(mesh.device_at(linear));
    }
    if !replicated.is_empty() {
        for run in ids.chunks_mut(size(&replicated) as usize) {
            run.sort_unstable();
        }
    }
    Ok(format!("{{devices=[{}]{}{}}}", join(&dims), join(&ids), suffix))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Subgroup {
    Replicated,
    Unreduced,
    Manual,
}

enum Parsed {
    Replicated,
    Unreduced,
    Maximal(i64),
    Tiled { dims: Vec<i64>, devices: Vec<i64>, types: Vec<Subgroup> },
}

impl Lexer<'_> {
    /// One HLO sharding, the whole input.
    fn hlo_sharding(&mut self) -> Result<Parsed> {
        self.expect("{")?;
        if self.src[self.pos..].trim_start().starts_with('{') {
            return Err(Error::conversion(format!(
                "tuple HLO sharding {:?}: convert each element separately",
                self.src
            )));
        }
        let out = if self.eat("replicated") {
            Parsed::Replicated
        } else if self.eat("unreduced") {
            Parsed::Unreduced
        } else if self.eat("manual") || self.eat("unknown") {
            return Err(Error::conversion(format!(
                "HLO sharding {:?} is manual or unknown, which a tensor sharding cannot express (use sdy.manual_computation)",
                self.src
            )));
        } else if self.eat("maximal") {
            self.expect("device=")?;
            Parsed::Maximal(self.int()?)
        } else if self.eat("devices=") {
            self.expect("[")?;
            let dims = self.list("]", Self::int)?;
            let n = dims.iter().try_fold(1i64, |a, &d| if d >= 1 { a.checked_mul(d) } else { None });
            let Some(n) = n.filter(|&n| n <= 1 << 24) else {
                return Err(Error::parse(
                    self.pos,
                    format!(
                        "HLO sharding {:?}: tile dims {dims:?} must be positive with at most 2^24 devices",
                        self.src
                    ),
                ));
            };
            let devices = if self.eat("<=") {
                self.expect("[")?;
                let rd = self.list("]", Self::int)?;
                let perm: Vec<i64> = if self.eat("T") {
                    self.expect("(")?;
                    self.list(")", Self::int)?
                } else {
                    (0..rd.len() as i64).collect()
                };
                iota_devices(&rd, &perm, n).map_err(|e| e.context(format!("HLO sharding {:?}", self.src)))?
            } else {
                let mut ids = vec![self.int()?];
                while self.eat(",") {
                    ids.push(self.int()?);
                }
                if ids.len() as i64 != n {
                    return Err(Error::parse(
                        self.pos,
                        format!("HLO sharding {:?}: {} device ids for {n} tiles", self.src, ids.len()),
                    ));
                }
                ids
            };
            let mut types = Vec::new();
            if self.eat("last_tile_dim_replicate") {
                types.push(Subgroup::Replicated);
            } else if self.eat("last_tile_dims={") {
                loop {
                    types.push(if self.eat("replicated") {
                        Subgroup::Replicated
                    } else if self.eat("unreduced") {
                        Subgroup::Unreduced
                    } else if self.eat("manual") {
                        Subgroup::Manual
                    } else {
                        return self.err("replicated, unreduced or manual");
                    });
                    if self.eat("}") {
                        break;
                    }
                    self.expect(",")?;
                }
            }
            if types.len() > dims.len() {
                return self.err("no more subgroup types than tile dims");
            }
            Parsed::Tiled { dims, devices, types }
        } else {
            return self.err("replicated, maximal or devices=");
        };
        if self.eat("metadata=") || self.eat("shard_as") || self.eat("shard_like") {
            return Err(Error::conversion(format!(
                "HLO sharding {:?}: metadata and shard_as/shard_like are not supported",
                self.src
            )));
        }
        self.expect("}")?;
        self.done()?;
        Ok(out)
    }
}

/// `iota(n).reshape(rd).transpose(perm)`, flattened.
fn iota_devices(rd: &[i64], perm: &[i64], n: i64) -> Result<Vec<i64>> {
    let mut seen = vec![false; rd.len()];
    let valid = perm.len() == rd.len()
        && perm.iter().all(|&p| (0..rd.len() as i64).contains(&p) && !std::mem::replace(&mut seen[p as usize], true));
    let total = rd.iter().try_fold(1i64, |a, &d| if d >= 1 { a.checked_mul(d) } else { None });
    if !valid || total != Some(n) {
        return Err(Error::parse(
            0,
            format!("reshape dims {rd:?} with transpose {perm:?} do not describe {n} devices"),
        ));
    }
    let stride: Vec<i64> = (0..rd.len()).map(|i| rd[i + 1..].iter().product()).collect();
    Ok((0..n)
        .map(|k| {
            let (mut rest, mut linear) = (k, 0);
            for &p in perm.iter().rev() {
                let p = p as usize;
                linear += (rest % rd[p]) * stride[p];
                rest /= rd[p];
            }
            linear
        })
        .collect())
}

/// Parses an HLO sharding for a tensor of `rank` onto `mesh` (or a derived mesh), returning
/// the sharding (bound to `mesh_name`, or inlined) and its mesh.
pub fn from_hlo(
    text: &str,
    rank: usize,
    mesh: Option<&Mesh>,
    mesh_name: Option<String>,
) -> Result<(TensorSharding, Mesh)> {
    if rank > MAX_RANK {
        return Err(Error::conversion(format!(
            "tensor rank {rank} is larger than the {MAX_RANK} dimensions shardwise supports"
        )));
    }
    let parsed = Lexer::new(text).hlo_sharding()?;
    let bind = |m: &Mesh| match &mesh_name {
        Some(n) => MeshRef::Named(n.into()),
        None => MeshRef::Inline(Box::new(m.clone())),
    };
    let closed = |axes: Vec<AxisRef>| DimSharding::closed(axes);
    let finish = |t: TensorSharding, m: Mesh| -> Result<(TensorSharding, Mesh)> {
        t.validate(&m, None, false)
            .map_err(|e| Error::conversion(format!("HLO sharding {text:?} on this mesh: {e}")))?;
        Ok((t, m))
    };
    let (dims, devices, types) = match parsed {
        Parsed::Maximal(d) => {
            let m = match mesh {
                Some(m) if m.maximal_device() == Some(d) => m.clone(),
                Some(m) => {
                    return Err(Error::conversion(format!(
                        "HLO sharding {text:?} puts the tensor on device {d}, but the target mesh {} is not the maximal mesh of that device",
                        crate::text::print_mesh(m)
                    )))
                }
                None => Mesh::maximal(d)?,
            };
            return finish(TensorSharding::replicated(bind(&m), 0, false), m);
        }
        Parsed::Replicated => {
            let m = mesh.cloned().unwrap_or_else(Mesh::empty);
            return finish(TensorSharding::replicated(bind(&m), rank, false), m);
        }
        Parsed::Unreduced => {
            let Some(m) = mesh.cloned() else {
                return Err(Error::conversion(format!(
                    "HLO sharding {text:?}: an unreduced sharding needs a target mesh"
                )));
            };
            let mut t = TensorSharding::replicated(bind(&m), rank, false);
            t.unreduced = m.axes().iter().filter(|a| a.size > 1).map(|a| AxisRef::full(a.name.clone())).collect();
            return finish(t, m);
        }
        Parsed::Tiled { dims, devices, types } => (dims, devices, types),
    };
    if types.contains(&Subgroup::Manual) {
        return Err(Error::conversion(format!(
            "HLO sharding {text:?} has manual subgroups, which a tensor sharding cannot express"
        )));
    }
    let nd = dims.len() - types.len();
    if nd != rank {
        return Err(Error::conversion(format!(
            "HLO sharding {text:?} has {nd} data dims, but the tensor has rank {rank}"
        )));
    }
    let n = devices.len() as i64;
    let m = match mesh {
        Some(m) => {
            if m.is_maximal() || m.total_size() != n {
                return Err(Error::conversion(format!(
                    "HLO sharding {text:?} spans {n} devices, but the target mesh {} has {}",
                    crate::text::print_mesh(m),
                    m.total_size()
                )));
            }
            m.clone()
        }
        None => derive_mesh(&dims, &devices)?,
    };
    let positions: Vec<i64> = devices
        .iter()
        .map(|&d| m.position_of(d))
        .collect::<Result<_>>()
        .map_err(|e| Error::conversion(format!("HLO sharding {text:?}: {e}")))?;
    let (positions, dims, types) = replicated_last(positions, dims, types);
    let per_dim = decompose_iota(&positions, &dims).ok_or_else(|| {
        Error::conversion(format!(
            "HLO sharding {text:?}: its device order is not a reshape/transpose of the mesh {}",
            crate::text::print_mesh(&m)
        ))
    })?;
    let axes_of = |pieces: &[StridedPiece]| -> Result<Vec<AxisRef>> {
        let mut v = Vec::new();
        for p in pieces {
            v.extend(piece_axes(*p, &m)?);
        }
        merge_adjacent(v, &m)
    };
    let mut t = TensorSharding::replicated(bind(&m), rank, false);
    for (dim, pieces) in t.dims.iter_mut().zip(&per_dim) {
        *dim = closed(axes_of(pieces)?);
    }
    let mut unreduced = Vec::new();
    for (k, ty) in types.iter().enumerate() {
        if *ty == Subgroup::Unreduced {
            unreduced.extend(axes_of(&per_dim[nd + k])?);
        }
    }
    unreduced.sort_by(|a, b| a.mesh_cmp(b, &m));
    t.unreduced = merge_adjacent(unreduced, &m)?;
    t.reduction = Reduction::Sum;
    finish(t, m)
}

/// Moves the replicated subgroup dims to the end as one dim and orders the devices of each
/// replication group by mesh position. The order within a replication group carries no meaning
/// (XLA sorts it by device id), so this makes the array an iota reshape whenever the layout is
/// one.
fn replicated_last(positions: Vec<i64>, dims: Vec<i64>, types: Vec<Subgroup>) -> (Vec<i64>, Vec<i64>, Vec<Subgroup>) {
    let nd = dims.len() - types.len();
    let is_rep = |k: usize| k >= nd && types[k - nd] == Subgroup::Replicated;
    if !(0..dims.len()).any(is_rep) {
        return (positions, dims, types);
    }
    let order: Vec<usize> =
        (0..dims.len()).filter(|&k| !is_rep(k)).chain((0..dims.len()).filter(|&k| is_rep(k))).collect();
    let stride: Vec<i64> = (0..dims.len()).map(|k| dims[k + 1..].iter().product()).collect();
    let mut out = Vec::with_capacity(positions.len());
    for k in 0..positions.len() as i64 {
        let (mut rest, mut flat) = (k, 0);
        for &d in order.iter().rev() {
            flat += (rest % dims[d]) * stride[d];
            rest /= dims[d];
        }
        out.push(positions[flat as usize]);
    }
    let group: i64 = (0..dims.len()).filter(|&k| is_rep(k)).map(|k| dims[k]).product();
    for run in out.chunks_mut(group as usize) {
        run.sort_unstable();
    }
    let mut new_dims: Vec<i64> = order.iter().filter(|&&k| !is_rep(k)).map(|&k| dims[k]).collect();
    new_dims.push(group);
    let mut new_types: Vec<Subgroup> = types.iter().copied().filter(|t| *t != Subgroup::Replicated).collect();
    new_types.push(Subgroup::Replicated);
    (out, new_dims, new_types)
}

/// A mesh for a device array: one axis per iota piece when the array is an iota
/// reshape/transpose, else one axis per tile dim with the array as explicit device order.
fn derive_mesh(dims: &[i64], devices: &[i64]) -> Result<Mesh> {
    if let Some(per_dim) = decompose_iota(devices, dims) {
        let mut all: Vec<StridedPiece> = per_dim.into_iter().flatten().collect();
        all.sort_by_key(|p| std::cmp::Reverse(p.stride));
        return mesh_of_sizes(&all.iter().map(|p| p.size).collect::<Vec<_>>(), None, vec![]);
    }
    let sizes: Vec<i64> = dims.iter().copied().filter(|&d| d > 1).collect();
    mesh_of_sizes(&sizes, None, devices.to_vec()).map_err(|e| {
        Error::conversion(format!("device ids {devices:?} are no permutation of 0..{}: {e}", devices.len()))
    })
}
