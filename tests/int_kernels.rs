//! Integer kernels: the widening multiply (`MulWide`), i32 accumulation and the requantize step
//! (`Requant`, rounded as onnxruntime's f32 `rint(float(a) * scale)`). Checked against naive Rust references: the rounding
//! against a brute-force nearest-integer search, a quantized conv and matmul against plain loops
//! over i64, on the interpreter and in compiled C (bit-exact), and the kernels' UOps hold no
//! float value at all.

use std::sync::Arc;

use picograd::codegen::lower::{buf_params, lower_ast};
use picograd::codegen::opt::OptConfig;
use picograd::codegen::uops::UOpKind;
use picograd::device::Device;
use picograd::interp::Interp;
use picograd::ops::{fixed_point, pack_shift, requant, AluOp};
use picograd::schedule::schedule;
use picograd::tensor::quantized::{requant_params, Ties};
use picograd::tensor::PoolOpts;
use picograd::{ConvOpts, DType, Padding, Tensor};

#[path = "common/live_uops.rs"]
mod live_uops;

#[path = "common/rng.rs"]
mod rng;
use rng::Rng;

#[path = "common/requant_ref.rs"]
mod requant_ref;
use requant_ref::{nearest, reference_requant_z};

fn reference_requant(a: i32, m: i32, s: i32) -> i32 {
    reference_requant_z(a, m, s, 0)
}

/// onnxruntime's requantize in f32: `rint(float(a) * scale)`, ties to even, then `+ z`.
fn onnxruntime_requant(a: i32, scale: f32) -> i32 {
    ((a as f32) * scale).round_ties_even() as i32
}

#[test]
fn requant_rounds_as_onnxruntimes_f32_product() {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..20_000 {
        let a = r.range(i32::MIN as i64, i32::MAX as i64) as i32;
        let m = r.range(1 << 30, (1 << 31) - 1) as i32;
        let s = r.range(1, 62) as i32;
        assert_eq!(requant(a, m, s), reference_requant(a, m, s), "{a} {m} {s}");
    }
    // With an f32 scale (the multiplier `fixed_point` gives), exactly f32 arithmetic: random
    // accumulators (past 2^24, where float(a) rounds too), and values within a few f32 ulps of
    // a tie, where rounding the exact product once would differ.
    let mut near_ties = 0;
    for i in 0..200_000 {
        let scale = f32::from_bits(r.range(0x3000_0000, 0x3f7f_ffff) as u32); // ~[4.7e-10, 1)
        let (m, s) = fixed_point(scale).unwrap();
        let a = if i % 2 == 0 {
            r.range(-(1 << 28), 1 << 28) as i32
        } else {
            // a ≈ (k + 1/2) / scale, the accumulator nearest a tie.
            let k = r.range(-200, 200) as f64 + 0.5;
            (k / scale as f64)
                .round()
                .clamp(i32::MIN as f64, i32::MAX as f64) as i32
        };
        let got = requant(a, m, s);
        assert_eq!(got, onnxruntime_requant(a, scale), "{a} · {scale:e}");
        let once = nearest(i128::from(a) * i128::from(m), s as u32) as i32;
        near_ties += usize::from(got != once);
    }
    assert!(
        near_ties > 0,
        "no case where the f32 rounding differs from a single one"
    );
    // With a zero point, the tie goes to the even final value.
    for _ in 0..20_000 {
        let a = r.range(-(1 << 20), 1 << 20) as i32;
        let (m, s) = (r.range(1, 1 << 12) as i32, r.range(1, 14) as i32);
        let z = r.range(-300, 300) as i32;
        let got = requant(a, m, pack_shift(s, z));
        assert_eq!(got, reference_requant_z(a, m, s, z), "{a} {m} {s} {z}");
    }
    assert_eq!(requant(5, 1, pack_shift(1, 0)), 2, "2.5 -> 2");
    assert_eq!(
        requant(5, 1, pack_shift(1, 1)),
        4,
        "2.5 + 1 -> 4, not 2 + 1"
    );
    assert_eq!(requant(-5, 1, pack_shift(1, -1)), -4, "-2.5 - 1 -> -4");
    // Exact ties: odd multiples of a half round to the even neighbour, both signs.
    for k in -9i32..=9 {
        let a = 2 * k + 1; // a * 2^30 / 2^31 = k + 1/2
        let even = if k % 2 == 0 { k } else { k + 1 };
        assert_eq!(requant(a, 1 << 30, 31), even, "tie at {k}.5");
    }
    // The worked example of the KWS net's third pointwise conv (`scripts/device-bench-int8.py`):
    // 60427 · 0.0023747662 = 143.49999485 exactly, 143.5 as an f32 product: onnxruntime gives
    // 144 (the even neighbour), a single exact rounding 143.
    let scale = 0.002_374_766_2f32;
    let (m, s) = fixed_point(scale).unwrap();
    assert_eq!(requant(60427, m, s), 144);
    assert_eq!(nearest(60427 * i128::from(m), s as u32), 143);
    // Small accumulators with small multipliers (the common case) agree too.
    for a in -300..300 {
        for (m, s) in [(3, 2), (5, 3), (1_234_567, 20)] {
            assert_eq!(requant(a, m, s), reference_requant(a, m, s));
        }
    }
}

