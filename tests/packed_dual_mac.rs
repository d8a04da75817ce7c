//! The packed dual multiply-accumulate and the channel-interleaved layout that feeds it: for a
//! target with `dual_mac` (Cortex-M4), an int8 pointwise conv reading an intermediate int8
//! activation stores that activation channel-interleaved (the scheduling layer's
//! `interleave` rule, no copy), and its sum reads one 32-bit word per four products of each
//! factor (a 3-source `DualMac` over two 4-lane `VecLoad`s, printed `pg_smlad4_b`). Checked
//! against a naive i64 reference: the capture relowered for Cortex-M4 and run on the
//! interpreter, and the exported C on the host (portable branch) and under QEMU on Cortex-M4
//! (the `__smlad`/`__sxtb16` branch; one QEMU run). The first conv has 12 input channels
//! (three words); the second reads 12 channels of 15 pixels, so the interleaved buffer is
//! `[12, 15]` stored `[15, 12]`; a third, with 6 input channels (not a whole number of words),
//! keeps its NCHW input and pairs its products from single loads (the remainder path).

use std::sync::Arc;

use picograd::codegen::opt::OptConfig;
use picograd::codegen::uops::UOpKind;
use picograd::device::Device;
use picograd::export::{export, ExportNames, ExportOptions};
use picograd::interp::Interp;
use picograd::jit::Capture;
use picograd::ops::requant;
use picograd::runtime::target::{Target, Values};
use picograd::tensor::quantized::{requant_params, Ties};
use picograd::{ConvOpts, DType, Tensor};

const H: usize = 3;
const W: usize = 5;
/// Channels of the input, the interleaved intermediate, the odd intermediate and the output.
const C: [usize; 4] = [12, 12, 6, 4];
const ZP: i64 = -3;

#[path = "common/int_bundle.rs"]
mod int_bundle;
#[path = "common/rng.rs"]
mod rng;
use rng::Rng;

/// Layer `n`: 1×1 conv weights `[C[n+1], C[n]]`, biases and per-channel scales.
struct Layer {
    w: Vec<i8>,
    bias: Vec<i32>,
    scales: Vec<f32>,
}

fn layer(n: usize) -> Layer {
    let (ci, co) = (C[n], C[n + 1]);
    let mut r = Rng(17 + n as u64);
    let w = (0..ci * co).map(|_| r.range(-127, 127) as i8).collect();
    let bias = (0..co).map(|_| r.range(-3000, 3000) as i32).collect();
    let scales = (0..co).map(|c| 0.0009 + 2e-4 * c as f32).collect();
    Layer { w, bias, scales }
}

fn input() -> Vec<i8> {
    let mut r = Rng(5);
    (0..C[0] * H * W)
        .map(|_| r.range(-128, 127) as i8)
        .collect()
}

/// A 1×1 conv of `x` (`[ci, H·W]`) with layer `n`, requantized to i8 (zero point [`ZP`]).
fn conv_reference(x: &[i64], n: usize) -> Vec<i64> {
    let (ci, co, p) = (C[n], C[n + 1], H * W);
    let l = layer(n);
    let (m, s) = requant_params("test", &l.scales).unwrap();
    let mut out = Vec::new();
    for o in 0..co {
        for q in 0..p {
            let mut acc = l.bias[o] as i64;
            for c in 0..ci {
                acc += x[c * p + q] * l.w[o * ci + c] as i64;
            }
            let y = requant(acc as i32, m[o], s[o]) as i64;
            out.push((y + ZP).clamp(-128, 127));
        }
    }
    out
}

fn reference() -> Vec<i32> {
    let mut x: Vec<i64> = input().iter().map(|&v| v as i64).collect();
    for n in 0..3 {
        x = conv_reference(&x, n);
    }
    x.iter().map(|&v| v as i32).collect()
}

fn qconv(x: &Tensor, n: usize, dev: &Arc<dyn Device>) -> Tensor {
    let (ci, co) = (C[n], C[n + 1]);
    let l = layer(n);
    let w = Tensor::try_from_slice_on(&l.w, &[co, ci, 1, 1], dev).unwrap();
    let bias = Tensor::try_from_slice_on(&l.bias, &[co], dev).unwrap();
    let acc = x
        .try_conv2d_int(&w, Some(&bias), &ConvOpts::default())
        .unwrap();
    let (m, s) = requant_params("test", &l.scales).unwrap();
    let per = [1, co, 1, 1];
    let m = Tensor::try_from_slice_on(&m, &per, dev).unwrap();
    let s = Tensor::try_from_slice_on(&s, &per, dev).unwrap();
    let zp = Tensor::try_from_slice_on(&[ZP as i8], &[1], dev).unwrap();
    acc.try_requantize(&m, &s, &zp, None, DType::I8, Ties::BeforeZeroPoint)
        .unwrap()
}

