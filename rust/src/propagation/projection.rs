//! Sharding projection (Shardy `ShardingProjection`, `TensorFactorShardings`, `FactorSharding`
//! in `shardy/dialect/sdy/transforms/propagation/sharding_projection.{h,cc}`): the view of
//! the dimension shardings of an op's operands and results from the perspective of the op's
//! factors.
//!
//! The workflow is
//!
//! 1. project each tensor's dimension shardings onto the factors of its mapping in the op's
//!    [`OpShardingRule`] ([`ShardingProjection::build`]); an axis may be split into sub-axes
//!    where a factor is smaller than it;
//! 2. change the factor shardings ([`ShardingProjection::expand_sharding`], or a
//!    [`FactorPropagation`](super::factor_prop::FactorPropagation) strategy);
//! 3. project the factor shardings back to dimension shardings
//!    ([`TensorFactorShardings::to_tensor_sharding`]); adjacent sub-axes merge again, and a
//!    dimension stops at a factor that would need a strided view.
//!
//! A reshape `8 -> 4x2` has the rule `([ij])->([i, j]) {i=4, j=2}`. On the mesh `["x"=8]` the
//! operand sharding `[{"x"}]` projects to `i: ["x":(1)4]` and `j: ["x":(4)2]`; once the result
//! has the same factor shardings, it projects back to `[{"x":(1)4}, {"x":(4)2}]`, and the
//! operand still to `[{"x"}]` (the two sub-axes merge).
//!
//! Factor shardings of a tensor are stored in a `Vec` indexed by factor (`None` where the
//! tensor does not have the factor), not in a map.

use std::fmt;
use std::ops::BitOrAssign;

use super::axes::{add_axis_or_merge, axis_size, gcd, greatest_common_prefix};
use crate::axis::{AxisRef, SubAxis};
use crate::error::{Error, Result};
use crate::mesh::Mesh;
use crate::name::Name;
use crate::rule::{DimMapping, OpShardingRule};
use crate::sharding::{DimSharding, MeshRef, Reduction, TensorSharding};

/// How one axis list relates to another as a prefix (Shardy `PrefixStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PrefixStatus {
    /// The two lists are equal.
    Equal,
    /// The first list is a strict prefix of the second: equal up to its last reference, which
    /// is a prefix of (or equal to) the reference at the same position of the second list.
    StrictPrefix,
    /// The first list is not a prefix of the second.
    NotAPrefix,
}

/// Whether `first` is a prefix of `second` (Shardy `isAxisListPrefixOf`). `["a":(1)4]` is a
/// strict prefix of `["a", "b"]`; `["a", "b":(1)2]` of `["a", "b"]`.
pub fn axis_list_prefix_status(first: &[AxisRef], second: &[AxisRef]) -> PrefixStatus {
    let Some(first_last) = first.last() else {
        return if second.is_empty() { PrefixStatus::Equal } else { PrefixStatus::StrictPrefix };
    };
    if first.len() > second.len() {
        return PrefixStatus::NotAPrefix;
    }
    let n = first.len();
    if first[..n - 1] != second[..n - 1] {
        return PrefixStatus::NotAPrefix;
    }
    if first.len() == second.len() && *first_last == second[n - 1] {
        return PrefixStatus::Equal;
    }
    if first_last.prefix_of(&second[n - 1]) {
        PrefixStatus::StrictPrefix
    } else {
        PrefixStatus::NotAPrefix
    }
}

/// Whether `first` is a strict prefix of `second` (Shardy `isStrictPrefix`).
pub fn is_strict_prefix(first: &[AxisRef], second: &[AxisRef]) -> bool {
    axis_list_prefix_status(first, second) == PrefixStatus::StrictPrefix
}

/// The sharding of one factor in one tensor (Shardy `FactorSharding`): the axes along which
/// it is sharded, whether it may be sharded further, whether it is the minor-most factor of
/// its dimension, and the overflow axes.
///
/// Overflow axes are the axes of the projected dimension sharding that follow a non-minor-most
/// factor whose remaining size is coprime to the next axis; they are kept only so that
/// projecting back restores the dimension sharding, and they block any further sharding of the
/// factor and of the factors minor to it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct FactorSharding {
    /// Axes sharding the factor, major to minor (Shardy `axisRefs`).
    pub axes: Vec<AxisRef>,
    /// The factor may not be sharded further (its dimension sharding was closed).
    pub closed: bool,
    /// The factor is the last (minor-most) factor of its dimension; only such a factor may be
    /// sharded by axes whose product does not divide its size.
    pub minor_most: bool,
    /// Axes of the dimension sharding beyond this non-minor-most factor that it cannot take.
    pub overflow_axes: Vec<AxisRef>,
}

