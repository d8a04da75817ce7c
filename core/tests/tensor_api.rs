//! The Tensor API against plain reference code: every op is compared with f64 loops on flat
//! vectors written here, independent of picograd. Runs on the default device (the interpreter).

use picograd_core::{DType, Tensor};

// ---- reference helpers ----

/// A reference binary function.
type Bin = fn(f64, f64) -> f64;
/// A reference unary function.
type Un = fn(f64) -> f64;

fn t32(v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape)
}

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec().unwrap()
}

fn seq(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32 * 0.5 - 2.0).collect()
}

fn assert_exact(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "lengths: {got:?} vs {want:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            g == w || (g.is_nan() && w.is_nan()),
            "at {i}: {g} vs {w}\n{got:?}\n{want:?}"
        );
    }
}

fn assert_close(got: &[f64], want: &[f64], rel: f64) {
    assert_eq!(got.len(), want.len(), "lengths: {got:?} vs {want:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || (g - w).abs() <= rel * w.abs().max(1.0);
        assert!(ok, "at {i}: {g} vs {w}\n{got:?}\n{want:?}");
    }
}

/// Row-major strides of a shape.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Multi-index of flat index `i` in `shape`.
fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    idx
}

/// Reference reduction of `x` (shape `shape`) over `axes` with `f`, keeping dims as 1.
fn ref_reduce(
    x: &[f64],
    shape: &[usize],
    axes: &[usize],
    init: f64,
    f: fn(f64, f64) -> f64,
) -> Vec<f64> {
    let out_shape: Vec<usize> = shape
        .iter()
        .enumerate()
        .map(|(i, &d)| if axes.contains(&i) { 1 } else { d })
        .collect();
    let os = strides(&out_shape);
    let mut out = vec![init; out_shape.iter().product()];
    for (i, &v) in x.iter().enumerate() {
        let idx = unravel(i, shape);
        let o: usize = idx
            .iter()
            .enumerate()
            .map(|(d, &k)| if axes.contains(&d) { 0 } else { k * os[d] })
            .sum();
        out[o] = f(out[o], v);
    }
    out
}

/// Reference broadcast binary op of numpy shapes.
fn ref_broadcast(
    a: &[f64],
    sa: &[usize],
    b: &[f64],
    sb: &[usize],
    f: fn(f64, f64) -> f64,
) -> (Vec<f64>, Vec<usize>) {
    let n = sa.len().max(sb.len());
    let pad = |s: &[usize]| [vec![1; n - s.len()], s.to_vec()].concat();
    let (pa, pb) = (pad(sa), pad(sb));
    let out: Vec<usize> = pa.iter().zip(&pb).map(|(&x, &y)| x.max(y)).collect();
    let (ta, tb) = (strides(&pa), strides(&pb));
    let vals = (0..out.iter().product())
        .map(|i| {
            let idx = unravel(i, &out);
            let ia: usize = idx
                .iter()
                .enumerate()
                .map(|(d, &k)| if pa[d] == 1 { 0 } else { k * ta[d] })
                .sum();
            let ib: usize = idx
                .iter()
                .enumerate()
                .map(|(d, &k)| if pb[d] == 1 { 0 } else { k * tb[d] })
                .sum();
            f(a[ia], b[ib])
        })
        .collect();
    (vals, out)
}

fn ref_matmul(a: &[f64], b: &[f64], n: usize, k: usize, m: usize) -> Vec<f64> {
    let mut out = vec![0.0; n * m];
    for i in 0..n {
        for j in 0..m {
            out[i * m + j] = (0..k).map(|p| a[i * k + p] * b[p * m + j]).sum();
        }
    }
    out
}

fn f64s(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| f64::from(x)).collect()
}

// ---- creation ----

