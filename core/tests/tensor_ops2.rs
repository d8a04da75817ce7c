//! Processing ops, nn helpers, losses and linear algebra: the reference's worked examples
//! (`reference/seeds/002…`) reproduced, plus comparisons with plain f64 loops written here,
//! gradient checks against central finite differences (f64), and the conv kernel count.

use picograd_core::{ConvOpts, DType, Padding, PoolOpts, Tensor};

// ---- helpers ----

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec().unwrap()
}

fn assert_close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "lengths: {got:?} vs {want:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * w.abs().max(1.0),
            "at {i}: {g} vs {w}\n{got:?}\n{want:?}"
        );
    }
}

fn arange_i(n: usize, shape: &[usize]) -> Tensor {
    let v: Vec<i32> = (0..n as i32).collect();
    Tensor::from_slice(&v, shape)
}

/// Deterministic pseudo-random values in [-1, 1).
fn noise(n: usize, seed: u64) -> Vec<f64> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

fn t64(v: &[f64], shape: &[usize]) -> Tensor {
    Tensor::from_slice(v, shape)
}

fn t32(v: &[f64], shape: &[usize]) -> Tensor {
    let f: Vec<f32> = v.iter().map(|&x| x as f32).collect();
    Tensor::from_slice(&f, shape)
}

/// Checks d(loss)/d(input) against central differences, in f64.
fn grad_check(x0: &[f64], shape: &[usize], f: &dyn Fn(&Tensor) -> Tensor) {
    let x = t64(x0, shape).requires_grad_(true);
    let g = f(&x).gradient(&[&x]).unwrap();
    let got = vals(&g[0]);
    let eps = 1e-6;
    let want: Vec<f64> = (0..x0.len())
        .map(|i| {
            let mut a = x0.to_vec();
            let mut b = x0.to_vec();
            a[i] += eps;
            b[i] -= eps;
            let fa = f(&t64(&a, shape)).item::<f64>().unwrap();
            let fb = f(&t64(&b, shape)).item::<f64>().unwrap();
            (fa - fb) / (2.0 * eps)
        })
        .collect();
    assert_close(&got, &want, 1e-5);
}

// ---- pooling: worked examples ----

#[test]
fn avg_pool2d_examples() {
    let t = arange_i(25, &[1, 1, 5, 5]);
    assert_eq!(
        vals(&t.avg_pool2d(&PoolOpts::default())),
        [3.0, 5.0, 13.0, 15.0]
    );
    let c = t.avg_pool2d(&PoolOpts::default().ceil_mode(true));
    assert_close(
        &vals(&c),
        &[3.0, 5.0, 6.5, 13.0, 15.0, 16.5, 20.5, 22.5, 24.0],
        1e-6,
    );
    let p = t.avg_pool2d(&PoolOpts::default().padding(1));
    let want = [0.0, 0.75, 1.75, 3.75, 9.0, 11.0, 8.75, 19.0, 21.0];
    assert_close(&vals(&p), &want, 1e-6);
    let q = t.avg_pool2d(&PoolOpts::default().padding(1).count_include_pad(false));
    let want = [0.0, 1.5, 3.5, 7.5, 9.0, 11.0, 17.5, 19.0, 21.0];
    assert_close(&vals(&q), &want, 1e-6);
}

#[test]
fn max_pool2d_examples() {
    let t = arange_i(25, &[1, 1, 5, 5]);
    let m = t.max_pool2d(&PoolOpts::default());
    assert_eq!(m.to_vec::<i32>().unwrap(), [6, 8, 16, 18]);
    let c = t.max_pool2d(&PoolOpts::default().ceil_mode(true));
    assert_eq!(
        c.to_vec::<i32>().unwrap(),
        [6, 8, 9, 16, 18, 19, 21, 23, 24]
    );
    let p = t.max_pool2d(&PoolOpts::default().padding(1));
    assert_eq!(
        p.to_vec::<i32>().unwrap(),
        [0, 2, 4, 10, 12, 14, 20, 22, 24]
    );
}

