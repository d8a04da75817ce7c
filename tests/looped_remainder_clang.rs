//! Looped remainders (`Opt::LoopedUpcast`) in compiled C: pointwise convs over rows that the
//! conv tile's pixels do not divide (7, 14, 196, 49) get a looped remainder from the heuristic
//! at 8 lanes, and on the Clang device optimized for 8 lanes give bit for bit what the
//! unoptimized Clang kernels give; explicit looped opts with
//! vector lanes along the row (a pixel-lane tile with a looped tail) run on Clang bit-identical
//! to the unoptimized kernel, and their C compiles under `-Wall -Wextra -Werror`.

use std::sync::Arc;

use picograd::codegen::c::render_kernel;
use picograd::codegen::kernel::{Kernel, Opt};
use picograd::codegen::lower::{buf_params, lower_ast, lower_ast_with};
use picograd::codegen::opt::OptConfig;
use picograd::codegen::strategy::hand_coded;
use picograd::device::Device;
use picograd::runtime::tuning::host_render_opts;
use picograd::runtime::Clang;
use picograd::schedule::schedule;
use picograd::{ConvOpts, Tensor};

#[path = "../core/tests/common/strict_cc.rs"]
mod strict_cc;
use strict_cc::compile_host_kernel;

#[path = "../core/tests/common/interp_run.rs"]
mod interp_run;
use interp_run::run_on;

#[path = "common/seeded.rs"]
mod seeded;
use seeded::data;

fn clang(opt: Option<OptConfig>) -> Arc<dyn Device> {
    picograd::init();
    let c = Clang::new().expect("no C compiler: the looped-remainder tests cannot run");
    Arc::new(
        c.with_render_opts(host_render_opts())
            .with_opt_config(opt)
            .with_fused_mulacc(true),
    )
}

/// A pointwise conv with a bias and a ReLU after it, its weights stored `[cin, cout]`
/// (contiguous along the output channels, as the scheduler's blocked copies of larger convs
/// are), so the conv tile puts channels in vector lanes.
fn pointwise(dev: &Arc<dyn Device>, x: [usize; 4], cout: usize) -> Tensor {
    let on = |shape: &[usize], seed| {
        let n = shape.iter().product();
        Tensor::try_from_slice_on(&data(n, seed), shape, dev).unwrap()
    };
    let w = on(&[x[1], cout, 1, 1], 2).permute(&[1, 0, 2, 3]);
    let b = on(&[cout], 3);
    on(&x, 1).conv2d(&w, Some(&b), &ConvOpts::default()).relu()
}

/// Rows of 7, 14 (merged with a second row), 196 (14 × 14) and 49 (7 × 7), batch 2, and 45
/// (5 × 9) at batch 1: the conv tile's pixel counts leave a remainder on each. The reduces are
/// short (5–32 channels), so all but the 7-wide row take pixel lanes
/// (`strategy/orientation.rs`), whose tails of 4 or more pixels are 4-lane vectors.
const SHAPES: [([usize; 4], usize); 5] = [
    ([2, 24, 1, 7], 32),
    ([2, 16, 2, 7], 48),
    ([2, 24, 14, 14], 40),
    ([2, 32, 7, 7], 64),
    ([1, 5, 5, 9], 24),
];

#[test]
fn the_heuristic_loops_rows_its_pixels_do_not_divide() {
    picograd::init();
    let interp = picograd::context::interp();
    for (x, cout) in SHAPES {
        let t = pointwise(&interp, x, cout);
        let item = schedule(&[t.lazy().contiguous()]).unwrap().pop().unwrap();
        let mut k = Kernel::new(&item.ast).unwrap();
        let opts = hand_coded(&mut k, &OptConfig::for_vec_width(8));
        assert!(
            opts.iter().any(|o| matches!(o, Opt::LoopedUpcast { .. })),
            "{x:?} -> {cout}: {opts:?} -> {}",
            k.describe()
        );
    }
}

#[test]
fn looped_conv_tiles_equal_unoptimized_c() {
    let (plain, tiled) = (clang(None), clang(Some(OptConfig::for_vec_width(8))));
    for (x, cout) in SHAPES {
        let want = pointwise(&plain, x, cout).to_vec::<f32>().unwrap();
        let got = pointwise(&tiled, x, cout).to_vec::<f32>().unwrap();
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                g.to_bits(),
                w.to_bits(),
                "{x:?} -> {cout}: [{i}] {g} vs {w}"
            );
        }
    }
}

#[test]
fn pixel_lanes_with_a_looped_tail_equal_unoptimized_c() {
    let dev = clang(None);
    let interp = picograd::context::interp();
    // A 7 × 7 image (one axis of 49 pixels) and a 14 × 14 one (196): 8-lane vectors of pixels,
    // 4 output channels per step, a tail of 1 pixel (a scalar) and of 4 (one 4-lane vector).
    for (hw, amount) in [(7, 8), (7, 16), (14, 8)] {
        let t = pointwise(&interp, [1, 12, hw, hw], 8);
        let item = schedule(&[t.lazy().contiguous()]).unwrap().pop().unwrap();
        let k = Kernel::new(&item.ast).unwrap();
        assert_eq!(k.describe(), format!("[8,{} | 12 | ]", hw * hw));
        let opts = [
            Opt::Upcast { axis: 0, amount: 4 },
            Opt::LoopedUpcast {
                axis: 1,
                amount,
                lanes: 8,
            },
        ];
        let looped = lower_ast_with(&item.ast, buf_params(&item), None, Some(&opts), true).unwrap();
        let unopt = lower_ast(&item.ast, buf_params(&item), None, true).unwrap();
        assert_eq!(
            run_on(&*dev, &looped, &item),
            run_on(&*dev, &unopt, &item),
            "{hw}² by {amount}"
        );
        let c = render_kernel(&looped, &host_render_opts()).unwrap();
        assert!(c.contains("pg_f32x8 acc"), "no vector accumulator:\n{c}");
        compile_host_kernel(&c, &format!("looped_{hw}_{amount}"));
    }
}

#[test]
fn two_pixel_vectors_equal_unoptimized_c() {
    // The pixel-lane tile with two vectors of pixels (`strategy/orientation.rs`): 6 output
    // channels × 2 × 8 pixels, on a row of 32 and of 64 pixels.
    let dev = clang(None);
    let interp = picograd::context::interp();
    for w in [4, 8] {
        let t = pointwise(&interp, [1, 48, 8, w], 24);
        let item = schedule(&[t.lazy().contiguous()]).unwrap().pop().unwrap();
        let k = Kernel::new(&item.ast).unwrap();
        assert_eq!(k.describe(), format!("[24,{} | 48 | ]", 8 * w));
        let opts = [
            Opt::Upcast { axis: 0, amount: 6 },
            Opt::Vectorize { axis: 1, amount: 8 },
            Opt::Upcast { axis: 1, amount: 2 },
        ];
        let tiled = lower_ast_with(&item.ast, buf_params(&item), None, Some(&opts), true).unwrap();
        let unopt = lower_ast(&item.ast, buf_params(&item), None, true).unwrap();
        assert_eq!(
            run_on(&*dev, &tiled, &item),
            run_on(&*dev, &unopt, &item),
            "8 × {w}"
        );
        let c = render_kernel(&tiled, &host_render_opts()).unwrap();
        assert!(c.contains("pg_f32x8 acc11"), "12 vector accumulators:\n{c}");
        compile_host_kernel(&c, &format!("two_vectors_{w}"));
    }
}
