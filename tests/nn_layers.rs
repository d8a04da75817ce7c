//! `nn` layers against straightforward f64 references (Linear, LayerNorm, BatchNorm in train and
//! eval, GroupNorm, Embedding, the composed convs, 2x2 max pool), Dropout, and state dicts: the
//! raw blob and safetensors round trips, and malformed blobs (truncated or mutated) giving
//! errors rather than panics.
// The f64 references index several arrays in step; index loops read clearest.
#![allow(clippy::needless_range_loop)]

use picograd::nn::state::{load_blob, load_state_dict, save_blob};
use picograd::nn::*;
use picograd::{DType, Error, Tensor};
use proptest::prelude::*;

fn vals(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec().unwrap()
}

fn close(got: &[f64], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        assert!((a - b).abs() <= tol, "{what}[{i}]: {a} vs {b}");
    }
}

fn input(shape: &[usize], seed: u64) -> (Tensor, Vec<f64>) {
    let t = Tensor::randn(shape, seed);
    let v = vals(&t);
    (t, v)
}

#[test]
fn linear_matches_reference() {
    picograd::init();
    let l = Linear::new(3, 2, true, 5);
    let (x, xv) = input(&[4, 3], 1);
    let (w, b) = (vals(&l.weight), vals(l.bias.as_ref().unwrap()));
    let want: Vec<f64> = (0..8)
        .map(|i| {
            b[i % 2]
                + (0..3)
                    .map(|k| xv[i / 2 * 3 + k] * w[i % 2 * 3 + k])
                    .sum::<f64>()
        })
        .collect();
    close(&vals(&l.forward(&x)), &want, 1e-5, "linear");
    assert!(
        w.iter().all(|v| v.abs() <= 1.0 / 3f64.sqrt()),
        "kaiming bound"
    );
}

/// Normalizes each `group`-long run of `x`.
fn norm_ref(x: &[f64], group: usize, eps: f64) -> Vec<f64> {
    x.chunks(group)
        .flat_map(|c| {
            let m = c.iter().sum::<f64>() / group as f64;
            let v = c.iter().map(|a| (a - m).powi(2)).sum::<f64>() / group as f64;
            c.iter().map(move |a| (a - m) / (v + eps).sqrt())
        })
        .collect()
}

#[test]
fn layernorm_and_groupnorm_match_reference() {
    picograd::init();
    let (x, xv) = input(&[2, 3, 4], 2);
    close(
        &vals(&LayerNorm::new(&[4]).forward(&x)),
        &norm_ref(&xv, 4, 1e-5),
        1e-4,
        "ln",
    );
    close(
        &vals(&LayerNorm::new(&[3, 4]).forward(&x)),
        &norm_ref(&xv, 12, 1e-5),
        1e-4,
        "ln2",
    );
    let (x, xv) = input(&[2, 4, 3], 3);
    close(
        &vals(&GroupNorm::new(2, 4).forward(&x)),
        &norm_ref(&xv, 6, 1e-5),
        1e-4,
        "gn",
    );
}

#[test]
fn batchnorm_train_and_eval_match_reference() {
    picograd::init();
    let (n, c, hw) = (3, 2, 4);
    let (x, xv) = input(&[n, c, hw], 4);
    let mut bn = BatchNorm::new(c);
    let y = vals(&bn.forward(&x));
    let (mut means, mut vars) = (vec![], vec![]);
    for ch in 0..c {
        let v: Vec<f64> = (0..n)
            .flat_map(|i| xv[(i * c + ch) * hw..][..hw].to_vec())
            .collect();
        let m = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|a| (a - m).powi(2)).sum::<f64>() / v.len() as f64;
        for i in 0..n {
            for k in 0..hw {
                let at = (i * c + ch) * hw + k;
                assert!(
                    (y[at] - (xv[at] - m) / (var + 1e-5).sqrt()).abs() < 1e-4,
                    "bn train"
                );
            }
        }
        means.push(0.1 * m);
        vars.push(0.9 + 0.1 * var * 12.0 / 11.0);
    }
    close(&vals(&bn.running_mean), &means, 1e-5, "running mean");
    close(&vals(&bn.running_var), &vars, 1e-5, "running var");
    bn.eval();
    let y = vals(&bn.forward(&x));
    let want: Vec<f64> = (0..xv.len())
        .map(|i| (xv[i] - means[i / hw % c]) / (vars[i / hw % c] + 1e-5).sqrt())
        .collect();
    close(&y, &want, 1e-4, "bn eval");
    close(
        &vals(&bn.running_mean),
        &means,
        1e-6,
        "eval leaves running stats",
    );
}