impl FactorSharding {
    /// An open factor sharding along `axes` (not minor-most, no overflow axes).
    pub fn open(axes: Vec<AxisRef>) -> FactorSharding {
        FactorSharding { axes, ..FactorSharding::default() }
    }

    /// A closed factor sharding along `axes` (not minor-most, no overflow axes).
    pub fn closed(axes: Vec<AxisRef>) -> FactorSharding {
        FactorSharding { axes, closed: true, ..FactorSharding::default() }
    }

    /// The same sharding, marked minor-most.
    pub fn minor_most(mut self) -> FactorSharding {
        self.minor_most = true;
        self
    }

    /// The same sharding with `overflow` as its overflow axes.
    pub fn with_overflow(mut self, overflow: Vec<AxisRef>) -> FactorSharding {
        self.overflow_axes = overflow;
        self
    }
}

/// The factor shardings of one tensor, with its replicated and unreduced axes (Shardy
/// `TensorFactorShardings`). `factors[f]` is `None` when the tensor does not have factor `f`;
/// the vector may be shorter than the rule's factor count (missing entries are `None`), and
/// equality ignores trailing `None`s.
#[derive(Debug, Clone, Default)]
pub struct TensorFactorShardings {
    /// The sharding of each factor, indexed by factor; `None` where the tensor lacks it.
    pub factors: Vec<Option<FactorSharding>>,
    /// Explicitly replicated axes of the tensor sharding.
    pub replicated: Vec<AxisRef>,
    /// Unreduced axes of the tensor sharding.
    pub unreduced: Vec<AxisRef>,
    /// How the unreduced axes are to be reduced.
    pub reduction: Reduction,
}

impl PartialEq for TensorFactorShardings {
    fn eq(&self, other: &Self) -> bool {
        let n = self.factors.len().max(other.factors.len());
        (0..n).all(|f| self.get(f) == other.get(f))
            && self.replicated == other.replicated
            && self.unreduced == other.unreduced
            && self.reduction == other.reduction
    }
}

impl Eq for TensorFactorShardings {}

impl TensorFactorShardings {
    /// A tensor with the given `(factor, sharding)` pairs and no replicated or unreduced axes.
    /// A factor listed twice keeps its last sharding.
    pub fn from_factors(factors: impl IntoIterator<Item = (usize, FactorSharding)>) -> TensorFactorShardings {
        let mut t = TensorFactorShardings::default();
        for (f, s) in factors {
            t.insert(f, s);
        }
        t
    }

    /// The same tensor with `replicated` as its replicated axes.
    pub fn with_replicated(mut self, replicated: Vec<AxisRef>) -> TensorFactorShardings {
        self.replicated = replicated;
        self
    }

    /// The same tensor with `unreduced` as its unreduced axes.
    pub fn with_unreduced(mut self, unreduced: Vec<AxisRef>) -> TensorFactorShardings {
        self.unreduced = unreduced;
        self
    }

    /// The sharding of factor `factor`, if this tensor has it.
    pub fn get(&self, factor: usize) -> Option<&FactorSharding> {
        self.factors.get(factor).and_then(Option::as_ref)
    }

    /// Mutable access to the sharding of factor `factor`, if this tensor has it.
    pub fn get_mut(&mut self, factor: usize) -> Option<&mut FactorSharding> {
        self.factors.get_mut(factor).and_then(Option::as_mut)
    }

    /// Whether this tensor has factor `factor`.
    pub fn has_factor(&self, factor: usize) -> bool {
        self.get(factor).is_some()
    }

    /// Sets the sharding of factor `factor`, returning the previous one.
    pub fn insert(&mut self, factor: usize, sharding: FactorSharding) -> Option<FactorSharding> {
        if self.factors.len() <= factor {
            self.factors.resize(factor + 1, None);
        }
        self.factors[factor].replace(sharding)
    }

