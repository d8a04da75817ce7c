//! Linear algebra composed from tensor ops: `qr` by Householder reflections (full-size
//! reflectors `I - τ w wᵀ`, so no in-place updates are needed) and `svd` by one-sided Jacobi
//! rotations with a round-robin column pairing and a fixed number of sweeps. Both work on the
//! last two axes with any leading batch axes.
//!
//! Precision: the Jacobi iteration runs [`SVD_SWEEPS`] sweeps, which brings well-conditioned
//! matrices of up to ~16 columns to working precision (f32 ≈ 1e-5, f64 ≈ 1e-12 relative).

use alloc::format;
use alloc::vec;
use alloc::vec::Vec;

use crate::dtype::DType;
use crate::error::{Error, Result};

use super::{must, Tensor};

/// Jacobi sweeps `svd` runs (each sweep rotates every column pair once).
pub const SVD_SWEEPS: usize = 10;

/// The `n`×`n` identity broadcast over `batch`.
fn batched_eye(batch: &[usize], n: usize, dtype: DType) -> Result<Tensor> {
    let mut shape = vec![1isize; batch.len()];
    shape.extend([n as isize, n as isize]);
    let mut full = batch.to_vec();
    full.extend([n, n]);
    Tensor::eye(n, dtype).try_reshape(&shape)?.try_expand(&full)
}

/// `(before, after)` ranges keeping every leading axis of `t` and `last` for the last two.
fn keep_last2(t: &Tensor, rows: (usize, usize), cols: (usize, usize)) -> Vec<(usize, usize)> {
    let s = t.shape();
    let mut r: Vec<(usize, usize)> = s[..s.len() - 2].iter().map(|&d| (0, d)).collect();
    r.extend([rows, cols]);
    r
}

/// One Householder step on column `i`: returns the reflector vector `w` (padded to `m` rows,
/// `[.., m, 1]`) and its `τ` (`[.., 1, 1]`), such that `(I - τ w wᵀ) r` zeroes `r[i+1.., i]`.
fn householder(r: &Tensor, i: usize, m: usize) -> Result<(Tensor, Tensor)> {
    let col = r.try_shrink(&keep_last2(r, (i, m), (i, i + 1)))?;
    let norm = col.try_mul(&col)?.try_sum(&[-2], true)?.sqrt();
    let x0 = col.try_shrink(&keep_last2(&col, (0, 1), (0, 1)))?;
    let nz = norm.ne(0.0);
    let s = x0.ne(0.0).try_where(x0.sign().neg(), -1.0)?;
    let u1 = x0.try_sub(s.try_mul(&norm)?)?;
    let w = col.try_div(nz.try_where(&u1, 1.0)?)?;
    let first = Tensor::full(&[1, 1], 1.0, DType::Bool).try_pad(&[(0, m - i - 1), (0, 0)])?;
    let w = first.try_where(w.const_like(1.0), &w)?;
    let tau = s.neg().try_mul(&u1)?.try_div(nz.try_where(&norm, 1.0)?)?;
    let tau = nz.try_where(&tau, 0.0)?;
    let mut pad = vec![(0, 0); w.ndim() - 2];
    pad.extend([(i, 0), (0, 0)]);
    Ok((w.try_pad(&pad)?, tau))
}

/// `[rows, cols]` bools, true on and above the diagonal.
fn upper_mask(rows: usize, cols: usize) -> Result<Tensor> {
    let r = Tensor::arange(0.0, rows as f64, 1.0, DType::I32).try_reshape(&[rows as isize, 1])?;
    let c = Tensor::arange(0.0, cols as f64, 1.0, DType::I32).try_reshape(&[1, cols as isize])?;
    r.try_le(&c)
}

/// The `[n, k]` matrix whose columns are the unit vectors `e_j` for `j` in `idx`.
fn pick_columns(n: usize, idx: &[usize], dtype: DType) -> Result<Tensor> {
    let eye = Tensor::eye(n, dtype);
    let cols = idx
        .iter()
        .map(|&j| eye.try_shrink(&[(0, n), (j, j + 1)]))
        .collect::<Result<Vec<_>>>()?;
    let refs: Vec<&Tensor> = cols.iter().collect();
    Tensor::try_cat(&refs, 1)
}

/// The column pairs of round `r` of a round-robin over `n` columns (circle method).
fn round_pairs(n: usize, r: usize) -> Vec<(usize, usize)> {
    let np = n + n % 2;
    let mut seats = vec![0];
    seats.extend((0..np - 1).map(|j| 1 + (j + r) % (np - 1)));
    (0..np / 2)
        .map(|k| (seats[k], seats[np - 1 - k]))
        .filter(|&(a, b)| a < n && b < n)
        .collect()
}