#[test]
fn embedding_and_dropout() {
    picograd::init();
    let e = Embedding::new(5, 3, 9);
    let w = vals(&e.weight);
    let idx = Tensor::from_slice(&[4i32, 0, 2, 2], &[2, 2]);
    let y = e.forward(&idx);
    assert_eq!(y.shape(), vec![2, 2, 3]);
    let want: Vec<f64> = [4, 0, 2, 2]
        .iter()
        .flat_map(|&i| w[i * 3..i * 3 + 3].to_vec())
        .collect();
    close(&vals(&y), &want, 0.0, "embedding");

    let mut d = Dropout::new(0.5, 7);
    let x = Tensor::ones(&[1000], DType::F32);
    let y = vals(&d.forward(&x));
    assert!(y.iter().all(|&v| v == 0.0 || v == 2.0));
    let kept = y.iter().filter(|&&v| v == 2.0).count();
    assert!((400..600).contains(&kept), "kept {kept}");
    d.eval();
    close(&vals(&d.forward(&x)), &vec![1.0; 1000], 0.0, "dropout eval");
}

/// Direct conv2d: `x` (n, c, h, w), `wt` (o, c/g, kh, kw), padding [l, r, t, b].
#[allow(clippy::too_many_arguments)]
fn conv_ref(
    x: &[f64],
    xs: [usize; 4],
    wt: &[f64],
    ws: [usize; 4],
    g: usize,
    s: (usize, usize),
    d: (usize, usize),
    p: [usize; 4],
) -> (Vec<f64>, [usize; 4]) {
    let [n, c, h, w] = xs;
    let [o, cg, kh, kw] = ws;
    let oh = (h + p[2] + p[3] - d.0 * (kh - 1) - 1) / s.0 + 1;
    let ow = (w + p[0] + p[1] - d.1 * (kw - 1) - 1) / s.1 + 1;
    let mut out = vec![0.0; n * o * oh * ow];
    for (i, (b, oc, y, xx)) in (0..n)
        .flat_map(|b| {
            (0..o).flat_map(move |oc| {
                (0..oh).flat_map(move |y| (0..ow).map(move |xx| (b, oc, y, xx)))
            })
        })
        .enumerate()
    {
        let grp = oc / (o / g);
        for ic in 0..cg {
            for ky in 0..kh {
                for kx in 0..kw {
                    let iy = (y * s.0 + ky * d.0) as i64 - p[2] as i64;
                    let ix = (xx * s.1 + kx * d.1) as i64 - p[0] as i64;
                    if iy < 0 || ix < 0 || iy >= h as i64 || ix >= w as i64 {
                        continue;
                    }
                    let ch = grp * cg + ic;
                    let xi = ((b * c + ch) * h + iy as usize) * w + ix as usize;
                    out[i] += x[xi] * wt[((oc * cg + ic) * kh + ky) * kw + kx];
                }
            }
        }
    }
    (out, [n, o, oh, ow])
}

#[test]
fn conv2d_matches_direct_loops() {
    picograd::init();
    let cases = [
        ([2, 3, 5, 6], [4, 3, 3, 3], 1, (1, 1), (1, 1), [1, 1, 1, 1]),
        ([1, 4, 7, 6], [6, 2, 3, 2], 2, (2, 1), (1, 2), [0, 2, 1, 0]),
        ([1, 2, 6, 6], [2, 2, 2, 2], 1, (2, 2), (2, 1), [0, 0, 0, 0]),
    ];
    for (k, (xs, ws, g, s, d, p)) in cases.into_iter().enumerate() {
        let (x, xv) = input(&xs, 10 + k as u64);
        let (w, wv) = input(&ws, 20 + k as u64);
        let (want, shape) = conv_ref(&xv, xs, &wv, ws, g, s, d, p);
        let mut layer = Conv2d::new(ws[1] * g, ws[0], ws[2], 1, 0, 1);
        layer.weight = w.clone();
        layer.bias = None;
        (layer.groups, layer.stride, layer.dilation, layer.padding) = (g, s, d, p);
        let y = layer.forward(&x);
        assert_eq!(y.shape(), shape.to_vec(), "case {k}");
        close(&vals(&y), &want, 1e-4, &format!("conv case {k}"));
    }
}