    /// The factors of this tensor with their shardings, by increasing factor index.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &FactorSharding)> {
        self.factors.iter().enumerate().filter_map(|(f, s)| s.as_ref().map(|s| (f, s)))
    }

    /// One past the largest factor index this tensor has (0 when it has none).
    pub fn factor_bound(&self) -> usize {
        self.factors.iter().rposition(Option::is_some).map_or(0, |f| f + 1)
    }

    /// Replaces the axes of factor `factor` by `new_axes` when this tensor has the factor and
    /// its axes are a strict prefix of `new_axes` (Shardy
    /// `TensorFactorShardings::expandShardingAxes`). Returns whether the axes changed.
    pub fn expand_sharding_axes(&mut self, factor: usize, new_axes: &[AxisRef]) -> bool {
        let Some(s) = self.get_mut(factor) else { return false };
        if !is_strict_prefix(&s.axes, new_axes) {
            return false;
        }
        s.axes.clear();
        s.axes.extend_from_slice(new_axes);
        true
    }

    /// Replaces the axes and overflow axes of factor `factor` when this tensor has the factor
    /// and either differs (Shardy `TensorFactorShardings::updateShardingAxes`); closedness and
    /// minor-mostness are kept. Returns whether anything changed.
    pub fn update_sharding_axes(&mut self, factor: usize, new_axes: &[AxisRef], new_overflow_axes: &[AxisRef]) -> bool {
        let Some(s) = self.get_mut(factor) else { return false };
        if s.axes == new_axes && s.overflow_axes == new_overflow_axes {
            return false;
        }
        s.axes = new_axes.to_vec();
        s.overflow_axes = new_overflow_axes.to_vec();
        true
    }

    /// Product of the sizes of every axis and overflow axis of every factor (Shardy
    /// `TensorFactorShardings::getShardingSize`), saturating at `i64::MAX`.
    pub fn sharding_size(&self, mesh: &Mesh) -> Result<i64> {
        let mut size = 1i64;
        for (_, s) in self.iter() {
            for a in s.axes.iter().chain(&s.overflow_axes) {
                size = size.saturating_mul(axis_size(a, Some(mesh))?);
            }
        }
        Ok(size)
    }

    /// Projects the factor shardings back to a tensor sharding bound to `mesh_ref` (Shardy
    /// `TensorFactorShardings::createTensorShardingAttr`). For each dimension of `mapping`,
    /// factor by factor from major to minor: the factor's axes are appended (the first one
    /// merged into the previous factor's last axis when they are adjacent sub-axes); a factor
    /// with overflow axes appends them and ends the dimension; a factor sharded into fewer
    /// pieces than its size ends the dimension too, since any further axis would need a
    /// strided view. A dimension is closed if any factor it went through is closed. Replicated
    /// and unreduced axes and the reduction are copied; priorities are not kept.
    ///
    /// Errors when `mapping` names a factor this tensor lacks or that has no size in
    /// `factor_sizes`, or when an axis is unknown to `mesh`.
    pub fn to_tensor_sharding(
        &self,
        mapping: &[DimMapping],
        factor_sizes: &[i64],
        mesh_ref: &MeshRef,
        mesh: &Mesh,
    ) -> Result<TensorSharding> {
        let mut dims = Vec::with_capacity(mapping.len());
        for (d, dim_mapping) in mapping.iter().enumerate() {
            let mut closed = false;
            let mut axes: Vec<AxisRef> = Vec::new();
            for &f in dim_mapping {
                let fi =
                    factor_index(f, factor_sizes.len()).map_err(|e| e.context(format!("projecting back dim {d}")))?;
                let s = self.get(fi).ok_or_else(|| {
                    Error::invariant(
                        "projection-missing-factor",
                        format!(
                            "projecting back dim {d}: the mapping names factor {} but the tensor's factor shardings do not have it",
                            crate::rule::factor_symbol(f)
                        ),
                    )
                })?;
                closed |= s.closed;
                let sharded = append_axes(&mut axes, &s.axes, mesh)?;
                if !s.overflow_axes.is_empty() {
                    append_axes(&mut axes, &s.overflow_axes, mesh)?;
                    break;
                }
                if sharded < factor_sizes[fi] {
                    break;
                }
            }
            dims.push(DimSharding { axes, closed, priority: None });
        }
        Ok(TensorSharding {
            mesh: mesh_ref.clone(),
            dims,
            replicated: self.replicated.clone(),
            unreduced: self.unreduced.clone(),
            reduction: self.reduction,
        })
    }
}

/// Appends `new` to `axes`, merging the first one into the last of `axes` when possible;
/// returns the product of the sizes of `new` (Shardy's `addAxesToDimSharding`).
fn append_axes(axes: &mut Vec<AxisRef>, new: &[AxisRef], mesh: &Mesh) -> Result<i64> {
    let mut total = 1i64;
    for (i, a) in new.iter().enumerate() {
        total = total.saturating_mul(axis_size(a, Some(mesh))?);
        if i == 0 {
            add_axis_or_merge(axes, a.clone(), mesh)?;
        } else {
            axes.push(a.clone());
        }
    }
    Ok(total)
}

fn factor_index(f: i64, num_factors: usize) -> Result<usize> {
    usize::try_from(f).ok().filter(|&i| i < num_factors).ok_or_else(|| {
        Error::invariant(
            "projection-factor-out-of-range",
            format!("factor index {f} is out of range: the rule has {num_factors} factors"),
        )
    })
}

/// A fixed-size set of tensor indices (LLVM's `BitVector` as Shardy uses it).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct BitSet {
    words: Vec<u64>,
    len: usize,
}

impl BitSet {
    /// A set over `0..len` with no element.
    pub fn new(len: usize) -> BitSet {
        BitSet { words: vec![0; len.div_ceil(64)], len }
    }

    /// The size of the universe `0..len`.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the universe is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `i` is in the set (`false` outside the universe).
    pub fn get(&self, i: usize) -> bool {
        i < self.len && self.words[i / 64] & (1 << (i % 64)) != 0
    }

