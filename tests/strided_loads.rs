//! Stride-2 vector loads (`VecLoad { stride: 2 }`): a stride-2 depthwise conv tiled with vector
//! lanes along its output row reads every other input element of a row. The linearizer makes
//! that one strided vector load (not eight scalar loads put together), the interpreter runs it
//! lane by lane, and the C renderer prints it as two vector loads and their even lanes. Checked
//! bit for bit against the unoptimized kernel on the interpreter and on the Clang device, and
//! against a naive reference; the C compiles under `-Wall -Wextra -Werror`.

use std::sync::Arc;

use picograd::codegen::c::render_kernel;
use picograd::codegen::lower::{buf_params, lower_ast};
use picograd::codegen::opt::OptConfig;
use picograd::device::Device;
use picograd::runtime::tuning::host_render_opts;
use picograd::runtime::Clang;
use picograd::schedule::schedule;
use picograd::{ConvOpts, Padding, Tensor};

#[path = "../core/tests/common/strict_cc.rs"]
mod strict_cc;
use strict_cc::compile_host_kernel;

#[path = "../core/tests/common/interp_run.rs"]
mod interp_run;

fn data(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7919 + seed * 104_729) % 2003) as f32 / 1001.0 - 1.0) * 1.37)
        .collect()
}

const C: usize = 4;
const H: usize = 34;

/// A 3 × 3 depthwise conv, stride 2, unpadded, over `[1, C, H, H]`: output rows of 16.
fn depthwise(dev: &Arc<dyn Device>) -> Tensor {
    let on = |shape: &[usize], seed| {
        let n = shape.iter().product();
        Tensor::try_from_slice_on(&data(n, seed), shape, dev).unwrap()
    };
    let opts = ConvOpts {
        stride: vec![2],
        padding: Padding::All(0),
        groups: C,
        ..ConvOpts::default()
    };
    on(&[1, C, H, H], 1).conv2d(&on(&[C, 1, 3, 3], 2), None, &opts)
}

fn naive() -> Vec<f32> {
    let (x, w) = (data(C * H * H, 1), data(C * 9, 2));
    let o = (H - 3) / 2 + 1;
    (0..C * o * o)
        .map(|i| {
            let (c, y, xo) = (i / (o * o), i / o % o, i % o);
            let mut s = 0.0f32;
            for ky in 0..3 {
                for kx in 0..3 {
                    s += x[(c * H + 2 * y + ky) * H + 2 * xo + kx] * w[c * 9 + ky * 3 + kx];
                }
            }
            s
        })
        .collect()
}

#[test]
fn stride_two_loads_equal_the_unoptimized_kernel() {
    picograd::init();
    let interp = picograd::context::interp();
    let t = depthwise(&interp);
    let item = schedule(&[t.lazy().contiguous()]).unwrap().pop().unwrap();
    let cfg = OptConfig::for_vec_width(8);
    let tiled = lower_ast(&item.ast, buf_params(&item), Some(&cfg), true).unwrap();
    let listing = format!("{tiled}");
    assert!(listing.contains("f32x8 LOAD stride 2"), "{listing}");
    let plain = lower_ast(&item.ast, buf_params(&item), None, true).unwrap();
    let got = interp_run::run(&tiled, &item);
    assert_eq!(got, interp_run::run(&plain, &item), "interpreter");
    let want = naive();
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let g = f32::from_bits(*g);
        assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "[{i}]: {g} vs {w}");
    }
    // Compiled: the same bits as unoptimized C, and warning-free.
    let clang = |opt: Option<OptConfig>| -> Arc<dyn Device> {
        let c = Clang::new().expect("no C compiler: the strided-load tests cannot run");
        Arc::new(c.with_render_opts(host_render_opts()).with_opt_config(opt))
    };
    let a = depthwise(&clang(Some(cfg))).to_vec::<f32>().unwrap();
    let b = depthwise(&clang(None)).to_vec::<f32>().unwrap();
    assert!(
        a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
        "Clang: strided vector loads differ from unoptimized C"
    );
    let c = render_kernel(&tiled, &host_render_opts()).unwrap();
    assert!(c.contains("_hi = *(const pg_f32x8u *)"), "{c}");
    compile_host_kernel(&c, "strided");
}
