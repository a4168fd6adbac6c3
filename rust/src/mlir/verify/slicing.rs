//! Shape rules of the ops that take parts of a tensor: `slice`, `dynamic_slice`, `pad`,
//! `gather`, `scatter`, `iota` and the reduced dimensions of `reduce`, as StableHLO's type
//! inference checks and infers them (openxla/stablehlo `dialect/TypeInference.cpp`:
//! `inferSliceOp`, `inferDynamicSliceOp`, `inferPadOp`, `verifyGather` + `inferGatherOp`,
//! `verifyScatterOp` + `validateScatterDimensionNumbers`, `verifyIotaOp`,
//! `verifyReduceOpInputsAndInferShape`; the constraint names of the StableHLO spec, such as
//! `gather_c9`, name some of the checks). A size of `-1` is dynamic and agrees with any size.

use super::shapes::{dims_text, same, same_dims, struct_int, struct_list};
use super::{Verifier, VerifyError};

/// Whether `dims` is sorted without repeats.
fn sorted_unique(dims: &[i64]) -> bool {
    dims.windows(2).all(|w| w[0] < w[1])
}

fn unique(dims: &[i64]) -> bool {
    let mut v = dims.to_vec();
    v.sort_unstable();
    sorted_unique(&v)
}

fn in_bounds(dims: &[i64], rank: usize) -> bool {
    dims.iter().all(|&d| d >= 0 && (d as usize) < rank)
}

impl<'p> Verifier<'p> {
    /// `stablehlo.slice` (slice_c2 to slice_c5).
    pub(super) fn slice(&self, op: u32, x: u32, r: u32) -> Result<(), VerifyError> {
        let [start, limit, strides] = self.int_attrs(op, ["start_indices", "limit_indices", "strides"])?;
        let Some(a) = self.dims(x) else { return Ok(()) };
        if start.len() != a.len() {
            return Err(self.err(op, format!("has {} start indices for an operand of rank {}", start.len(), a.len())));
        }
        let mut want = Vec::with_capacity(a.len());
        for i in 0..a.len() {
            let (s, l, k) = (start[i], limit[i], strides[i]);
            if s < 0 || s > l || (a[i] >= 0 && l > a[i]) {
                return Err(
                    self.err(op, format!("slice [{s}, {l}) of dimension {i} is out of range for its size {}", a[i]))
                );
            }
            if k <= 0 {
                return Err(self.err(op, format!("stride {k} of dimension {i} is not positive")));
            }
            let len = l - s; // 0 <= s <= l: no overflow
            want.push(len / k + i64::from(len % k != 0));
        }
        self.inferred(op, r, &want, "the slice")
    }

    /// `stablehlo.dynamic_slice`'s sizes (dynamic_slice_c2, c4, c5; the start indices are
    /// counted by the `StartIndices` rule).
    pub(super) fn dynamic_slice(&self, op: u32, x: u32, r: u32) -> Result<(), VerifyError> {
        let sizes = self.int_attr(op, "slice_sizes")?;
        let Some(a) = self.dims(x) else { return Ok(()) };
        if sizes.len() != a.len() {
            return Err(self.err(op, format!("has {} slice sizes for an operand of rank {}", sizes.len(), a.len())));
        }
        for (i, (&s, &d)) in sizes.iter().zip(a).enumerate() {
            if s < 0 || (d >= 0 && s > d) {
                return Err(self.err(op, format!("slice size {s} of dimension {i} is out of range for its size {d}")));
            }
        }
        self.inferred(op, r, &sizes, "the slice sizes")
    }

    /// `stablehlo.pad` (pad_c2 to pad_c4).
    pub(super) fn pad(&self, op: u32, x: u32, value: u32, r: u32) -> Result<(), VerifyError> {
        let [low, high, interior] =
            self.int_attrs(op, ["edge_padding_low", "edge_padding_high", "interior_padding"])?;
        if let Some(v) = self.dims(value) {
            if !v.is_empty() {
                return Err(self.err(op, format!("padding value has shape {}, expected a scalar", dims_text(v))));
            }
        }
        let Some(a) = self.dims(x) else { return Ok(()) };
        if low.len() != a.len() {
            return Err(self.err(op, format!("has {} paddings for an operand of rank {}", low.len(), a.len())));
        }
        let mut want = Vec::with_capacity(a.len());
        for i in 0..a.len() {
            if interior[i] < 0 {
                return Err(self.err(op, format!("interior padding {} of dimension {i} is negative", interior[i])));
            }
            if a[i] < 0 {
                want.push(-1);
                continue;
            }
            let size = (a[i] - 1)
                .max(0)
                .checked_mul(interior[i])
                .and_then(|n| n.checked_add(a[i]))
                .and_then(|n| n.checked_add(low[i]))
                .and_then(|n| n.checked_add(high[i]));
            match size {
                Some(n) if n >= 0 => want.push(n),
                _ => return Err(self.err(op, format!("padding makes dimension {i} negative or too large"))),
            }
        }
        self.inferred(op, r, &want, "the padded operand")
    }

