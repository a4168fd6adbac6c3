//! Shape rules of the windowed ops, `convolution` and `reduce_window`, as StableHLO's type
//! inference checks and infers them (openxla/stablehlo `dialect/TypeInference.cpp`:
//! `verifyWindowAttributesAndInferWindowDimensions`, `inferWindowOutputShape` with
//! `dilatedBound` and `stridedBound`, `isSpatialDimensionsValid`,
//! `verifyConvolutionAttributes`, `inferConvolutionOp`,
//! `verifyReduceWindowOpInputsAndInferWindow`). A size of `-1` is dynamic; an attribute the
//! verifier cannot read (a hexadecimal `dense`, a `#stablehlo.conv<raw ...>`) is left to
//! jaxlib's verifier.

use super::shapes::dims_text;
use super::{Verifier, VerifyError};

/// One spatial dimension of a window (StableHLO's `WindowDimension`).
#[derive(Debug, Clone, Copy)]
struct Window {
    size: i64,
    stride: i64,
    base_dilation: i64,
    window_dilation: i64,
    low: i64,
    high: i64,
}

/// The dimensions of the type of a `dense<...> : tensor<...>` attribute.
fn dense_dims(text: &str) -> Option<Vec<i64>> {
    super::shapes::tensor_dims(text.trim().strip_prefix("dense<")?.rsplit_once(" : ")?.1.trim())
}

/// The values of an integer `dense<...> : tensor<...>` attribute, a splat expanded to the
/// type's element count, with the type's dimensions; `None` when it does not read so. Call it
/// once [`dense_dims`] is known to be small: a splat is expanded.
fn dense_ints(text: &str) -> Option<(Vec<i64>, Vec<i64>)> {
    let body = text.trim().strip_prefix("dense<")?;
    let (values, ty) = body.rsplit_once(" : ")?;
    let values = values.trim_end().strip_suffix('>')?;
    let dims = super::shapes::tensor_dims(ty.trim())?;
    let count = dims.iter().try_fold(1i64, |n, &d| if d < 0 { None } else { n.checked_mul(d) })?;
    let flat: String = values.chars().filter(|c| !matches!(c, '[' | ']')).collect();
    let mut out: Vec<i64> = if flat.trim().is_empty() {
        Vec::new()
    } else {
        flat.split(',').map(|v| v.trim().parse().ok()).collect::<Option<_>>()?
    };
    if out.len() == 1 && count != 1 {
        out = vec![out[0]; usize::try_from(count).ok()?];
    }
    (out.len() as i64 == count).then_some((dims, out))
}

/// `(bound - 1) * dilation + 1` for a bound above 0 (`dilatedBound`); `None` on overflow.
fn dilated(bound: i64, dilation: i64) -> Option<i64> {
    if bound == 0 {
        return Some(0);
    }
    (bound - 1).checked_mul(dilation)?.checked_add(1)
}

/// The output size of one window dimension over a base of size `base` (`-1` when dynamic).
fn output_size(base: i64, w: &Window) -> Option<i64> {
    if base < 0 || w.size < 0 {
        return Some(-1);
    }
    let padded = dilated(base, w.base_dilation)?.checked_add(w.low)?.checked_add(w.high)?;
    let window = dilated(w.size, w.window_dilation)?;
    // `stridedBound`: the number of window positions, 0 when the window does not fit.
    Some(if padded <= 0 || window > padded { 0 } else { (padded - window) / w.stride + 1 })
}

/// The spatial dimension numbers of a `#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>`:
/// for the input, kernel and output in turn, the positions of the two named dimensions
/// (`b`/`f`, `i`/`o`, `b`/`f`) and of the spatial ones by number.
type ConvLayout = [(i64, i64, Vec<i64>); 3];

fn conv_layout(text: &str) -> Option<ConvLayout> {
    let body = text.trim().strip_prefix("#stablehlo.conv<")?.strip_suffix('>')?;
    let (lhs, rest) = body.split_once('x')?;
    let (rhs, out) = rest.split_once("->")?;
    let one = |part: &str, first: char, second: char| -> Option<(i64, i64, Vec<i64>)> {
        let items: Vec<&str> = part.trim().strip_prefix('[')?.strip_suffix(']')?.split(',').map(str::trim).collect();
        let (mut a, mut b) = (None, None);
        let mut spatial: Vec<Option<i64>> = vec![None; items.len().saturating_sub(2)];
        for (pos, item) in items.iter().enumerate() {
            let pos = pos as i64;
            match item.chars().next()? {
                c if c == first && item.len() == 1 => {
                    if a.replace(pos).is_some() {
                        return None;
                    }
                }
                c if c == second && item.len() == 1 => {
                    if b.replace(pos).is_some() {
                        return None;
                    }
                }
                _ => {
                    let k: usize = item.parse().ok()?;
                    let slot = spatial.get_mut(k)?;
                    if slot.is_some() {
                        return None;
                    }
                    *slot = Some(pos);
                }
            }
        }
        Some((a?, b?, spatial.into_iter().collect::<Option<_>>()?))
    };
    Some([one(lhs, 'b', 'f')?, one(rhs, 'i', 'o')?, one(out, 'b', 'f')?])
}