#[test]
fn max_unpool2d_example() {
    let v: Vec<i32> = (1..17).collect();
    let t = Tensor::from_slice(&v, &[1, 1, 4, 4]);
    let (out, idx) = t.max_pool2d_with_indices(&PoolOpts::default());
    assert_eq!(out.to_vec::<i32>().unwrap(), [6, 8, 14, 16]);
    assert_eq!(idx.to_vec::<i32>().unwrap(), [5, 7, 13, 15]);
    let u = out.max_unpool2d(&idx, &PoolOpts::default(), None);
    assert_eq!(u.shape(), [1, 1, 4, 4]);
    let want = [0, 0, 0, 0, 0, 6, 0, 8, 0, 0, 0, 0, 0, 14, 0, 16];
    assert_eq!(u.to_vec::<i32>().unwrap(), want);
}

// ---- pooling: against windows computed with loops ----

/// Reference 2-D pooling of `[c, h, w]` data; `None` cells are padding. `f` reduces a window.
#[allow(clippy::too_many_arguments)]
fn ref_pool(
    x: &[f64],
    (c, h, w): (usize, usize, usize),
    k: [usize; 2],
    s: [usize; 2],
    d: [usize; 2],
    p: [usize; 2],
    f: &dyn Fn(&[Option<f64>]) -> f64,
) -> Vec<f64> {
    let oh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) / s[0] + 1;
    let ow = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) / s[1] + 1;
    let mut out = vec![];
    for ch in 0..c {
        for oy in 0..oh {
            for ox in 0..ow {
                let mut win = vec![];
                for ky in 0..k[0] {
                    for kx in 0..k[1] {
                        let y = (oy * s[0] + ky * d[0]) as i64 - p[0] as i64;
                        let xx = (ox * s[1] + kx * d[1]) as i64 - p[1] as i64;
                        let inside = y >= 0 && xx >= 0 && (y as usize) < h && (xx as usize) < w;
                        win.push(inside.then(|| x[ch * h * w + y as usize * w + xx as usize]));
                    }
                }
                out.push(f(&win));
            }
        }
    }
    out
}

#[test]
fn pools_match_loops() {
    let (c, h, w) = (2, 6, 7);
    let x = noise(c * h * w, 3);
    let t = t64(&x, &[1, c, h, w]);
    let cases = [
        ([3, 2], [1, 2], [1, 1], [1, 0]),
        ([2, 2], [2, 3], [2, 1], [0, 1]),
        ([3, 3], [2, 2], [1, 2], [1, 1]),
        ([1, 2], [3, 2], [1, 1], [0, 0]),
    ];
    for (k, s, d, p) in cases {
        let o = PoolOpts::new(&k)
            .stride(&s)
            .dilation(&d)
            .padding(Padding::PerDim(p.to_vec()));
        let avg = |win: &[Option<f64>]| {
            win.iter().map(|v| v.unwrap_or(0.0)).sum::<f64>() / win.len() as f64
        };
        let mx = |win: &[Option<f64>]| {
            win.iter()
                .map(|v| v.unwrap_or(f64::NEG_INFINITY))
                .fold(f64::NEG_INFINITY, f64::max)
        };
        let ra = ref_pool(&x, (c, h, w), k, s, d, p, &avg);
        assert_close(&vals(&t.avg_pool2d(&o)), &ra, 1e-12);
        let rm = ref_pool(&x, (c, h, w), k, s, d, p, &mx);
        assert_close(&vals(&t.max_pool2d(&o)), &rm, 0.0);
    }
}

// ---- conv2d ----

#[test]
fn conv2d_example() {
    let t = arange_i(9, &[1, 1, 3, 3]).float();
    let w = Tensor::ones(&[1, 1, 2, 2], DType::F32);
    let y = t.conv2d(&w, None, &ConvOpts::default());
    assert_eq!(y.shape(), [1, 1, 2, 2]);
    assert_eq!(vals(&y), [8.0, 12.0, 20.0, 24.0]);
}