#[test]
fn arange_eye_like() {
    assert_exact(
        &vals(&Tensor::arange(0.0, 5.0, 1.0, DType::F32)),
        &[0., 1., 2., 3., 4.],
    );
    assert_exact(
        &vals(&Tensor::arange(1.0, 2.0, 0.25, DType::F32)),
        &[1., 1.25, 1.5, 1.75],
    );
    assert_exact(
        &vals(&Tensor::arange(3.0, -3.0, -2.0, DType::I32)),
        &[3., 1., -1.],
    );
    assert_eq!(Tensor::arange(3.0, 3.0, 1.0, DType::I32).shape(), vec![0]);
    for n in [1usize, 2, 3, 5] {
        let want: Vec<f64> = (0..n * n)
            .map(|i| f64::from(u8::from(i / n == i % n)))
            .collect();
        assert_exact(&vals(&Tensor::eye(n, DType::F32)), &want);
    }
    let x = t32(&seq(6), &[2, 3]);
    assert_exact(&vals(&x.zeros_like()), &[0.0; 6]);
    assert_exact(&vals(&x.ones_like()), &[1.0; 6]);
    assert_exact(&vals(&x.full_like(2.5)), &[2.5; 6]);
    assert_eq!(x.full_like(2.5).dtype(), DType::F32);
}

#[test]
fn random_is_deterministic_and_distributed() {
    let a = vals(&Tensor::rand(&[1000], 1));
    assert_eq!(a, vals(&Tensor::rand(&[1000], 1)));
    assert_ne!(a, vals(&Tensor::rand(&[1000], 2)));
    assert!(a.iter().all(|&v| (0.0..1.0).contains(&v)));
    let mean = a.iter().sum::<f64>() / 1000.0;
    assert!((mean - 0.5).abs() < 0.05, "mean {mean}");
    let u = vals(&Tensor::uniform(&[500], -3.0, 2.0, 9));
    assert!(u.iter().all(|&v| (-3.0..2.0).contains(&v)));
    let n = vals(&Tensor::randn(&[4000], 3));
    let m = n.iter().sum::<f64>() / 4000.0;
    let var = n.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / 4000.0;
    assert!(
        m.abs() < 0.06 && (var - 1.0).abs() < 0.08,
        "mean {m} var {var}"
    );
}

// ---- elementwise ----

#[test]
fn binary_ops_broadcast() {
    let (sa, sb) = ([2usize, 1, 3], [4usize, 1]);
    let a: Vec<f32> = seq(6);
    let b: Vec<f32> = vec![1.5, -2.0, 0.25, 4.0];
    let (ta, tb) = (t32(&a, &sa), t32(&b, &sb));
    let cases: [(Tensor, Bin); 6] = [
        (&ta + &tb, |x, y| x + y),
        (&ta - &tb, |x, y| x - y),
        (&ta * &tb, |x, y| x * y),
        (&ta / &tb, |x, y| x / y),
        (ta.maximum(&tb), f64::max),
        (ta.minimum(&tb), f64::min),
    ];
    for (got, f) in cases {
        let (want, shape) = ref_broadcast(&f64s(&a), &sa, &f64s(&b), &sb, f);
        assert_eq!(got.shape(), shape);
        // f32 results of one f32 op: compare against the f64 result rounded to f32.
        let want: Vec<f64> = want.iter().map(|&w| f64::from(w as f32)).collect();
        assert_exact(&vals(&got), &want);
    }
}