#[test]
fn fixed_point_is_the_f32_scale_exactly() {
    for scale in [
        1e-3f32,
        0.0123,
        0.5,
        1.0,
        3.75,
        1.17e-9,
        2.0e8,
        0.003_921_568_6,
    ] {
        let (m, s) = fixed_point(scale).unwrap();
        assert!((1 << 30..=i32::MAX).contains(&m));
        assert_eq!(m as f64 * (-(s as f64)).exp2(), scale as f64, "{scale}");
    }
    for bad in [0.0f32, -1.0, f32::NAN, f32::INFINITY, 1e-20, 1e12] {
        assert!(fixed_point(bad).is_none(), "{bad}");
    }
    assert!(requant_params("test", &[0.5, -0.5]).is_err());
}

fn clang() -> Arc<dyn Device> {
    picograd::init();
    Arc::new(picograd::runtime::Clang::new().expect("no C compiler: the int8 tests cannot run"))
}

/// Shapes and data of one quantized conv: u8 input with zero point, i8 weights per channel.
struct QConv {
    x: Vec<u8>,
    w: Vec<i8>,
    bias: Vec<i32>,
    scales: Vec<f32>,
    xz: u8,
    yz: u8,
    shape: [usize; 4], // b, cin, h, w
    cout: usize,
}

fn qconv_case(per_channel: bool) -> QConv {
    let mut r = Rng(42 + per_channel as u64);
    let shape = [2, 3, 6, 5];
    let cout = 4;
    let n = shape.iter().product();
    QConv {
        x: (0..n).map(|_| r.range(0, 255) as u8).collect(),
        w: (0..cout * 3 * 9)
            .map(|_| r.range(-127, 127) as i8)
            .collect(),
        bias: (0..cout).map(|_| r.range(-5000, 5000) as i32).collect(),
        scales: if per_channel {
            (0..cout)
                .map(|c| 0.0007 + 0.0003 * c as f32 + r.range(0, 99) as f32 * 1e-6)
                .collect()
        } else {
            vec![0.000_913_7]
        },
        xz: 117,
        yz: 9,
        shape,
        cout,
    }
}

/// Plain loops: 3×3 conv, padding 1, in i64, then the reference requantize and clamp.
fn qconv_reference(q: &QConv) -> Vec<u8> {
    let [b, ci, h, w] = q.shape;
    let (mults, shifts) = requant_params("test", &q.scales).unwrap();
    let mut out = Vec::new();
    for n in 0..b {
        for o in 0..q.cout {
            let ch = if q.scales.len() > 1 { o } else { 0 };
            for y in 0..h {
                for x in 0..w {
                    let mut acc = q.bias[o] as i64;
                    for c in 0..ci {
                        for ky in 0..3 {
                            for kx in 0..3 {
                                let (iy, ix) = (y as i64 + ky - 1, x as i64 + kx - 1);
                                if iy < 0 || ix < 0 || iy >= h as i64 || ix >= w as i64 {
                                    continue;
                                }
                                let xi = ((n * ci + c) * h + iy as usize) * w + ix as usize;
                                let wi = ((o * ci + c) * 3 + ky as usize) * 3 + kx as usize;
                                acc += (q.x[xi] as i64 - q.xz as i64) * q.w[wi] as i64;
                            }
                        }
                    }
                    let r = reference_requant(acc as i32, mults[ch], shifts[ch]) as i64;
                    out.push((r + q.yz as i64).clamp(0, 255) as u8);
                }
            }
        }
    }
    out
}

