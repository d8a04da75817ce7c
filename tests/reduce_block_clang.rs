//! Blocked reduces (`Opt::ReduceBlock`) in compiled C: a pointwise conv with a bias, a residual
//! and a ReLU over 45 input channels (no block divides them), blocked explicitly with pixel
//! lanes and with channel lanes, runs on Clang bit for bit as the unoptimized C kernel, and its
//! C compiles under `-Wall -Wextra -Werror`; the heuristic's blocks (a 7 × 7 pointwise conv
//! over 301 channels, whose weights outgrow the default L1) split over two threads — on the output loops inside the block loop, never on the block loop
//! itself — give the same bits.

use std::sync::Arc;

use picograd::codegen::c::render_kernel;
use picograd::codegen::kernel::{Kernel, Opt};
use picograd::codegen::lower::{buf_params, lower_ast, lower_ast_with};
use picograd::codegen::opt::OptConfig;
use picograd::codegen::split::split_loops;
use picograd::codegen::strategy::hand_coded;
use picograd::device::Device;
use picograd::realize::run_schedule;
use picograd::runtime::tuning::host_render_opts;
use picograd::runtime::Clang;
use picograd::schedule::{schedule, schedule_for};
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

fn clang(opt: Option<OptConfig>, threads: usize) -> Arc<dyn Device> {
    picograd::init();
    let c = Clang::new().expect("no C compiler: the reduce-block tests cannot run");
    Arc::new(
        c.with_render_opts(host_render_opts())
            .with_opt_config(opt)
            .with_fused_mulacc(true)
            .with_threads(threads, 0),
    )
}

/// `relu(conv1x1(x, w) + b + r)` over `x [1, 45, 2, 7]` → 24 channels on `dev`, the weights
/// stored `[cin, cout]`.
fn conv(dev: &Arc<dyn Device>) -> Tensor {
    let on = |shape: &[usize], seed| {
        let n = shape.iter().product();
        Tensor::try_from_slice_on(&data(n, seed), shape, dev).unwrap()
    };
    let w = on(&[45, 24, 1, 1], 2).permute(&[1, 0, 2, 3]);
    let (b, r) = (on(&[24], 3), on(&[1, 24, 2, 7], 4));
    (on(&[1, 45, 2, 7], 1).conv2d(&w, Some(&b), &ConvOpts::default()) + r).relu()
}

#[test]
fn explicit_blocks_equal_unoptimized_c() {
    let dev = clang(None, 1);
    let interp = picograd::context::interp();
    let t = conv(&interp);
    let item = schedule(&[t.lazy().contiguous()]).unwrap().pop().unwrap();
    let block = Opt::ReduceBlock { axis: 0, amount: 8 };
    let plans = [
        // Pixel lanes (14 pixels: 8 lanes and a scalar tail of 6), 4 channels per step.
        vec![
            Opt::Upcast { axis: 0, amount: 4 },
            Opt::Vectorize { axis: 1, amount: 8 },
            block,
        ],
        // Channel lanes, 2 pixels per step.
        vec![
            Opt::Vectorize { axis: 0, amount: 8 },
            Opt::Upcast { axis: 1, amount: 2 },
            block,
        ],
    ];
    let unopt = lower_ast(&item.ast, buf_params(&item), None, true).unwrap();
    let want = run_on(&*dev, &unopt, &item);
    for (n, opts) in plans.iter().enumerate() {
        let lk = lower_ast_with(&item.ast, buf_params(&item), None, Some(opts), true).unwrap();
        assert_eq!(run_on(&*dev, &lk, &item), want, "{opts:?}");
        let c = render_kernel(&lk, &host_render_opts()).unwrap();
        compile_host_kernel(&c, &format!("reduce_block_{n}"));
    }
}

/// A 7 × 7 pointwise conv over 301 channels to 64 with a bias, a residual and a ReLU on `dev`
/// (as mobilenet_v2's late convs: the default L1 does not hold its weights over the reduce).
fn long_conv(dev: &Arc<dyn Device>) -> Tensor {
    let on = |shape: &[usize], seed| {
        let n = shape.iter().product();
        Tensor::try_from_slice_on(&data(n, seed), shape, dev).unwrap()
    };
    let w = on(&[64, 301, 1, 1], 6);
    let (b, r) = (on(&[64], 7), on(&[1, 64, 7, 7], 8));
    (on(&[1, 301, 7, 7], 5).conv2d(&w, Some(&b), &ConvOpts::default()) + r).relu()
}

#[test]
fn heuristic_blocks_split_over_threads_equal_unoptimized_c() {
    let cfg = OptConfig::for_vec_width(8);
    let interp = picograd::context::interp();
    let mut items = schedule_for(&[long_conv(&interp).lazy().contiguous()], Some(&cfg)).unwrap();
    let item = items.pop().unwrap();
    run_schedule(&items).unwrap();
    let mut k = Kernel::new(&item.ast).unwrap();
    let opts = hand_coded(&mut k, &cfg);
    assert!(
        k.reduce_block.is_some(),
        "no block: {opts:?} -> {}",
        k.describe()
    );
    let lk = lower_ast(&item.ast, buf_params(&item), Some(&cfg), true).unwrap();
    let listing = format!("{lk}");
    let first_loop = lk
        .uops
        .iter()
        .position(|u| u.kind == picograd::codegen::uops::UOpKind::Loop)
        .unwrap();
    let split = split_loops(&lk, 2).expect("the output loops split over two threads");
    assert!(
        !split.contains(&first_loop),
        "the block loop was split:\n{listing}"
    );
    let want = long_conv(&clang(None, 1)).to_vec::<f32>().unwrap();
    let got = long_conv(&clang(Some(cfg), 2)).to_vec::<f32>().unwrap();
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.to_bits(), w.to_bits(), "[{i}] {g} vs {w}");
    }
}
