//! Processing ops, nn helpers, losses and linear algebra: the reference's worked examples
//! (`reference/seeds/002…`) reproduced, plus comparisons with plain f64 loops written here,
//! gradient checks against central finite differences (f64), and the conv kernel count.

use picograd_core::{ConvOpts, DType, InterpolateMode, Padding, PoolOpts, Reduction, Tensor};

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
    assert_eq!(kernels(&y), 1, "conv2d + bias + relu kernels");
}

#[test]
fn padded_conv_copies_its_input_once_on_a_desktop_target() {
    // On a target with caches the scheduler copies the padded input into its own buffer first
    // (`schedule/layout.rs`) and the conv + bias + relu stays one kernel; on the interpreter (no
    // optimizer config) it reads through the padding mask, also in one kernel.
    let x = t32(&noise(2 * 4 * 16 * 16, 7), &[2, 4, 16, 16]);
    let w = t32(&noise(3 * 4 * 3 * 3, 8), &[3, 4, 3, 3]);
    let b = t32(&noise(3, 9), &[3]);
    Tensor::realize_all(&[&x, &w, &b]).unwrap();
    let y = x
        .conv2d(&w, Some(&b), &ConvOpts::default().padding(1))
        .relu();
    assert_eq!(kernels(&y), 1, "conv2d + bias + relu kernels, masked");
    assert_eq!(
        conv_kernels(&y),
        1,
        "conv2d + bias + relu kernels after the copy"
    );
}

fn kernels(t: &Tensor) -> usize {
    picograd_core::schedule::schedule(&[t.lazy().contiguous()])
        .unwrap()
        .len()
}

/// Kernels of a padded conv's schedule for an 8-lane desktop target, not counting the one copy
/// of the input into its padded buffer, which must come first, hold no reduce and be a layout
/// copy (the conv then reads it without bounds checks). Every other kernel is counted.
fn conv_kernels(t: &Tensor) -> usize {
    let cfg = picograd_core::codegen::opt::OptConfig::for_vec_width(8);
    let items =
        picograd_core::schedule::schedule_for(&[t.lazy().contiguous()], Some(&cfg)).unwrap();
    assert!(items.len() >= 2, "a padded conv copies its input first");
    assert!(
        items[0].ast.find_reduce().is_none() && items[0].layout_copy,
        "the first kernel is the padding copy"
    );
    items.len() - 1
}

