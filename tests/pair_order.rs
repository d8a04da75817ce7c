//! The order in which the linearizer pairs an integer sum's scalar products into `DualMac`s
//! (`pack_count` in `core/src/codegen/linearizer.rs`): among orders along each unrolled reduce
//! axis, the one whose packed operands the tile's outputs share most. For a depthwise 3×3
//! window that pairs vertically adjacent taps, whose input pair the neighbouring outputs of a
//! row reuse. Checked on int8 depthwise convs (5 channels over 7 × 9 pixels, padding 1; stride 1
//! and stride 2, so borders and odd rows run): lowered for Cortex-M4 some input pair feeds
//! several `DualMac`s, and the values equal a naive i64 reference on the interpreter and the
//! Clang device with those kernels, and in the exported C on the host and under QEMU on
//! Cortex-M4 (stride 1; one QEMU run).

use std::collections::HashSet;
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

const C: usize = 5;
const H: usize = 7;
const W: usize = 9;
const YZ: i64 = -3;

#[path = "common/int_bundle.rs"]
mod int_bundle;
#[path = "common/rng.rs"]
mod rng;
use rng::Rng;

fn weights() -> Vec<i8> {
    let mut r = Rng(17);
    (0..C * 9).map(|_| r.range(-127, 127) as i8).collect()
}

fn bias() -> Vec<i32> {
    let mut r = Rng(19);
    (0..C).map(|_| r.range(-3000, 3000) as i32).collect()
}

fn scales() -> Vec<f32> {
    (0..C).map(|c| 0.0031 + 2e-4 * c as f32).collect()
}

/// The model input: int8 activations in [-128, 127], as i32.
fn input() -> Vec<i32> {
    let mut r = Rng(23);
    (0..C * H * W).map(|_| r.range(-128, 127) as i32).collect()
}

/// The depthwise 3×3 conv, padding 1 (zeros), `stride`, in i64, requantized to i8 around `YZ`.
fn reference(stride: usize) -> Vec<i32> {
    let (x, w, b) = (input(), weights(), bias());
    let (mults, shifts) = requant_params("test", &scales()).unwrap();
    let (oh, ow) = ((H - 1) / stride + 1, (W - 1) / stride + 1);
    let mut out = Vec::new();
    for c in 0..C {
        for y in 0..oh as i64 {
            for xx in 0..ow as i64 {
                let mut acc = i64::from(b[c]);
                for (ky, kx) in (0..9).map(|k| (k / 3, k % 3)) {
                    let (iy, ix) = (y * stride as i64 + ky - 1, xx * stride as i64 + kx - 1);
                    if iy < 0 || ix < 0 || iy >= H as i64 || ix >= W as i64 {
                        continue;
                    }
                    let xi = (c * H + iy as usize) * W + ix as usize;
                    acc += i64::from(x[xi]) * i64::from(w[c * 9 + (ky * 3 + kx) as usize]);
                }
                let q = i64::from(requant(acc as i32, mults[c], shifts[c]));
                out.push((q + YZ).clamp(-128, 127) as i32);
            }
        }
    }
    out
}

/// The conv on `dev`: i8 input and weights, i32 bias, per-channel requantize to i8, as i32.
fn model(x: &Tensor, stride: usize, dev: &Arc<dyn Device>) -> Tensor {
    let w = Tensor::try_from_slice_on(&weights(), &[C, 1, 3, 3], dev).unwrap();
    let b = Tensor::try_from_slice_on(&bias(), &[C], dev).unwrap();
    let opts = ConvOpts {
        groups: C,
        stride: vec![stride],
        padding: Padding::All(1),
        ..ConvOpts::default()
    };
    let acc = x
        .cast(DType::I8)
        .try_conv2d_int(&w, Some(&b), &opts)
        .unwrap();
    let (m, s) = requant_params("test", &scales()).unwrap();
    let per = [1, C, 1, 1];
    let m = Tensor::try_from_slice_on(&m, &per, dev).unwrap();
    let s = Tensor::try_from_slice_on(&s, &per, dev).unwrap();
    let zp = Tensor::try_from_slice_on(&[YZ as i8], &[1], dev).unwrap();
    acc.try_requantize(&m, &s, &zp, None, DType::I8, Ties::BeforeZeroPoint)
        .unwrap()
        .cast(DType::I32)
}