    /// `stablehlo.iota` (iota_c1: the dimension within the result's rank, not a scalar).
    pub(super) fn iota(&self, op: u32, r: u32) -> Result<(), VerifyError> {
        let text = self.attr(op, "iota_dimension").unwrap_or("");
        let Some(d) = crate::mlir::printer::int_of(text, "i64") else {
            return Err(self.err(op, "requires an integer attribute 'iota_dimension'".into()));
        };
        let Some(rank) = self.dims(r).map(<[i64]>::len) else { return Ok(()) };
        if rank == 0 || d < 0 || d as usize >= rank {
            return Err(self.err(op, format!("iota dimension {d} is out of range for a result of rank {rank}")));
        }
        Ok(())
    }

    /// The reduced dimensions of `stablehlo.reduce` (reduce_c1, c4, c5, c7): each result has
    /// its input's shape without them.
    pub(super) fn reduce(&self, op: u32, ins: &[u32], outs: &[u32]) -> Result<(), VerifyError> {
        let dims = self.int_attr(op, "dimensions")?;
        let Some(a) = self.common_shape(op, &ins[..ins.len() / 2])? else { return Ok(()) };
        if !in_bounds(&dims, a.len()) || !unique(&dims) {
            return Err(self.err(
                op,
                format!("dimensions {} are not distinct dimensions of an input of rank {}", dims_text(&dims), a.len()),
            ));
        }
        let want: Vec<i64> = (0..a.len()).filter(|i| !dims.contains(&(*i as i64))).map(|i| a[i]).collect();
        for &r in outs {
            self.inferred(op, r, &want, "the input without its reduced dimensions")?;
        }
        Ok(())
    }

