//! Loads out of loops that store only into other buffers: the `hoist` pass moves a load to
//! just before the outermost loop its index does not depend on, unless that loop stores into
//! the buffer the load reads or may run zero times. Checked on an int8 pointwise conv with a
//! bias and a per-channel requantize (multiplier, shift and zero point loaded per output
//! channel, the pixel loop storing the output): lowered for Cortex-M4, no load of a buffer the
//! kernel never stores into stays in a loop it does not depend on; its values equal a naive
//! reference (the f32 requantize onnxruntime computes, on the exact i32 sums) on the
//! interpreter and the exported C on the host and under QEMU on Cortex-M4 (one QEMU run). Odd
//! channel and pixel counts, so tiles leave remainders.

use std::sync::Arc;

use picograd::codegen::lower::{buf_params, lower_ast};
use picograd::codegen::uops::{LinearKernel, UOpKind};
use picograd::device::Device;
use picograd::interp::Interp;
use picograd::ops::fixed_point;
use picograd::runtime::target::{Target, Values};
use picograd::schedule::schedule;

use loop_depths::depths;
use picograd::tensor::quantized::Ties;
use picograd::{ConvOpts, DType, Tensor};

#[path = "common/int_bundle.rs"]
mod int_bundle;
#[path = "common/loop_depths.rs"]
mod loop_depths;
#[path = "common/rng.rs"]
mod rng;

/// Input channels, output channels, height, width.
const CI: usize = 12;
const CO: usize = 5;
const H: usize = 3;
const W: usize = 7;
const BIAS: [i32; CO] = [1_000, -20_000, 0, 77_777, -3];
const SCALE: [f32; CO] = [0.002_374_766_2, 0.001_1, 0.003_1, 0.000_45, 0.017];
const ZP: i32 = -5;

fn input() -> Vec<i8> {
    let mut r = rng::Rng(21);
    (0..CI * H * W).map(|_| r.range(-128, 127) as i8).collect()
}

fn weights() -> Vec<i8> {
    let mut r = rng::Rng(34);
    (0..CO * CI).map(|_| r.range(-127, 127) as i8).collect()
}

/// The conv's exact sums plus bias, requantized as onnxruntime does in f32
/// (`rint(float(acc) * scale)`, ties to even) plus the zero point, clamped to int8.
fn reference() -> Vec<i32> {
    let (x, w) = (input(), weights());
    let mut out = Vec::new();
    for o in 0..CO {
        for p in 0..H * W {
            let acc: i32 = BIAS[o]
                + (0..CI)
                    .map(|c| i32::from(x[c * H * W + p]) * i32::from(w[o * CI + c]))
                    .sum::<i32>();
            let r = ((acc as f32) * SCALE[o]).round_ties_even() as i32 + ZP;
            out.push(r.clamp(-128, 127));
        }
    }
    out
}

/// How many loads of `lk` read a buffer the kernel never stores into from inside a loop their
/// index, gate and buffer do not depend on (every loop here runs at least once).
fn invariant_loads_in_loops(lk: &LinearKernel) -> usize {
    let depth = depths(lk);
    let defined_at =
        |s: u32| depth[s as usize] + usize::from(lk.uops[s as usize].kind == UOpKind::Loop);
    let stored: Vec<u32> = (lk.uops.iter())
        .filter(|u| matches!(u.kind, UOpKind::Store | UOpKind::VecStore { .. }))
        .map(|u| u.src[0])
        .collect();
    (lk.uops.iter().enumerate())
        .filter(|(i, u)| {
            matches!(u.kind, UOpKind::Load | UOpKind::VecLoad { .. })
                && !stored.contains(&u.src[0])
                && depth[*i] > u.src.iter().map(|&s| defined_at(s)).max().unwrap_or(0)
        })
        .count()
}

#[test]
fn per_channel_loads_leave_the_pixel_loop_and_values_agree_with_a_naive_reference() {
    picograd::init();
    let want = reference();
    let dev: Arc<dyn Device> = Arc::new(Interp::new());
    let x = Tensor::try_from_slice_on(&input(), &[1, CI, H, W], &dev).unwrap();
    x.realize().unwrap();
    let w = Tensor::try_from_slice_on(&weights(), &[CO, CI, 1, 1], &dev).unwrap();
    let b = Tensor::try_from_slice_on(&BIAS, &[CO], &dev).unwrap();
    let (ms, ss): (Vec<i32>, Vec<i32>) = SCALE.iter().map(|&s| fixed_point(s).unwrap()).unzip();
    let m = Tensor::try_from_slice_on(&ms, &[1, CO, 1, 1], &dev).unwrap();
    let s = Tensor::try_from_slice_on(&ss, &[1, CO, 1, 1], &dev).unwrap();
    let zp = Tensor::try_from_slice_on(&[ZP], &[1], &dev).unwrap();
    let acc = x
        .try_conv2d_int(&w, Some(&b), &ConvOpts::default())
        .unwrap();
    let y = acc
        .try_requantize(&m, &s, &zp, None, DType::I8, Ties::BeforeZeroPoint)
        .unwrap()
        .cast(DType::I32);

    let cfg = Target::by_name("cortex-m4").unwrap().opt;
    let items = schedule(&[y.lazy().contiguous()]).unwrap();
    let mut per_channel = 0;
    for item in items.iter().filter(|i| !i.is_copy) {
        let lk = lower_ast(&item.ast, buf_params(item), Some(&cfg), false).unwrap();
        assert_eq!(invariant_loads_in_loops(&lk), 0, "{lk}");
        per_channel += usize::from(
            lk.uops
                .iter()
                .any(|u| u.kind == UOpKind::Alu(picograd::ops::AluOp::Requant)),
        );
    }
    assert_eq!(per_channel, 1, "the requantize is not in one kernel");

    let bundle = int_bundle::export_for_cortex_m4(&x, &y, &want);
    let xs = Values {
        dtype: DType::I8,
        bits: input().iter().map(|&v| u64::from(v as u8)).collect(),
    };
    int_bundle::check_bundle(&bundle, &[("x", xs)], &want);
}