/// Direct conv2d: x `[b, cin, h, w]`, w `[cout, cin/g, kh, kw]`, per-side pads `(t, b, l, r)`.
#[allow(clippy::too_many_arguments)]
fn ref_conv2d(
    x: &[f64],
    [b, cin, h, w]: [usize; 4],
    wt: &[f64],
    [cout, cig, kh, kw]: [usize; 4],
    g: usize,
    s: [usize; 2],
    d: [usize; 2],
    [pt, pb, pl, pr]: [usize; 4],
) -> (Vec<f64>, [usize; 2]) {
    let oh = (h + pt + pb - d[0] * (kh - 1) - 1) / s[0] + 1;
    let ow = (w + pl + pr - d[1] * (kw - 1) - 1) / s[1] + 1;
    let cog = cout / g;
    let mut out = vec![0.0; b * cout * oh * ow];
    for n in 0..b {
        for co in 0..cout {
            let grp = co / cog;
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = 0.0;
                    for ci in 0..cig {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let y = (oy * s[0] + ky * d[0]) as i64 - pt as i64;
                                let xx = (ox * s[1] + kx * d[1]) as i64 - pl as i64;
                                if y < 0 || xx < 0 || y as usize >= h || xx as usize >= w {
                                    continue;
                                }
                                let c = grp * cig + ci;
                                let xv = x[((n * cin + c) * h + y as usize) * w + xx as usize];
                                acc += xv * wt[((co * cig + ci) * kh + ky) * kw + kx];
                            }
                        }
                    }
                    out[((n * cout + co) * oh + oy) * ow + ox] = acc;
                }
            }
        }
    }
    (out, [oh, ow])
}

