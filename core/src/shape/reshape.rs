//! The arithmetic of reshaping one strided view without a copy: grouping dimensions that walk
//! memory as one ([`merge_dims`]), splitting groups into new dimensions ([`reshape_strides`]),
//! and carrying a mask across ([`reshape_mask`]).
//!
//! Invariant: each function returns `None` rather than a guess whenever one view cannot express
//! the reshape; callers then stack a new view. Shapes and masks here are constant.

use alloc::vec;
use alloc::vec::Vec;

use crate::symbolic::Node;

/// One run of dimensions that walks memory like a single dimension.
#[derive(Clone, Debug)]
pub(crate) struct Group {
    /// The product of the run's sizes.
    pub size: i64,
    /// The stride of its innermost dimension.
    pub stride: Node,
    /// How many of its innermost positions are distinct in memory; beyond them the run only
    /// repeats positions that a mask hides (or, for a leading stride-0 run, nothing is real).
    pub real: i64,
}

/// Groups `shape` into runs: size-1 dimensions join their neighbours, a dimension whose stride is
/// its inner neighbour's stride times that neighbour's size joins it, and a dimension that is (or
/// is masked to) a single position joins the next one.
pub(crate) fn merge_dims(
    shape: &[i64],
    strides: &[Node],
    mask: Option<&[(i64, i64)]>,
) -> Vec<Group> {
    let Some((&s0, _)) = shape.split_first() else {
        return Vec::new();
    };
    let single = |i: usize| match mask {
        Some(m) => m[i].1 - m[i].0 == 1,
        None => shape[i] == 1,
    };
    let real0 = if strides[0].as_const() == Some(0) {
        0
    } else {
        s0
    };
    let mut out = vec![Group {
        size: s0,
        stride: strides[0].clone(),
        real: real0,
    }];
    let mut merging = single(0);
    for (i, (&s, st)) in shape.iter().zip(strides).enumerate().skip(1) {
        if s == 1 {
            continue;
        }
        let last = out.len() - 1;
        if merging || out[last].stride == st * s {
            let g = &mut out[last];
            g.real = if merging { s } else { g.real * s };
            g.size *= s;
            g.stride = st.clone();
        } else {
            out.push(Group {
                size: s,
                stride: st.clone(),
                real: s,
            });
        }
        merging = single(i);
    }
    out
}

/// The strides of `new_shape` over memory laid out as `shape` with `strides`, when every group
/// of [`merge_dims`] splits exactly into consecutive new dimensions.
pub(crate) fn reshape_strides(
    shape: &[i64],
    strides: &[Node],
    mask: Option<&[(i64, i64)]>,
    new_shape: &[i64],
) -> Option<Vec<Node>> {
    let mut rev = Vec::with_capacity(new_shape.len());
    let mut dims = new_shape.iter().rev();
    for g in merge_dims(shape, strides, mask).into_iter().rev() {
        let (mut acc, mut stride) = (1i64, g.stride);
        while acc < g.size {
            let d = *dims.next()?;
            rev.push(&stride * acc);
            acc = acc.checked_mul(d)?;
            if acc >= g.real {
                stride = Node::cst(0);
            }
        }
        if acc != g.size {
            return None;
        }
    }
    // What is left over is size-1 dimensions in front.
    let mut out = vec![Node::cst(0); new_shape.len() - rev.len()];
    out.extend(rev.into_iter().rev());
    Some(out)
}

/// The mask of `new_shape` admitting exactly the positions `mask` admits in `shape` (row-major
/// order is shared), when that set is still a box. No mask means all of `new_shape`.
pub(crate) fn reshape_mask(
    mask: Option<&[(i64, i64)]>,
    shape: &[i64],
    new_shape: &[i64],
) -> Option<Vec<(i64, i64)>> {
    let Some(mask) = mask else {
        return Some(new_shape.iter().map(|&s| (0, s)).collect());
    };
    let mut olds = shape.iter().rev().copied().zip(mask.iter().rev().copied());
    let mut news = new_shape.iter().rev().copied();
    let mut next_old = move || olds.next().unwrap_or((1, (0, 1)));
    let mut out = Vec::with_capacity(new_shape.len());
    // Walking from the innermost: `block` is the run of old dimensions being cut (its size and
    // mask), `inner` the product of the new dimensions already cut from it.
    let (mut block, (mut l, mut r)) = next_old();
    let (mut dim, mut inner) = (news.next().unwrap_or(1), 1i64);
    while out.len() < new_shape.len() {
        let span = dim * inner;
        if block == span {
            // The new dimension closes the block.
            out.push((l / inner, (r - 1) / inner + 1));
            (block, (l, r)) = next_old();
            (dim, inner) = (news.next().unwrap_or(1), 1);
        } else if block > span {
            // The new dimension cuts the block: the mask must not straddle the cut.
            let straddles = (l % span != 0 || r % span != 0) && l / span != (r - 1) / span;
            if block % span != 0 || straddles {
                return None;
            }
            out.push((l % span / inner, (r - 1) % span / inner + 1));
            (dim, inner) = (news.next().unwrap_or(1), span);
        } else {
            // The new dimension spans several old ones: fold the next old one into the block.
            let (size, (nl, nr)) = next_old();
            if (l, r) != (0, block) && l != r && nr - nl != 1 {
                return None;
            }
            (l, r) = (nl * block + l, (nr - 1) * block + r);
            block *= size;
        }
    }
    out.reverse();
    Some(out)
}