#[test]
fn conv_layers_and_pool_match_references() {
    picograd::init();
    // Conv1d = conv2d with height 1.
    let c1 = Conv1d::new(2, 3, 3, 2, 1, 1);
    let (x, xv) = input(&[2, 2, 7], 30);
    let (want, _) = conv_ref(
        &xv,
        [2, 2, 1, 7],
        &vals(&c1.weight),
        [3, 2, 1, 3],
        1,
        (1, 2),
        (1, 1),
        [1, 1, 0, 0],
    );
    let b = vals(c1.bias.as_ref().unwrap());
    let want: Vec<f64> = want
        .iter()
        .enumerate()
        .map(|(i, v)| v + b[i / 4 % 3])
        .collect();
    close(&vals(&c1.forward(&x)), &want, 1e-4, "conv1d");

    // ConvTranspose2d: scatter each input pixel times the kernel.
    let mut ct = ConvTranspose2d::new(2, 3, 3, 2, 1, 2);
    ct.bias = None;
    ct.output_padding = (1, 0);
    let (x, xv) = input(&[1, 2, 3, 4], 31);
    let wv = vals(&ct.weight);
    let (oh, ow) = ((3 - 1) * 2 - 2 + 3 + 1, (4 - 1) * 2 - 2 + 3);
    let mut want = vec![0.0; 3 * oh * ow];
    for ic in 0..2 {
        for (iy, ix) in (0..3).flat_map(|a| (0..4).map(move |b| (a, b))) {
            for (oc, ky, kx) in
                (0..3).flat_map(|o| (0..3).flat_map(move |a| (0..3).map(move |b| (o, a, b))))
            {
                let (y, xx) = ((iy * 2 + ky) as i64 - 1, (ix * 2 + kx) as i64 - 1);
                if y >= 0 && xx >= 0 && (y as usize) < oh && (xx as usize) < ow {
                    want[(oc * oh + y as usize) * ow + xx as usize] +=
                        xv[(ic * 3 + iy) * 4 + ix] * wv[((ic * 3 + oc) * 3 + ky) * 3 + kx];
                }
            }
        }
    }
    let y = ct.forward(&x);
    assert_eq!(y.shape(), vec![1, 3, oh, ow]);
    close(&vals(&y), &want, 1e-4, "conv_transpose2d");

    let (x, xv) = input(&[1, 2, 5, 4], 32);
    let want: Vec<f64> = (0..2 * 2 * 2)
        .map(|i| {
            let (c, y, xx) = (i / 4, i / 2 % 2, i % 2);
            let at = |dy: usize, dx: usize| xv[(c * 5 + 2 * y + dy) * 4 + 2 * xx + dx];
            at(0, 0).max(at(0, 1)).max(at(1, 0)).max(at(1, 1))
        })
        .collect();
    let pooled = x.max_pool2d(&picograd::tensor::PoolOpts::new(&[2, 2]));
    close(&vals(&pooled), &want, 0.0, "max_pool2d 2x2");
}

#[test]
fn conv_gradient_flows() {
    picograd::init();
    let conv = Conv2d::new(1, 2, 3, 1, 1, 3);
    let (x, _) = input(&[2, 1, 4, 4], 40);
    conv.forward(&x).sum_all().backward().unwrap();
    let g = vals(&conv.bias.as_ref().unwrap().grad().unwrap());
    close(&g, &[32.0, 32.0], 1e-4, "bias grad = N*H*W");
    assert_eq!(conv.weight.grad().unwrap().shape(), vec![2, 1, 3, 3]);
}