#[test]
fn conv2d_matches_loops() {
    // (b, cin, h, w, cout, groups, k, stride, dilation, per-side pads (top, bottom, left, right))
    let cases = [
        (1, 2, 5, 5, 3, 1, [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
        (2, 4, 6, 5, 4, 2, [2, 3], [2, 1], [1, 2], [0, 1, 2, 0]),
        (1, 3, 7, 6, 6, 3, [3, 2], [2, 2], [2, 1], [2, 2, 0, 1]),
        (1, 2, 4, 4, 2, 1, [1, 1], [3, 2], [1, 1], [0, 0, 0, 0]),
    ];
    for (i, (b, cin, h, w, cout, g, k, s, d, p)) in cases.into_iter().enumerate() {
        let x = noise(b * cin * h * w, 10 + i as u64);
        let wt = noise(cout * (cin / g) * k[0] * k[1], 20 + i as u64);
        let bias = noise(cout, 30 + i as u64);
        let (want, [oh, ow]) = ref_conv2d(
            &x,
            [b, cin, h, w],
            &wt,
            [cout, cin / g, k[0], k[1]],
            g,
            s,
            d,
            p,
        );
        let want: Vec<f64> = want
            .iter()
            .enumerate()
            .map(|(j, v)| v + bias[(j / (oh * ow)) % cout])
            .collect();
        let o = ConvOpts::default()
            .groups(g)
            .stride(&s)
            .dilation(&d)
            .padding(Padding::PerSide(vec![p[2], p[3], p[0], p[1]]));
        let tx = t64(&x, &[b, cin, h, w]);
        let tw = t64(&wt, &[cout, cin / g, k[0], k[1]]);
        let y = tx.conv2d(&tw, Some(&t64(&bias, &[cout])), &o);
        assert_eq!(y.shape(), [b, cout, oh, ow], "case {i}");
        assert_close(&vals(&y), &want, 1e-12);
    }
}

#[test]
fn conv1d_matches_conv2d() {
    let x = noise(2 * 3 * 9, 5);
    let w = noise(4 * 3 * 3, 6);
    let o = ConvOpts::default().stride(&[2]).padding(1);
    let y1 = t64(&x, &[2, 3, 9]).conv1d(&t64(&w, &[4, 3, 3]), None, &o);
    let o2 = ConvOpts::default()
        .stride(&[1, 2])
        .padding(Padding::PerSide(vec![1, 1, 0, 0]));
    let y2 = t64(&x, &[2, 3, 1, 9]).conv2d(&t64(&w, &[4, 3, 1, 3]), None, &o2);
    assert_eq!(y1.shape(), [2, 4, 5]);
    assert_close(&vals(&y1), &vals(&y2), 1e-12);
}

#[test]
fn conv_errors_name_op_and_shapes() {
    let x = Tensor::zeros(&[1, 3, 4, 4], DType::F32);
    let w = Tensor::zeros(&[2, 2, 3, 3], DType::F32);
    let e = x
        .try_conv2d(&w, None, &ConvOpts::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("conv2d") && e.contains("[1, 3, 4, 4]") && e.contains("[2, 2, 3, 3]"),
        "{e}"
    );
    let e = x
        .try_avg_pool2d(&PoolOpts::default().padding(Padding::PerDim(vec![1, 1, 1])))
        .unwrap_err()
        .to_string();
    assert!(e.contains("avg_pool2d"), "{e}");
}

// ---- conv_transpose2d ----

#[test]
fn conv_transpose2d_example() {
    let t = arange_i(9, &[1, 1, 3, 3]).float();
    let w = Tensor::ones(&[1, 1, 2, 2], DType::F32);
    let y = t.conv_transpose2d(&w, None, &ConvOpts::default());
    let want = [
        0., 1., 3., 2., 3., 8., 12., 7., 9., 20., 24., 13., 6., 13., 15., 8.,
    ];
    assert_eq!(y.shape(), [1, 1, 4, 4]);
    assert_eq!(vals(&y), want);
}

/// Transposed conv by scatter-add: x `[b, cin, h, w]`, w `[cin, cout/g, kh, kw]`.
#[allow(clippy::too_many_arguments)]
fn ref_conv_t(
    x: &[f64],
    [b, cin, h, w]: [usize; 4],
    wt: &[f64],
    [_, cog, kh, kw]: [usize; 4],
    g: usize,
    s: [usize; 2],
    d: [usize; 2],
    p: [usize; 2],
    op: [usize; 2],
) -> (Vec<f64>, [usize; 2]) {
    let full_h = (h - 1) * s[0] + d[0] * (kh - 1) + 1 + op[0];
    let full_w = (w - 1) * s[1] + d[1] * (kw - 1) + 1 + op[1];
    let (oh, ow) = (full_h - 2 * p[0], full_w - 2 * p[1]);
    let cout = cog * g;
    let cig = cin / g;
    let mut out = vec![0.0; b * cout * oh * ow];
    for n in 0..b {
        for ci in 0..cin {
            let grp = ci / cig;
            for y in 0..h {
                for xx in 0..w {
                    let v = x[((n * cin + ci) * h + y) * w + xx];
                    for co in 0..cog {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let oy = (y * s[0] + ky * d[0]) as i64 - p[0] as i64;
                                let ox = (xx * s[1] + kx * d[1]) as i64 - p[1] as i64;
                                if oy < 0 || ox < 0 || oy as usize >= oh || ox as usize >= ow {
                                    continue;
                                }
                                let c = grp * cog + co;
                                let wv = wt[((ci * cog + co) * kh + ky) * kw + kx];
                                out[((n * cout + c) * oh + oy as usize) * ow + ox as usize] +=
                                    v * wv;
                            }
                        }
                    }
                }
            }
        }
    }
    (out, [oh, ow])
}