impl<'p> Verifier<'p> {
    /// The windows of an op with `rank` window dimensions of sizes `sizes`, from its
    /// `strides`, `base`/`window` dilation and `padding` attributes (absent: 1, 1, 1 and 0).
    fn windows(&self, op: u32, sizes: &[i64], names: [&str; 4]) -> Result<Option<Vec<Window>>, VerifyError> {
        let n = sizes.len();
        let ones = || vec![1; n];
        let [strides, base, dil, padding] = names;
        let list = |name: &str| -> Result<Vec<i64>, VerifyError> {
            let v = self.optional_ints(op, name)?.unwrap_or_else(ones);
            if v.len() != n {
                return Err(self.err(op, format!("{name} has {} entries for {n} window dimensions", v.len())));
            }
            if let Some((i, &x)) = v.iter().enumerate().find(|(_, &x)| x <= 0) {
                return Err(self.err(op, format!("{name} {x} of window dimension {i} is not positive")));
            }
            Ok(v)
        };
        let (strides, base, dil) = (list(strides)?, list(base)?, list(dil)?);
        let pads = match self.attr(op, padding) {
            None => vec![0; 2 * n],
            Some(text) => {
                let Some(dims) = dense_dims(text) else { return Ok(None) };
                if dims.len() != 2 || dims[1] != 2 || dims[0] != n as i64 {
                    return Err(self.err(op, format!("{padding} has shape {}, expected [{n}, 2]", dims_text(&dims))));
                }
                let Some((_, v)) = dense_ints(text) else { return Ok(None) };
                v
            }
        };
        if let Some((i, &s)) = sizes.iter().enumerate().find(|(_, &s)| s == 0 || s < -1) {
            return Err(self.err(op, format!("window dimension {i} has size {s}, expected a positive size")));
        }
        Ok(Some(
            (0..n)
                .map(|i| Window {
                    size: sizes[i],
                    stride: strides[i],
                    base_dilation: base[i],
                    window_dilation: dil[i],
                    low: pads[2 * i],
                    high: pads[2 * i + 1],
                })
                .collect(),
        ))
    }

    fn window_output(&self, op: u32, base: &[i64], windows: &[Window]) -> Result<Vec<i64>, VerifyError> {
        base.iter()
            .zip(windows)
            .map(|(&b, w)| output_size(b, w))
            .collect::<Option<Vec<i64>>>()
            .ok_or_else(|| self.err(op, "window sizes overflow".into()))
    }

    /// `stablehlo.reduce_window` (reduce_window_c2 to c12, c16): every result has the
    /// inputs' shape after the window.
    pub(super) fn reduce_window(&self, op: u32, ins: &[u32], outs: &[u32]) -> Result<(), VerifyError> {
        let sizes = self.int_attr(op, "window_dimensions")?;
        if let Some((i, &s)) = sizes.iter().enumerate().find(|(_, &s)| s <= 0) {
            return Err(self.err(op, format!("window dimension {i} has size {s}, expected a positive size")));
        }
        let Some(a) = self.common_shape(op, &ins[..ins.len() / 2])? else { return Ok(()) };
        if sizes.len() != a.len() {
            return Err(
                self.err(op, format!("window_dimensions has {} entries for inputs of rank {}", sizes.len(), a.len()))
            );
        }
        let names = ["window_strides", "base_dilations", "window_dilations", "padding"];
        let Some(windows) = self.windows(op, &sizes, names)? else { return Ok(()) };
        let want = self.window_output(op, a, &windows)?;
        for &r in outs {
            self.inferred(op, r, &want, "the windowed input")?;
        }
        Ok(())
    }