fn sample_state() -> Vec<(String, Tensor)> {
    vec![
        ("w".into(), Tensor::randn(&[2, 3], 1)),
        ("idx".into(), Tensor::from_slice(&[1i32, -2, 3], &[3])),
        ("flag".into(), Tensor::from_slice(&[true], &[])),
        ("half".into(), Tensor::from_f64s(&[1.5], &[1], DType::F16)),
    ]
}

fn same(a: &[(String, Tensor)], b: &[(String, Tensor)]) {
    assert_eq!(a.len(), b.len());
    for ((na, ta), (nb, tb)) in a.iter().zip(b) {
        assert_eq!((na, ta.shape(), ta.dtype()), (nb, tb.shape(), tb.dtype()));
        assert_eq!(ta.to_bytes().unwrap(), tb.to_bytes().unwrap(), "{na}");
    }
}

#[test]
fn blob_and_safetensors_round_trip() {
    picograd::init();
    let s = sample_state();
    same(&s, &load_blob(&save_blob(&s).unwrap()).unwrap());
    let tmp = picograd::runtime::private_fs::private_temp_dir("pg_nn_").unwrap();
    let path = tmp.path().join("s.safetensors");
    picograd::runtime::safetensors::save(&path, &s).unwrap();
    let mut sorted = s.clone();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    same(
        &sorted,
        &picograd::runtime::safetensors::load(&path).unwrap(),
    );
    std::fs::write(&path, b"garbage").unwrap();
    assert!(matches!(
        picograd::runtime::safetensors::load(&path),
        Err(Error::Format { .. })
    ));

    // Loading into a model writes the parameters in place.
    let (a, b) = (Linear::new(3, 2, true, 1), Linear::new(3, 2, true, 2));
    load_state_dict(
        &state_dict(&b.parameters()),
        &load_blob(&save_blob(&a.parameters()).unwrap()).unwrap(),
    )
    .unwrap();
    same(&a.parameters(), &b.parameters());
    let wrong = Linear::new(2, 2, true, 3);
    assert!(load_state_dict(&wrong.parameters(), &a.parameters()).is_err());
}

#[test]
fn malformed_blob_errors_name_the_offset() {
    picograd::init();
    let blob = save_blob(&sample_state()).unwrap();
    let err = load_blob(&blob[..blob.len() - 1]).unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err}");
    let mut bad = blob.clone();
    bad[12 + 4 + 1] = 200; // first tensor's dtype code ("w" is one byte)
    let Err(Error::Format { offset, .. }) = load_blob(&bad) else {
        panic!("bad dtype accepted")
    };
    assert_eq!(offset, 17);
    let mut extra = blob;
    extra.push(0);
    assert!(load_blob(&extra).is_err());
}

/// A name twice is an error everywhere, never "the first one wins": saving, loading a blob
/// (a blob rebuilt by hand with the first entry repeated), and loading a state dict.
#[test]
fn duplicate_names_are_errors() {
    picograd::init();
    let mut twice = sample_state();
    twice.push(("w".into(), Tensor::zeros(&[2, 3], DType::F32)));
    let e = save_blob(&twice).unwrap_err();
    assert!(e.to_string().contains("\"w\""), "{e}");
    let one = save_blob(&sample_state()[..1]).unwrap();
    let entry = &one[12..];
    let mut blob = one[..8].to_vec();
    blob.extend(2u32.to_le_bytes());
    blob.extend(entry);
    blob.extend(entry);
    let Err(Error::Format { offset, detail, .. }) = load_blob(&blob) else {
        panic!("a blob naming \"w\" twice was accepted")
    };
    assert_eq!(offset as usize, 12 + entry.len(), "{detail}");
    assert!(detail.contains("second tensor named \"w\""), "{detail}");
    let e = load_state_dict(&sample_state(), &twice).unwrap_err();
    assert!(e.to_string().contains("two loaded tensors"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn truncated_or_mutated_blobs_never_panic(cut in 0usize..200, at in 0usize..200, byte: u8) {
        picograd::init();
        let blob = save_blob(&sample_state()).unwrap();
        let _ = load_blob(&blob[..cut.min(blob.len())]);
        let mut m = blob.clone();
        let i = at % m.len();
        m[i] = byte;
        let _ = load_blob(&m);
    }
}
