//! Every differentiable primitive's gradient agrees with central finite differences, in f64, on
//! random shapes — including broadcasting, padding, slicing, strides and reductions. The loss is
//! `sum(op(x) * w)` with fixed random weights `w`, so every output element matters.

use picograd_core::ops::{AluOp, ReduceOp};
use picograd_core::{DType, Tensor};
use proptest::prelude::*;

fn t64(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape)
}

/// A deterministic pseudo-random value in [lo, hi).
fn val(i: usize, seed: u64, lo: f64, hi: f64) -> f64 {
    let mut z = (i as u64).wrapping_add(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    lo + (hi - lo) * ((z >> 11) as f64 / (1u64 << 53) as f64)
}

fn vals(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    (0..n).map(|i| val(i, seed, lo, hi)).collect()
}

/// Checks d/dx sum(f(x) * w) against central differences.
fn check(
    x: &[f64],
    shape: &[usize],
    seed: u64,
    f: &dyn Fn(&Tensor) -> Tensor,
) -> Result<(), TestCaseError> {
    let xt = t64(x, shape).requires_grad_(true);
    let y = f(&xt);
    let w = t64(&vals(y.numel(), seed ^ 0xABCD, -1.0, 1.0), &y.shape());
    let loss = |t: &Tensor| f(t).mul(&w).sum_all();
    let g = loss(&xt).gradient(&[&xt]).unwrap()[0]
        .to_vec::<f64>()
        .unwrap();
    let eps = 1e-6;
    for i in 0..x.len() {
        let mut p = x.to_vec();
        p[i] += eps;
        let mut m = x.to_vec();
        m[i] -= eps;
        let fp = loss(&t64(&p, shape)).item::<f64>().unwrap();
        let fm = loss(&t64(&m, shape)).item::<f64>().unwrap();
        let num = (fp - fm) / (2.0 * eps);
        prop_assert!(
            (num - g[i]).abs() <= 1e-5 * num.abs().max(1.0),
            "element {}: analytic {} vs numeric {} (shape {:?})",
            i,
            g[i],
            num,
            shape
        );
    }
    Ok(())
}

fn shape_strategy() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..4, 1..4)
}