/// The conv in picograd's integer ops on `dev`.
fn qconv_tensor(q: &QConv, dev: &Arc<dyn Device>) -> Tensor {
    let x = Tensor::try_from_slice_on(&q.x, &q.shape, dev).unwrap();
    let w = Tensor::try_from_slice_on(&q.w, &[q.cout, 3, 3, 3], dev).unwrap();
    let bias = Tensor::try_from_slice_on(&q.bias, &[q.cout], dev).unwrap();
    // (x - xz) spans [-255, 255]: i16, times the i8 weights as they are, widened products.
    let xc = x
        .cast(DType::I16)
        .try_sub(Tensor::try_from_slice_on(&[q.xz as i16], &[1], dev).unwrap())
        .unwrap();
    let opts = ConvOpts {
        padding: Padding::All(1),
        ..ConvOpts::default()
    };
    let acc = xc.try_conv2d_int(&w, Some(&bias), &opts).unwrap();
    let (m, s) = requant_params("test", &q.scales).unwrap();
    let per = [1, m.len(), 1, 1];
    let m = Tensor::try_from_slice_on(&m, &per, dev).unwrap();
    let s = Tensor::try_from_slice_on(&s, &per, dev).unwrap();
    let zp = Tensor::try_from_slice_on(&[q.yz], &[1], dev).unwrap();
    acc.try_requantize(&m, &s, &zp, None, DType::U8, Ties::BeforeZeroPoint)
        .unwrap()
}

/// The centered input `cast(x, i16) - xz` of a padded conv is computed where the conv reads it
/// (`schedule/widen.rs`), never stored as an i16 copy beside the u8 input (twice its memory in
/// an exported arena); the padding taps still read 0 after centering (values against the
/// naive reference).
#[test]
fn centered_input_is_not_stored() {
    let q = qconv_case(false);
    let dev: Arc<dyn Device> = Arc::new(Interp::new());
    let y = qconv_tensor(&q, &dev);
    let items = schedule(&[y.lazy().contiguous()]).unwrap();
    let stored: Vec<DType> = items.iter().map(|i| i.out.dtype()).collect();
    assert!(
        !stored.contains(&DType::I16),
        "an i16 buffer is stored: {stored:?}"
    );
    assert_eq!(y.to_vec::<u8>().unwrap(), qconv_reference(&q));
}

#[test]
fn quantized_conv_is_bit_exact_on_interp_and_clang() {
    let devs: [Arc<dyn Device>; 2] = [Arc::new(Interp::new()), clang()];
    for per_channel in [false, true] {
        let q = qconv_case(per_channel);
        let want = qconv_reference(&q);
        for dev in &devs {
            let got = qconv_tensor(&q, dev).to_vec::<u8>().unwrap();
            assert_eq!(got, want, "per_channel {per_channel} on {}", dev.name());
        }
    }
}

#[test]
fn quantized_conv_kernels_hold_no_float() {
    let q = qconv_case(true);
    let y = qconv_tensor(&q, &(Arc::new(Interp::new()) as Arc<dyn Device>));
    let items = schedule(&[y.lazy().contiguous()]).unwrap();
    let (mut wide, mut requants) = (0, 0);
    for cfg in [None, Some(OptConfig::for_vec_width(8))] {
        for item in items.iter().filter(|i| !i.is_copy) {
            let lk = lower_ast(&item.ast, buf_params(item), cfg.as_ref(), false).unwrap();
            for u in &lk.uops {
                assert!(!u.dtype.is_float(), "float UOp {:?} in {}", u.kind, lk.name);
                wide += usize::from(u.kind == UOpKind::Alu(AluOp::MulWide));
                requants += usize::from(u.kind == UOpKind::Alu(AluOp::Requant));
            }
        }
    }
    assert!(wide > 0, "the conv multiplies with MulWide");
    assert!(requants > 0, "the conv requantizes with Requant");
}