    /// `stablehlo.gather` (gather_c1 to gather_c23).
    pub(super) fn gather(&self, op: u32, x: u32, idx: u32, r: u32) -> Result<(), VerifyError> {
        let text = self.attr(op, "dimension_numbers").unwrap_or("");
        let fields = (
            struct_list(text, "offset_dims"),
            struct_list(text, "collapsed_slice_dims"),
            struct_list(text, "operand_batching_dims"),
            struct_list(text, "start_indices_batching_dims"),
            struct_list(text, "start_index_map"),
            struct_int(text, "index_vector_dim"),
        );
        let (Some(offset), Some(collapsed), Some(batching), Some(idx_batching), Some(index_map), Some(ivd)) = fields
        else {
            return Err(self.err(op, format!("dimension_numbers do not read as a gather's: {text}")));
        };
        let sizes = self.int_attr(op, "slice_sizes")?;
        let (Some(a), Some(s)) = (self.dims(x), self.dims(idx)) else { return Ok(()) };
        let fail = |m: String| Err(self.err(op, m));
        if offset.len() + collapsed.len() + batching.len() != a.len() {
            return fail(format!(
                "offset_dims, collapsed_slice_dims and operand_batching_dims have {} entries for an operand of rank {}",
                offset.len() + collapsed.len() + batching.len(),
                a.len()
            ));
        }
        if ivd < 0 || ivd as usize > s.len() {
            return fail(format!("index_vector_dim {ivd} is out of range for start indices of rank {}", s.len()));
        }
        let index_size = if ivd as usize == s.len() { 1 } else { s[ivd as usize] };
        if index_size >= 0 && index_size != index_map.len() as i64 {
            return fail(format!(
                "start_index_map has {} entries, the index vector dimension of the start indices {index_size}",
                index_map.len()
            ));
        }
        if !sorted_unique(&offset) || !sorted_unique(&collapsed) || !sorted_unique(&batching) {
            return fail(
                "offset_dims, collapsed_slice_dims and operand_batching_dims must be sorted, without repeats".into(),
            );
        }
        if !in_bounds(&collapsed, a.len()) || !in_bounds(&batching, a.len()) || !in_bounds(&index_map, a.len()) {
            return fail(format!(
                "collapsed_slice_dims, operand_batching_dims and start_index_map must be dimensions of the operand (rank {})",
                a.len()
            ));
        }
        // gather_c6, gather_c18: distinct over each concatenation (a repeat inside
        // start_index_map too).
        if !unique(&[&collapsed[..], &batching].concat()) || !unique(&[&index_map[..], &batching].concat()) {
            return fail(
                "collapsed_slice_dims and start_index_map must each be distinct from and with operand_batching_dims"
                    .into(),
            );
        }
        if !unique(&idx_batching) || !in_bounds(&idx_batching, s.len()) || idx_batching.contains(&ivd) {
            return fail(format!(
                "start_indices_batching_dims {} must be distinct dimensions of the start indices other than index_vector_dim",
                dims_text(&idx_batching)
            ));
        }
        if idx_batching.len() != batching.len() {
            return fail("operand_batching_dims and start_indices_batching_dims differ in length".into());
        }
        for (&p, &q) in batching.iter().zip(&idx_batching) {
            if !same(a[p as usize], s[q as usize]) {
                return fail(format!(
                    "batching dimensions differ in size: operand dimension {p} is {}, start indices dimension {q} is {}",
                    a[p as usize], s[q as usize]
                ));
            }
        }
        if sizes.len() != a.len() {
            return fail(format!("has {} slice sizes for an operand of rank {}", sizes.len(), a.len()));
        }
        for &d in collapsed.iter().chain(&batching) {
            if sizes[d as usize] > 1 {
                return fail(format!(
                    "slice size {} of collapsed or batching dimension {d} is above 1",
                    sizes[d as usize]
                ));
            }
        }
        for (i, (&k, &d)) in sizes.iter().zip(a).enumerate() {
            if k < 0 || (d >= 0 && k > d) {
                return fail(format!("slice size {k} of dimension {i} is out of range for its size {d}"));
            }
        }
        // The result: offset dimensions take the slice sizes left after the collapsed and
        // batching dimensions, in order; the others the start indices' dimensions but the
        // index vector dimension, in order.
        let rank = offset.len() + s.len() + usize::from(ivd as usize == s.len()) - 1;
        if !in_bounds(&offset, rank) {
            return fail(format!("offset_dims {} are out of range for a result of rank {rank}", dims_text(&offset)));
        }
        let mut window = (0..a.len() as i64).filter(|d| !collapsed.contains(d) && !batching.contains(d));
        let mut batch = (0..s.len()).filter(|&d| d != ivd as usize);
        let want: Vec<i64> = (0..rank as i64)
            .map(|d| {
                if offset.contains(&d) {
                    window.next().map_or(-1, |w| sizes[w as usize])
                } else {
                    batch.next().map_or(-1, |b| s[b])
                }
            })
            .collect();
        self.inferred(op, r, &want, "the gather")
    }
    /// `stablehlo.scatter` (scatter_c1 to scatter_c24 on shapes; the update computation's
    /// types are not checked): `ins` are the inputs, the scatter indices and the updates.
    pub(super) fn scatter(&self, op: u32, ins: &[u32], outs: &[u32]) -> Result<(), VerifyError> {
        let text = self.attr(op, "scatter_dimension_numbers").unwrap_or("");
        let fields = (
            struct_list(text, "update_window_dims"),
            struct_list(text, "inserted_window_dims"),
            struct_list(text, "input_batching_dims"),
            struct_list(text, "scatter_indices_batching_dims"),
            struct_list(text, "scatter_dims_to_operand_dims"),
            struct_int(text, "index_vector_dim"),
        );
        let (Some(window), Some(inserted), Some(batching), Some(idx_batching), Some(to_operand), Some(ivd)) = fields
        else {
            return Err(self.err(op, format!("scatter_dimension_numbers do not read as a scatter's: {text}")));
        };
        let n = outs.len();
        let (inputs, updates) = (&ins[..n], &ins[n + 1..]);
        let fail = |m: String| Err(self.err(op, m));
        let Some(mut s) = self.dims(ins[n]).map(<[i64]>::to_vec) else { return Ok(()) };
        if ivd < 0 || ivd as usize > s.len() {
            return fail(format!("index_vector_dim {ivd} is out of range for scatter indices of rank {}", s.len()));
        }
        if ivd as usize == s.len() {
            s.push(1); // the implied trailing 1
        }
        self.common_shape(op, inputs)?;
        for (i, (&x, &u)) in inputs.iter().zip(updates).enumerate() {
            let (Some(a), Some(b)) = (self.dims(x), self.dims(u)) else { continue };
            if let Some(r) = self.dims(outs[i]) {
                if !same_dims(r, a) {
                    return fail(format!("result {i} has shape {}, its input {}", dims_text(r), dims_text(a)));
                }
            }
            if b.len() + 1 != s.len() + window.len() {
                return fail(format!(
                    "update {i} has rank {}, expected {} (the scatter indices' {} dimensions but the index vector, and {} window dimensions)",
                    b.len(),
                    s.len() - 1 + window.len(),
                    s.len(),
                    window.len()
                ));
            }
            if window.len() + inserted.len() + batching.len() != a.len() {
                return fail(format!(
                    "update_window_dims, inserted_window_dims and input_batching_dims have {} entries for an input of rank {}",
                    window.len() + inserted.len() + batching.len(),
                    a.len()
                ));
            }
            if !sorted_unique(&window) || !in_bounds(&window, b.len()) {
                return fail(format!(
                    "update_window_dims {} must be sorted dimensions of the updates",
                    dims_text(&window)
                ));
            }
            // scatter_c9, c10 to c13, c20, c21: sorted where StableHLO requires it, distinct over
            // each concatenation, within the input's rank.
            if !inserted.windows(2).all(|w| w[0] <= w[1]) || !batching.windows(2).all(|w| w[0] <= w[1]) {
                return fail("inserted_window_dims and input_batching_dims must be sorted".into());
            }
            if !unique(&[&inserted[..], &batching].concat()) || !unique(&[&to_operand[..], &batching].concat()) {
                return fail(
                    "inserted_window_dims and scatter_dims_to_operand_dims must each be distinct from and with input_batching_dims"
                        .into(),
                );
            }
            if !in_bounds(&inserted, a.len()) || !in_bounds(&batching, a.len()) || !in_bounds(&to_operand, a.len()) {
                return fail(format!(
                    "inserted_window_dims, input_batching_dims and scatter_dims_to_operand_dims must be dimensions of the input (rank {})",
                    a.len()
                ));
            }
            if !unique(&idx_batching) || !in_bounds(&idx_batching, s.len()) || idx_batching.contains(&ivd) {
                return fail(format!(
                    "scatter_indices_batching_dims {} must be distinct dimensions of the scatter indices other than index_vector_dim",
                    dims_text(&idx_batching)
                ));
            }
            if idx_batching.len() != batching.len() {
                return fail("input_batching_dims and scatter_indices_batching_dims differ in length".into());
            }
            for (&p, &q) in batching.iter().zip(&idx_batching) {
                if !same(a[p as usize], s[q as usize]) {
                    return fail(format!(
                        "batching dimensions differ in size: input dimension {p} is {}, scatter indices dimension {q} is {}",
                        a[p as usize], s[q as usize]
                    ));
                }
            }
            let index_size = s[ivd as usize];
            if index_size >= 0 && index_size != to_operand.len() as i64 {
                return fail(format!(
                    "scatter_dims_to_operand_dims has {} entries, the index vector dimension of the scatter indices {index_size}",
                    to_operand.len()
                ));
            }
            // The window dimensions of the updates are at most the input's dimensions left after
            // the inserted and batching ones; the others are the scatter indices' but the index
            // vector dimension.
            let mut bounds = (0..a.len() as i64).filter(|d| !inserted.contains(d) && !batching.contains(d));
            for &w in &window {
                let bound = bounds.next().map_or(-1, |d| a[d as usize]);
                let size = b[w as usize];
                if size >= 0 && bound >= 0 && size > bound {
                    return fail(format!("update window dimension {w} has size {size}, above the input's {bound}"));
                }
            }
            let mut scatter_dims = (0..s.len()).filter(|&d| d != ivd as usize);
            for (d, &size) in b.iter().enumerate() {
                if window.contains(&(d as i64)) {
                    continue;
                }
                let want = scatter_dims.next().map_or(-1, |k| s[k]);
                if !same(size, want) {
                    return fail(format!(
                        "update scatter dimension {d} has size {size}, the scatter indices' dimension {want}"
                    ));
                }
            }
        }
        Ok(())
    }
}
