//! Kernels that only move data, as a strided copy a device can run without compiling anything.
//!
//! A scheduled kernel whose AST is a store of one load (same dtype, no arithmetic) through a
//! ShapeTracker that reduces to one view — a permute, reshape, shrink, flip, expand or zero pad of
//! its input, such as a weight panel or a padded activation — writes `out[i] = in[offset + Σ
//! idx_d·stride_d]` where every index is inside the view's mask, and zero elsewhere.
//! [`StridedCopy::from_ast`] recognizes such a kernel; [`StridedCopy::run`] performs it on
//! byte slices, iterating strides (no symbolic evaluation per element), one run of the innermost
//! dimension at a time. A device offers to run it through
//! [`Device::copy_program`](crate::device::Device::copy_program); the realizer asks for it where
//! compiling would cost more than the copy's speed could win back (see `realize.rs`).
//!
//! Invariant: `run` writes exactly the bytes the compiled kernel writes: every output element
//! once, in row-major order of the store, with the element's bits moved unchanged (only dtypes
//! whose load and store move bits are accepted: not f16/bf16, which the kernels compute in f32),
//! and all-zero bits (+0, the value a masked load gives) outside the mask. Before touching
//! anything it checks that every index it will read is inside the source.

use alloc::vec::Vec;

use crate::ast::{Ast, AstOp};
use crate::dtype::DType;
use crate::error::{Error, Result};

/// A movement kernel as strides (see the module doc). Dimensions are merged where the source
/// walks them as one, and size-1 dimensions dropped, so the innermost run is as long as can be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StridedCopy {
    /// Bytes per element.
    itemsize: usize,
    /// The output's dimensions, row-major (at least one).
    dims: Vec<usize>,
    /// The source index step of each dimension, in elements (0 for an expand, negative for a
    /// flip).
    strides: Vec<i64>,
    /// The source index of position `(0, 0, …)`.
    offset: i64,
    /// The valid range `[lo, hi)` of each dimension; positions outside any are zero.
    valid: Vec<(usize, usize)>,
}

/// Does a load and store of `dtype` move its bits unchanged? f16 and bf16 go through f32 in the
/// kernels (a NaN's payload need not survive), so their copies stay compiled.
fn bits_move(dtype: DType) -> bool {
    match dtype {
        DType::Bool
        | DType::I8
        | DType::U8
        | DType::I16
        | DType::U16
        | DType::I32
        | DType::U32
        | DType::I64
        | DType::U64
        | DType::F32
        | DType::F64 => true,
        DType::F16 | DType::BF16 => false,
    }
}