#[test]
fn scalar_operands_and_operators() {
    let x = t32(&[1.0, -2.0, 3.5], &[3]);
    assert_exact(&vals(&(&x + 1.0)), &[2.0, -1.0, 4.5]);
    assert_exact(&vals(&(2.0 * &x)), &[2.0, -4.0, 7.0]);
    assert_exact(&vals(&(1.0 - x.clone())), &[0.0, 3.0, -2.5]);
    assert_exact(&vals(&(&x / 2.0)), &[0.5, -1.0, 1.75]);
    assert_exact(
        &vals(&(8.0 / &x)),
        &[8.0, -4.0, 8.0 / 3.5f32 as f64].map(|v: f64| f64::from(v as f32)),
    );
    assert_exact(&vals(&-&x), &[-1.0, 2.0, -3.5]);
    assert_exact(&vals(&x.sub(0.5).mul(2)), &[1.0, -5.0, 6.0]);
    assert_exact(&vals(&x.clamp(Some(-1.0), Some(2.0))), &[1.0, -1.0, 2.0]);
    assert_exact(&vals(&x.clamp(None, Some(0.0))), &[0.0, -2.0, 0.0]);
    // A scalar adopts the tensor's dtype.
    let i = Tensor::from_slice(&[5i32, -5], &[2]);
    assert_eq!((&i + 2.7).dtype(), DType::I32);
    assert_exact(&vals(&(&i + 2.7)), &[7.0, -3.0]);
}

#[test]
fn unary_math_matches_reference() {
    let xs: Vec<f32> = vec![-2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.0, 3.7];
    let pos: Vec<f32> = vec![0.1, 0.5, 1.0, 2.0, 10.0, 123.0];
    let x = t32(&xs, &[8]);
    let p = t32(&pos, &[6]);
    let r = |v: &[f32], f: fn(f64) -> f64| v.iter().map(|&a| f(f64::from(a))).collect::<Vec<_>>();
    let gelu = |a: f64| {
        0.5 * a * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (a + 0.044715 * a * a * a)).tanh())
    };
    let on_x: [(Tensor, Un); 9] = [
        (x.exp(), f64::exp),
        (x.exp2(), f64::exp2),
        (x.sin(), f64::sin),
        (x.cos(), f64::cos),
        (x.tan(), f64::tan),
        (x.sigmoid(), |a| 1.0 / (1.0 + (-a).exp())),
        (x.tanh(), f64::tanh),
        (x.gelu(), gelu),
        (x.relu(), |a| a.max(0.0)),
    ];
    for (got, f) in on_x {
        assert_close(&vals(&got), &r(&xs, f), 1e-5);
    }
    let on_p: [(Tensor, Un); 5] = [
        (p.log(), f64::ln),
        (p.log2(), f64::log2),
        (p.sqrt(), f64::sqrt),
        (p.rsqrt(), |a| 1.0 / a.sqrt()),
        (p.reciprocal(), |a| 1.0 / a),
    ];
    for (got, f) in on_p {
        assert_close(&vals(&got), &r(&pos, f), 1e-5);
    }
    assert_exact(&vals(&x.abs()), &r(&xs, f64::abs));
    assert_exact(&vals(&x.neg()), &r(&xs, |a| -a));
    assert_exact(
        &vals(&x.sign()),
        &r(&xs, |a| if a == 0.0 { 0.0 } else { a.signum() }),
    );
    assert_exact(
        &vals(&Tensor::from_slice(&[-3i32, 0, 4], &[3]).sign()),
        &[-1.0, 0.0, 1.0],
    );
    assert_exact(
        &vals(&Tensor::from_slice(&[-3i32, 0, 4], &[3]).abs()),
        &[3.0, 0.0, 4.0],
    );
}

#[test]
fn pow_signs_and_special_cases() {
    let base: Vec<f32> = vec![-2.0, -2.0, -8.0, 0.0, 0.0, 3.0, 2.0, -1.5];
    let ex: Vec<f32> = vec![3.0, 2.0, 1.0 / 3.0, 0.0, 2.0, 0.5, -1.0, 0.0];
    let got = vals(&t32(&base, &[8]).pow(t32(&ex, &[8])));
    let want: Vec<f64> = base
        .iter()
        .zip(&ex)
        .map(|(&b, &e)| f64::from(b).powf(f64::from(e)))
        .collect();
    assert_close(&got, &want, 1e-5);
    assert_close(&vals(&t32(&[-3.0, 4.0], &[2]).pow(2.0)), &[9.0, 16.0], 1e-5);
    let ints =
        Tensor::from_slice(&[3i32, -2, 5], &[3]).pow(Tensor::from_slice(&[4i32, 3, 0], &[3]));
    assert_eq!(ints.dtype(), DType::I32);
    assert_exact(&vals(&ints), &[81.0, -8.0, 1.0]);
}