    /// `stablehlo.convolution` (convolution_c1 to c23 on shapes; element types and
    /// quantization are not checked).
    pub(super) fn convolution(&self, op: u32, lhs: u32, rhs: u32, r: u32) -> Result<(), VerifyError> {
        let text = self.attr(op, "dimension_numbers").unwrap_or("");
        let Some([(ib, if_, isp), (ki, ko, ksp), (ob, of, osp)]) = conv_layout(text) else {
            // The compact form names each dimension once (jaxlib's parser refuses a repeat or
            // a gap); the `raw` form is left to jaxlib's verifier.
            if text.trim_start().starts_with("#stablehlo.conv<[") {
                return Err(self.err(op, format!("dimension numbers {text} do not name each dimension once")));
            }
            return Ok(());
        };
        let count = |name: &str| -> Result<i64, VerifyError> {
            let n = match self.attr(op, name) {
                None => 1,
                Some(t) => crate::mlir::printer::int_of(t, "i64")
                    .ok_or_else(|| self.err(op, format!("attribute '{name}' is not an integer: {t}")))?,
            };
            if n <= 0 {
                return Err(self.err(op, format!("{name} {n} is not positive")));
            }
            Ok(n)
        };
        let (features, batches) = (count("feature_group_count")?, count("batch_group_count")?);
        let (Some(a), Some(k), Some(o)) = (self.dims(lhs), self.dims(rhs), self.dims(r)) else { return Ok(()) };
        let n = a.len();
        if n < 2 || k.len() != n || o.len() != n {
            return Err(self.err(
                op,
                format!("expects input, kernel and result of one rank >= 2, got {}, {} and {}", n, k.len(), o.len()),
            ));
        }
        if isp.len() != ksp.len() || isp.len() != osp.len() || isp.len() + 2 != n {
            return Err(self.err(op, format!("dimension numbers {text} do not fit operands of rank {n}")));
        }
        // Every position the layout names is below its length, `n` (checked above), and named
        // once (conv_layout).
        if batches > 1 && features > 1 {
            return Err(self
                .err(op, format!("batch_group_count {batches} and feature_group_count {features} are both above 1")));
        }
        let (batch, feature) = (a[ib as usize], a[if_ as usize]);
        let (kin, kout) = (k[ki as usize], k[ko as usize]);
        if batch >= 0 && batch % batches != 0 {
            return Err(
                self.err(op, format!("input batch size {batch} is not divisible by batch_group_count {batches}"))
            );
        }
        if feature >= 0 && (feature % features != 0 || (kin >= 0 && feature / features != kin)) {
            return Err(self.err(
                op,
                format!(
                    "input feature size {feature} is not feature_group_count {features} times the kernel's input features {kin}"
                ),
            ));
        }
        if kout >= 0 && (kout % batches != 0 || kout % features != 0) {
            return Err(self.err(
                op,
                format!(
                    "kernel output feature size {kout} is not divisible by batch_group_count {batches} and feature_group_count {features}"
                ),
            ));
        }
        let sizes: Vec<i64> = ksp.iter().map(|&d| k[d as usize]).collect();
        let names = ["window_strides", "lhs_dilation", "rhs_dilation", "padding"];
        let Some(windows) = self.windows(op, &sizes, names)? else { return Ok(()) };
        if let Some(rev) = self.attr(op, "window_reversal") {
            // `array<i1: false, true>`, or `array<i1>` when empty.
            let entries = rev.split_once(':').map_or(0, |(_, v)| v.split(',').count());
            if entries != sizes.len() {
                return Err(self
                    .err(op, format!("window_reversal has {entries} entries for {} window dimensions", sizes.len())));
            }
        }
        let base: Vec<i64> = isp.iter().map(|&d| a[d as usize]).collect();
        let spatial = self.window_output(op, &base, &windows)?;
        let mut want = vec![-1; n];
        for (i, &d) in osp.iter().enumerate() {
            want[d as usize] = spatial[i];
        }
        want[ob as usize] = if batch < 0 { -1 } else { batch / batches };
        want[of as usize] = kout;
        self.inferred(op, r, &want, "the convolution")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_padding() {
        assert_eq!(dense_ints("dense<1> : tensor<2x2xi64>"), Some((vec![2, 2], vec![1, 1, 1, 1])));
        assert_eq!(dense_ints("dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>"), Some((vec![2, 2], vec![0, 1, 2, 3])));
        assert_eq!(dense_ints("dense<> : tensor<0x2xi64>"), Some((vec![0, 2], vec![])));
        assert_eq!(dense_ints("dense<\"0x0100\"> : tensor<2x2xi64>"), None);
        assert_eq!(dense_dims("dense<0> : tensor<1000000000x2xi64>"), Some(vec![1_000_000_000, 2]));
    }

    #[test]
    fn conv_layouts() {
        let [(b, f, s), (i, o, k), (ob, of, os)] =
            conv_layout("#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>").unwrap();
        assert_eq!((b, f, s), (0, 3, vec![1, 2]));
        assert_eq!((i, o, k), (2, 3, vec![0, 1]));
        assert_eq!((ob, of, os), (0, 3, vec![1, 2]));
        let [_, _, (ob, of, os)] = conv_layout("#stablehlo.conv<[f, 0, 1, b]x[i, 0, 1, o]->[0, 1, b, f]>").unwrap();
        assert_eq!((ob, of, os), (2, 3, vec![0, 1]));
        assert!(conv_layout("#stablehlo.conv<raw input_batch_dimension = 0>").is_none());
        assert!(conv_layout("#stablehlo.conv<[b, 0, 0, f]x[0, 1, i, o]->[b, 0, 1, f]>").is_none());
    }

    #[test]
    fn window_sizes() {
        let w = Window { size: 3, stride: 2, base_dilation: 1, window_dilation: 1, low: 1, high: 1 };
        assert_eq!(output_size(8, &w), Some(4));
        assert_eq!(output_size(0, &w), Some(0));
        assert_eq!(output_size(-1, &w), Some(-1));
        let tall = Window { size: 9, ..w };
        assert_eq!(output_size(4, &tall), Some(0));
    }
}