#[test]
fn int_matmul_is_exact_on_interp_and_clang() {
    let (m, k, n) = (3, 37, 5);
    let mut r = Rng(7);
    let a: Vec<i8> = (0..m * k).map(|_| r.range(-128, 127) as i8).collect();
    let b: Vec<i8> = (0..k * n).map(|_| r.range(-128, 127) as i8).collect();
    let mut want = vec![0i32; m * n];
    for i in 0..m {
        for j in 0..n {
            want[i * n + j] = (0..k)
                .map(|t| a[i * k + t] as i32 * b[t * n + j] as i32)
                .sum();
        }
    }
    let devs: [Arc<dyn Device>; 2] = [Arc::new(Interp::new()), clang()];
    for dev in &devs {
        let ta = Tensor::try_from_slice_on(&a, &[m, k], dev).unwrap();
        let tb = Tensor::try_from_slice_on(&b, &[k, n], dev).unwrap();
        let got = ta.try_matmul_int(&tb).unwrap();
        assert_eq!(got.dtype(), DType::I32);
        assert_eq!(got.to_vec::<i32>().unwrap(), want, "on {}", dev.name());
    }
}

#[test]
fn integer_ops_reject_bad_operands() {
    let f = Tensor::from_slice(&[1.0f32, 2.0], &[2]);
    let i = Tensor::from_slice(&[1i32, 2], &[2]);
    assert!(f.try_mul_wide(&f).is_err(), "f32 is not a narrow integer");
    assert!(i.try_mul_wide(&i).is_err(), "i32 products would overflow");
    let small = Tensor::from_slice(&[1i8, 2], &[2]);
    let t = Ties::BeforeZeroPoint;
    assert!(small
        .try_requantize(&i, &i, &i, None, DType::I8, t)
        .is_err());
    assert!(i.try_requantize(&i, &i, &i, None, DType::F32, t).is_err());
    let a = Tensor::from_slice(&[1i8; 6], &[2, 3]);
    assert!(a.try_matmul_int(&a).is_err(), "[2,3] @ [2,3]");
}

#[test]
fn requantize_ties_agree_on_interp_and_clang() {
    // Accumulators around exact ties (multiples of 2 over a scale of 1/4), per-channel odd and
    // even zero points, both tie rules.
    let acc: Vec<i32> = (-40..40).map(|v| v * 2 + (v % 3)).collect();
    let zps = [3u8, 10];
    let devs: [Arc<dyn Device>; 2] = [Arc::new(Interp::new()), clang()];
    for ties in [Ties::BeforeZeroPoint, Ties::WithZeroPoint] {
        let want: Vec<u8> = acc
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                let z = zps[i / 40] as i32;
                let r = match ties {
                    Ties::BeforeZeroPoint => reference_requant(a, 1 << 30, 32) + z,
                    Ties::WithZeroPoint => reference_requant_z(a, 1 << 30, 32, z),
                };
                r.clamp(0, 255) as u8
            })
            .collect();
        for dev in &devs {
            let t = Tensor::try_from_slice_on(&acc, &[2, 40], dev).unwrap();
            let m = Tensor::try_from_slice_on(&[1i32 << 30], &[1], dev).unwrap();
            let s = Tensor::try_from_slice_on(&[32i32], &[1], dev).unwrap();
            let z = Tensor::try_from_slice_on(&zps, &[2, 1], dev).unwrap();
            let got = t.try_requantize(&m, &s, &z, None, DType::U8, ties).unwrap();
            assert_eq!(
                got.to_vec::<u8>().unwrap(),
                want,
                "{ties:?} on {}",
                dev.name()
            );
        }
    }
}

