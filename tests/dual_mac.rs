//! The dual multiply-accumulate (`UOpKind::DualMac`, Arm's `smlad`): for a target whose
//! `OptConfig` has `dual_mac` (Cortex-M4 with `opt.dual_mac = 1`), the linearizer pairs the products of an int8 conv's
//! sum into `DualMac` UOps; the interpreter runs them lane by lane, and the C renderer prints
//! `__smlad` (each pair packed into one word by `pg_pack16`) under `__ARM_FEATURE_DSP` and portable C
//! elsewhere. Checked: the kernels hold the op only when the target says so; one quantized
//! model (a 3×3 conv of centered i16 activations and one of i8 activations, both with i8
//! weights per channel) gives a naive i64 reference's values on the interpreter and the Clang
//! device lowered for Cortex-M4, and in the exported C built for the host (portable branch) and
//! run under QEMU on Cortex-M4 (the intrinsics; one QEMU run).

use std::sync::Arc;

use picograd::codegen::lower::{buf_params, lower_ast};
use picograd::codegen::opt::OptConfig;
use picograd::codegen::uops::UOpKind;
use picograd::device::Device;
use picograd::interp::Interp;
use picograd::jit::Capture;
use picograd::ops::requant;
use picograd::runtime::target::Values;
use picograd::schedule::schedule;
use picograd::tensor::quantized::{requant_params, Ties};
use picograd::{ConvOpts, DType, Padding, Tensor};

const SHAPE: [usize; 4] = [1, 3, 6, 5];
const COUT: usize = 4;
const XZ: i64 = 117;
const YZ: i64 = 9;

#[path = "common/int_bundle.rs"]
mod int_bundle;
#[path = "common/rng.rs"]
mod rng;
use rng::Rng;

/// The weights, biases and per-channel scales of the two convs.
struct Params {
    w: [Vec<i8>; 2],
    bias: [Vec<i32>; 2],
    scales: [Vec<f32>; 2],
}

fn params() -> Params {
    let mut r = Rng(7);
    let mut w = || (0..COUT * 27).map(|_| r.range(-127, 127) as i8).collect();
    let w = [w(), w()];
    let mut r = Rng(11);
    let mut bias = || (0..COUT).map(|_| r.range(-4000, 4000) as i32).collect();
    let bias = [bias(), bias()];
    let scales = [0.0007f32, 0.0021].map(|s| (0..COUT).map(|c| s + 1e-4 * c as f32).collect());
    Params { w, bias, scales }
}

/// The model input: values in [0, 255], as i32.
fn input() -> Vec<i32> {
    let mut r = Rng(3);
    (0..SHAPE.iter().product::<usize>())
        .map(|_| r.range(0, 255) as i32)
        .collect()
}

/// One 3×3 conv, padding 1, of `x` (already centered) in i64, requantized to u8.
fn conv_reference(x: &[i64], w: &[i8], bias: &[i32], scales: &[f32]) -> Vec<i64> {
    let [_, ci, h, wd] = SHAPE;
    let (mults, shifts) = requant_params("test", scales).unwrap();
    let mut out = Vec::new();
    for o in 0..COUT {
        for y in 0..h as i64 {
            for xx in 0..wd as i64 {
                let mut acc = bias[o] as i64;
                for c in 0..ci {
                    for (ky, kx) in (0..9).map(|k| (k / 3, k % 3)) {
                        let (iy, ix) = (y + ky - 1, xx + kx - 1);
                        if iy < 0 || ix < 0 || iy >= h as i64 || ix >= wd as i64 {
                            continue;
                        }
                        let xi = (c * h + iy as usize) * wd + ix as usize;
                        acc += x[xi] * w[((o * ci + c) * 3 + ky as usize) * 3 + kx as usize] as i64;
                    }
                }
                let q = requant(acc as i32, mults[o], shifts[o]) as i64;
                out.push((q + YZ).clamp(0, 255));
            }
        }
    }
    out
}

/// The model's output by the reference: `1000 · conv_a(x − 117) + conv_b(x − 128)`.
fn reference() -> Vec<i32> {
    let (p, x) = (params(), input());
    let a: Vec<i64> = x.iter().map(|&v| v as i64 - XZ).collect();
    let b: Vec<i64> = x.iter().map(|&v| v as i64 - 128).collect();
    let ya = conv_reference(&a, &p.w[0], &p.bias[0], &p.scales[0]);
    let yb = conv_reference(&b, &p.w[1], &p.bias[1], &p.scales[1]);
    ya.iter()
        .zip(&yb)
        .map(|(a, b)| (a * 1000 + b) as i32)
        .collect()
}