#[path = "common/shaped.rs"]
mod shaped;
use shaped::Shaped;

fn run_on(dev: Arc<dyn Device>, stride: usize) -> Vec<i32> {
    let x = Tensor::try_from_slice_on(&input(), &[1, C, H, W], &dev).unwrap();
    model(&x, stride, &dev).to_vec::<i32>().unwrap()
}

/// Over the kernels lowered for `cfg`: the `DualMac`s of scalar pairs, and how many of them
/// read a pair of input values (their first factors) another one read before.
fn shared_pairs(cfg: &OptConfig, stride: usize) -> (usize, usize) {
    let dev: Arc<dyn Device> = Arc::new(Interp::new());
    let x = Tensor::try_from_slice_on(&input(), &[1, C, H, W], &dev).unwrap();
    let items = schedule(&[model(&x, stride, &dev).lazy().contiguous()]).unwrap();
    let (mut pairs, mut shared) = (0, 0);
    for item in items.iter().filter(|i| !i.is_copy) {
        let lk = lower_ast(&item.ast, buf_params(item), Some(cfg), false).unwrap();
        let mut seen = HashSet::new();
        for u in lk.uops.iter().filter(|u| u.kind == UOpKind::DualMac) {
            if let [_, a0, _, a1, _] = u.src[..] {
                pairs += 1;
                shared += usize::from(!seen.insert((a0, a1)));
            }
        }
    }
    (pairs, shared)
}

#[test]
fn depthwise_pairs_share_their_input_operands() {
    let cfg = int_bundle::m4_dual_mac();
    let (pairs, shared) = shared_pairs(&cfg, 1);
    assert!(pairs > 0, "no paired products in the depthwise kernel");
    // A 3×3 window's vertical pairs: each input column pair serves up to three outputs of a
    // row tile; the horizontal (flattened) order shares none.
    assert!(
        shared * 3 >= pairs,
        "only {shared} of {pairs} pairs reuse an input pair"
    );
}

#[test]
fn depthwise_pairs_agree_on_every_device() {
    picograd::init();
    let cfg = int_bundle::m4_dual_mac();
    for stride in [1, 2] {
        let want = reference(stride);
        let interp = Arc::new(Shaped {
            inner: Arc::new(Interp::new()),
            cfg,
        });
        assert_eq!(run_on(interp, stride), want, "interpreter, stride {stride}");
        let clang = picograd::runtime::Clang::new()
            .expect("no C compiler: cannot run the test")
            .with_opt_config(Some(cfg));
        assert_eq!(
            run_on(Arc::new(clang), stride),
            want,
            "Clang, stride {stride}"
        );
    }
    let want = reference(1);
    let clang: Arc<dyn Device> = Arc::new(
        picograd::runtime::Clang::new()
            .expect("no C compiler: cannot run the test")
            .with_opt_config(Some(cfg)),
    );
    let x = Tensor::try_from_slice_on(&input(), &[1, C, H, W], &clang).unwrap();
    x.realize().unwrap();
    let y = model(&x, 1, &clang);
    let (cap, _) = Capture::record(&[&x], &[&y]).unwrap();
    let (bundle, c) = int_bundle::export_for_cortex_m4_with(&cap, cfg);
    assert!(
        c.contains("pg_smlad_b("),
        "the exported C pairs no products"
    );
    let feed = [("x", Values::i32(&input()))];
    int_bundle::check_bundle(&bundle, &feed, &want);
}
