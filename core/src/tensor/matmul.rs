//! Matrix products, numpy rules: 1-D operands gain (then lose) a unit axis, leading batch axes
//! broadcast. Composed as a broadcast multiply and a sum over the shared axis:
//! `(a.reshape(.., n, 1, k) * bᵀ.reshape(.., 1, m, k)).sum(-1)`.
//!
//! Nothing here depends on the target: how `b` is laid out for the cache (panels) is the
//! scheduler's choice (`schedule/layout.rs`), made for every matmul-shaped kernel alike.

use alloc::format;

use crate::error::{Error, Result};
use crate::shape::Sint;

use super::{must, Tensor};

fn mismatch(a: &[usize], b: &[usize], why: &str) -> Error {
    Error::shape("matmul", format!("shapes {a:?} and {b:?} {why}"))
}

impl Tensor {
    /// Matrix product of `self` (`[.., n, k]` or `[k]`) and `rhs` (`[.., k, m]` or `[k]`).
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// let v = Tensor::from_slice(&[1.0f32, 1.0], &[2]);
    /// assert_eq!(a.matmul(&v).to_vec::<f32>().unwrap(), vec![3.0, 7.0]);
    /// assert_eq!(v.matmul(&a).to_vec::<f32>().unwrap(), vec![4.0, 6.0]);
    /// ```
    pub fn try_matmul(&self, rhs: &Tensor) -> Result<Tensor> {
        // Ranks and messages only: the product itself is built over the symbolic shapes.
        let (sa, sb) = (self.shape_quiet(), rhs.shape_quiet());
        if sa.is_empty() || sb.is_empty() {
            return Err(mismatch(&sa, &sb, "include a 0-d tensor"));
        }
        let a = if sa.len() == 1 {
            self.try_unsqueeze(0)?
        } else {
            self.clone()
        };
        let b = if sb.len() == 1 {
            rhs.try_unsqueeze(1)?
        } else {
            rhs.clone()
        };
        let out = matmul_2d_up(&a, &b, (&sa, &sb))?;
        let out = if sb.len() == 1 {
            out.try_squeeze(Some(-1))?
        } else {
            out
        };
        match (sa.len(), out.ndim()) {
            (1, 1) => out.try_squeeze(Some(-1)),
            (1, _) => out.try_squeeze(Some(-2)),
            _ => Ok(out),
        }
    }
    /// [`Tensor::try_matmul`], panicking (naming both shapes) when they do not multiply.
    #[track_caller]
    pub fn matmul(&self, rhs: &Tensor) -> Tensor {
        must(self.try_matmul(rhs))
    }

    /// The dot product of two vectors, or [`Tensor::matmul`] for higher ranks.
    pub fn try_dot(&self, rhs: &Tensor) -> Result<Tensor> {
        self.try_matmul(rhs)
    }
    /// [`Tensor::try_dot`], panicking when the shapes do not multiply.
    #[track_caller]
    pub fn dot(&self, rhs: &Tensor) -> Tensor {
        must(self.try_dot(rhs))
    }
}

/// The product of two tensors of rank >= 2 with broadcast batch axes; errors name the user's
/// original shapes `orig`.
fn matmul_2d_up(a: &Tensor, b: &Tensor, orig: (&[usize], &[usize])) -> Result<Tensor> {
    // Symbolic shapes (bound variables) pass through: the row count of a batch is often one.
    let (sa, sb) = (a.sym_shape(), b.sym_shape());
    let (n, k) = (&sa[sa.len() - 2], &sa[sa.len() - 1]);
    let (k2, m) = (&sb[sb.len() - 2], &sb[sb.len() - 1]);
    if k != k2 {
        return Err(mismatch(orig.0, orig.1, "differ in the shared axis"));
    }
    Tensor::broadcast_shape_sym("matmul", &sa[..sa.len() - 2], &sb[..sb.len() - 2])
        .map_err(|_| mismatch(orig.0, orig.1, "have batch axes that do not broadcast"))?;
    let one = Sint::from(1);
    let mut ra = sa[..sa.len() - 2].to_vec();
    ra.extend([n.clone(), one.clone(), k.clone()]);
    let mut rb = sb[..sb.len() - 2].to_vec();
    rb.extend([one, m.clone(), k.clone()]);
    let a3 = a.try_reshape_sym(&ra)?;
    let b3 = b.try_transpose(-1, -2)?.try_reshape_sym(&rb)?;
    a3.try_mul(&b3)?.try_sum(&[-1], false)
}