fn model(x: &Tensor, dev: &Arc<dyn Device>) -> Tensor {
    let y = qconv(&qconv(&qconv(x, 0, dev), 1, dev), 2, dev);
    y.cast(DType::I32)
}

/// Cortex-M4's kernel configuration with the dual MAC on.
fn m4() -> OptConfig {
    OptConfig {
        dual_mac: true,
        ..Target::by_name("cortex-m4").unwrap().opt
    }
}

#[test]
fn packed_dual_mac_on_interleaved_activations_matches_the_reference() {
    picograd::init();
    let want = reference();
    let dev: Arc<dyn Device> = Arc::new(Interp::new());
    let x = Tensor::try_from_slice_on(&input(), &[1, C[0], H, W], &dev).unwrap();
    x.realize().unwrap();
    let y = model(&x, &dev);
    let (cap, _) = Capture::record(&[&x], &[&y]).unwrap();
    let cfg = m4();

    // The target's kernels: packed sums in the convs over 12 channels (the input is a model
    // input and keeps its layout, but the weights and the interleaved intermediate are
    // consecutive along the channels only for the second conv) and pairs in the 6-channel one.
    let rel = cap.relowered(Some(&cfg), false).unwrap();
    let packed: Vec<usize> = rel
        .steps()
        .iter()
        .filter_map(|s| s.kernel.as_ref())
        .map(|k| {
            k.uops
                .iter()
                .filter(|u| u.kind == UOpKind::DualMac && u.src.len() == 3)
                .count()
        })
        .collect();
    // Only the second conv packs: its input is the interleaved intermediate (the first conv
    // reads the model input, whose layout is the caller's, with its channels strided).
    assert_eq!(
        packed.iter().filter(|&&n| n > 0).count(),
        1,
        "packed DualMacs per kernel: {packed:?}"
    );
    let pairs = rel
        .steps()
        .iter()
        .filter_map(|s| s.kernel.as_ref())
        .flat_map(|k| k.uops.iter())
        .filter(|u| u.kind == UOpKind::DualMac && u.src.len() == 5)
        .count();
    assert!(pairs > 0, "the 6-channel conv should pair single loads");
    let plain = cap
        .relowered(
            Some(&OptConfig {
                dual_mac: false,
                ..cfg
            }),
            false,
        )
        .unwrap();
    let any_dual = plain
        .steps()
        .iter()
        .filter_map(|s| s.kernel.as_ref())
        .flat_map(|k| k.uops.iter())
        .any(|u| u.kind == UOpKind::DualMac);
    assert!(!any_dual, "a DualMac without the target's say-so");

    // The relowered kernels (interleaved layout, packed sums) on the interpreter.
    let got = rel
        .recompiled(&dev)
        .unwrap()
        .replay(&[&x])
        .unwrap()
        .remove(0)
        .to_vec::<i32>()
        .unwrap();
    assert_eq!(got, want, "interpreter running the Cortex-M4 kernels");

    // The exported C: the portable branch on the host, the intrinsics under QEMU.
    let target = Target::by_name("cortex-m4").unwrap();
    let opts = ExportOptions {
        opt: Some(cfg),
        ..target.export_options()
    };
    let bundle = export(&cap, &ExportNames::new(&["x"], &["y"]), &opts).unwrap();
    let c = String::from_utf8(bundle.file("model.c").unwrap().to_vec()).unwrap();
    for call in ["pg_smlad4_b(", "pg_ld_i8x4(", "pg_smlad_b("] {
        assert!(c.contains(call), "the exported C has no {call}");
    }
    let dir = std::env::temp_dir().join(format!("picograd-packed-mac-{}", std::process::id()));
    picograd::runtime::export::write_bundle(&bundle, &dir).unwrap();
    let xs = Values {
        dtype: DType::I8,
        bits: input().iter().map(|&v| u64::from(v as u8)).collect(),
    };
    let feed = [("x", xs)];
    int_bundle::check_host_and_cortex_m4(&dir, &feed, &want);
    let _ = std::fs::remove_dir_all(&dir);
}