    /// Adds (`value`) or removes `i`; indices outside the universe are ignored.
    pub fn set(&mut self, i: usize, value: bool) {
        if i >= self.len {
            return;
        }
        let bit = 1u64 << (i % 64);
        if value {
            self.words[i / 64] |= bit;
        } else {
            self.words[i / 64] &= !bit;
        }
    }

    /// Whether any index is in the set.
    pub fn any(&self) -> bool {
        self.words.iter().any(|&w| w != 0)
    }

    /// The indices in the set, increasing (Shardy's `toSetBitsVector`).
    pub fn ones(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.len).filter(move |&i| self.get(i))
    }

    /// The indices in the set, increasing, collected.
    pub fn to_vec(&self) -> Vec<usize> {
        self.ones().collect()
    }
}

impl BitOrAssign<&BitSet> for BitSet {
    /// Union; the universe grows to the larger of the two.
    fn bitor_assign(&mut self, other: &BitSet) {
        if other.len > self.len {
            self.len = other.len;
            self.words.resize(other.words.len(), 0);
        }
        for (w, o) in self.words.iter_mut().zip(&other.words) {
            *w |= o;
        }
    }
}

impl fmt::Display for BitSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.to_vec())
    }
}

/// Which operands and which results changed (Shardy `UpdateTensorShardings`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct UpdateTensorShardings {
    /// Indices of the operands that changed.
    pub operands: BitSet,
    /// Indices of the results that changed.
    pub results: BitSet,
}

impl UpdateTensorShardings {
    /// Nothing changed, for an op with the given numbers of operands and results.
    pub fn new(num_operands: usize, num_results: usize) -> UpdateTensorShardings {
        UpdateTensorShardings { operands: BitSet::new(num_operands), results: BitSet::new(num_results) }
    }

    /// Whether any operand or result changed.
    pub fn any(&self) -> bool {
        self.operands.any() || self.results.any()
    }
}

impl BitOrAssign<&UpdateTensorShardings> for UpdateTensorShardings {
    fn bitor_assign(&mut self, other: &UpdateTensorShardings) {
        self.operands |= &other.operands;
        self.results |= &other.results;
    }
}

/// The factor shardings of every operand and result of one op (Shardy `ShardingProjection`).
/// Tensor index `t` means operand `t` for `t < operands.len()`, else result
/// `t - operands.len()`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShardingProjection {
    /// The factor shardings of each operand.
    pub operands: Vec<TensorFactorShardings>,
    /// The factor shardings of each result.
    pub results: Vec<TensorFactorShardings>,
}