#[test]
fn pools_and_transposed_conv_are_one_kernel() {
    let x = t32(&noise(2 * 3 * 6 * 6, 4), &[2, 3, 6, 6]);
    let w = t32(&noise(3 * 2 * 3 * 3, 5), &[3, 2, 3, 3]);
    Tensor::realize_all(&[&x, &w]).unwrap();
    let o = PoolOpts::new(&[3, 3]).stride(&[2]).padding(1);
    assert_eq!(kernels(&x.max_pool2d(&o)), 1, "max_pool2d with padding");
    assert_eq!(kernels(&x.avg_pool2d(&o)), 1, "avg_pool2d with padding");
    let ct = x.conv_transpose2d(&w, None, &ConvOpts::default().stride(&[2]).padding(1));
    assert_eq!(kernels(&ct.relu()), 1, "conv_transpose2d + relu");
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

// ---- interpolate ----

#[test]
fn interpolate_example() {
    let v = [1i32, 2, 3, 4, 21, 22, 23, 24, 41, 42, 43, 44];
    let t = Tensor::from_slice(&v, &[3, 4]);
    let y = t.interpolate(&[2, 3], InterpolateMode::Linear, false);
    assert_eq!(y.shape(), [2, 3]);
    assert_eq!(y.to_vec::<i32>().unwrap(), [6, 7, 8, 36, 37, 38]);
}

/// Reference 1-D resize of `x` to `out` samples.
fn ref_resize(x: &[f64], out: usize, mode: InterpolateMode, align: bool) -> Vec<f64> {
    let n = x.len();
    let a = usize::from(align);
    let scale = if out > a {
        (n - a) as f64 / (out - a) as f64
    } else {
        0.0
    };
    (0..out)
        .map(|o| {
            let o = o as f64;
            match mode {
                InterpolateMode::Linear => {
                    let c = if align {
                        o * scale
                    } else {
                        (o + 0.5) * scale - 0.5
                    };
                    let c = c.clamp(0.0, (n - 1) as f64);
                    let (lo, hi) = (c.floor() as usize, c.ceil() as usize);
                    x[lo] + (x[hi] - x[lo]) * (c - c.floor())
                }
                InterpolateMode::Nearest => x[((o * scale) as usize).min(n - 1)],
                InterpolateMode::NearestExact => x[(((o + 0.5) * scale) as usize).min(n - 1)],
            }
        })
        .collect()
}

#[test]
fn interpolate_matches_loops() {
    let (h, w) = (3, 5);
    let x = noise(2 * h * w, 90);
    let t = t64(&x, &[2, h, w]);
    let modes = [
        (InterpolateMode::Linear, false),
        (InterpolateMode::Linear, true),
        (InterpolateMode::Nearest, false),
        (InterpolateMode::NearestExact, false),
    ];
    for (mode, align) in modes {
        for (oh, ow) in [(5, 2), (2, 8), (1, 5)] {
            let y = vals(&t.interpolate(&[oh, ow], mode, align));
            let mut want = vec![];
            for b in 0..2 {
                let rows: Vec<Vec<f64>> = (0..h)
                    .map(|r| ref_resize(&x[(b * h + r) * w..(b * h + r + 1) * w], ow, mode, align))
                    .collect();
                let cols: Vec<Vec<f64>> = (0..ow)
                    .map(|c| {
                        ref_resize(
                            &rows.iter().map(|r| r[c]).collect::<Vec<_>>(),
                            oh,
                            mode,
                            align,
                        )
                    })
                    .collect();
                for r in 0..oh {
                    want.extend(cols.iter().map(|c| c[r]));
                }
            }
            // Source coordinates are computed in f32, as the reference does.
            assert_close(&y, &want, 1e-6);
        }
    }
    assert!(t
        .try_interpolate(&[2, 2], InterpolateMode::Nearest, true)
        .is_err());
}

// ---- nn helpers ----

#[test]
fn linear_and_sequential_examples() {
    let t = Tensor::from_slice(&[1i32, 2, 3, 4], &[2, 2]);
    let w = Tensor::from_slice(&[1i32, 2, 3, 4], &[2, 2]);
    let b = Tensor::from_slice(&[1i32, 2], &[2]);
    assert_eq!(
        t.linear(&w, Some(&b)).to_vec::<i32>().unwrap(),
        [8, 12, 16, 24]
    );
    let t = Tensor::from_slice(&[1i32, 2, 3], &[3]);
    let y = t.sequential(&[&|x: &Tensor| x.mul(2), &|x: &Tensor| x.add(1)]);
    assert_eq!(y.to_vec::<i32>().unwrap(), [3, 5, 7]);
}

fn mean_std(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0);
    (m, var.sqrt())
}

#[test]
fn layernorm_example_properties() {
    // Reference: randn(8, 10, 16) * 2 + 8, layernorm → mean ≈ 0, std ≈ 1.
    let t = Tensor::randn(&[8, 10, 16], 42).mul(2.0).add(8.0);
    let y = vals(&t.layernorm(&[-1], 1e-5));
    let (m, s) = mean_std(&y);
    assert!(m.abs() < 1e-5 && (s - 1.0).abs() < 5e-3, "{m} {s}");
    for row in y.chunks(16) {
        let (m, _) = mean_std(row);
        let var = row.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / 16.0;
        assert!(m.abs() < 1e-5 && (var - 1.0).abs() < 1e-3, "{m} {var}");
    }
}