#[test]
fn comparisons_and_where() {
    let a = t32(&[1.0, 2.0, 3.0, f32::NAN], &[4]);
    let b = t32(&[2.0, 2.0, 2.0, 2.0], &[4]);
    let cmp = |t: Tensor| t.to_vec::<bool>().unwrap();
    assert_eq!(cmp(a.lt(&b)), [true, false, false, false]);
    assert_eq!(cmp(a.le(&b)), [true, true, false, true]); // le is !(a > b), as tinygrad
    assert_eq!(cmp(a.gt(&b)), [false, false, true, false]);
    assert_eq!(cmp(a.ge(2.0)), [false, true, true, true]);
    assert_eq!(cmp(a.eq(2.0)), [false, true, false, false]);
    assert_eq!(cmp(a.ne(&b)), [true, false, true, true]);
    assert_eq!(cmp(a.lt(&b).logical_not()), [false, true, true, true]);
    let c = a.gt(1.5);
    assert_exact(
        &vals(&c.where_(&a, 0.0).sub(0.0).slice(&[(0, 3, 1)])),
        &[0.0, 2.0, 3.0],
    );
    // where broadcasts all three operands.
    let m = Tensor::from_slice(&[true, false], &[2, 1]);
    let w = m.where_(t32(&[1.0, 2.0, 3.0], &[3]), -1.0);
    assert_eq!(w.shape(), vec![2, 3]);
    assert_exact(&vals(&w), &[1.0, 2.0, 3.0, -1.0, -1.0, -1.0]);
}

// ---- integers ----

#[test]
fn int_semantics() {
    let a = Tensor::from_slice(&[i32::MAX, 7, -7, 5], &[4]);
    let b = Tensor::from_slice(&[1i32, 2, 2, 0], &[4]);
    assert_eq!((&a + &b).to_vec::<i32>().unwrap(), vec![i32::MIN, 9, -5, 5]);
    // Division truncates toward zero; x/0 = 0; int / int stays int.
    let q = &a / &b;
    assert_eq!(q.dtype(), DType::I32);
    assert_eq!(q.to_vec::<i32>().unwrap(), vec![i32::MAX, 3, -3, 0]);
    assert_eq!(a.rem(&b).to_vec::<i32>().unwrap(), vec![0, 1, -1, 0]);
    let u = Tensor::from_slice(&[250u8, 3], &[2]);
    assert_eq!((&u + 10.0).to_vec::<u8>().unwrap(), vec![4, 13]);
    // Promotion: i32 + f32 -> f32.
    let f = t32(&[0.5, 0.5, 0.5, 0.5], &[4]);
    let s = &b + &f;
    assert_eq!(s.dtype(), DType::F32);
    assert_exact(&vals(&s), &[1.5, 2.5, 2.5, 0.5]);
    assert_eq!(
        (&u + &Tensor::from_slice(&[1i8, 1], &[2])).dtype(),
        DType::I16
    );
}

// ---- movement ----

#[test]
fn reshape_permute_transpose() {
    let x = t32(&seq(24), &[2, 3, 4]);
    let r = x.reshape(&[4, -1]);
    assert_eq!(r.shape(), vec![4, 6]);
    assert_exact(&vals(&r), &f64s(&seq(24)));
    let p = x.permute(&[2, 0, 1]);
    assert_eq!(p.shape(), vec![4, 2, 3]);
    let xs = f64s(&seq(24));
    let want: Vec<f64> = (0..24)
        .map(|i| {
            let idx = unravel(i, &[4, 2, 3]);
            xs[idx[1] * 12 + idx[2] * 4 + idx[0]]
        })
        .collect();
    assert_exact(&vals(&p), &want);
    let t = x.transpose(-1, 0);
    assert_eq!(t.shape(), vec![4, 3, 2]);
    let want_t: Vec<f64> = (0..24)
        .map(|i| {
            let idx = unravel(i, &[4, 3, 2]);
            xs[idx[2] * 12 + idx[1] * 4 + idx[0]]
        })
        .collect();
    assert_exact(&vals(&t), &want_t);
}

