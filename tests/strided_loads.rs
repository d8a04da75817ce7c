//! Stride-2 vector loads (`VecLoad { stride: 2 }`): a stride-2 depthwise conv tiled with vector
//! lanes along its output row reads every other input element of a row. The linearizer makes
//! that one strided vector load (not eight scalar loads put together), the interpreter runs it
//! lane by lane, and the C renderer prints it as two vector loads and their even lanes. A padded
//! conv's row is one gated strided load (a gate per lane), which the padding-bounds pass turns
//! into a plain strided load in the interior. Checked bit for bit against the unoptimized kernel
//! on the interpreter and on the Clang device, and against a naive reference; the C compiles
//! under `-Wall -Wextra -Werror`. A row the vector lanes do not divide ends in a narrower vector
//! (8, 4, then scalars), checked the same way.

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

#[path = "common/seeded.rs"]
mod seeded;
use seeded::data;

/// A 3 × 3 depthwise conv, stride `stride`, padding `pad` on every side, over `[1, c, h, h]`.
fn depthwise(dev: &Arc<dyn Device>, (c, h, pad, stride): Shape) -> Tensor {
    let on = |shape: &[usize], seed| {
        let n = shape.iter().product();
        Tensor::try_from_slice_on(&data(n, seed), shape, dev).unwrap()
    };
    let opts = ConvOpts {
        stride: vec![stride],
        padding: Padding::All(pad),
        groups: c,
        ..ConvOpts::default()
    };
    on(&[1, c, h, h], 1).conv2d(&on(&[c, 1, 3, 3], 2), None, &opts)
}

/// `(channels, rows = columns, padding, stride)`.
type Shape = (usize, usize, usize, usize);

/// The conv summed in the same (ky, kx) order, padding taps skipped.
fn naive((c, h, pad, stride): Shape) -> Vec<f32> {
    let (x, w) = (data(c * h * h, 1), data(c * 9, 2));
    let o = (h + 2 * pad - 3) / stride + 1;
    (0..c * o * o)
        .map(|i| {
            let (ch, y, xo) = (i / (o * o), i / o % o, i % o);
            let mut s = 0.0f32;
            for ky in 0..3 {
                for kx in 0..3 {
                    let at = |o: usize, k: usize| (stride * o + k) as isize - pad as isize;
                    let (iy, ix) = (at(y, ky), at(xo, kx));
                    if iy < 0 || ix < 0 || iy >= h as isize || ix >= h as isize {
                        continue;
                    }
                    s += x[(ch * h + iy as usize) * h + ix as usize] * w[ch * 9 + ky * 3 + kx];
                }
            }
            s
        })
        .collect()
}

/// Lowers the conv tiled for 8-lane vectors and unoptimized, checks both on the interpreter
/// (bit for bit) and against the naive sum, the same on the Clang device, and that the tiled C
/// compiles warning-free; returns the tiled listing and its C.
fn check(shape: Shape) -> (String, String) {
    check_with(shape, OptConfig::for_vec_width(8))
}

/// [`check`] under the configuration `cfg`.
fn check_with(shape: Shape, cfg: OptConfig) -> (String, String) {
    picograd::init();
    let interp = picograd::context::interp();
    let t = depthwise(&interp, shape);
    let item = schedule(&[t.lazy().contiguous()]).unwrap().pop().unwrap();
    let tiled = lower_ast(&item.ast, buf_params(&item), Some(&cfg), true).unwrap();
    let listing = format!("{tiled}");
    let plain = lower_ast(&item.ast, buf_params(&item), None, true).unwrap();
    let got = interp_run::run(&tiled, &item);
    assert_eq!(got, interp_run::run(&plain, &item), "interpreter");
    let want = naive(shape);
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
    let a = depthwise(&clang(Some(cfg)), shape).to_vec::<f32>().unwrap();
    let b = depthwise(&clang(None), shape).to_vec::<f32>().unwrap();
    assert!(
        a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
        "Clang: strided vector loads differ from unoptimized C"
    );
    let src = render_kernel(&tiled, &host_render_opts()).unwrap();
    compile_host_kernel(&src, "strided");
    (listing, src)
}

#[test]
fn stride_two_loads_equal_the_unoptimized_kernel() {
    // Unpadded, [1, 4, 34, 34]: output rows of 16.
    let (listing, c) = check((4, 34, 0, 2));
    assert!(listing.contains("f32x8 LOAD stride 2"), "{listing}");
    assert!(c.contains("_hi = *(const pg_f32x8u *)"), "{c}");
}

#[test]
fn padded_stride_two_loads_are_gated_lanes_then_plain_in_the_interior() {
    // Padded by 1, [1, 3, 31, 31] (odd channels and rows): output rows of 16, two vectors of 8;
    // the first column's left tap and the last column's right tap (input column 31) are
    // padding, so both border vectors keep a gated lane.
    let (listing, c) = check((3, 31, 1, 2));
    // The interior's loads lost their gates: plain two-load strided reads in the C.
    assert!(c.contains("_hi = *(const pg_f32x8u *)"), "{c}");
    // The borders are vectors too, their padding lanes zeros (the gates decided by the split
    // loops): the left column's first lane, the right column's last.
    assert!(listing.contains("LOAD stride 2"), "{listing}");
    assert!(c.contains("= {0.0f, data1["), "{c}");
    assert!(c.contains("], 0.0f};"), "{c}");
}

#[test]
fn a_row_the_lanes_do_not_divide_ends_in_a_narrower_vector() {
    // Stride 1, padded by 1, [1, 3, 15, 15]: output rows of 15 on 8 lanes are vectors of 8 and
    // 4 and three scalars (was 8 and seven scalars; no 2-lane vectors, which x86 has no
    // instructions for), the padded borders gated lane by lane.
    let (_, c) = check((3, 15, 1, 1));
    assert!(c.contains("pg_f32x8 acc"), "{c}");
    assert!(c.contains("pg_f32x4 acc"), "{c}");
    assert!(!c.contains("pg_f32x2 acc"), "{c}");
    assert!(c.contains("float acc"), "{c}");
}

#[test]
fn gates_a_small_code_budget_keeps_are_loaded_lane_by_lane() {
    // A code budget of 2 copies per loop (size mode's) keeps the gates of a row padded on both
    // sides: the gated vector load stays, and C loads each lane under its own gate.
    let mut cfg = OptConfig::for_vec_width(8);
    cfg.max_unrolled = 2;
    let (listing, c) = check_with((3, 31, 1, 2), cfg);
    assert!(listing.contains("LOAD stride 2"), "{listing}");
    let gated = |l: &&str| l.contains("const pg_f32x8 val") && l.contains(" ? data1[");
    assert!(c.lines().any(|l| gated(&l)), "{c}");
}
