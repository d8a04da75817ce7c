//! Image-major replays (`Capture::image_major`, `core/src/jit/slice.rs`): a `Jit` over a small
//! CNN at batch 6 on a Clang device whose L2 is a few KiB (so its intermediates count as too big
//! for the cache) replays the convs one slice of images at a time — slices of 1 image on one
//! core, of 2 on two — with every value bit for bit what the same function computes without
//! the `Jit` at batch 6, and what it computes image by image at batch 1; a step that mixes
//! images (a mean over the batch) ends the segment, and the values stay exact; the capture
//! lowered again as export lowers it (no layout transforms) gives the same bits too.

use std::sync::Arc;

use picograd::codegen::opt::OptConfig;
use picograd::device::Device;
use picograd::jit::Jit;
use picograd::runtime::tuning::host_render_opts;
use picograd::runtime::Clang;
use picograd::symbolic::VarVals;
use picograd::{ConvOpts, Padding, Result, Tensor};

#[path = "common/seeded.rs"]
mod seeded;
use seeded::data;

/// The host Clang device on `threads` cores with an L2 of `l2` bytes per core.
fn clang(l2: usize, threads: usize) -> Arc<dyn Device> {
    picograd::init();
    let c = Clang::new().expect("no C compiler: the image-major tests cannot run");
    let cfg = OptConfig {
        l2_bytes: l2,
        ..OptConfig::for_vec_width(8)
    };
    Arc::new(
        c.with_render_opts(host_render_opts())
            .with_opt_config(Some(cfg))
            .with_fused_mulacc(true)
            .with_threads(threads, 0),
    )
}

fn on(dev: &Arc<dyn Device>, shape: &[usize], seed: usize) -> Tensor {
    let n = shape.iter().product();
    Tensor::try_from_slice_on(&data(n, seed), shape, dev).unwrap()
}

/// Weights of [`net`].
struct Weights {
    w1: Tensor,
    b1: Tensor,
    dw: Tensor,
    w2: Tensor,
    fc: Tensor,
}

fn weights(dev: &Arc<dyn Device>) -> Weights {
    Weights {
        w1: on(dev, &[6, 3, 3, 3], 11),
        b1: on(dev, &[6], 12),
        dw: on(dev, &[6, 1, 3, 3], 13),
        w2: on(dev, &[5, 6, 1, 1], 14),
        fc: on(dev, &[5, 3], 15),
    }
}

/// conv 3×3 (pad 1) + bias, ReLU; depthwise 3×3 stride 2 (pad 1); pointwise conv to 5 channels
/// plus the depthwise output's sum over channels; ReLU; global mean; a linear layer. With
/// `mix`, the first conv's output is centred on its mean over the batch (images depend on each
/// other there).
fn net(x: &Tensor, w: &Weights, mix: bool) -> Result<Tensor> {
    let pad1 = ConvOpts {
        padding: Padding::All(1),
        ..ConvOpts::default()
    };
    let mut h = x.conv2d(&w.w1, Some(&w.b1), &pad1).relu();
    if mix {
        h = h.sub(h.mean(&[0], true));
    }
    let dw = ConvOpts {
        groups: 6,
        stride: vec![2],
        padding: Padding::All(1),
        ..ConvOpts::default()
    };
    let d = h.conv2d(&w.dw, None, &dw);
    let p = d
        .conv2d(&w.w2, None, &ConvOpts::default())
        .add(d.sum(&[1], true))
        .relu();
    Ok(p.mean(&[2, 3], false).matmul(&w.fc))
}

#[path = "common/f32_bits.rs"]
mod f32_bits;
use f32_bits::bits;

/// Does the capture run sliced steps (a recorded slice index)?
fn sliced_steps(vals: &[&VarVals]) -> usize {
    vals.iter()
        .filter(|v| v.iter().any(|(n, _)| &**n == "_slice"))
        .count()
}