#[test]
fn squeeze_unsqueeze_flatten_expand_pad_flip() {
    let x = t32(&seq(6), &[1, 2, 1, 3]);
    assert_eq!(x.squeeze(None).shape(), vec![2, 3]);
    assert_eq!(x.squeeze(Some(-2)).shape(), vec![1, 2, 3]);
    assert_eq!(x.squeeze(Some(1)).shape(), vec![1, 2, 1, 3]);
    assert_eq!(x.unsqueeze(-1).shape(), vec![1, 2, 1, 3, 1]);
    assert_eq!(x.unsqueeze(0).shape(), vec![1, 1, 2, 1, 3]);
    assert_eq!(x.flatten(1, -1).shape(), vec![1, 6]);
    assert_eq!(x.flatten(0, 1).shape(), vec![2, 1, 3]);
    let y = t32(&[1.0, 2.0], &[2, 1]);
    assert_exact(&vals(&y.expand(&[2, 3])), &[1., 1., 1., 2., 2., 2.]);
    assert_exact(&vals(&y.pad(&[(1, 0), (0, 1)])), &[0., 0., 1., 0., 2., 0.]);
    assert_exact(
        &vals(&y.pad_value(&[(0, 1), (1, 0)], 7.0)),
        &[7., 1., 7., 2., 7., 7.],
    );
    let z = t32(&seq(6), &[2, 3]);
    let zs = f64s(&seq(6));
    assert_exact(
        &vals(&z.flip(&[-1])),
        &[zs[2], zs[1], zs[0], zs[5], zs[4], zs[3]],
    );
    assert_exact(&vals(&z.shrink(&[(1, 2), (0, 2)])), &[zs[3], zs[4]]);
}

/// Python's slice on one axis, as a reference.
fn py_slice(n: i64, start: i64, stop: i64, step: i64) -> Vec<i64> {
    let norm = |v: i64, lo: i64, hi: i64| {
        let v = if v < 0 { v.saturating_add(n) } else { v };
        v.clamp(lo, hi)
    };
    let (lo, hi) = if step > 0 { (0, n) } else { (-1, n - 1) };
    let (mut i, stop) = (norm(start, lo, hi), norm(stop, lo, hi));
    let mut out = vec![];
    while (step > 0 && i < stop) || (step < 0 && i > stop) {
        out.push(i);
        i += step;
    }
    out
}

#[test]
fn slicing_with_steps() {
    let n = 7;
    let x = Tensor::arange(0.0, n as f64, 1.0, DType::I32);
    let cases = [
        (0, 7, 1),
        (1, 6, 2),
        (i64::MAX, i64::MIN, -1),
        (5, 1, -2),
        (-2, -7, -3),
        (-100, 100, 3),
        (100, -100, -4),
        (3, 3, 1),
        (6, 0, 1),
        (-1, i64::MIN, -2),
    ];
    for (a, b, s) in cases {
        let want: Vec<f64> = py_slice(n, a, b, s).iter().map(|&v| v as f64).collect();
        assert_exact(&vals(&x.slice(&[(a, b, s)])), &want);
    }
    // Two axes: [::-1, 1::2] on a 3x4.
    let m = t32(&seq(12), &[3, 4]);
    let ms = f64s(&seq(12));
    let got = m.slice(&[(i64::MAX, i64::MIN, -1), (1, i64::MAX, 2)]);
    assert_eq!(got.shape(), vec![3, 2]);
    assert_exact(&vals(&got), &[ms[9], ms[11], ms[5], ms[7], ms[1], ms[3]]);
    assert!(m.try_slice(&[(0, 1, 0)]).is_err());
}