fn n(shape: &[usize]) -> usize {
    shape.iter().product()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn unary_ops(shape in shape_strategy(), seed in any::<u64>(), which in 0usize..6) {
        let (lo, hi) = match which { 1 | 3 | 5 => (0.5, 2.0), _ => (-2.0, 2.0) };
        let x = vals(n(&shape), seed, lo, hi);
        let f: &dyn Fn(&Tensor) -> Tensor = match which {
            0 => &|t| t.try_alu(AluOp::Neg, &[]).unwrap(),
            1 => &|t| t.try_alu(AluOp::Log2, &[]).unwrap(),
            2 => &|t| t.try_alu(AluOp::Exp2, &[]).unwrap(),
            3 => &|t| t.try_alu(AluOp::Sqrt, &[]).unwrap(),
            4 => &|t| t.try_alu(AluOp::Sin, &[]).unwrap(),
            _ => &|t| t.try_alu(AluOp::Recip, &[]).unwrap(),
        };
        check(&x, &shape, seed, f)?;
    }

    #[test]
    fn binary_ops_with_broadcasting(shape in shape_strategy(), seed in any::<u64>(), which in 0usize..6, bmask in any::<u8>()) {
        let x = vals(n(&shape), seed, 0.5, 2.0);
        // The other operand broadcasts along the axes `bmask` picks; values keep max free of ties.
        let oshape: Vec<usize> = shape.iter().enumerate().map(|(a, &d)| if (bmask >> a) & 1 == 1 { 1 } else { d }).collect();
        let other = t64(&vals(n(&oshape), seed ^ 7, 0.5, 2.0), &oshape);
        let f: Box<dyn Fn(&Tensor) -> Tensor> = match which {
            0 => Box::new(move |t| t.try_alu(AluOp::Add, &[&other]).unwrap()),
            1 => Box::new(move |t| t.try_alu(AluOp::Sub, &[&other]).unwrap()),
            2 => Box::new(move |t| t.try_alu(AluOp::Mul, &[&other]).unwrap()),
            3 => Box::new(move |t| t.try_alu(AluOp::Div, &[&other]).unwrap()),
            4 => Box::new(move |t| other.try_alu(AluOp::Div, &[t]).unwrap()),
            _ => Box::new(move |t| t.try_alu(AluOp::Max, &[&other]).unwrap()),
        };
        check(&x, &shape, seed, &*f)?;
    }

    #[test]
    fn where_and_mulacc(shape in shape_strategy(), seed in any::<u64>()) {
        let x = vals(n(&shape), seed, -2.0, 2.0);
        let cond = t64(&vals(n(&shape), seed ^ 3, -1.0, 1.0), &shape).try_alu(AluOp::CmpLt, &[&t64(&vec![0.0; n(&shape)], &shape)]).unwrap();
        let other = t64(&vals(n(&shape), seed ^ 5, -1.0, 1.0), &shape);
        check(&x, &shape, seed, &|t| cond.try_alu(AluOp::Where, &[t, &other]).unwrap())?;
        check(&x, &shape, seed, &|t| t.try_alu(AluOp::MulAcc, &[&other, t]).unwrap())?;
    }

    #[test]
    fn reductions(shape in shape_strategy(), seed in any::<u64>(), amask in any::<u8>(), keep in any::<bool>(), max in any::<bool>()) {
        let x = vals(n(&shape), seed, -2.0, 2.0);
        let axes: Vec<isize> = (0..shape.len()).filter(|a| (amask >> a) & 1 == 1).map(|a| a as isize).collect();
        let axes = if axes.is_empty() { vec![0] } else { axes };
        let op = if max { ReduceOp::Max } else { ReduceOp::Sum };
        check(&x, &shape, seed, &|t| t.try_reduce(op, Some(&axes), keep).unwrap())?;
    }

    #[test]
    fn movement_ops(shape in shape_strategy(), seed in any::<u64>(), which in 0usize..6, k in any::<u32>()) {
        let x = vals(n(&shape), seed, -2.0, 2.0);
        let r = shape.len();
        let f: Box<dyn Fn(&Tensor) -> Tensor> = match which {
            0 => Box::new(|t| t.try_reshape(&[-1]).unwrap()),
            1 => Box::new(move |t| { let mut o: Vec<usize> = (0..r).collect(); o.rotate_left(k as usize % r); t.try_permute(&o).unwrap() }),
            2 => Box::new(move |t| { let mut s = vec![2usize]; s.extend(t.shape()); t.try_expand(&s).unwrap() }),
            3 => Box::new(move |t| t.try_pad(&(0..r).map(|a| (((k >> a) & 1) as usize, ((k >> (a + 4)) & 1) as usize)).collect::<Vec<_>>()).unwrap()),
            4 => Box::new(move |t| { let s = t.shape(); t.try_shrink(&s.iter().enumerate().map(|(a, &d)| { let b = if d > 1 { ((k >> a) & 1) as usize } else { 0 }; (b, d) }).collect::<Vec<_>>()).unwrap() }),
            _ => Box::new(move |t| t.try_stride(&(0..r).map(|a| match (k >> (2 * a)) & 3 { 0 => 1, 1 => -1, 2 => 2, _ => -2 }).collect::<Vec<i64>>()).unwrap()),
        };
        check(&x, &shape, seed, &*f)?;
    }
}

#[test]
fn cast_and_contiguous_pass_gradients_through() {
    let x = vals(6, 9, -1.0, 1.0);
    check(&x, &[2, 3], 9, &|t| {
        t.contiguous().try_alu(AluOp::Mul, &[t]).unwrap()
    })
    .unwrap();
    // Through f32 and back: the gradient is cast back (values stay within f32 precision).
    let xt = t64(&x, &[2, 3]).requires_grad_(true);
    let g = xt
        .cast(DType::F32)
        .cast(DType::F64)
        .sum_all()
        .gradient(&[&xt])
        .unwrap();
    assert_eq!(g[0].to_vec::<f64>().unwrap(), vec![1.0; 6]);
}

#[test]
fn gradients_accumulate_and_detach_cuts() {
    let x = t64(&[1.0, 2.0], &[2]).requires_grad_(true);
    x.mul(&x).sum_all().backward().unwrap();
    x.mul(3.0).sum_all().backward().unwrap();
    assert_eq!(
        x.grad().unwrap().to_vec::<f64>().unwrap(),
        vec![2.0 + 3.0, 4.0 + 3.0]
    );
    let y = x.detach().mul(&x).sum_all();
    assert_eq!(
        y.gradient(&[&x]).unwrap()[0].to_vec::<f64>().unwrap(),
        vec![1.0, 2.0]
    );
    let z = t64(&[1.0], &[1]).sum_all();
    assert!(z.backward().is_err(), "no tensor needs a gradient");
    assert!(x
        .mul(2.0)
        .backward()
        .unwrap_err()
        .to_string()
        .contains("one-element"));
}