impl StridedCopy {
    /// The copy `ast` performs, when it is a store of one load of the same dtype into a
    /// row-major output, through a source view with constant shape, strides, offset and mask
    /// (after [`crate::ShapeTracker::simplify`]). `None` for anything else (arithmetic, several
    /// views, symbolic sizes, an output written through a view): such kernels are compiled.
    pub fn from_ast(ast: &Ast) -> Option<StridedCopy> {
        let AstOp::Store { buf: 0, st: out_st } = ast.op() else {
            return None;
        };
        let [load] = ast.src() else {
            return None;
        };
        let AstOp::Load { buf: 1, st } = load.op() else {
            return None;
        };
        if load.dtype() != ast.dtype() || !bits_move(ast.dtype()) || !out_st.contiguous() {
            return None;
        }
        let st = st.simplify();
        let [view] = st.views() else {
            return None;
        };
        if view.shape() != out_st.shape() {
            return None;
        }
        let konst = |n: &crate::symbolic::Node| n.as_const();
        let shape: Vec<i64> = view.shape().iter().map(konst).collect::<Option<_>>()?;
        let strides: Vec<i64> = view.strides().iter().map(konst).collect::<Option<_>>()?;
        let offset = konst(view.offset())?;
        let valid: Vec<(i64, i64)> = match view.mask() {
            Some(m) => m
                .iter()
                .map(|(b, e)| Some((konst(b)?, konst(e)?)))
                .collect::<Option<_>>()?,
            None => shape.iter().map(|&d| (0, d)).collect(),
        };
        let dims = shape
            .iter()
            .map(|&d| usize::try_from(d).ok())
            .collect::<Option<Vec<usize>>>()?;
        let valid = valid
            .iter()
            .zip(&dims)
            .map(|(&(lo, hi), &d)| {
                let clamp = |x: i64| usize::try_from(x.max(0)).map(|x| x.min(d));
                Some((clamp(lo).ok()?, clamp(hi).ok()?))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(StridedCopy::new(
            ast.dtype().itemsize(),
            dims,
            strides,
            offset,
            valid,
        ))
    }

    /// A copy from its parts (one stride and valid range per dimension), normalized: size-1
    /// dimensions dropped, dimensions the source walks as one merged, and an empty valid range
    /// anywhere made the all-zero copy.
    pub fn new(
        itemsize: usize,
        dims: Vec<usize>,
        strides: Vec<i64>,
        offset: i64,
        valid: Vec<(usize, usize)>,
    ) -> StridedCopy {
        let total: usize = dims.iter().product();
        let empty = valid.iter().any(|&(lo, hi)| lo >= hi);
        if total == 0 || empty {
            // Nothing is read: one dimension, nothing valid.
            return StridedCopy {
                itemsize,
                dims: alloc::vec![total],
                strides: alloc::vec![0],
                offset: 0,
                valid: alloc::vec![(0, 0)],
            };
        }
        let (mut d2, mut s2, mut v2) = (Vec::new(), Vec::new(), Vec::<(usize, usize)>::new());
        let mut offset = offset;
        for ((&d, &s), &(lo, hi)) in dims.iter().zip(&strides).zip(&valid) {
            if d == 1 {
                continue;
            }
            if hi - lo == 1 && s != 0 {
                // One valid position reads one element: fold it into the offset (as a view
                // does), which lets neighbours merge.
                offset += s * lo as i64;
                d2.push(d);
                s2.push(0);
                v2.push((lo, hi));
                continue;
            }
            d2.push(d);
            s2.push(s);
            v2.push((lo, hi));
        }
        // Merge a dimension into the one before it when the source walks the pair as one run and
        // the inner one is valid throughout: position (i, j) reads i·(s·d) + j·s.
        let (mut dims, mut strides, mut valid) =
            (Vec::new(), Vec::<i64>::new(), Vec::<(usize, usize)>::new());
        for ((d, s), v) in d2.into_iter().zip(s2).zip(v2) {
            if let (Some(pd), Some(ps), Some(pv)) =
                (dims.last_mut(), strides.last_mut(), valid.last_mut())
            {
                if v == (0, d) && *ps == s * d as i64 {
                    *pd *= d;
                    *pv = (pv.0 * d, pv.1 * d);
                    *ps = s;
                    continue;
                }
            }
            dims.push(d);
            strides.push(s);
            valid.push(v);
        }
        if dims.is_empty() {
            dims.push(1);
            strides.push(0);
            valid.push((0, 1));
        }
        StridedCopy {
            itemsize,
            dims,
            strides,
            offset,
            valid,
        }
    }

    /// Elements written (the output's size).
    pub fn out_len(&self) -> usize {
        self.dims.iter().product()
    }

    /// Bytes per element.
    pub fn itemsize(&self) -> usize {
        self.itemsize
    }

    /// The lowest and highest source index read, or `None` when nothing is read.
    fn src_range(&self) -> Option<(i64, i64)> {
        let (mut lo, mut hi) = (self.offset, self.offset);
        for (&s, &(a, b)) in self.strides.iter().zip(&self.valid) {
            if a >= b {
                return None;
            }
            let (x, y) = (s * a as i64, s * (b as i64 - 1));
            lo += x.min(y);
            hi += x.max(y);
        }
        Some((lo, hi))
    }

    /// Elements of the source the copy reads up to (one past the highest index read; 0 when it
    /// reads nothing). An error when some index read is negative.
    pub fn src_len(&self) -> Result<usize> {
        match self.src_range() {
            None => Ok(0),
            Some((lo, _)) if lo < 0 => Err(Error::internal(alloc::format!(
                "strided copy reads source index {lo}"
            ))),
            Some((_, hi)) => Ok(hi as usize + 1),
        }
    }

    /// Writes the copy of `src` into `dst` (see the module doc). `src` must hold at least
    /// [`StridedCopy::src_len`] elements and `dst` exactly [`StridedCopy::out_len`], both of
    /// [`StridedCopy::itemsize`] bytes, or nothing is written and the error says which.
    pub fn run(&self, src: &[u8], dst: &mut [u8]) -> Result<()> {
        let n = self.itemsize;
        let need = self.src_len()?.saturating_mul(n);
        if src.len() < need || dst.len() != self.out_len().saturating_mul(n) {
            return Err(Error::internal(alloc::format!(
                "strided copy of {:?} (strides {:?}, offset {}): source {} bytes (needs {need}), \
                 destination {} bytes (needs {})",
                self.dims,
                self.strides,
                self.offset,
                src.len(),
                dst.len(),
                self.out_len() * n
            )));
        }
        match n {
            1 => self.walk::<1>(src, dst, 0, self.offset),
            2 => self.walk::<2>(src, dst, 0, self.offset),
            4 => self.walk::<4>(src, dst, 0, self.offset),
            8 => self.walk::<8>(src, dst, 0, self.offset),
            _ => {
                return Err(Error::internal(alloc::format!(
                    "strided copy of {n}-byte elements"
                )))
            }
        }
        Ok(())
    }

    /// Fills `dst` (the block of dimension `d` and the ones inside it) reading from source
    /// index `base` on; `N` bytes per element. Indices were checked by `run`.
    fn walk<const N: usize>(&self, src: &[u8], dst: &mut [u8], d: usize, base: i64) {
        if d + 2 >= self.dims.len() {
            self.plane::<N>(src, dst, d, base);
            return;
        }
        let (size, stride, (lo, hi)) = (self.dims[d], self.strides[d], self.valid[d]);
        let block = dst.len() / size;
        let (head, rest) = dst.split_at_mut(lo * block);
        let (body, tail) = rest.split_at_mut((hi - lo) * block);
        head.fill(0);
        tail.fill(0);
        let first = base + stride * lo as i64;
        for (i, out) in body.chunks_exact_mut(block).enumerate() {
            self.walk::<N>(src, out, d + 1, first + stride * i as i64);
        }
    }

    /// The innermost two dimensions from `d` on (or the last one alone) as a plane of rows and
    /// columns, in one call: a row may be a few elements long (a weight panel's lanes), where a
    /// call per row would cost more than its copy. When the source steps further along a row
    /// than down a column (a transpose), the plane is walked column by column, so the source is
    /// read in order.
    fn plane<const N: usize>(&self, src: &[u8], dst: &mut [u8], d: usize, base: i64) {
        let last = self.dims.len() - 1;
        let (rows, rs, (r0, r1)) = match d == last {
            true => (1, 0, (0, 1)),
            false => (self.dims[d], self.strides[d], self.valid[d]),
        };
        let (cols, cs, (c0, c1)) = (self.dims[last], self.strides[last], self.valid[last]);
        let row_bytes = cols * N;
        debug_assert_eq!(dst.len(), rows * row_bytes);
        dst[..r0 * row_bytes].fill(0);
        dst[r1 * row_bytes..].fill(0);
        if c0 > 0 || c1 < cols {
            for r in r0..r1 {
                let line = &mut dst[r * row_bytes..(r + 1) * row_bytes];
                line[..c0 * N].fill(0);
                line[c1 * N..].fill(0);
            }
        }
        let first = base + rs * r0 as i64 + cs * c0 as i64;
        if cs.unsigned_abs() > rs.unsigned_abs() && r1 - r0 > 1 {
            for c in c0..c1 {
                let mut at = first + cs * (c - c0) as i64;
                for r in r0..r1 {
                    let (i, o) = (at as usize * N, (r * cols + c) * N);
                    dst[o..o + N].copy_from_slice(&src[i..i + N]);
                    at += rs;
                }
            }
            return;
        }
        for r in r0..r1 {
            let line = &mut dst[r * row_bytes + c0 * N..r * row_bytes + c1 * N];
            row::<N>(src, line, first + rs * (r - r0) as i64, cs);
        }
    }
}

/// The innermost run: `dst`'s elements read from `src` at `first`, `first + stride`, ….
fn row<const N: usize>(src: &[u8], dst: &mut [u8], first: i64, stride: i64) {
    if dst.is_empty() {
        return;
    }
    let start = first as usize * N;
    match stride {
        1 => dst.copy_from_slice(&src[start..start + dst.len()]),
        0 => {
            let v: [u8; N] = src[start..start + N].try_into().unwrap_or([0; N]);
            for out in dst.chunks_exact_mut(N) {
                out.copy_from_slice(&v);
            }
        }
        _ => {
            let mut at = first;
            for out in dst.chunks_exact_mut(N) {
                let i = at as usize * N;
                out.copy_from_slice(&src[i..i + N]);
                at += stride;
            }
        }
    }
}
