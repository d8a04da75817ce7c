//! 64-bit index arithmetic (`CRenderOpts::wide_index`, on for the Clang device of a 64-bit host)
//! changes the C types of loop counters and bounded index math, never what a kernel computes:
//! padded and strided convolutions (negative index offsets), flipped and padded views, odd
//! matmuls, i32 data arithmetic that wraps (loaded values have no bounds, so it stays 32-bit),
//! each on one core and split across cores, give bit-identical results with i64 and i32 indices.
//! The wide C is checked to hold 64-bit counters, so the comparison cannot pass by the option
//! doing nothing.

use std::sync::Arc;

use picograd::codegen::c::render_kernel;
use picograd::codegen::lower::{buf_params, lower_ast};
use picograd::device::Device;
use picograd::runtime::tuning::host_render_opts;
use picograd::runtime::Clang;
use picograd::schedule::schedule;
use picograd::{ConvOpts, DType, Padding, Tensor};

#[path = "common/seeded.rs"]
mod seeded;
use seeded::data;

/// The host Clang device with 64-bit (`wide`) or 32-bit index arithmetic, on `threads` cores
/// (splitting every kernel with a splittable loop when more than one).
fn device(wide: bool, threads: usize) -> Arc<dyn Device> {
    picograd::init();
    let c = Clang::new().expect("no C compiler: the wide-index tests cannot run");
    let opts = picograd::codegen::c::CRenderOpts {
        wide_index: wide,
        ..host_render_opts()
    };
    Arc::new(c.with_render_opts(opts).with_threads(threads, 0))
}

fn on(dev: &Arc<dyn Device>, shape: &[usize], seed: usize) -> Tensor {
    let n = shape.iter().product();
    Tensor::try_from_slice_on(&data(n, seed), shape, dev).unwrap()
}

fn conv(dev: &Arc<dyn Device>, x: [usize; 4], w: [usize; 4], pad: usize, stride: usize) -> Tensor {
    let opts = ConvOpts {
        padding: Padding::All(pad),
        stride: vec![stride, stride],
        ..ConvOpts::default()
    };
    on(dev, &x, 3).conv2d(&on(dev, &w, 4), Some(&on(dev, &[w[0]], 5)), &opts)
}

type Workload = (&'static str, fn(&Arc<dyn Device>) -> Tensor);

fn workloads() -> Vec<Workload> {
    vec![
        ("conv 3x3 pad 1, 2x5x9x11 -> 8", |d| {
            conv(d, [2, 5, 9, 11], [8, 5, 3, 3], 1, 1).relu()
        }),
        ("conv 3x3 pad 2 stride 2, 1x3x13x10 -> 16", |d| {
            conv(d, [1, 3, 13, 10], [16, 3, 3, 3], 2, 2)
        }),
        ("flip and pad", |d| {
            on(d, &[7, 9], 6)
                .flip(&[0, 1])
                .pad(&[(2, 1), (0, 3)])
                .mul(2.0)
        }),
        ("matmul 13x17x19 + bias", |d| {
            on(d, &[13, 17], 1)
                .matmul(&on(d, &[17, 19], 2))
                .add(on(d, &[19], 7))
        }),
        ("i32 data that wraps, transposed", |d| {
            let v: Vec<i32> = (0..60).map(|i| i32::MAX - 7 * i).collect();
            let a = Tensor::try_from_slice_on(&v, &[6, 10], d).unwrap();
            a.add(a.transpose(0, 1).transpose(0, 1).mul(3))
        }),
        ("i32 data whose second sum wraps, then cast to f32", |d| {
            // a + flip(a) fits; adding a again wraps (3 * 0x3000_0000 > i32::MAX).
            let v: Vec<i32> = (0..60).map(|i| 0x3000_0000 + 7 * i).collect();
            let a = Tensor::try_from_slice_on(&v, &[6, 10], d).unwrap();
            a.add(a.flip(&[1])).add(&a).cast(DType::F32)
        }),
    ]
}

#[test]
fn wide_index_kernels_equal_narrow_ones() {
    for threads in [1, 2] {
        let (narrow, wide) = (device(false, threads), device(true, threads));
        for (name, f) in workloads() {
            let (want, got) = (f(&narrow), f(&wide));
            assert_eq!(want.dtype(), got.dtype(), "{name}");
            let same = match want.dtype() {
                DType::I32 => want.to_vec::<i32>().unwrap() == got.to_vec::<i32>().unwrap(),
                _ => {
                    let (w, g) = (want.to_vec::<f32>().unwrap(), got.to_vec::<f32>().unwrap());
                    w.len() == g.len() && w.iter().zip(&g).all(|(a, b)| a.to_bits() == b.to_bits())
                }
            };
            assert!(
                same,
                "{name} ({threads} threads): i64 indices differ from i32"
            );
        }
    }
}

#[test]
fn wide_index_c_counts_in_64_bits() {
    picograd::init();
    let dev = picograd::context::interp();
    let t = conv(&dev, [2, 5, 9, 11], [8, 5, 3, 3], 1, 1);
    let items = schedule(&[t.lazy().contiguous()]).unwrap();
    let item = items.last().unwrap();
    let lk = lower_ast(&item.ast, buf_params(item), None, false).unwrap();
    let render = |wide: bool| {
        let opts = picograd::codegen::c::CRenderOpts {
            wide_index: wide,
            ..host_render_opts()
        };
        render_kernel(&lk, &opts).unwrap()
    };
    let (w, n) = (render(true), render(false));
    assert!(
        w.contains("for (int64_t ridx0") && !w.contains("int32_t ridx"),
        "{w}"
    );
    assert!(w.contains("const int64_t val"), "{w}");
    assert!(n.contains("for (int32_t ridx0"), "{n}");
}
