//! Reading MLIR type texts: ranked tensor shapes.

/// The shape of a ranked tensor type (`tensor<4x?x8xf32>` -> `[4, -1, 8]`, with an encoding
/// after a comma ignored), or `None` for another type.
pub fn tensor_shape(ty: &str) -> Option<Vec<i64>> {
    let inner = ty.strip_prefix("tensor<")?.strip_suffix('>')?;
    let mut dims = Vec::new();
    let mut rest = inner;
    while let Some((head, tail)) = rest.split_once('x') {
        if head == "?" {
            dims.push(-1);
        } else if !head.is_empty() && head.bytes().all(|c| c.is_ascii_digit()) {
            dims.push(head.parse().ok()?);
        } else {
            break;
        }
        rest = tail;
    }
    if rest.starts_with('*') {
        return None;
    }
    Some(dims)
}

/// Whether `ty` is a ranked tensor type with a dynamic dimension (`tensor<4x?xf32>`): what
/// `tensor_shape(ty)` gives contains -1, found without building the shape.
pub fn has_dynamic_dim(ty: &str) -> bool {
    if !ty.as_bytes().contains(&b'?') {
        return false;
    }
    let Some(inner) = ty.strip_prefix("tensor<").and_then(|t| t.strip_suffix('>')) else { return false };
    let mut rest = inner;
    let mut dynamic = false;
    while let Some((head, tail)) = rest.split_once('x') {
        if head == "?" {
            dynamic = true;
        } else if !head.is_empty() && head.bytes().all(|c| c.is_ascii_digit()) {
            if head.parse::<i64>().is_err() {
                return false; // `tensor_shape` reads no shape
            }
        } else {
            break;
        }
        rest = tail;
    }
    dynamic && !rest.starts_with('*')
}

/// The rank of a ranked tensor type, 0 for any other type (Python's `rank_of`).
pub fn rank(ty: &str) -> usize {
    tensor_shape(ty).map_or(0, |s| s.len())
}

/// A rank-0 tensor (Shardy's `isScalar`).
pub fn is_scalar(ty: &str) -> bool {
    // `tensor_shape(ty)` is empty: its first `x`-separated part is no dimension.
    let Some(inner) = ty.strip_prefix("tensor<").and_then(|t| t.strip_suffix('>')) else { return false };
    if inner.starts_with('*') {
        return false;
    }
    match inner.split_once('x') {
        None => true,
        Some((head, _)) => head != "?" && (head.is_empty() || !head.bytes().all(|c| c.is_ascii_digit())),
    }
}

/// The element type of a ranked tensor type (`f32` of `tensor<4x8xf32>`), encoding left out.
pub fn element_type(ty: &str) -> Option<&str> {
    let inner = ty.strip_prefix("tensor<")?.strip_suffix('>')?;
    let mut rest = inner.split(',').next().unwrap_or(inner).trim();
    while let Some((head, tail)) = rest.split_once('x') {
        if head == "?" || (!head.is_empty() && head.bytes().all(|c| c.is_ascii_digit())) {
            rest = tail;
        } else {
            break;
        }
    }
    Some(rest)
}