/// The C requantize against the exact reference at every shift 1..=62 (the Clang device's
/// `pg_requant` has a 32-bit path for shifts above 32, accumulators below 2^24 and f32 multipliers, and a 64-bit one otherwise): per shift, exact
/// ties of both parities and their neighbours (multiplier 2^30), random accumulators with random
/// 31-bit multipliers, accumulators next to ties with f32 multipliers, and a zero point in the tie (`Ties::WithZeroPoint`'s packed shift). The
/// raw i32 `Requant` ALU op, so no clamp hides a wrong value.
#[test]
fn requant_agrees_with_the_reference_at_every_shift_on_clang() {
    let mut r = Rng(0x5eed_0017);
    let (mut acc, mut ms, mut sz, mut want) = (vec![], vec![], vec![], vec![]);
    for s in 1..=62i32 {
        let z = r.range(-130, 130) as i32;
        for i in 0..72 {
            let (a, m) = if i >= 48 {
                // An f32 multiplier (`M·2^7`) and the accumulator nearest a tie `(k + 1/2)·2^s/m`,
                // where rounding the product as an f32 first can land on the tie.
                let m = (r.range(1 << 23, (1 << 24) - 1) << 7) as i32;
                let k = r.range(-300, 300) as f64 + 0.5;
                let a = (k * 2f64.powi(s) / m as f64).round() + [-1.0, 0.0, 1.0][i % 3];
                (a.clamp(i32::MIN as f64, i32::MAX as f64) as i32, m)
            } else if i < 24 {
                // a·2^30 / 2^s = (2k+1)/2 when a = (2k+1)·2^(s-31); shifted for s < 31.
                let k = r.range(-6, 6);
                let tie = if s >= 31 {
                    (2 * k + 1) << (s - 31)
                } else {
                    2 * k + 1
                };
                let a = (tie + [-1, 0, 1][i % 3]).clamp(i32::MIN as i64, i32::MAX as i64);
                (a as i32, if s >= 31 { 1 << 30 } else { 1 << (s - 1) })
            } else {
                let a = r.range(i32::MIN as i64, i32::MAX as i64) as i32;
                (a, r.range(1 << 30, (1 << 31) - 1) as i32)
            };
            let packed = if i % 2 == 0 { s } else { pack_shift(s, z) };
            let zr = if i % 2 == 0 { 0 } else { z };
            acc.push(a);
            ms.push(m);
            sz.push(packed);
            want.push(reference_requant_z(a, m, s, zr));
        }
    }
    assert_eq!(requant_on_clang(&acc, &ms, &sz), want);
}

#[test]
fn integer_results_carry_no_gradient() {
    // Backward does not flow through integer values, so it never reaches MulWide or Requant
    // (their gradient rule is an error, unit-tested in autograd.rs): the integer branch adds
    // nothing to the float input's gradient.
    let x = Tensor::from_slice(&[1.0f32, -2.0, 3.0], &[3]).requires_grad_(true);
    let q = x.cast(DType::I8);
    let wide = q.try_mul_wide(&q).unwrap();
    let y = wide
        .cast(DType::F32)
        .sum(&[0], false)
        .add(x.sum(&[0], false));
    let g = y.gradient(&[&x]).unwrap();
    assert_eq!(g[0].to_vec::<f32>().unwrap(), [1.0, 1.0, 1.0]);
}