/// The selection matrices of one round: left columns, right columns, and (for odd `n`) the
/// diagonal mask of the column that sits out.
struct Round {
    left: Tensor,
    right: Tensor,
    rest: Option<Tensor>,
}

fn round_mats(n: usize, r: usize, dtype: DType) -> Result<Round> {
    let pairs = round_pairs(n, r);
    let (l, rr): (Vec<usize>, Vec<usize>) = pairs.iter().copied().unzip();
    let rest = match (0..n).find(|j| !l.contains(j) && !rr.contains(j)) {
        None => None,
        Some(j) => {
            let e = pick_columns(n, &[j], dtype)?;
            Some(e.try_matmul(&e.try_transpose(0, 1)?)?)
        }
    };
    Ok(Round {
        left: pick_columns(n, &l, dtype)?,
        right: pick_columns(n, &rr, dtype)?,
        rest,
    })
}

/// Applies one round of Jacobi rotations to the columns of `u` `[.., m, n]` and `v`.
fn jacobi_round(u: &Tensor, v: &Tensor, rd: &Round) -> Result<(Tensor, Tensor)> {
    let (l, r) = (u.try_matmul(&rd.left)?, u.try_matmul(&rd.right)?);
    let alpha = l.try_mul(&l)?.try_sum(&[-2], true)?;
    let beta = r.try_mul(&r)?.try_sum(&[-2], true)?;
    let gamma = l.try_mul(&r)?.try_sum(&[-2], true)?;
    let rot = gamma.ne(0.0);
    let zeta = beta
        .try_sub(&alpha)?
        .try_div(rot.try_where(&gamma, 1.0)?.mul(2.0))?;
    let sgn = zeta.lt(0.0).try_where(-1.0, 1.0)?.cast(zeta.dtype());
    let t = sgn.try_div(zeta.abs().try_add(zeta.mul(&zeta).add(1.0).sqrt())?)?;
    let t = rot.try_where(&t, 0.0)?;
    let c = t.try_mul(&t)?.add(1.0).rsqrt();
    let s = c.try_mul(&t)?;
    let apply = |x: &Tensor| -> Result<Tensor> {
        let (xl, xr) = (x.try_matmul(&rd.left)?, x.try_matmul(&rd.right)?);
        let nl = c.try_mul(&xl)?.try_sub(s.try_mul(&xr)?)?;
        let nr = s.try_mul(&xl)?.try_add(c.try_mul(&xr)?)?;
        let mut y = nl.try_matmul(&rd.left.try_transpose(0, 1)?)?;
        y = y.try_add(nr.try_matmul(&rd.right.try_transpose(0, 1)?)?)?;
        match &rd.rest {
            Some(keep) => y.try_add(x.try_matmul(keep)?),
            None => Ok(y),
        }
    };
    Ok((apply(u)?, apply(v)?))
}

/// Per batch, the permutation matrix `[.., n, n]` that sorts `s` `[.., n]` descending (ties
/// keep their order): `P[i, k] = 1` when element `i` ranks `k`.
fn sort_desc_perm(s: &Tensor) -> Result<Tensor> {
    let n = s.shape()[s.ndim() - 1];
    let si = s.try_unsqueeze(-1)?; // [.., n, 1]: element i
    let sj = s.try_unsqueeze(-2)?; // [.., 1, n]: element j
    let before = Tensor::arange(0.0, n as f64, 1.0, DType::I32);
    let j_lt_i = before
        .try_reshape(&[1, n as isize])?
        .try_lt(&before.try_reshape(&[n as isize, 1])?)?;
    let beats = sj.try_gt(&si)?.cast(DType::I32);
    let ties = sj.try_eq(&si)?.try_mul(&j_lt_i)?.cast(DType::I32);
    let rank = beats.try_add(ties)?.try_sum(&[-1], true)?; // [.., n, 1]
    let k = before.try_reshape(&[1, n as isize])?;
    Ok(rank.try_eq(&k)?.cast(s.dtype()))
}

