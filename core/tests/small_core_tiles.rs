//! The small-core conv tiles (`codegen/strategy/small_core.rs`, `depthwise.rs`): on a
//! configuration with 32 float registers, pointwise, first-layer (strided, one input channel)
//! and padded convs get a channels × pixels tile, and depthwise convs a row tile, sized by the
//! register file, and compute bit-identical results to the unoptimized lowering on the
//! interpreter.

use picograd_core::codegen::kernel::{Kernel, Opt};
use picograd_core::codegen::lower::{buf_params, lower_ast};
use picograd_core::codegen::opt::OptConfig;
use picograd_core::codegen::strategy::hand_coded;
use picograd_core::realize::run_schedule;
use picograd_core::schedule::{schedule_for, ScheduleItem};
use picograd_core::tensor::{ConvOpts, Padding};
use picograd_core::Tensor;

#[path = "common/interp_run.rs"]
mod interp_run;
use interp_run::run;

fn data(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 37 + seed * 11) % 23) as f32 - 11.0) * 0.173)
        .collect()
}

/// The conv kernel of `x [1, cin, h, w] * w [cout, cin/groups, kh, kw]` for a small device,
/// its inputs realized.
fn conv_item(
    xs: [usize; 4],
    ws: [usize; 4],
    stride: usize,
    pad: Padding,
    groups: usize,
) -> ScheduleItem {
    let x = Tensor::from_slice(&data(xs.iter().product(), 1), &xs);
    let w = Tensor::from_slice(&data(ws.iter().product(), 2), &ws);
    let b = Tensor::from_slice(&data(ws[0], 3), &[ws[0]]);
    let opts = ConvOpts::default()
        .padding(pad)
        .stride(&[stride, stride])
        .groups(groups);
    let y = x.conv2d(&w, Some(&b), &opts).relu();
    let cfg = OptConfig::small_device();
    let mut items = schedule_for(&[y.lazy().contiguous()], Some(&cfg)).unwrap();
    let last = items.pop().unwrap();
    run_schedule(&items).unwrap();
    last
}

#[test]
fn register_file_tiles_are_bit_identical_and_sized_by_the_registers() {
    let cfg = OptConfig::small_device();
    assert_eq!(cfg.float_registers, 32);
    // (input, weight, stride, padding, groups, accumulators of the tile 32 registers allow)
    let cases = [
        // Pointwise 16 -> 8 over 5 x 5 pixels: 4 channels x 5 pixels (20 + 4 + 5 <= 30).
        ([1, 16, 5, 5], [8, 16, 1, 1], 1, Padding::All(0), 1, 20),
        // A first layer: one input channel, 10 x 4 kernel, stride 2, uneven padding.
        (
            [1, 1, 21, 10],
            [8, 1, 10, 4],
            2,
            Padding::PerSide(vec![1, 2, 4, 5]),
            1,
            20,
        ),
        // A padded 3 x 3 conv, 8 -> 16 channels on 4 x 4: 4 x 4 (16 + 4 + 4 <= 30).
        ([1, 8, 4, 4], [16, 8, 3, 3], 1, Padding::All(1), 1, 16),
        // Odd sizes, 6 channels, rows of 7: 3 x 7 needs 31 registers, so 2 x 7 (0.64 loads
        // per MAC) beats 6 x 1 (1.17).
        ([1, 3, 5, 7], [6, 3, 3, 3], 1, Padding::All(1), 1, 14),
        // Depthwise 3 x 3 over rows of 5: the whole row (5 + 7 inputs + 3 weights <= 30).
        ([1, 8, 6, 5], [8, 1, 3, 3], 1, Padding::All(1), 8, 5),
        // Depthwise over rows of 14: 7 (7 + 9 + 3 <= 30; 14 would need 33).
        ([1, 4, 3, 14], [4, 1, 3, 3], 1, Padding::All(1), 4, 7),
    ];
    for (ci, (xs, ws, stride, pad, groups, accs)) in cases.into_iter().enumerate() {
        let item = conv_item(xs, ws, stride, pad, groups);
        let mut k = Kernel::new(&item.ast).unwrap();
        let opts = hand_coded(&mut k, &cfg);
        let tile: usize = opts
            .iter()
            .map(|o| match o {
                Opt::Upcast { amount, .. }
                | Opt::Vectorize { amount, .. }
                | Opt::LoopedUpcast { amount, .. } => *amount,
                Opt::Unroll { .. } | Opt::ReduceBlock { .. } | Opt::StageWeights => 1,
            })
            .product();
        assert_eq!(tile, accs, "case {ci}: {opts:?} ({})", k.describe());
        for fused in [false, true] {
            let plain = lower_ast(&item.ast, buf_params(&item), None, fused).unwrap();
            let tiled = lower_ast(&item.ast, buf_params(&item), Some(&cfg), fused).unwrap();
            assert_eq!(
                run(&tiled, &item),
                run(&plain, &item),
                "case {ci} ({opts:?}, {}) fused {fused}",
                k.describe()
            );
        }
    }
}