/// The mesh reference that the present shardings share (Shardy `getCommonMeshOrRef`, given
/// that the caller has already resolved the mesh to `mesh`): shardings on the empty inline mesh
/// `<[]>` are ignored; the others must all name the same mesh symbol, or inline a mesh equal to
/// `mesh`. Returns the first such reference, or `None` when no sharding is present.
///
/// Errors (`ErrorKind::Mesh`) when two shardings name different mesh symbols, or an inline mesh
/// differs from `mesh`.
pub fn common_mesh_ref<'a>(
    operand_shardings: &[Option<&'a TensorSharding>],
    result_shardings: &[Option<&'a TensorSharding>],
    mesh: &Mesh,
) -> Result<Option<&'a MeshRef>> {
    let mut common: Option<&'a MeshRef> = None;
    let mut named: Option<(&'a str, String)> = None;
    let tensors = operand_shardings
        .iter()
        .enumerate()
        .map(|(i, s)| (s, "operand", i))
        .chain(result_shardings.iter().enumerate().map(|(i, s)| (s, "result", i)));
    for (sharding, kind, i) in tensors {
        let Some(sharding) = sharding else { continue };
        match &sharding.mesh {
            MeshRef::Inline(m) if m.is_empty() => continue,
            MeshRef::Inline(m) => {
                if **m != *mesh {
                    return Err(Error::mesh(format!(
                        "{kind} {i} is sharded on the inline mesh {}, but the op's shardings are projected on the mesh {}; all tensors of an op must share one mesh",
                        crate::text::print_mesh(m),
                        crate::text::print_mesh(mesh)
                    )));
                }
            }
            MeshRef::Named(n) => match &named {
                Some((prev, first)) if *prev != n => {
                    return Err(Error::mesh(format!(
                        "{kind} {i} is sharded on mesh @{n} but {first} on mesh @{prev}; all tensors of an op must share one mesh"
                    )));
                }
                Some(_) => {}
                None => named = Some((n, format!("{kind} {i}"))),
            },
        }
        common.get_or_insert(&sharding.mesh);
    }
    Ok(common)
}

/// `AxisRefInfo` of Shardy's projection: what is left of the current axis of a dimension
/// sharding while it is handed out to factors.
#[derive(Clone, Copy)]
struct Remaining {
    size: i64,
    /// Pre-size when what is left is a sub-axis (always set for a sub-axis of the input).
    split_pre: Option<i64>,
}

impl Remaining {
    fn at(axes: &[AxisRef], index: usize, mesh: &Mesh) -> Result<Option<Remaining>> {
        let Some(a) = axes.get(index) else { return Ok(None) };
        Ok(Some(Remaining { size: axis_size(a, Some(mesh))?, split_pre: a.sub.map(|s| s.pre_size) }))
    }

    fn axis(&self, name: Name) -> AxisRef {
        AxisRef { name, sub: self.split_pre.map(|p| SubAxis { pre_size: p, size: self.size }) }
    }
}

/// Shardy's `addRemainingAxes`: appends what is left of the current axis and every following
/// axis of `axes`, merging where possible.
fn add_remaining_axes(
    out: &mut Vec<AxisRef>,
    mut remaining: Option<Remaining>,
    axes: &[AxisRef],
    mut index: usize,
    mesh: &Mesh,
) -> Result<()> {
    while let Some(r) = remaining {
        add_axis_or_merge(out, r.axis(axes[index].name), mesh)?;
        index += 1;
        remaining = Remaining::at(axes, index, mesh)?;
    }
    Ok(())
}

/// Checks what projection relies on for every axis of `sharding`: the axis exists in `mesh`
/// and a sub-axis has pre-size >= 1 and size > 1.
fn check_axes(sharding: &TensorSharding, mesh: &Mesh) -> Result<()> {
    for a in sharding.axis_refs() {
        mesh.require_axis(&a.name)?;
        a.check_local()?;
    }
    Ok(())
}

/// Shardy's `buildTensorFactorShardings` for one tensor with an optional sharding.
fn build_tensor(
    mapping: &[DimMapping],
    sharding: Option<&TensorSharding>,
    factor_sizes: &[i64],
    mesh: &Mesh,
    closed_if_missing: bool,
) -> Result<TensorFactorShardings> {
    let mut out = TensorFactorShardings { factors: vec![None; factor_sizes.len()], ..Default::default() };
    if let Some(s) = sharding {
        if s.dims.len() != mapping.len() {
            return Err(Error::invariant(
                "projection-rank-mismatch",
                format!(
                    "the sharding {} has {} dimensions but the rule maps {} dimensions",
                    crate::text::print_sharding(s),
                    s.dims.len(),
                    mapping.len()
                ),
            ));
        }
        check_axes(s, mesh)?;
    }
    for (d, dim_mapping) in mapping.iter().enumerate() {
        let (axes, dim_closed): (&[AxisRef], bool) = match sharding {
            Some(s) => (&s.dims[d].axes, s.dims[d].closed),
            None => (&[], closed_if_missing),
        };
        let mut index = 0usize;
        let mut remaining = Remaining::at(axes, index, mesh)?;
        let mut has_overflow = false;
        for (k, &f) in dim_mapping.iter().enumerate() {
            let fi = factor_index(f, factor_sizes.len()).map_err(|e| e.context(format!("projecting dim {d}")))?;
            let minor_most = k + 1 == dim_mapping.len();
            let fs = out.factors[fi].get_or_insert_with(FactorSharding::default);
            fs.minor_most = minor_most;
            if has_overflow {
                // A previous factor overflowed: this one stays empty and closed.
                fs.closed = true;
                break;
            }
            fs.closed = dim_closed;
            if minor_most {
                // The minor-most factor takes every remaining axis, even when their product does
                // not divide its size (padding).
                add_remaining_axes(&mut fs.axes, remaining, axes, index, mesh)?;
                break;
            }
            let mut remaining_factor = factor_sizes[fi];
            let mut common = 1i64;
            while let Some(r) = remaining.as_mut() {
                if r.size != 1 {
                    common = gcd(remaining_factor, r.size);
                    if common <= 1 {
                        break;
                    }
                }
                let name = &axes[index].name;
                if r.size > common {
                    // Split the axis: this factor takes its major part of size `common`.
                    let pre = r.split_pre.unwrap_or(1);
                    let sub = SubAxis { pre_size: pre, size: common };
                    r.split_pre = Some(sub.next_pre_size());
                    r.size /= common;
                    remaining_factor /= common;
                    fs.axes.push(AxisRef { name: *name, sub: Some(sub) });
                } else {
                    // The factor takes all that is left of the axis.
                    fs.axes.push(r.axis(*name));
                    remaining_factor /= r.size;
                    index += 1;
                    remaining = Remaining::at(axes, index, mesh)?;
                }
            }
            if remaining_factor > 1 && remaining.is_some() {
                // The rest of the factor and the current axis are coprime: everything left of
                // the dimension sharding overflows.
                has_overflow = true;
                add_remaining_axes(&mut fs.overflow_axes, remaining, axes, index, mesh)?;
            }
        }
    }
    if let Some(s) = sharding {
        out.replicated.clone_from(&s.replicated);
        out.unreduced.clone_from(&s.unreduced);
        out.reduction = s.reduction;
    }
    Ok(out)
}

/// Shardy's `buildTensorFactorShardings` from axes per factor: every factor of `mapping`
/// sharded along `axes_per_factor[f]`, closed.
fn build_tensor_from_axes(mapping: &[DimMapping], axes_per_factor: &[Vec<AxisRef>]) -> Result<TensorFactorShardings> {
    let mut out = TensorFactorShardings { factors: vec![None; axes_per_factor.len()], ..Default::default() };
    for (d, dim_mapping) in mapping.iter().enumerate() {
        for (k, &f) in dim_mapping.iter().enumerate() {
            let fi = factor_index(f, axes_per_factor.len())
                .map_err(|e| e.context(format!("dim {d}: expected one axis list per factor")))?;
            let fs = out.factors[fi].get_or_insert_with(FactorSharding::default);
            fs.axes.clone_from(&axes_per_factor[fi]);
            fs.closed = true;
            fs.minor_most = k + 1 == dim_mapping.len();
        }
    }
    Ok(out)
}

fn check_count(kind: &str, shardings: usize, mappings: usize) -> Result<()> {
    if shardings != mappings {
        return Err(Error::invariant(
            "projection-tensor-count",
            format!(
                "expected one {kind} sharding (or None) per {kind} mapping of the rule ({mappings}), got {shardings}"
            ),
        ));
    }
    Ok(())
}

impl ShardingProjection {
    /// A projection of the given factor shardings.
    pub fn new(operands: Vec<TensorFactorShardings>, results: Vec<TensorFactorShardings>) -> ShardingProjection {
        ShardingProjection { operands, results }
    }

    /// Projects the shardings of an op's operands and results onto the factors of `rule`
    /// (Shardy `ShardingProjection::build`). A missing sharding (`None`) projects to empty
    /// factor shardings, open or closed per `closed_if_missing`.
    ///
    /// Each dimension's axes are handed out to its factors major to minor: a non-minor-most
    /// factor takes axes (splitting one into sub-axes by the gcd of its size and what is left of
    /// the factor) while they divide what is left of it, size-1 axes always; if it is not full
    /// then and axes are left, those become its overflow axes and the factors minor to it stay
    /// empty and closed; the minor-most factor takes every remaining axis.
    ///
    /// Errors: shardings that do not share the mesh (see [`common_mesh_ref`]); a count of
    /// shardings other than the rule's count of mappings; a sharding whose rank is not its
    /// mapping's; a factor index out of range; an axis unknown to `mesh` or a malformed
    /// sub-axis.
    pub fn build(
        operand_shardings: &[Option<&TensorSharding>],
        result_shardings: &[Option<&TensorSharding>],
        rule: &OpShardingRule,
        mesh: &Mesh,
        closed_if_missing: bool,
    ) -> Result<ShardingProjection> {
        common_mesh_ref(operand_shardings, result_shardings, mesh)?;
        ShardingProjection::build_on_mesh(operand_shardings, result_shardings, rule, mesh, closed_if_missing)
    }

    /// [`ShardingProjection::build`] without its mesh check: the shardings may name different
    /// mesh symbols or inline meshes. Shardy's propagation compares meshes by content (two
    /// symbols naming equal meshes project together, a sharding on the empty mesh `<[]>` joins
    /// any op), and its caller has already found the common mesh `mesh` (see
    /// `propagation::solver`). Errors as `build` does otherwise.
    pub fn build_on_mesh(
        operand_shardings: &[Option<&TensorSharding>],
        result_shardings: &[Option<&TensorSharding>],
        rule: &OpShardingRule,
        mesh: &Mesh,
        closed_if_missing: bool,
    ) -> Result<ShardingProjection> {
        check_count("operand", operand_shardings.len(), rule.operand_mappings.len())?;
        check_count("result", result_shardings.len(), rule.result_mappings.len())?;
        let sizes = &rule.factor_sizes;
        let operands = operand_shardings
            .iter()
            .zip(&rule.operand_mappings)
            .enumerate()
            .map(|(i, (s, m))| {
                build_tensor(m, *s, sizes, mesh, closed_if_missing).map_err(|e| e.context(format!("operand {i}")))
            })
            .collect::<Result<Vec<_>>>()?;
        let results = result_shardings
            .iter()
            .zip(&rule.result_mappings)
            .enumerate()
            .map(|(i, (s, m))| {
                build_tensor(m, *s, sizes, mesh, closed_if_missing).map_err(|e| e.context(format!("result {i}")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(ShardingProjection { operands, results })
    }

    /// A projection where every tensor shards each of its factors `f` along
    /// `axes_per_factor[f]`, all closed, with no overflow, replicated or unreduced axes
    /// (Shardy's `ShardingProjection::build(AxesPerFactorRef, OpShardingRuleAttr)`). Errors
    /// when `axes_per_factor` has no entry for a factor of the rule's mappings.
    pub fn from_axes_per_factor(axes_per_factor: &[Vec<AxisRef>], rule: &OpShardingRule) -> Result<ShardingProjection> {
        let operands = rule
            .operand_mappings
            .iter()
            .map(|m| build_tensor_from_axes(m, axes_per_factor))
            .collect::<Result<Vec<_>>>()?;
        let results = rule
            .result_mappings
            .iter()
            .map(|m| build_tensor_from_axes(m, axes_per_factor))
            .collect::<Result<Vec<_>>>()?;
        Ok(ShardingProjection { operands, results })
    }

    /// Number of operands.
    pub fn num_operands(&self) -> usize {
        self.operands.len()
    }

    /// Number of results.
    pub fn num_results(&self) -> usize {
        self.results.len()
    }

    /// Number of operands and results.
    pub fn num_tensors(&self) -> usize {
        self.operands.len() + self.results.len()
    }

    /// Tensor `t`: operand `t`, or result `t - num_operands()` (Shardy `getTensor`).
    pub fn tensor(&self, t: usize) -> Option<&TensorFactorShardings> {
        if t < self.operands.len() {
            self.operands.get(t)
        } else {
            self.results.get(t - self.operands.len())
        }
    }

    /// Every operand, then every result.
    pub fn tensors(&self) -> impl Iterator<Item = &TensorFactorShardings> {
        self.operands.iter().chain(&self.results)
    }

    /// One past the largest factor index any tensor has.
    pub fn factor_bound(&self) -> usize {
        self.tensors().map(TensorFactorShardings::factor_bound).max().unwrap_or(0)
    }

    /// [`TensorFactorShardings::expand_sharding_axes`] on operand `operand` (false when there
    /// is no such operand).
    pub fn expand_operand_sharding(&mut self, operand: usize, factor: usize, new_axes: &[AxisRef]) -> bool {
        self.operands.get_mut(operand).is_some_and(|t| t.expand_sharding_axes(factor, new_axes))
    }

    /// [`TensorFactorShardings::expand_sharding_axes`] on result `result` (false when there is
    /// no such result).
    pub fn expand_result_sharding(&mut self, result: usize, factor: usize, new_axes: &[AxisRef]) -> bool {
        self.results.get_mut(result).is_some_and(|t| t.expand_sharding_axes(factor, new_axes))
    }

    /// Expands the axes of `factor` to `new_axes` in every tensor that has the factor and whose
    /// axes are a strict prefix of `new_axes` (Shardy `ShardingProjection::expandSharding`).
    pub fn expand_sharding(&mut self, factor: usize, new_axes: &[AxisRef]) -> UpdateTensorShardings {
        let mut up = UpdateTensorShardings::new(self.operands.len(), self.results.len());
        for (i, t) in self.operands.iter_mut().enumerate() {
            up.operands.set(i, t.expand_sharding_axes(factor, new_axes));
        }
        for (i, t) in self.results.iter_mut().enumerate() {
            up.results.set(i, t.expand_sharding_axes(factor, new_axes));
        }
        up
    }

    /// Sets the axes and overflow axes of `factor` in every tensor that has it (Shardy
    /// `ShardingProjection::updateSharding`); closedness is kept.
    pub fn update_sharding(
        &mut self,
        factor: usize,
        new_axes: &[AxisRef],
        new_overflow_axes: &[AxisRef],
    ) -> UpdateTensorShardings {
        let mut up = UpdateTensorShardings::new(self.operands.len(), self.results.len());
        for (i, t) in self.operands.iter_mut().enumerate() {
            up.operands.set(i, t.update_sharding_axes(factor, new_axes, new_overflow_axes));
        }
        for (i, t) in self.results.iter_mut().enumerate() {
            up.results.set(i, t.update_sharding_axes(factor, new_axes, new_overflow_axes));
        }
        up
    }

    /// For each factor `0..num_factors`, the greatest common prefix of its axes over all
    /// tensors that have it, empty for a factor no tensor has (Shardy
    /// `ShardingProjection::getGreatestCommonPrefixAxes`). Factors at or beyond `num_factors`
    /// are ignored.
    pub fn greatest_common_prefix_axes(&self, num_factors: usize) -> Vec<Vec<AxisRef>> {
        let mut out: Vec<Option<Vec<AxisRef>>> = vec![None; num_factors];
        for t in self.tensors() {
            for (f, s) in t.iter().take_while(|(f, _)| *f < num_factors) {
                out[f] = Some(match out[f].take() {
                    None => s.axes.clone(),
                    Some(prev) => greatest_common_prefix(&prev, &s.axes),
                });
            }
        }
        out.into_iter().map(Option::unwrap_or_default).collect()
    }

    /// The operands and results that have overflow axes in some factor (Shardy
    /// `ShardingProjection::tensorsContainOverflowAxes`).
    pub fn tensors_containing_overflow_axes(&self) -> UpdateTensorShardings {
        let has = |t: &TensorFactorShardings| t.iter().any(|(_, s)| !s.overflow_axes.is_empty());
        let mut up = UpdateTensorShardings::new(self.operands.len(), self.results.len());
        for (i, t) in self.operands.iter().enumerate() {
            up.operands.set(i, has(t));
        }
        for (i, t) in self.results.iter().enumerate() {
            up.results.set(i, has(t));
        }
        up
    }

    /// Projects every operand and result back to a tensor sharding bound to `mesh_ref`
    /// ([`TensorFactorShardings::to_tensor_sharding`] with the rule's mappings); returns the
    /// operand shardings and the result shardings.
    pub fn to_tensor_shardings(
        &self,
        rule: &OpShardingRule,
        mesh_ref: &MeshRef,
        mesh: &Mesh,
    ) -> Result<(Vec<TensorSharding>, Vec<TensorSharding>)> {
        check_count("operand", self.operands.len(), rule.operand_mappings.len())?;
        check_count("result", self.results.len(), rule.result_mappings.len())?;
        let sizes = &rule.factor_sizes;
        let operands = self
            .operands
            .iter()
            .zip(&rule.operand_mappings)
            .enumerate()
            .map(|(i, (t, m))| {
                t.to_tensor_sharding(m, sizes, mesh_ref, mesh).map_err(|e| e.context(format!("operand {i}")))
            })
            .collect::<Result<Vec<_>>>()?;
        let results = self
            .results
            .iter()
            .zip(&rule.result_mappings)
            .enumerate()
            .map(|(i, (t, m))| {
                t.to_tensor_sharding(m, sizes, mesh_ref, mesh).map_err(|e| e.context(format!("result {i}")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((operands, results))
    }
}

/// Redistributes `all_axes` (the axes of one dimension, major to minor) over the factor
/// shardings `shardings` of that dimension, whose sizes are `factor_sizes` (Shardy
/// `distributeAxesAcrossFactors`): each axis in turn goes to the first factor with room left
/// that shares a divisor greater than 1 with it (a size-1 axis goes to the first factor with
/// room), split into sub-axes where the factor takes only part of it, and the first axis that no
/// factor can take goes with every axis after it to the overflow axes of the last factor.
/// Errors when the two slices differ in length, an axis is unknown to `mesh`, or a sub-axis is
/// malformed.
pub fn distribute_axes_across_factors(
    shardings: &mut [FactorSharding],
    factor_sizes: &[i64],
    all_axes: &[AxisRef],
    mesh: &Mesh,
) -> Result<()> {
    if shardings.len() != factor_sizes.len() {
        return Err(Error::invariant(
            "projection-factor-count",
            format!("expected one factor size per factor sharding ({}), got {}", shardings.len(), factor_sizes.len()),
        ));
    }
    if shardings.is_empty() {
        return Ok(());
    }
    for a in all_axes {
        mesh.require_axis(&a.name)?;
        a.check_local()?;
    }
    let mut room = factor_sizes.to_vec();
    let mut index = 0usize;
    let mut current = Remaining::at(all_axes, index, mesh)?;
    while let Some(mut r) = current {
        let name = &all_axes[index].name;
        let mut used = false;
        let mut advanced = false;
        for (i, fs) in shardings.iter_mut().enumerate() {
            if room[i] <= 1 {
                continue;
            }
            let common = gcd(room[i], r.size);
            if common == 1 && r.size != 1 {
                continue;
            }
            used = true;
            if r.size > common {
                // The factor takes the major part of size `common`; the rest is offered to the
                // following factors.
                let sub = SubAxis { pre_size: r.split_pre.unwrap_or(1), size: common };
                add_axis_or_merge(&mut fs.axes, AxisRef { name: *name, sub: Some(sub) }, mesh)?;
                r.split_pre = Some(sub.next_pre_size());
                r.size /= common;
                room[i] /= common;
            } else {
                add_axis_or_merge(&mut fs.axes, r.axis(*name), mesh)?;
                room[i] /= r.size;
                advanced = true;
                break;
            }
        }
        if !used {
            if let Some(last) = shardings.last_mut() {
                add_remaining_axes(&mut last.overflow_axes, Some(r), all_axes, index, mesh)?;
            }
            break;
        }
        if advanced {
            index += 1;
            current = Remaining::at(all_axes, index, mesh)?;
        } else {
            current = Some(r);
        }
    }
    Ok(())
}