fn check(threads: usize, mix: bool) {
    let dev = clang(4096, threads);
    let w = weights(&dev);
    let inputs: Vec<Tensor> = (0..3).map(|s| on(&dev, &[6, 3, 9, 11], 20 + s)).collect();
    let jit = Jit::new(|x: &[Tensor]| Ok(vec![net(&x[0], &w, mix)?]));
    for (call, x) in inputs.iter().enumerate() {
        let want = net(x, &w, mix).unwrap();
        let got = jit.call(std::slice::from_ref(x)).unwrap();
        assert_eq!(bits(&got[0]), bits(&want), "threads {threads}, call {call}");
        if !mix {
            // Image by image at batch 1: the same bits.
            let per_image: Vec<u32> = (0..6)
                .flat_map(|i| {
                    let xi = x.shrink(&[(i, i + 1), (0, 3), (0, 9), (0, 11)]);
                    bits(&net(&xi, &w, false).unwrap())
                })
                .collect();
            assert_eq!(bits(&got[0]), per_image, "threads {threads}, call {call}");
        }
    }
    let cap = jit.capture().unwrap();
    let vals: Vec<&VarVals> = cap.steps().iter().map(|s| &s.var_vals).collect();
    let sliced = sliced_steps(&vals);
    assert!(
        sliced > 0,
        "no step ran image-major (threads {threads}, mix {mix})"
    );
    // Export's view of it: the kernels lowered again without the host's layout transforms
    // (each sliced step's untransformed kernel sliced alike) give the same bits.
    let x = &inputs[0];
    let plain = cap.relowered(None, true).unwrap().recompiled(&dev).unwrap();
    let got = plain.replay(&[x]).unwrap();
    assert_eq!(bits(&got[0]), bits(&net(x, &w, mix).unwrap()), "relowered");
    let per_slice = if threads == 2 { 3 } else { 6 };
    assert_eq!(
        sliced % per_slice,
        0,
        "{sliced} sliced steps are not a whole number of {per_slice} slices"
    );
}

#[test]
fn one_core_replays_image_by_image_with_the_same_bits() {
    check(1, false);
}

#[test]
fn two_cores_replay_two_images_at_a_time_with_the_same_bits() {
    check(2, false);
}

#[test]
fn a_mean_over_the_batch_ends_a_segment_and_the_bits_stay() {
    check(1, true);
}

/// Below the cache budget nothing is sliced: a device with a large L2 replays step by step.
#[test]
fn values_that_fit_the_cache_are_not_sliced() {
    let dev = clang(64 << 20, 1);
    let w = weights(&dev);
    let x = on(&dev, &[6, 3, 9, 11], 30);
    let jit = Jit::new(|x: &[Tensor]| Ok(vec![net(&x[0], &w, false)?]));
    let want = net(&x, &w, false).unwrap();
    let got = jit.call(std::slice::from_ref(&x)).unwrap();
    assert_eq!(bits(&got[0]), bits(&want));
    let cap = jit.capture().unwrap();
    let vals: Vec<&VarVals> = cap.steps().iter().map(|s| &s.var_vals).collect();
    assert_eq!(sliced_steps(&vals), 0);
}

/// The image-major form is made at the first replay with the same steps frozen (the weights'
/// layout copies): a weight written after it (an optimizer's update) makes the next replay run
/// them again, and the values are those of the new weight.
#[test]
fn a_weight_written_after_slicing_is_read_anew() {
    let dev = clang(4096, 1);
    let mut w = weights(&dev);
    w.w1 = w.w1.try_own().unwrap();
    w.w2 = w.w2.try_own().unwrap();
    let jit = Jit::new(|x: &[Tensor]| Ok(vec![net(&x[0], &w, false)?]));
    for k in 0..5 {
        if k == 3 {
            for (t, seed) in [(&w.w1, 40), (&w.w2, 41)] {
                let new = on(&dev, &t.shape(), seed);
                t.try_assign(&new).unwrap();
                t.realize().unwrap();
            }
        }
        let x = on(&dev, &[6, 3, 9, 11], 50 + k);
        let got = jit.call(std::slice::from_ref(&x)).unwrap();
        assert_eq!(
            bits(&got[0]),
            bits(&net(&x, &w, false).unwrap()),
            "call {k}"
        );
        let cap = jit.capture().unwrap();
        let vals: Vec<&VarVals> = cap.steps().iter().map(|s| &s.var_vals).collect();
        assert_eq!(
            sliced_steps(&vals) > 0,
            k >= 1,
            "call {k}: sliced from the first replay on"
        );
        assert_eq!(cap.refreshes(), usize::from(k >= 3), "call {k}");
    }
}