impl Tensor {
    /// QR decomposition of the last two axes `[.., m, n]`: `Q` `[.., m, m]` orthogonal and `R`
    /// `[.., m, n]` upper triangular (exact zeros below the diagonal), `Q R = A`.
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let a = Tensor::from_slice(&[3.0f64, 1.0, 4.0, 2.0], &[2, 2]);
    /// let (q, r) = a.qr();
    /// let back = q.matmul(&r).to_vec::<f64>().unwrap();
    /// assert!(back.iter().zip([3.0, 1.0, 4.0, 2.0]).all(|(x, y)| (x - y).abs() < 1e-12));
    /// assert_eq!(r.to_vec::<f64>().unwrap()[2], 0.0);
    /// ```
    pub fn try_qr(&self) -> Result<(Tensor, Tensor)> {
        let shape = self.shape();
        if shape.len() < 2 {
            return Err(Error::shape(
                "qr",
                format!("needs [.., m, n], got {shape:?}"),
            ));
        }
        let (m, n) = (shape[shape.len() - 2], shape[shape.len() - 1]);
        let batch = &shape[..shape.len() - 2];
        let mut r = self.float();
        let mut q = batched_eye(batch, m, r.dtype())?;
        for i in 0..m.min(n) {
            let (w, tau) = householder(&r, i, m)?;
            let wt = w.try_transpose(-2, -1)?;
            r = r.try_sub(w.try_mul(&tau)?.try_matmul(&wt.try_matmul(&r)?)?)?;
            q = q.try_sub(q.try_matmul(&w)?.try_matmul(&wt.try_mul(&tau)?)?)?;
        }
        let r = upper_mask(m, n)?.try_where(&r, 0.0)?;
        Ok((q, r))
    }
    /// [`Tensor::try_qr`], panicking on a rank below 2.
    #[track_caller]
    pub fn qr(&self) -> (Tensor, Tensor) {
        must(self.try_qr())
    }

    /// Thin singular value decomposition of the last two axes `[.., m, n]`, `k = min(m, n)`:
    /// `U` `[.., m, k]` and `Vᵀ` `[.., k, n]` with orthonormal columns/rows, `S` `[.., k]`
    /// non-negative and descending, `U · diag(S) · Vᵀ = A`. One-sided Jacobi with
    /// [`SVD_SWEEPS`] sweeps; the intermediate values are realized after every sweep, so this
    /// computes (and is not differentiable through the sweeps' history).
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let a = Tensor::from_slice(&[3.0f64, 0.0, 0.0, -4.0], &[2, 2]);
    /// let (_, s, _) = a.svd();
    /// let s = s.to_vec::<f64>().unwrap();
    /// assert!((s[0] - 4.0).abs() < 1e-12 && (s[1] - 3.0).abs() < 1e-12);
    /// ```
    pub fn try_svd(&self) -> Result<(Tensor, Tensor, Tensor)> {
        let shape = self.shape();
        if shape.len() < 2 {
            return Err(Error::shape(
                "svd",
                format!("needs [.., m, n], got {shape:?}"),
            ));
        }
        let (m, n) = (shape[shape.len() - 2], shape[shape.len() - 1]);
        if m < n {
            let (u, s, vt) = self.try_transpose(-2, -1)?.try_svd()?;
            return Ok((vt.try_transpose(-2, -1)?, s, u.try_transpose(-2, -1)?));
        }
        let mut u = self.float().contiguous();
        let mut v = batched_eye(&shape[..shape.len() - 2], n, u.dtype())?.contiguous();
        let rounds = (0..(n + n % 2).saturating_sub(1))
            .map(|r| round_mats(n, r, u.dtype()))
            .collect::<Result<Vec<_>>>()?;
        for _ in 0..SVD_SWEEPS {
            for rd in &rounds {
                (u, v) = jacobi_round(&u, &v, rd)?;
            }
            (u, v) = (u.contiguous(), v.contiguous());
            Tensor::realize_all(&[&u, &v])?;
        }
        let s = u.try_mul(&u)?.try_sum(&[-2], false)?.sqrt();
        let p = sort_desc_perm(&s)?;
        let s = s.try_unsqueeze(-2)?.try_matmul(&p)?.try_squeeze(Some(-2))?;
        let safe = s.ne(0.0).try_where(&s, 1.0)?.try_unsqueeze(-2)?;
        let u = u.try_matmul(&p)?.try_div(&safe)?;
        let vt = v.try_matmul(&p)?.try_transpose(-2, -1)?;
        Ok((u, s, vt))
    }

    /// [`Tensor::try_svd`], panicking on a rank below 2 or a failed computation.
    #[track_caller]
    pub fn svd(&self) -> (Tensor, Tensor, Tensor) {
        must(self.try_svd())
    }
}