#[test]
fn conv_transpose2d_matches_scatter_add() {
    // (b, cin, h, w, cout/g, groups, k, stride, dilation, padding, output_padding)
    let cases = [
        (1, 2, 3, 3, 3, 1, [3, 3], [1, 1], [1, 1], [0, 0], [0, 0]),
        (2, 4, 3, 4, 1, 2, [2, 3], [2, 3], [1, 1], [1, 0], [1, 2]),
        (1, 3, 4, 3, 2, 3, [3, 2], [2, 1], [2, 1], [1, 1], [1, 0]),
    ];
    for (i, (b, cin, h, w, cog, g, k, s, d, p, op)) in cases.into_iter().enumerate() {
        let x = noise(b * cin * h * w, 40 + i as u64);
        let wt = noise(cin * cog * k[0] * k[1], 50 + i as u64);
        let (want, [oh, ow]) = ref_conv_t(
            &x,
            [b, cin, h, w],
            &wt,
            [cin, cog, k[0], k[1]],
            g,
            s,
            d,
            p,
            op,
        );
        let o = ConvOpts::default()
            .groups(g)
            .stride(&s)
            .dilation(&d)
            .padding(Padding::PerDim(p.to_vec()))
            .output_padding(&op);
        let y =
            t64(&x, &[b, cin, h, w]).conv_transpose2d(&t64(&wt, &[cin, cog, k[0], k[1]]), None, &o);
        assert_eq!(y.shape(), [b, cog * g, oh, ow], "case {i}");
        assert_close(&vals(&y), &want, 1e-12);
    }
}

// ---- kernel count ----

#[test]
fn conv2d_bias_relu_is_one_kernel() {
    let x = t32(&noise(2 * 3 * 6 * 6, 1), &[2, 3, 6, 6]);
    let w = t32(&noise(4 * 3 * 3 * 3, 2), &[4, 3, 3, 3]);
    let b = t32(&noise(4, 3), &[4]);
    Tensor::realize_all(&[&x, &w, &b]).unwrap();
    let y = x
        .conv2d(&w, Some(&b), &ConvOpts::default().padding(1))
        .relu();
    let items = picograd_core::schedule::schedule(&[y.lazy().contiguous()]).unwrap();
    assert_eq!(items.len(), 1, "conv2d + bias + relu kernels");
}

// ---- gradients vs finite differences ----

#[test]
fn conv2d_grad_matches_finite_differences() {
    let (x0, w0) = (noise(4 * 5 * 4, 60), noise(4 * 2 * 2 * 3, 61));
    let o = ConvOpts::default()
        .groups(2)
        .stride(&[2, 1])
        .padding(Padding::PerSide(vec![1, 0, 1, 1]));
    let wt = t64(&w0, &[4, 2, 2, 3]);
    let cx = noise(4 * 3 * 3, 62);
    let weights = t64(&cx, &[1, 4, 3, 3]);
    grad_check(&x0, &[1, 4, 5, 4], &|x| {
        x.conv2d(&wt, None, &o).mul(&weights).sum_all()
    });
    let xt = t64(&x0, &[1, 4, 5, 4]);
    grad_check(&w0, &[4, 2, 2, 3], &|w| {
        xt.conv2d(w, None, &o).mul(&weights).sum_all()
    });
}

#[test]
fn conv_transpose2d_grad_matches_finite_differences() {
    let (x0, w0) = (noise(2 * 3 * 3, 70), noise(2 * 2 * 2 * 2, 71));
    let o = ConvOpts::default()
        .stride(&[2])
        .padding(1)
        .output_padding(&[1]);
    let wt = t64(&w0, &[2, 2, 2, 2]);
    let y = t64(&x0, &[1, 2, 3, 3]).conv_transpose2d(&wt, None, &o);
    let cx = noise(y.numel(), 72);
    let weights = t64(&cx, &y.shape());
    grad_check(&x0, &[1, 2, 3, 3], &|x| {
        x.conv_transpose2d(&wt, None, &o).mul(&weights).sum_all()
    });
}

#[test]
fn pool_grads_match_finite_differences() {
    let x0 = noise(2 * 5 * 5, 80);
    let o = PoolOpts::new(&[3, 2]).stride(&[2, 1]).padding(1);
    let cx = noise(2 * 3 * 6, 81);
    let weights = t64(&cx, &[1, 2, 3, 6]);
    grad_check(&x0, &[1, 2, 5, 5], &|x| {
        x.avg_pool2d(&o).mul(&weights).sum_all()
    });
    grad_check(&x0, &[1, 2, 5, 5], &|x| {
        x.max_pool2d(&o).mul(&weights).sum_all()
    });
}
