//! Sizes checked at the door: every shape a tensor is made with, or moved into, has an element
//! count and a byte size that exist. One rule, applied where shapes are made (constructors,
//! reshape, expand, pad, slices), so no later stage — the scheduler's index arithmetic, a
//! kernel, an exported model's size macros — ever sees a count that wrapped.
//!
//! The rule: the product of the dimensions, with any 0 counted as 1, times the item size, must
//! fit in `isize` (Rust's bound on an allocation). Counting zeros as one keeps a shape like
//! `[0, 2^62]` out too: it holds nothing, but a view of it (after a pad, or its strides) would
//! index past anything that exists.

use alloc::format;

use crate::dtype::DType;
use crate::error::{Error, Result};

/// The element count of `shape`, or an error for `op` naming the shape when it (or its byte
/// size in `dtype`) cannot exist.
pub(crate) fn checked_numel(op: &'static str, shape: &[usize], dtype: DType) -> Result<usize> {
    let too_big = || {
        Error::shape(
            op,
            format!(
                "shape {shape:?} of {dtype} is too large to exist (more than {} bytes)",
                isize::MAX
            ),
        )
    };
    let mut extent: usize = 1;
    let mut numel: usize = 1;
    for &d in shape {
        extent = extent.checked_mul(d.max(1)).ok_or_else(too_big)?;
        numel *= d; // at most `extent`, so it cannot overflow
    }
    let bytes = extent
        .checked_mul(dtype.itemsize().max(1))
        .ok_or_else(too_big)?;
    if bytes > isize::MAX as usize {
        return Err(too_big());
    }
    Ok(numel)
}

/// `dim + before + after` for a pad of `op`, or an error naming the axis when it overflows.
pub(crate) fn padded_dim(
    op: &'static str,
    axis: usize,
    dim: usize,
    pad: (usize, usize),
) -> Result<usize> {
    dim.checked_add(pad.0)
        .and_then(|d| d.checked_add(pad.1))
        .filter(|&d| d <= isize::MAX as usize)
        .ok_or_else(|| {
            Error::shape(
                op,
                format!("padding axis {axis} of size {dim} by {pad:?} overflows"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn counts_and_limits() {
        assert_eq!(checked_numel("t", &[2, 3], DType::F32), Ok(6));
        assert_eq!(checked_numel("t", &[0, 5], DType::F32), Ok(0));
        assert_eq!(checked_numel("t", &[], DType::F32), Ok(1));
        for bad in [
            &[1usize << 32, 1 << 32][..],
            &[0, 1 << 62],
            &[1 << 61, 0, 4],
            &[usize::MAX],
        ] {
            let e = checked_numel("t", bad, DType::F32).unwrap_err();
            assert!(e.to_string().contains("too large"), "{bad:?}: {e}");
        }
        // u8 may hold 2^40 elements (if memory allows); f32 of 2^61 cannot exist.
        assert_eq!(checked_numel("t", &[1 << 40], DType::U8), Ok(1 << 40));
        assert!(checked_numel("t", &[1 << 61], DType::F32).is_err());
        assert!(padded_dim("pad", 0, 3, (1 << 62, 1 << 62)).is_err());
        assert_eq!(padded_dim("pad", 0, 3, (1, 2)), Ok(6));
    }
}