#[test]
fn cat_stack_split_round_trip() {
    let a = t32(&seq(6), &[2, 3]);
    let b = t32(&seq(4), &[2, 2]);
    let c = Tensor::cat(&[&a, &b], -1);
    assert_eq!(c.shape(), vec![2, 5]);
    let (av, bv) = (f64s(&seq(6)), f64s(&seq(4)));
    let want: Vec<f64> = [&av[0..3], &bv[0..2], &av[3..6], &bv[2..4]].concat();
    assert_exact(&vals(&c), &want);
    let parts = c.split(&[3, 2], 1);
    assert_exact(&vals(&parts[0]), &av);
    assert_exact(&vals(&parts[1]), &bv);
    let c0 = Tensor::cat(&[&a, &a, &a], 0);
    assert_eq!(c0.shape(), vec![6, 3]);
    for p in c0.split_size(2, 0) {
        assert_exact(&vals(&p), &av);
    }
    assert_eq!(
        c0.chunk(4, 0)
            .iter()
            .map(|t| t.shape()[0])
            .collect::<Vec<_>>(),
        vec![2, 2, 2]
    );
    let s = Tensor::stack(&[&a, &a.mul(2.0)], 1);
    assert_eq!(s.shape(), vec![2, 2, 3]);
    let want_s: Vec<f64> = [
        &av[0..3],
        &av[0..3].iter().map(|v| v * 2.0).collect::<Vec<_>>()[..],
        &av[3..6],
        &av[3..6].iter().map(|v| v * 2.0).collect::<Vec<_>>()[..],
    ]
    .concat();
    assert_exact(&vals(&s), &want_s);
    let back = s.split(&[1, 1], 1);
    assert_exact(&vals(&back[1].squeeze(Some(1))), &vals(&a.mul(2.0)));
    let sl = Tensor::stack(&[&a, &a], -1);
    assert_eq!(sl.shape(), vec![2, 3, 2]);
    let bools = Tensor::cat(&[&a.gt(0.0), &a.lt(0.0)], 0);
    assert_eq!(bools.dtype(), DType::Bool);
    assert_eq!(bools.sum_all().item::<i32>().unwrap(), 5);
}

// ---- reductions ----

#[test]
fn reductions_match_reference() {
    let shape = [2usize, 3, 4];
    let xs: Vec<f32> = (0..24).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
    let x = t32(&xs, &shape);
    let xv = f64s(&xs);
    for axes in [vec![0usize], vec![1], vec![2], vec![0, 2], vec![0, 1, 2]] {
        let ia: Vec<isize> = axes.iter().map(|&a| a as isize - 3).collect(); // negative axes
        let cnt: f64 = axes.iter().map(|&a| shape[a] as f64).product();
        let sum = ref_reduce(&xv, &shape, &axes, 0.0, |a, b| a + b);
        let max = ref_reduce(&xv, &shape, &axes, f64::NEG_INFINITY, f64::max);
        let min = ref_reduce(&xv, &shape, &axes, f64::INFINITY, f64::min);
        let prod = ref_reduce(&xv, &shape, &axes, 1.0, |a, b| a * b);
        let mean: Vec<f64> = sum.iter().map(|s| s / cnt).collect();
        assert_exact(&vals(&x.sum(&ia, true)), &sum);
        assert_exact(&vals(&x.max(&ia, true)), &max);
        assert_exact(&vals(&x.min(&ia, true)), &min);
        assert_exact(&vals(&x.prod(&ia, true)), &prod);
        assert_close(&vals(&x.mean(&ia, true)), &mean, 1e-6);
        let kept: Vec<usize> = shape
            .iter()
            .enumerate()
            .filter(|(i, _)| !axes.contains(i))
            .map(|(_, &d)| d)
            .collect();
        assert_eq!(x.sum(&ia, false).shape(), kept);
        assert_eq!(x.prod(&ia, false).shape(), kept);
    }
    assert_exact(&vals(&x.sum_all()), &[xv.iter().sum()]);
    assert_eq!(x.sum_all().shape(), Vec::<usize>::new());
    assert_exact(&vals(&x.max_all()), &[5.0]);
    assert_exact(&vals(&x.min_all()), &[-5.0]);
    assert_close(&vals(&x.mean_all()), &[xv.iter().sum::<f64>() / 24.0], 1e-6);
    let p = t32(&[-1.0, 2.0, -3.0, 0.5, 4.0], &[5]);
    assert_exact(&vals(&p.prod_all()), &[12.0]);
}

