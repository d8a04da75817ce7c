//! An integer sum's bias as its accumulators' start: for a kernel storing `sum + b` of an
//! integer reduce, `b` read outside the reduce, the linearizer starts each accumulator at `b`
//! (an `Assign` of `b`'s value before the reduce loop) and drops the add after it. Exact
//! because integer sums wrap; a float sum keeps its add after the reduce (another order would
//! round differently). Checked on an int8 conv with i32 biases at both ends of the i32 range
//! (so the sums wrap) against a naive wrapping reference: on the interpreter, and the exported
//! C on the host and under QEMU on Cortex-M4 (one QEMU run); and structurally on the i32 and
//! the f32 kernels lowered for Cortex-M4.

use std::sync::Arc;

use picograd::codegen::lower::{buf_params, lower_ast};
use picograd::codegen::uops::UOpKind;
use picograd::device::Device;
use picograd::interp::Interp;
use picograd::runtime::target::{Target, Values};
use picograd::schedule::schedule;
use picograd::{ConvOpts, DType, Tensor};

#[path = "common/int_bundle.rs"]
mod int_bundle;
#[path = "common/rng.rs"]
mod rng;

/// Input channels, output channels, height, width, kernel size.
const CI: usize = 3;
const CO: usize = 4;
const H: usize = 4;
const W: usize = 5;
const K: usize = 3;
const BIAS: [i32; CO] = [i32::MAX - 5, i32::MIN + 7, 12_345, -999];

fn input() -> Vec<i8> {
    let mut r = rng::Rng(7);
    (0..CI * H * W).map(|_| r.range(-128, 127) as i8).collect()
}

fn weights() -> Vec<i8> {
    let mut r = rng::Rng(13);
    (0..CO * CI * K * K)
        .map(|_| r.range(-127, 127) as i8)
        .collect()
}

/// The conv with bias, every sum wrapping in i32, bias added last.
fn reference() -> Vec<i32> {
    let (x, w) = (input(), weights());
    let (oh, ow) = (H - K + 1, W - K + 1);
    let mut out = Vec::new();
    for (o, bias) in BIAS.iter().enumerate() {
        for i in 0..oh {
            for j in 0..ow {
                let mut acc = 0i32;
                for c in 0..CI {
                    for ki in 0..K {
                        for kj in 0..K {
                            let xv = i32::from(x[(c * H + i + ki) * W + j + kj]);
                            let wv = i32::from(w[((o * CI + c) * K + ki) * K + kj]);
                            acc = acc.wrapping_add(xv * wv);
                        }
                    }
                }
                out.push(acc.wrapping_add(*bias));
            }
        }
    }
    out
}

/// How many `Assign`s give an accumulator a loaded value directly (a bias as its start; the
/// reduce's own updates assign arithmetic results), over the kernels of `y` lowered for
/// Cortex-M4.
fn bias_starts(y: &Tensor) -> usize {
    let cfg = Target::by_name("cortex-m4").unwrap().opt;
    let items = schedule(&[y.lazy().contiguous()]).unwrap();
    let mut n = 0;
    for item in items.iter().filter(|i| !i.is_copy) {
        let lk = lower_ast(&item.ast, buf_params(item), Some(&cfg), false).unwrap();
        n += lk
            .uops
            .iter()
            .filter(|u| {
                u.kind == UOpKind::Assign && lk.uops[u.src[1] as usize].kind == UOpKind::Load
            })
            .count();
    }
    n
}

#[test]
fn integer_bias_starts_the_accumulators_and_agrees_with_a_wrapping_reference() {
    picograd::init();
    let want = reference();
    let dev: Arc<dyn Device> = Arc::new(Interp::new());
    let x = Tensor::try_from_slice_on(&input(), &[1, CI, H, W], &dev).unwrap();
    x.realize().unwrap();
    let w = Tensor::try_from_slice_on(&weights(), &[CO, CI, K, K], &dev).unwrap();
    let b = Tensor::try_from_slice_on(&BIAS, &[CO], &dev).unwrap();
    let y = x
        .try_conv2d_int(&w, Some(&b), &ConvOpts::default())
        .unwrap();
    assert_eq!(y.dtype(), DType::I32);
    assert!(bias_starts(&y) > 0, "no accumulator starts at the bias");

    // The same conv in f32 keeps its bias add after the sum.
    let bf: Vec<f32> = BIAS.iter().map(|&v| v as f32).collect();
    let bf = Tensor::try_from_slice_on(&bf, &[CO], &dev).unwrap();
    let yf = x
        .cast(DType::F32)
        .try_conv2d(&w.cast(DType::F32), Some(&bf), &ConvOpts::default())
        .unwrap();
    assert_eq!(bias_starts(&yf), 0, "a float sum started at its bias");

    let bundle = int_bundle::export_for_cortex_m4(&x, &y, &want);
    let xs = Values {
        dtype: DType::I8,
        bits: input().iter().map(|&v| u64::from(v as u8)).collect(),
    };
    int_bundle::check_bundle(&bundle, &[("x", xs)], &want);
}