#[test]
fn batchnorm_example_properties() {
    let t = Tensor::randn(&[8, 4, 4, 4], 7).mul(2.0).add(8.0);
    let mean = t.mean(&[0, 2, 3], false);
    let d = t.sub(mean.reshape(&[1, 4, 1, 1]));
    let var = d.mul(&d).sum(&[0, 2, 3], false).div(127.0);
    let y = t.batchnorm(None, None, &mean, &var.add(1e-5).rsqrt(), &[1]);
    let (m, s) = mean_std(&vals(&y));
    assert!(m.abs() < 1e-5 && (s - 1.0).abs() < 1e-2, "{m} {s}");
    // weight and bias: y = (x - mean) * w * invstd + b per channel.
    let w = t32(&[1.0, 2.0, 3.0, 4.0], &[4]);
    let b = t32(&[0.5, 0.0, -0.5, 1.0], &[4]);
    let x = t32(&noise(2 * 4 * 3, 8), &[2, 4, 3]);
    let mu = t32(&[0.1, 0.2, 0.3, 0.4], &[4]);
    let inv = t32(&[1.0, 0.5, 2.0, 1.5], &[4]);
    let got = vals(&x.batchnorm(Some(&w), Some(&b), &mu, &inv, &[1]));
    let xv = vals(&x);
    let (wv, bv, mv, iv) = (vals(&w), vals(&b), vals(&mu), vals(&inv));
    let want: Vec<f64> = (0..xv.len())
        .map(|i| {
            let c = (i / 3) % 4;
            (xv[i] - mv[c]) * wv[c] * iv[c] + bv[c]
        })
        .collect();
    assert_close(&got, &want, 1e-6);
}

#[test]
fn dropout_properties() {
    let t = Tensor::randn(&[16, 16], 42);
    assert_eq!(vals(&t.dropout(0.5, false, 1)), vals(&t));
    let x = vals(&t);
    let y = vals(&t.dropout(0.25, true, 9));
    assert_eq!(y, vals(&t.dropout(0.25, true, 9)), "seeded");
    let zeros = y.iter().filter(|&&v| v == 0.0).count();
    assert!(
        (30..100).contains(&zeros),
        "{zeros} of 256 dropped at p = 0.25"
    );
    for (a, b) in x.iter().zip(&y) {
        assert!(*b == 0.0 || ((b - a / 0.75).abs() < 1e-6), "{a} -> {b}");
    }
    assert!(vals(&t.dropout(1.0, true, 3)).iter().all(|&v| v == 0.0));
    assert!(t.try_dropout(1.5, true, 3).is_err());
}

/// Reference attention for one batch: q `[l, d]`, k `[s, d]`, v `[s, e]`.
fn ref_attention(
    q: &[f64],
    k: &[f64],
    v: &[f64],
    (l, s, d, e): (usize, usize, usize, usize),
    causal: bool,
) -> Vec<f64> {
    let mut out = vec![0.0; l * e];
    for i in 0..l {
        let sc: Vec<f64> = (0..s)
            .map(|j| {
                if causal && j > i {
                    return f64::NEG_INFINITY;
                }
                (0..d).map(|c| q[i * d + c] * k[j * d + c]).sum::<f64>() / (d as f64).sqrt()
            })
            .collect();
        let m = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let ex: Vec<f64> = sc.iter().map(|x| (x - m).exp()).collect();
        let z: f64 = ex.iter().sum();
        for c in 0..e {
            out[i * e + c] = (0..s).map(|j| ex[j] / z * v[j * e + c]).sum();
        }
    }
    out
}