#[test]
fn int_reductions() {
    let x = Tensor::from_slice(&[3i32, -7, 2, 9, 0, -1], &[2, 3]);
    assert_eq!(x.min(&[1], false).to_vec::<i32>().unwrap(), vec![-7, -1]);
    assert_eq!(x.max(&[0], false).to_vec::<i32>().unwrap(), vec![9, 0, 2]);
    assert_eq!(x.prod(&[1], false).to_vec::<i32>().unwrap(), vec![-42, 0]);
    let u = Tensor::from_slice(&[3u8, 200, 0, 255], &[4]);
    assert_eq!(u.min_all().to_vec::<u8>().unwrap(), vec![0]);
    assert_eq!(u.sum_all().to_vec::<u32>().unwrap(), vec![458]);
    assert_eq!(x.mean(&[1], false).dtype(), DType::F32);
    assert_exact(
        &vals(&x.mean(&[1], false)),
        &[-2.0 / 3.0f32 as f64, 8.0 / 3.0f32 as f64].map(|v: f64| f64::from(v as f32)),
    );
}

// ---- matmul ----

#[test]
fn matmul_shapes() {
    let a: Vec<f32> = seq(6);
    let b: Vec<f32> = (0..12).map(|i| (i % 5) as f32 - 1.5).collect();
    let (av, bv) = (f64s(&a), f64s(&b));
    // 2-D · 2-D
    let m = t32(&a, &[2, 3]).matmul(&t32(&b, &[3, 4]));
    assert_eq!(m.shape(), vec![2, 4]);
    assert_exact(&vals(&m), &ref_matmul(&av, &bv, 2, 3, 4));
    // 1-D · 2-D and 2-D · 1-D and 1-D · 1-D
    let v = t32(&a[..3], &[3]);
    let vm = v.matmul(&t32(&b, &[3, 4]));
    assert_eq!(vm.shape(), vec![4]);
    assert_exact(&vals(&vm), &ref_matmul(&av[..3], &bv, 1, 3, 4));
    let mv = t32(&b, &[4, 3]).matmul(&v);
    assert_eq!(mv.shape(), vec![4]);
    assert_exact(&vals(&mv), &ref_matmul(&bv, &av[..3], 4, 3, 1));
    let d = v.dot(&t32(&b[..3], &[3]));
    assert_eq!(d.shape(), Vec::<usize>::new());
    assert_exact(&vals(&d), &ref_matmul(&av[..3], &bv[..3], 1, 3, 1));
    // batched with broadcasting: [2,1,2,3] x [3,3,2] -> [2,3,2,2]
    let ba: Vec<f32> = (0..12).map(|i| i as f32 - 4.0).collect();
    let bb: Vec<f32> = (0..18).map(|i| (i % 7) as f32 * 0.5).collect();
    let bm = t32(&ba, &[2, 1, 2, 3]).matmul(&t32(&bb, &[3, 3, 2]));
    assert_eq!(bm.shape(), vec![2, 3, 2, 2]);
    let mut want = vec![];
    for i in 0..2 {
        for j in 0..3 {
            want.extend(ref_matmul(
                &f64s(&ba[i * 6..i * 6 + 6]),
                &f64s(&bb[j * 6..j * 6 + 6]),
                2,
                3,
                2,
            ));
        }
    }
    assert_exact(&vals(&bm), &want);
    // int matmul
    let im = Tensor::from_slice(&[1i32, 2, 3, 4], &[2, 2]).matmul(&Tensor::eye(2, DType::I32));
    assert_eq!(im.to_vec::<i32>().unwrap(), vec![1, 2, 3, 4]);
}