/// A requantized conv read by a max pool (which cannot fuse the conv's sum) is stored as its
/// uint8 values, not as the i32 accumulator: the buffer between the kernels is the narrow one
/// (an exported arena holds int8 activations), and the pooled values are the reference's.
#[test]
fn requantized_conv_is_stored_narrow() {
    let q = qconv_case(true);
    let dev: Arc<dyn Device> = Arc::new(Interp::new());
    let pooled = qconv_tensor(&q, &dev)
        .try_max_pool2d(&PoolOpts::new(&[2, 2]))
        .unwrap();
    let items = schedule(&[pooled.lazy().contiguous()]).unwrap();
    let kernels: Vec<_> = items.iter().filter(|i| !i.is_copy).collect();
    // The kernels that sum (the conv) or pool; others store the centered input and constants.
    let stored: Vec<DType> = kernels
        .iter()
        .filter(|i| i.ast.find_reduce().is_some())
        .map(|i| i.out.dtype())
        .collect();
    assert_eq!(stored, [DType::U8; 2], "the conv's and the pool's outputs");
    let conv = qconv_reference(&q);
    let [b, _, h, w] = q.shape;
    let mut want = Vec::new();
    for nc in 0..b * q.cout {
        for (y, x) in (0..h / 2).flat_map(|y| (0..w / 2).map(move |x| (y, x))) {
            let at = |dy: usize, dx: usize| conv[(nc * h + 2 * y + dy) * w + 2 * x + dx];
            want.push(at(0, 0).max(at(0, 1)).max(at(1, 0)).max(at(1, 1)));
        }
    }
    assert_eq!(pooled.to_vec::<u8>().unwrap(), want);
}

/// `pg_requant`'s inline path (shifts 33..=62, accumulators within ±2^24) against the exact
/// reference: random accumulators across that range and its edges (±(2^24 − 1), ±2^24, where
/// the general form takes over) with f32 multipliers (`M·2^7`, as `fixed_point` makes them)
/// and random 31-bit ones, zero points in the packed shift on every other value.
#[test]
fn requant_inline_path_agrees_with_the_reference() {
    let mut r = Rng(0x0017_5eed);
    let (mut acc, mut ms, mut sz, mut want) = (vec![], vec![], vec![], vec![]);
    let edges = [(1 << 24) - 1, 1 << 24, -(1 << 24) + 1, -(1 << 24), 0, 1, -1];
    for s in 33..=62i32 {
        for i in 0..64 {
            let a = match edges.get(i) {
                Some(&e) => e,
                None => r.range(-(1 << 24), 1 << 24) as i32,
            };
            let m = if i % 3 == 0 {
                r.range(1 << 30, (1 << 31) - 1) as i32
            } else {
                (r.range(1 << 23, (1 << 24) - 1) << 7) as i32
            };
            let z = if i % 2 == 0 {
                0
            } else {
                r.range(-130, 130) as i32
            };
            acc.push(a);
            ms.push(m);
            sz.push(pack_shift(s, z));
            want.push(reference_requant_z(a, m, s, z));
        }
    }
    assert_eq!(requant_on_clang(&acc, &ms, &sz), want);
}

/// `pg_requant_wide`'s early return, which serves the products the inline path sends to it for
/// lying within 2^32 of a tie: with `|a| < 2^24` the f32 rounding moves the exact product `p`
/// by at most `|p| / 2^24`, so a product farther than that from every tie rounds once. Products
/// on both sides of that bound: f32 multipliers (`M·2^7`, as `fixed_point` makes them), the
/// accumulator nearest a tie `(k + 1/2)·2^s` and its neighbours, `k` log-uniform so that the
/// tie distance (up to `m / 2`) is sometimes above and sometimes below `|p| / 2^24`; every other
/// value with a zero point. Counts the values the f32 rounding moves (checked non-zero: the
/// bound is exercised, not only the far side of it).
#[test]
fn requant_near_ties_agree_with_the_reference_on_clang() {
    let mut r = Rng(0x7e57_0017_0000_0002);
    let (mut acc, mut ms, mut sz, mut want) = (vec![], vec![], vec![], vec![]);
    let mut moved = 0;
    for s in 33..=62i32 {
        for i in 0..56 {
            let m = (r.range(1 << 23, (1 << 24) - 1) << 7) as i32;
            // |p| < 2^55 with |a| < 2^24: k up to 2^(54 - s), log-uniform.
            let top = (54 - s).max(1) as u32;
            let bits = r.range(0, i64::from(top)) as u32;
            let k = r.range(0, (1i64 << bits) - 1) as f64 + 0.5;
            let k = if i % 4 < 2 { k } else { -k };
            let near = (k * 2f64.powi(s) / f64::from(m)).round()
                + [-2.0, -1.0, 0.0, 1.0, 2.0, 0.0, 0.0][i % 7];
            let a = near.clamp(-f64::from((1 << 24) - 1), f64::from((1 << 24) - 1)) as i32;
            let z = if i % 2 == 0 {
                0
            } else {
                r.range(-130, 130) as i32
            };
            let w = reference_requant_z(a, m, s, z);
            let once = nearest(
                i128::from(a) * i128::from(m) + (i128::from(z) << s),
                s as u32,
            ) as i32;
            moved += usize::from(w != once);
            acc.push(a);
            ms.push(m);
            sz.push(pack_shift(s, z));
            want.push(w);
        }
    }
    assert!(
        moved > 0,
        "no value where the f32 rounding moves the result"
    );
    assert_eq!(requant_on_clang(&acc, &ms, &sz), want);
}