#[test]
fn attention_matches_loops() {
    // The reference's example shape: q, k, v of [2, 4, 8] (random, so checked against loops).
    let (b, l, d) = (2, 4, 8);
    let (q, k, v) = (
        noise(b * l * d, 100),
        noise(b * l * d, 101),
        noise(b * l * d, 102),
    );
    let (tq, tk, tv) = (
        t64(&q, &[b, l, d]),
        t64(&k, &[b, l, d]),
        t64(&v, &[b, l, d]),
    );
    for causal in [false, true] {
        let y = vals(&tq.scaled_dot_product_attention(&tk, &tv, None, causal));
        let n = l * d;
        let want: Vec<f64> = (0..b)
            .flat_map(|i| {
                ref_attention(
                    &q[i * n..(i + 1) * n],
                    &k[i * n..(i + 1) * n],
                    &v[i * n..(i + 1) * n],
                    (l, l, d, d),
                    causal,
                )
            })
            .collect();
        assert_close(&y, &want, 1e-12);
    }
    // A bool mask equal to the causal one gives the same result.
    let m: Vec<bool> = (0..l * l).map(|i| i % l <= i / l).collect();
    let mask = Tensor::from_slice(&m, &[l, l]);
    let a = vals(&tq.scaled_dot_product_attention(&tk, &tv, Some(&mask), false));
    assert_close(
        &a,
        &vals(&tq.scaled_dot_product_attention(&tk, &tv, None, true)),
        1e-12,
    );
    assert!(tq
        .try_scaled_dot_product_attention(&tk, &tv, Some(&mask), true)
        .is_err());
}

// ---- losses: worked examples ----

#[test]
fn binary_crossentropy_examples() {
    let t = Tensor::from_slice(&[0.1f32, 0.9, 0.2], &[3]);
    let y = Tensor::from_slice(&[0i32, 1, 0], &[3]);
    let l = t
        .binary_crossentropy(&y, Reduction::Mean)
        .item::<f32>()
        .unwrap();
    assert!((l as f64 - 0.14462155103683472).abs() < 1e-6, "{l}");
    let t = Tensor::from_slice(&[-1.0f32, 2.0, -3.0], &[3]);
    let l = t
        .binary_crossentropy_logits(&y, Reduction::Mean, None)
        .item::<f32>()
        .unwrap();
    assert!((l as f64 - 0.16292566061019897).abs() < 1e-6, "{l}");
    // pos_weight scales the positive term only.
    let pw = Tensor::from_slice(&[2.0f32, 2.0, 2.0], &[3]);
    let s1 = vals(&t.binary_crossentropy_logits(&y, Reduction::None, None));
    let s2 = vals(&t.binary_crossentropy_logits(&y, Reduction::None, Some(&pw)));
    assert_close(&s2, &[s1[0], 2.0 * s1[1], s1[2]], 1e-6);
}

fn logits() -> (Tensor, Tensor) {
    let t = Tensor::from_slice(&[-1.0f32, 2.0, -3.0, 1.0, -2.0, 3.0], &[2, 3]);
    (t, Tensor::from_slice(&[1i32, 2], &[2]))
}

#[test]
fn categorical_losses_examples() {
    let (t, y) = logits();
    let want = 0.09391524642705917;
    let l = t.sparse_categorical_crossentropy(&y, -1, 0.0, Reduction::Mean);
    assert!((l.item::<f32>().unwrap() as f64 - want).abs() < 1e-6);
    let l = t.cross_entropy(&y, Reduction::Mean, 0.0);
    assert!((l.item::<f32>().unwrap() as f64 - want).abs() < 1e-6);
    assert_close(
        &vals(&t.cross_entropy(&y, Reduction::None, 0.0)),
        &[0.055, 0.1328],
        2e-3,
    );
    let lp = t.sub(t.exp().sum(&[-1], true).log());
    let l = lp.nll_loss(&y, None, None, Reduction::Mean);
    assert!((l.item::<f32>().unwrap() as f64 - want).abs() < 1e-6);
    assert_close(
        &vals(&lp.nll_loss(&y, None, None, Reduction::None)),
        &[0.055, 0.1328],
        2e-3,
    );
    let s = lp
        .nll_loss(&y, None, None, Reduction::Sum)
        .item::<f32>()
        .unwrap() as f64;
    assert!((s - 2.0 * want).abs() < 1e-6);
}