/// One quantized conv of `x` (i16 or i8) on `dev`, requantized to u8, as i32.
fn qconv(x: &Tensor, p: &Params, n: usize, dev: &Arc<dyn Device>) -> Tensor {
    let w = Tensor::try_from_slice_on(&p.w[n], &[COUT, 3, 3, 3], dev).unwrap();
    let bias = Tensor::try_from_slice_on(&p.bias[n], &[COUT], dev).unwrap();
    let opts = ConvOpts {
        padding: Padding::All(1),
        ..ConvOpts::default()
    };
    let acc = x.try_conv2d_int(&w, Some(&bias), &opts).unwrap();
    let (m, s) = requant_params("test", &p.scales[n]).unwrap();
    let per = [1, COUT, 1, 1];
    let m = Tensor::try_from_slice_on(&m, &per, dev).unwrap();
    let s = Tensor::try_from_slice_on(&s, &per, dev).unwrap();
    let zp = Tensor::try_from_slice_on(&[YZ as u8], &[1], dev).unwrap();
    acc.try_requantize(&m, &s, &zp, None, DType::U8, Ties::BeforeZeroPoint)
        .unwrap()
        .cast(DType::I32)
}

/// The model: a conv of centered i16 activations (halfword lanes) and one of i8 activations
/// (byte lanes), both with i8 weights.
fn model(x: &Tensor, dev: &Arc<dyn Device>) -> Tensor {
    let p = params();
    let xa = x.cast(DType::I16).try_sub(XZ).unwrap();
    let xb = x.try_sub(128i64).unwrap().cast(DType::I8);
    let ya = qconv(&xa, &p, 0, dev);
    let yb = qconv(&xb, &p, 1, dev);
    ya.try_mul(1000i64).unwrap().try_add(&yb).unwrap()
}

#[path = "common/shaped.rs"]
mod shaped;
use shaped::Shaped;

fn run_on(dev: Arc<dyn Device>) -> Vec<i32> {
    let x = Tensor::try_from_slice_on(&input(), &SHAPE, &dev).unwrap();
    model(&x, &dev).to_vec::<i32>().unwrap()
}

/// How many `DualMac` UOps the model's kernels hold when lowered for `cfg`.
fn dual_macs(cfg: &OptConfig) -> usize {
    let dev: Arc<dyn Device> = Arc::new(Interp::new());
    let x = Tensor::try_from_slice_on(&input(), &SHAPE, &dev).unwrap();
    let items = schedule(&[model(&x, &dev).lazy().contiguous()]).unwrap();
    let mut n = 0;
    for item in items.iter().filter(|i| !i.is_copy) {
        let lk = lower_ast(&item.ast, buf_params(item), Some(cfg), false).unwrap();
        for u in lk.uops.iter().filter(|u| u.kind == UOpKind::DualMac) {
            n += 1;
            // A product with a constant zero factor (a padded input) is never paired: the
            // linearizer drops it (the other product takes a single step).
            let zero =
                |&s: &u32| matches!(lk.uops[s as usize].kind, UOpKind::Const(c) if c.bits() == 0);
            assert!(
                !u.src[1..].iter().any(zero),
                "a DualMac with a zero factor in {}",
                lk.name
            );
        }
    }
    n
}

#[test]
fn dsp_kernels_hold_the_dual_mac() {
    let cfg = int_bundle::m4_dual_mac();
    assert!(dual_macs(&cfg) > 0, "no DualMac in the Cortex-M4 kernels");
    let plain = OptConfig {
        dual_mac: false,
        ..cfg
    };
    assert_eq!(
        dual_macs(&plain),
        0,
        "a DualMac without the target's say-so"
    );
}

#[test]
fn dual_mac_conv_agrees_on_every_device() {
    picograd::init();
    let want = reference();
    let cfg = int_bundle::m4_dual_mac();
    let interp = Arc::new(Shaped {
        inner: Arc::new(Interp::new()),
        cfg,
    });
    assert_eq!(run_on(interp), want, "interpreter (Cortex-M4 kernels)");
    let clang = picograd::runtime::Clang::new()
        .expect("no C compiler: cannot run the test")
        .with_opt_config(Some(cfg));
    let clang: Arc<dyn Device> = Arc::new(clang);
    assert_eq!(run_on(clang.clone()), want, "Clang (Cortex-M4 kernels)");

    let x = Tensor::try_from_slice_on(&input(), &SHAPE, &clang).unwrap();
    x.realize().unwrap();
    let y = model(&x, &clang);
    let (cap, _) = Capture::record(&[&x], &[&y]).unwrap();
    let (bundle, c) = int_bundle::export_for_cortex_m4_with(&cap, cfg);
    for call in ["pg_smlad_h(", "pg_smlad_b(", "__smlad(", "pg_pack16("] {
        assert!(c.contains(call), "the exported C has no {call}");
    }
    let feed = [("x", Values::i32(&input()))];
    int_bundle::check_bundle(&bundle, &feed, &want);
}