/// The requantize clamp `-max(-max(r, lo), -hi)` is lowered as `Clamp(r, lo, hi)` (printed as a
/// saturate where the core has one; `tests/saturate.rs` runs that under QEMU): the kernel
/// holds no `Neg`, and on the interpreter and
/// in C the values equal a naive clamp for accumulators at and beyond both ends of the i8 range
/// (i32 extremes included), with and without a fused ReLU's floor.
#[test]
fn requantize_clamp_is_a_min_and_agrees_with_a_naive_clamp() {
    let mut acc: Vec<i32> = vec![i32::MIN, i32::MIN + 1, i32::MAX, i32::MAX - 1, 0];
    acc.extend((-300..300).step_by(7));
    let (m, s) = (1i32 << 30, 31); // scale 1/2
    let devs: [Arc<dyn Device>; 2] = [Arc::new(Interp::new()), clang()];
    for floor in [None, Some(-5i64)] {
        let want: Vec<i8> = acc
            .iter()
            .map(|&a| {
                let lo = floor.unwrap_or(-128).max(-128);
                (reference_requant(a, m, s) + 3).clamp(lo as i32, 127) as i8
            })
            .collect();
        for dev in &devs {
            let n = acc.len();
            let t = Tensor::try_from_slice_on(&acc, &[n], dev).unwrap();
            let mt = Tensor::try_from_slice_on(&[m], &[1], dev).unwrap();
            let st = Tensor::try_from_slice_on(&[s], &[1], dev).unwrap();
            let z = Tensor::try_from_slice_on(&[3i8], &[1], dev).unwrap();
            let y = t
                .try_requantize(&mt, &st, &z, floor, DType::I8, Ties::BeforeZeroPoint)
                .unwrap();
            let items = schedule(&[y.lazy().contiguous()]).unwrap();
            for item in items.iter().filter(|i| !i.is_copy) {
                let lk = lower_ast(&item.ast, buf_params(item), None, false).unwrap();
                // What the stores read (the C prints only these; a replaced value stays in
                // the list unread).
                let live = live_uops::live_uops(&lk.uops);
                let has = |k: UOpKind| (0..live.len()).any(|i| live[i] && lk.uops[i].kind == k);
                assert!(!has(UOpKind::Alu(AluOp::Neg)), "a Neg read in {}", lk.name);
                assert!(has(UOpKind::Alu(AluOp::Clamp)), "no clamp in {}", lk.name);
            }
            assert_eq!(
                y.to_vec::<i8>().unwrap(),
                want,
                "{floor:?} on {}",
                dev.name()
            );
        }
    }
}

/// `Requant` of the accumulators `acc` by multipliers `ms` and packed shifts `sz`, computed by
/// the Clang device.
fn requant_on_clang(acc: &[i32], ms: &[i32], sz: &[i32]) -> Vec<i32> {
    let dev = clang();
    let n = acc.len();
    let t = |v: &[i32]| Tensor::try_from_slice_on(v, &[n], &dev).unwrap();
    t(acc)
        .try_alu(AluOp::Requant, &[&t(ms), &t(sz)])
        .unwrap()
        .to_vec::<i32>()
        .unwrap()
}