/// Reference log-softmax of rows.
fn ref_log_softmax(x: &[f64], c: usize) -> Vec<f64> {
    x.chunks(c)
        .flat_map(|r| {
            let m = r.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let z = r.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
            r.iter().map(move |v| v - m - z).collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn categorical_losses_options_match_loops() {
    let (n, c) = (5, 4);
    let x = noise(n * c, 110);
    let labels = [0i32, 3, 2, 3, 1];
    let lp = ref_log_softmax(&x, c);
    let t = t64(&x, &[n, c]);
    let y = Tensor::from_slice(&labels, &[n]);
    // ignore_index 3 and label smoothing 0.2 (sparse_categorical_crossentropy).
    let ls = 0.2;
    let mut total = 0.0;
    let mut count = 0.0;
    for i in 0..n {
        if labels[i] == 3 {
            continue;
        }
        let row = &lp[i * c..(i + 1) * c];
        total += -((1.0 - ls) * row[labels[i] as usize] + ls * row.iter().sum::<f64>() / c as f64);
        count += 1.0;
    }
    let got = t
        .sparse_categorical_crossentropy(&y, 3, ls, Reduction::Mean)
        .item::<f64>()
        .unwrap();
    assert!(
        (got - total / count).abs() < 1e-12,
        "{got} vs {}",
        total / count
    );
    // cross_entropy with label smoothing, sum reduction.
    let want: f64 = (0..n)
        .map(|i| {
            let row = &lp[i * c..(i + 1) * c];
            -(0..c)
                .map(|j| {
                    row[j]
                        * ((1.0 - ls) * f64::from(u8::from(labels[i] as usize == j))
                            + ls / c as f64)
                })
                .sum::<f64>()
        })
        .sum();
    let got = t
        .cross_entropy(&y, Reduction::Sum, ls)
        .item::<f64>()
        .unwrap();
    assert!((got - want).abs() < 1e-12);
    // cross_entropy with class probabilities equals the one-hot labels' loss.
    let probs: Vec<f64> = (0..n * c)
        .map(|i| f64::from(u8::from(labels[i / c] as usize == i % c)))
        .collect();
    let a = t
        .cross_entropy(&t64(&probs, &[n, c]), Reduction::Mean, 0.0)
        .item::<f64>()
        .unwrap();
    let b = t
        .cross_entropy(&y, Reduction::Mean, 0.0)
        .item::<f64>()
        .unwrap();
    assert!((a - b).abs() < 1e-12);
    // nll_loss with class weights and ignore_index: mean divides by the counted weight.
    let w = [0.5, 1.0, 2.0, 4.0];
    let (mut num, mut den) = (0.0, 0.0);
    for i in 0..n {
        if labels[i] == 0 {
            continue;
        }
        let k = labels[i] as usize;
        num += -lp[i * c + k] * w[k];
        den += w[k];
    }
    let tl = t64(&lp, &[n, c]);
    let got = tl
        .nll_loss(&y, Some(&t64(&w, &[4])), Some(0), Reduction::Mean)
        .item::<f64>()
        .unwrap();
    assert!((got - num / den).abs() < 1e-12);
    let e = t
        .try_cross_entropy(&Tensor::from_slice(&[1i32, 2], &[2]), Reduction::Mean, 0.0)
        .unwrap_err();
    assert!(e.to_string().contains("cross_entropy"), "{e}");
}

// ---- gradients of nn helpers and losses ----

#[test]
fn layernorm_grad_matches_finite_differences() {
    let x0 = noise(3 * 5, 120);
    let cw = t64(&noise(15, 121), &[3, 5]);
    grad_check(&x0, &[3, 5], &|x| {
        x.layernorm(&[-1], 1e-5).mul(&cw).sum_all()
    });
}

#[test]
fn cross_entropy_grad_matches_finite_differences() {
    let x0 = noise(4 * 3, 130);
    let y = Tensor::from_slice(&[2i32, 0, 1, 1], &[4]);
    grad_check(&x0, &[4, 3], &|x| x.cross_entropy(&y, Reduction::Mean, 0.1));
}

// ---- linear algebra ----

fn matmul_ref(a: &[f64], b: &[f64], (n, k, m): (usize, usize, usize)) -> Vec<f64> {
    let mut out = vec![0.0; n * m];
    for i in 0..n {
        for j in 0..m {
            out[i * m + j] = (0..k).map(|l| a[i * k + l] * b[l * m + j]).sum();
        }
    }
    out
}

fn transpose(a: &[f64], (r, c): (usize, usize)) -> Vec<f64> {
    (0..c * r).map(|i| a[(i % r) * c + i / r]).collect()
}

fn eye(n: usize) -> Vec<f64> {
    (0..n * n)
        .map(|i| f64::from(u8::from(i / n == i % n)))
        .collect()
}

#[test]
fn qr_properties() {
    for (m, n) in [(4, 3), (3, 3), (3, 5)] {
        let a = noise(m * n, 140 + m as u64 * 10 + n as u64);
        let (q, r) = t64(&a, &[m, n]).qr();
        let (qv, rv) = (vals(&q), vals(&r));
        assert_eq!((q.shape(), r.shape()), (vec![m, m], vec![m, n]));
        assert_close(&matmul_ref(&qv, &rv, (m, m, n)), &a, 1e-12);
        assert_close(
            &matmul_ref(&transpose(&qv, (m, m)), &qv, (m, m, m)),
            &eye(m),
            1e-12,
        );
        for i in 0..m {
            for j in 0..n.min(i) {
                assert_eq!(rv[i * n + j], 0.0, "R[{i}][{j}]");
            }
        }
    }
    // Batched, f32.
    let a = noise(2 * 3 * 2, 150);
    let (q, r) = t32(&a, &[2, 3, 2]).qr();
    assert_close(&vals(&q.matmul(&r)), &vals(&t32(&a, &[2, 3, 2])), 1e-5);
}

fn check_svd(a: &[f64], (m, n): (usize, usize), dtype: DType, tol: f64) {
    let t = if dtype == DType::F64 {
        t64(a, &[m, n])
    } else {
        t32(a, &[m, n])
    };
    let (u, s, vt) = t.svd();
    let k = m.min(n);
    assert_eq!(
        (u.shape(), s.shape(), vt.shape()),
        (vec![m, k], vec![k], vec![k, n])
    );
    let (uv, sv, vv) = (vals(&u), vals(&s), vals(&vt));
    assert!(
        sv.windows(2).all(|w| w[0] >= w[1]) && sv.iter().all(|&x| x >= 0.0),
        "{sv:?}"
    );
    let us: Vec<f64> = (0..m * k).map(|i| uv[i] * sv[i % k]).collect();
    assert_close(&matmul_ref(&us, &vv, (m, k, n)), &vals(&t), tol);
    assert_close(
        &matmul_ref(&transpose(&uv, (m, k)), &uv, (k, m, k)),
        &eye(k),
        tol,
    );
    assert_close(
        &matmul_ref(&vv, &transpose(&vv, (k, n)), (k, n, k)),
        &eye(k),
        tol,
    );
}

#[test]
fn svd_properties() {
    check_svd(&noise(4 * 3, 160), (4, 3), DType::F64, 1e-10);
    check_svd(&noise(3 * 5, 161), (3, 5), DType::F64, 1e-10);
    check_svd(&noise(4 * 4, 162), (4, 4), DType::F32, 1e-4);
}