// ---- errors ----

#[test]
fn error_messages_name_op_and_shapes() {
    let a = Tensor::zeros(&[2, 3], DType::F32);
    let b = Tensor::zeros(&[4, 5], DType::F32);
    let msg = |r: picograd_core::Result<Tensor>| r.expect_err("expected an error").to_string();
    let e = msg(a.try_reshape(&[4, 2]));
    assert!(e.contains("reshape") && e.contains("[2, 3]"), "{e}");
    let e = msg(a.try_add(&b));
    assert!(
        e.contains("add") && e.contains("[2, 3]") && e.contains("[4, 5]"),
        "{e}"
    );
    let e = msg(a.try_sum(&[2], false));
    assert!(e.contains("sum") && e.contains("axis 2"), "{e}");
    let e = msg(a.try_transpose(0, -3));
    assert!(e.contains("transpose") && e.contains("-3"), "{e}");
    let e = msg(a.try_matmul(&b));
    assert!(
        e.contains("matmul") && e.contains("[2, 3]") && e.contains("[4, 5]"),
        "{e}"
    );
    let e =
        msg(Tensor::zeros(&[2, 2, 3], DType::F32)
            .try_matmul(&Tensor::zeros(&[3, 3, 4], DType::F32)));
    assert!(
        e.contains("matmul") && e.contains("[2, 2, 3]") && e.contains("[3, 3, 4]"),
        "{e}"
    );
    let e = msg(Tensor::try_cat(&[&a, &b], 0));
    assert!(e.contains("cat") && e.contains("[4, 5]"), "{e}");
    let e = msg(a.try_unsqueeze(3));
    assert!(e.contains("unsqueeze") && e.contains("axis 3"), "{e}");
    assert!(a.try_split(&[1, 1], 1).is_err());
}

#[test]
#[should_panic(expected = "matmul: shape error: shapes [2, 3] and [4, 5]")]
fn plain_form_panics_with_the_same_message() {
    let _ = Tensor::zeros(&[2, 3], DType::F32).matmul(&Tensor::zeros(&[4, 5], DType::F32));
}

// ---- display ----

#[test]
fn display_golden() {
    let t = t32(&[1.0, -2.5, 3.25, 0.0, 10.0, 0.125], &[2, 3]);
    assert_eq!(
        t.to_string(),
        "[[1.0000, -2.5000, 3.2500],\n [0.0000, 10.0000, 0.1250]]"
    );
    let i = Tensor::from_slice(&[1i32, -2, 3, 4], &[2, 2]);
    assert_eq!(i.to_string(), "[[1, -2],\n [3, 4]]");
}

// ---- regressions: a masked view reshaped to rank 0 (ShapeTracker merge) ----

#[test]
fn shapetracker_simplify_keeps_mask_under_rank0_view() {
    use picograd_core::ShapeTracker;
    // [3] padded to [4], shrunk to the padding element [3..4): always invalid.
    let st = ShapeTracker::from_dims(&[3])
        .pad(&[(0, 1)])
        .unwrap()
        .shrink(&[(3, 4)])
        .unwrap();
    let two = st.reshape(&[]).unwrap();
    assert_eq!(two.expr_idxs(&two.idx_vars()).1.to_string(), "0");
    let merged = two.simplify();
    assert_eq!(merged.expr_idxs(&merged.idx_vars()).1.to_string(), "0");
}

#[test]
fn masked_elementwise_reshaped_to_scalar() {
    let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]);
    let s = x.pad(&[(0, 1)]).shrink(&[(3, 4)]).mul(2.0);
    // (Realizing `s` first hides the bug: the reshape then reads a buffer.)
    assert_exact(&vals(&s.reshape(&[])), &[0.0]);
}
