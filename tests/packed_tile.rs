//! The packed pointwise register tile with a looped remainder: on Cortex-M4 (`dual_mac`, 14
//! integer registers) a packed int8 1×1 conv whose pixel count the tile does not divide takes
//! 2 output channels × 2 pixels (each widened word reused across the other side: fewer loads
//! per multiply-add than the 1 × w tiles its divisors allow) in a loop, then the pixel left
//! over (`Opt::LoopedUpcast`). Here the second conv reads 8 interleaved channels (two words)
//! of 3 × 7 = 21 pixels (10 steps of 2, tail 1) into 6 output channels; its two words are
//! unrolled after the tile's 4-byte unroll, so the linearizer must run the packed axis fastest
//! to keep them words. The divisors of 21 alone would give a 6 × 1 tile. Checked against a
//! naive i64 reference: the capture relowered for Cortex-M4 on the interpreter, and the
//! exported C on the host (portable branch) and under QEMU on Cortex-M4 (one QEMU run).

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
const W: usize = 7;
/// Channels of the input, the interleaved intermediate and the output.
const C: [usize; 3] = [8, 8, 6];
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
    let mut r = Rng(29 + n as u64);
    let w = (0..ci * co).map(|_| r.range(-127, 127) as i8).collect();
    let bias = (0..co).map(|_| r.range(-3000, 3000) as i32).collect();
    let scales = (0..co).map(|c| 0.0009 + 2e-4 * c as f32).collect();
    Layer { w, bias, scales }
}

fn input() -> Vec<i8> {
    let mut r = Rng(11);
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
    for n in 0..2 {
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
    let y = qconv(&qconv(x, 0, dev), 1, dev);
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
fn packed_pointwise_tile_with_a_looped_remainder_matches_the_reference() {
    picograd::init();
    let want = reference();
    let dev: Arc<dyn Device> = Arc::new(Interp::new());
    let x = Tensor::try_from_slice_on(&input(), &[1, C[0], H, W], &dev).unwrap();
    x.realize().unwrap();
    let y = model(&x, &dev);
    let (cap, _) = Capture::record(&[&x], &[&y]).unwrap();
    let cfg = m4();
    assert_eq!(
        cfg.int_registers, 14,
        "the tile below is sized for 14 registers"
    );

    // The packed kernel: inside each pixel loop a 2 × 2 tile (2 words of 4 channels: 8 packed
    // DualMacs, 4 stores), after it the 1-pixel tail (2 channels: 4 DualMacs, 2 stores); a
    // 1 × w tile (w dividing 21: 3 or 7) would store w outputs per step.
    let rel = cap.relowered(Some(&cfg), false).unwrap();
    let kernels: Vec<_> = rel
        .steps()
        .iter()
        .filter_map(|s| s.kernel.as_ref())
        .filter(|k| {
            k.uops
                .iter()
                .any(|u| u.kind == UOpKind::DualMac && u.src.len() == 3)
        })
        .collect();
    assert_eq!(kernels.len(), 1, "one packed kernel");
    // (inside a loop, packed DualMacs, stores) per stretch between loop boundaries.
    let mut parts: Vec<(bool, usize, usize)> = vec![(false, 0, 0)];
    for u in &kernels[0].uops {
        match u.kind {
            UOpKind::Loop => parts.push((true, 0, 0)),
            UOpKind::EndLoop => parts.push((false, 0, 0)),
            UOpKind::DualMac if u.src.len() == 3 => parts.last_mut().unwrap().1 += 1,
            UOpKind::Store => parts.last_mut().unwrap().2 += 1,
            _ => {}
        }
    }
    parts.retain(|p| p.1 + p.2 > 0);
    let body = parts.iter().filter(|p| p.0).count();
    let tail = parts.len() - body;
    assert!(body > 0 && tail > 0, "no looped tile and tail: {parts:?}");
    for p in &parts {
        let want = if p.0 { (true, 8, 4) } else { (false, 4, 2) };
        assert_eq!(
            *p, want,
            "tile parts (in loop, DualMacs, stores): {parts:?}"
        );
    }

    let got = rel
        .recompiled(&dev)
        .unwrap()
        .replay(&[&x])
        .unwrap()
        .remove(0)
        .to_vec::<i32>()
        .unwrap();
    assert_eq!(got, want, "interpreter running the Cortex-M4 kernels");

    let target = Target::by_name("cortex-m4").unwrap();
    let opts = ExportOptions {
        opt: Some(cfg),
        ..target.export_options()
    };
    let bundle = export(&cap, &ExportNames::new(&["x"], &["y"]), &opts).unwrap();
    let c = String::from_utf8(bundle.file("model.c").unwrap().to_vec()).unwrap();
    assert!(
        c.contains("pg_smlad4_b("),
        "the exported C has no packed sum"
    );
    let dir = std::env::temp_dir().join(format!("picograd-packed-tile-{}", std::process::id()));
    picograd::runtime::export::write_bundle(&bundle, &dir).unwrap();
    let xs = Values {
        dtype: DType::I8,
        bits: input().iter().map(|&v| u64::from(v as u8)).collect(),
    };
    let feed = [("x", xs)];
    int_bundle::check_host_and_cortex_m4(&dir, &feed, &want);
    let _ = std::fs::remove_dir_all(&dir);
}
