//! Looped remainders (`Opt::LoopedUpcast`): an output axis split by an amount that does not
//! divide it runs a loop of upcast steps and then the positions left over, both inside the
//! loops of the axes before it. Checked on the interpreter against the unoptimized kernel (bit
//! for bit) and a naive reference, for the heuristic's pick on a pointwise conv over a 7-wide
//! row (channel vectors × pixels with a tail), on a 3×3 conv whose channels no tile divides
//! (channels looped, with a tail), and on a batch-1 pointwise conv whose blocked
//! weights still let its pixels merge into one row (and, with a short strided reduce, pixel
//! lanes over a stride-2 input), and for explicit looped opts — with and without
//! vector lanes, every amount up to the row — on rows of 7, 14 and 49. A golden
//! `PICOGRAD_DEBUG=3` listing (`tests/data/looped_remainder_conv.txt`; regenerate with
//! `PICOGRAD_BLESS=1` after a deliberate change) pins the looped kernel's UOps.

#[path = "common/interp_run.rs"]
mod interp_run;

use interp_run::{run, seeded_data as data};
use picograd_core::codegen::kernel::{Kernel, Opt};
use picograd_core::codegen::lower::{buf_params, lower_ast, lower_ast_with};
use picograd_core::codegen::opt::OptConfig;
use picograd_core::codegen::strategy::hand_coded;
use picograd_core::codegen::uops::UOpKind;
use picograd_core::ops::AluOp;
use picograd_core::realize::run_schedule;
use picograd_core::schedule::{schedule, schedule_for, ScheduleItem};
use picograd_core::tensor::ConvOpts;
use picograd_core::Tensor;

/// A pointwise conv `x [batch, cin, h, w]` → `cout` channels whose weights are stored
/// `[cin, cout]` (contiguous along the output channels, as the scheduler's blocked copies are),
/// and the naive result.
fn pointwise(batch: usize, cin: usize, cout: usize, (h, w): (usize, usize)) -> (Tensor, Vec<f32>) {
    let (x, wt) = (data(batch * cin * h * w, 3), data(cin * cout, 4));
    let hw = h * w;
    let want: Vec<f32> = (0..batch * cout * hw)
        .map(|o| {
            let (b, co, p) = (o / (cout * hw), o / hw % cout, o % hw);
            (0..cin)
                .map(|ci| x[(b * cin + ci) * hw + p] * wt[ci * cout + co])
                .sum()
        })
        .collect();
    let xt = Tensor::from_slice(&x, &[batch, cin, h, w]);
    let weight = Tensor::from_slice(&wt, &[cin, cout, 1, 1]).permute(&[1, 0, 2, 3]);
    (xt.conv2d(&weight, None, &ConvOpts::default()), want)
}

fn item(t: &Tensor) -> ScheduleItem {
    schedule(&[t.lazy().contiguous()]).unwrap().pop().unwrap()
}

fn close(name: &str, got: &[u32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{name}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let g = f32::from_bits(*g);
        assert!(
            (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "{name}[{i}]: {g} vs {w}"
        );
    }
}

#[test]
fn the_conv_tile_loops_a_row_its_pixels_do_not_divide() {
    // 32 channels over a 7-wide row at 8 lanes, batch 2: two channel vectors × 4 pixels (one
    // step, then a tail of 3) instead of 8 × 1 or 1 × 7, inside the batch and channel loops.
    let (t, want) = pointwise(2, 9, 32, (1, 7));
    let it = item(&t);
    let cfg = OptConfig::for_vec_width(8);
    let mut k = Kernel::new(&it.ast).unwrap();
    let opts = hand_coded(&mut k, &cfg);
    assert!(
        opts.contains(&Opt::LoopedUpcast {
            axis: 2,
            amount: 4,
            lanes: 0
        }),
        "{opts:?} -> {}",
        k.describe()
    );
    let rem = k.remainder.as_ref().expect("a remainder kernel");
    assert_eq!(rem.shared, 2, "{}", k.describe());
    let vector = lower_ast(&it.ast, buf_params(&it), Some(&cfg), false).unwrap();
    let listing = format!("{vector}");
    let path = format!(
        "{}/tests/data/looped_remainder_conv.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    if std::env::var("PICOGRAD_BLESS").is_ok() {
        std::fs::write(&path, &listing).unwrap();
    }
    let golden = std::fs::read_to_string(&path).unwrap();
    assert_eq!(listing, golden, "the looped-remainder UOps changed");
    // The shared batch and channel loops hold two reduce loops: the body's and the tail's.
    assert_eq!(listing.matches(" LOOP ").count(), 4, "{listing}");
    let unopt = lower_ast(&it.ast, buf_params(&it), None, false).unwrap();
    let (got, scalar) = (run(&vector, &it), run(&unopt, &it));
    assert_eq!(got, scalar, "looped and unoptimized kernels differ");
    close("conv", &got, &want);
}

#[test]
fn a_window_keeps_its_exact_pixel_count() {
    // A 3 × 3 conv (one channel vector, its taps unrolled) over a 28-wide row: 1 × 8 with a
    // tail of 4 loads as much per multiply-add as 1 × 7, so the exact 7 stays.
    let (cin, cout) = (4, 8);
    let x = Tensor::from_slice(&data(2 * cin * 3 * 30, 5), &[2, cin, 3, 30]);
    let w = Tensor::from_slice(&data(cin * 9 * cout, 6), &[cin, 3, 3, cout]).permute(&[3, 0, 1, 2]);
    let it = item(&x.conv2d(&w, None, &ConvOpts::default()));
    let mut k = Kernel::new(&it.ast).unwrap();
    let opts = hand_coded(&mut k, &OptConfig::for_vec_width(8));
    assert!(k.remainder.is_none(), "{opts:?} -> {}", k.describe());
    assert!(
        opts.contains(&Opt::Upcast { axis: 2, amount: 7 }),
        "{opts:?} -> {}",
        k.describe()
    );
}

/// A 3 × 3 conv `x [1, cin, 3, w + 2]` → `cout` channels, weights contiguous along the output
/// channels (as the scheduler blocks them), as one schedule item.
fn window_conv(cin: usize, cout: usize, w: usize) -> ScheduleItem {
    let x = Tensor::from_slice(&data(cin * 3 * (w + 2), 7), &[1, cin, 3, w + 2]);
    let wt = Tensor::from_slice(&data(cin * 9 * cout, 8), &[cin, 3, 3, cout]);
    item(&x.conv2d(&wt.permute(&[3, 0, 1, 2]), None, &ConvOpts::default()))
}

#[test]
fn a_window_tiles_channel_vectors_and_streams_big_weight_blocks_over_more_pixels() {
    // Two channel vectors over a 28-wide row: 2 × 4 (8 accumulators, 6 loads per 8
    // multiply-adds) rather than one vector × 7, and bit-identical to the unoptimized kernel.
    let it = window_conv(4, 16, 28);
    let cfg = OptConfig::for_vec_width(8);
    let mut k = Kernel::new(&it.ast).unwrap();
    let opts = hand_coded(&mut k, &cfg);
    assert_eq!(k.describe(), "[7 | 12 | 4,8,2,3]", "{opts:?}");
    let vector = lower_ast(&it.ast, buf_params(&it), Some(&cfg), false).unwrap();
    let unopt = lower_ast(&it.ast, buf_params(&it), None, false).unwrap();
    assert_eq!(
        run(&vector, &it),
        run(&unopt, &it),
        "tiled and unoptimized differ"
    );
    // Two weight vectors per tap: the unrolled taps run outermost, so one tap feeds all 8
    // accumulators before the next tap (accumulators outermost would give one accumulator
    // its 3 taps first and keep 6 weight vectors live).
    let targets: Vec<u32> = vector
        .uops
        .iter()
        .filter(|u| {
            matches!(
                u.kind,
                UOpKind::VecAlu {
                    op: AluOp::MulAcc,
                    ..
                }
            )
        })
        .map(|u| u.src[2])
        .collect();
    let mut first: Vec<u32> = targets[..8].to_vec();
    first.sort_unstable();
    first.dedup();
    assert_eq!(
        first.len(),
        8,
        "the first tap feeds every accumulator: {targets:?}"
    );
    // 256 input channels, 32 output channels, a 14-wide row: four vectors × 2 pixels read
    // 32 × 256 × 9 floats (288 KiB) per pixel step, over half of a 512 KiB L2, so each weight
    // vector counts as its 8 values and 2 vectors × 4 pixels (a tail of 2) wins; with a 1 MiB
    // L2 the block stays and the exact 4 × 2 loads fewer per multiply-add.
    let big = window_conv(256, 32, 14);
    for (l2, looped) in [(512 * 1024, true), (1024 * 1024, false)] {
        let mut k = Kernel::new(&big.ast).unwrap();
        let opts = hand_coded(&mut k, &cfg.with_caches(32 * 1024, l2));
        let step = if looped {
            Opt::LoopedUpcast {
                axis: 1,
                amount: 4,
                lanes: 0,
            }
        } else {
            Opt::Upcast { axis: 1, amount: 2 }
        };
        assert!(
            opts.contains(&step),
            "L2 {l2}: {opts:?} -> {}",
            k.describe()
        );
        let channels = if looped { 2 } else { 4 };
        assert!(
            opts.contains(&Opt::Upcast {
                axis: 0,
                amount: channels
            }),
            "L2 {l2}: {opts:?} -> {}",
            k.describe()
        );
    }
}

#[test]
fn channels_no_tile_divides_loop_with_a_tail() {
    // 12 output channels, weights strided along them (torch's layout: no channel lanes), two
    // 8-wide rows on 8 lanes: room for 8 channels of broadcast weights, of which only 6 divide
    // 12 — so 8 channels per loop step and a tail of 4 (the row's vector consumed its axis, so
    // the channel axis is found where it was). At batch 2 both parts sit inside the batch loop;
    // at batch 1 they are sibling loops, which `split_loops` divides one after the other.
    // Bit-identical to the unoptimized kernel, which matches a naive conv.
    let (cin, cout, h, w) = (3, 12, 2, 8);
    let conv = |batch: usize| {
        let (xs, ws) = (
            data(batch * cin * (h + 2) * (w + 2), 9),
            data(cout * cin * 9, 10),
        );
        let x = Tensor::from_slice(&xs, &[batch, cin, h + 2, w + 2]);
        let wt = Tensor::from_slice(&ws, &[cout, cin, 3, 3]);
        (item(&x.conv2d(&wt, None, &ConvOpts::default())), xs, ws)
    };
    let cfg = OptConfig::for_vec_width(8);
    for (batch, axis, shape, regions) in [
        (1, 0, "[2 | 3,3 | 8,8,3] + [2 | 3,3 | 8,4,3]", 2),
        (2, 1, "[2,2 | 3,3 | 8,8,3] + [2,2 | 3,3 | 8,4,3]", 1),
    ] {
        let (it, xs, ws) = conv(batch);
        let mut k = Kernel::new(&it.ast).unwrap();
        let opts = hand_coded(&mut k, &cfg);
        assert!(
            opts.contains(&Opt::LoopedUpcast {
                axis,
                amount: 8,
                lanes: 0
            }),
            "batch {batch}: {opts:?} -> {}",
            k.describe()
        );
        assert_eq!(k.describe(), shape, "batch {batch}");
        let want: Vec<f32> = (0..batch * cout * h * w)
            .map(|o| {
                let (b, co, oy, ox) = (o / (cout * h * w), o / (h * w) % cout, o / w % h, o % w);
                let mut acc = 0.0f32;
                for ci in 0..cin {
                    for ky in 0..3 {
                        for kx in 0..3 {
                            let xi = ((b * cin + ci) * (h + 2) + oy + ky) * (w + 2) + ox + kx;
                            acc += xs[xi] * ws[((co * cin + ci) * 3 + ky) * 3 + kx];
                        }
                    }
                }
                acc
            })
            .collect();
        let looped = lower_ast(&it.ast, buf_params(&it), Some(&cfg), false).unwrap();
        let split = picograd_core::codegen::split::split_loops(&looped, 2);
        assert_eq!(
            split.map(|s| s.len()),
            Some(regions),
            "batch {batch}: {looped}"
        );
        let unopt = lower_ast(&it.ast, buf_params(&it), None, false).unwrap();
        let (got, scalar) = (run(&looped, &it), run(&unopt, &it));
        assert_eq!(
            got, scalar,
            "batch {batch}: looped and unoptimized kernels differ"
        );
        close("conv", &got, &want);
    }
}

#[test]
fn explicit_looped_upcasts_equal_the_unoptimized_kernel() {
    // Rows of 7, 14 and 49 (a 7 × 7 image, merged into one axis): every amount that does not
    // divide the row, as scalar copies and (where 4 or 8 lanes divide it) with vector lanes,
    // after a channel upcast and followed by a reduce unroll that both parts take.
    for (h, w) in [(1, 7), (1, 14), (7, 7)] {
        let (t, want) = pointwise(1, 6, 8, (h, w));
        let it = item(&t);
        let unopt = lower_ast(&it.ast, buf_params(&it), None, false).unwrap();
        let reference = run(&unopt, &it);
        close("unoptimized", &reference, &want);
        let n = h * w;
        let k = Kernel::new(&it.ast).unwrap();
        assert_eq!(k.describe(), format!("[8,{n} | 6 | ]"));
        for amount in (2..n).filter(|a| n % a != 0) {
            for lanes in [0, 4, 8].into_iter().filter(|&l| l == 0 || amount % l == 0) {
                let opts = [
                    Opt::Upcast { axis: 0, amount: 2 },
                    Opt::LoopedUpcast {
                        axis: 1,
                        amount,
                        lanes,
                    },
                    Opt::Unroll { axis: 0, amount: 3 },
                ];
                let lk = lower_ast_with(&it.ast, buf_params(&it), None, Some(&opts), false)
                    .unwrap_or_else(|e| panic!("{opts:?}: {e}"));
                let got = run(&lk, &it);
                assert_eq!(got, reference, "row {n}, {opts:?}");
            }
        }
    }
}

#[test]
fn a_looped_upcast_that_does_not_fit_is_an_error() {
    let (t, _) = pointwise(1, 6, 8, (1, 14));
    let k = Kernel::new(&item(&t).ast).unwrap();
    for bad in [
        // Divides the row, is the whole row, lanes that do not divide the amount, a reduce axis.
        Opt::LoopedUpcast {
            axis: 1,
            amount: 7,
            lanes: 0,
        },
        Opt::LoopedUpcast {
            axis: 1,
            amount: 14,
            lanes: 0,
        },
        Opt::LoopedUpcast {
            axis: 1,
            amount: 6,
            lanes: 4,
        },
        Opt::LoopedUpcast {
            axis: 2,
            amount: 4,
            lanes: 0,
        },
    ] {
        assert!(k.clone().apply_opt(bad).is_err(), "{bad:?} applied");
    }
    // Only unrolls may follow a looped remainder.
    let mut looped = k.clone();
    looped
        .apply_opt(Opt::LoopedUpcast {
            axis: 1,
            amount: 4,
            lanes: 0,
        })
        .unwrap();
    assert!(looped
        .apply_opt(Opt::Upcast { axis: 0, amount: 2 })
        .is_err());
    assert!(looped.apply_opt(Opt::Unroll { axis: 0, amount: 2 }).is_ok());
}

#[test]
fn a_batch_one_pointwise_conv_with_blocked_weights_tiles_its_merged_pixels() {
    // torch's weight layout `[cout, cin, 1, 1]`, which the scheduler copies into blocks of 8
    // channels (a leaf of two views): the kernel still merges the 5 × 7 pixels into one row of
    // 35 (the blocked weight broadcasts both), and at batch 1 — no second output axis — the
    // conv tile takes it: two channel vectors × 4 pixels, looped (35 = 8 · 4 + 3). The reduce
    // is long enough (120) for channel lanes; a short one takes pixel lanes (the test below).
    let (cin, cout, (h, w)) = (120, 16, (5, 7));
    let (xv, wv) = (data(cin * h * w, 7), data(cout * cin, 8));
    let x = Tensor::from_slice(&xv, &[1, cin, h, w]);
    let wt = Tensor::from_slice(&wv, &[cout, cin, 1, 1]);
    let t = x.conv2d(&wt, None, &ConvOpts::default());
    let cfg = OptConfig::for_vec_width(8);
    let mut items = schedule_for(&[t.lazy().contiguous()], Some(&cfg)).unwrap();
    assert!(
        items.iter().any(|i| i.layout_copy),
        "the weight is copied into channel blocks"
    );
    let it = items.pop().unwrap();
    run_schedule(&items).unwrap();
    let mut k = Kernel::new(&it.ast).unwrap();
    assert_eq!(k.describe(), format!("[{cout},{} | {cin} | ]", h * w));
    let opts = hand_coded(&mut k, &cfg);
    assert!(
        opts.contains(&Opt::Vectorize { axis: 0, amount: 8 })
            && opts
                .iter()
                .any(|o| matches!(o, Opt::LoopedUpcast { amount: 4, .. })),
        "{opts:?} -> {}",
        k.describe()
    );
    let vector = lower_ast(&it.ast, buf_params(&it), Some(&cfg), false).unwrap();
    let unopt = lower_ast(&it.ast, buf_params(&it), None, false).unwrap();
    let (got, scalar) = (run(&vector, &it), run(&unopt, &it));
    assert_eq!(got, scalar, "tiled and unoptimized kernels differ");
    let hw = h * w;
    let want: Vec<f32> = (0..cout * hw)
        .map(|o| {
            let (co, p) = (o / hw, o % hw);
            (0..cin).map(|ci| xv[ci * hw + p] * wv[co * cin + ci]).sum()
        })
        .collect();
    close("pointwise", &got, &want);
}

#[test]
fn a_short_reduce_takes_pixel_lanes_and_a_vector_tail() {
    // A batch-1 pointwise conv over 5 channels into 24, with a bias and a residual added after
    // the reduce, on 5 × 9 pixels (one row of 45): with so short a reduce the channel-lane
    // tile's epilogue (a scalar store and a scalar residual load per lane) outweighs it, so the
    // tile runs 8 channels × a vector of 8 pixels, looped (45 = 5 · 8 + 5), the tail of 5 one
    // 4-lane vector and a scalar (`strategy/orientation.rs`).
    let (cin, cout, (h, w)) = (5, 24, (5, 9));
    let hw = h * w;
    let cfg = OptConfig::for_vec_width(8);
    let (it, want) = pointwise_residual(cin, cout, (h, w), 11, &cfg);
    let mut k = Kernel::new(&it.ast).unwrap();
    assert_eq!(k.describe(), format!("[{cout},{hw} | {cin} | ]"));
    let opts = hand_coded(&mut k, &cfg);
    // The tile (the short reduce is then unrolled whole).
    assert_eq!(
        opts[..2],
        [
            Opt::Upcast { axis: 0, amount: 8 },
            Opt::LoopedUpcast {
                axis: 1,
                amount: 8,
                lanes: 8
            }
        ],
        "{}",
        k.describe()
    );
    let rem = k.remainder.as_ref().expect("a remainder kernel");
    assert_eq!(rem.kernel.vector_lanes, 4, "{}", rem.kernel.describe());
    let vector = lower_ast(&it.ast, buf_params(&it), Some(&cfg), false).unwrap();
    // Vector stores of 8 pixels in the body, of 4 in the tail, and one scalar store per
    // channel for the tail's last pixel: no store per lane of a channel vector.
    let stores =
        |want: &dyn Fn(&UOpKind) -> bool| vector.uops.iter().filter(|u| want(&u.kind)).count();
    assert_eq!(
        stores(&|k| matches!(k, UOpKind::VecStore { lanes: 8 })),
        8,
        "{vector}"
    );
    assert_eq!(
        stores(&|k| matches!(k, UOpKind::VecStore { lanes: 4 })),
        8,
        "{vector}"
    );
    assert_eq!(stores(&|k| matches!(k, UOpKind::Store)), 8, "{vector}");
    let unopt = lower_ast(&it.ast, buf_params(&it), None, false).unwrap();
    let (got, scalar) = (run(&vector, &it), run(&unopt, &it));
    assert_eq!(got, scalar, "pixel-lane and unoptimized kernels differ");
    close("pixel lanes", &got, &want);
}

#[test]
fn a_longer_reduce_takes_two_vectors_of_pixels() {
    // A pointwise conv over 48 channels into 24, with a bias and a residual, on 4 × 8 pixels:
    // the reduce is long enough that the pixel-lane tile's loads per multiply-add decide, and
    // with 16 vector registers two vectors of pixels × 6 channels (12 accumulators, 8 loads a
    // step) beat one vector × 8 channels (8 accumulators, 9 loads a step).
    let (cin, cout, (h, w)) = (48, 24, (4, 8));
    let hw = h * w;
    let cfg = OptConfig::for_vec_width(8);
    assert_eq!(cfg.vec_registers, 16);
    let (it, want) = pointwise_residual(cin, cout, (h, w), 21, &cfg);
    let mut k = Kernel::new(&it.ast).unwrap();
    assert_eq!(k.describe(), format!("[{cout},{hw} | {cin} | ]"));
    let opts = hand_coded(&mut k, &cfg);
    assert_eq!(
        opts[..3],
        [
            Opt::Upcast { axis: 0, amount: 6 },
            Opt::Vectorize { axis: 1, amount: 8 },
            Opt::Upcast { axis: 1, amount: 2 },
        ],
        "{}",
        k.describe()
    );
    // Without a register count the tile keeps one vector of pixels.
    let unknown = OptConfig {
        vec_registers: 0,
        ..cfg
    };
    let mut k1 = Kernel::new(&it.ast).unwrap();
    let one = hand_coded(&mut k1, &unknown);
    assert_eq!(
        one[..2],
        [
            Opt::Upcast { axis: 0, amount: 8 },
            Opt::Vectorize { axis: 1, amount: 8 }
        ]
    );
    let vector = lower_ast(&it.ast, buf_params(&it), Some(&cfg), false).unwrap();
    let stores = vector
        .uops
        .iter()
        .filter(|u| matches!(u.kind, UOpKind::VecStore { lanes: 8 }))
        .count();
    assert_eq!(stores, 12, "6 channels × 2 vectors:\n{vector}");
    let unopt = lower_ast(&it.ast, buf_params(&it), None, false).unwrap();
    let (got, scalar) = (run(&vector, &it), run(&unopt, &it));
    assert_eq!(got, scalar, "two-vector and unoptimized kernels differ");
    close("two vectors of pixels", &got, &want);
}

#[test]
fn a_short_strided_reduce_takes_pixel_lanes_over_its_strided_input() {
    // A 3×3 stride-2 conv from 3 channels to 32 (padding 1: 16 × 32 → 8 × 16 pixels), like a
    // CNN's first layer: a reduce of 27 taps. On a 16-lane target the channel-lane tile (32
    // channels × 4 pixels) spends 16 scalar stores per accumulator; 8 channels × 16 pixels read
    // through stride 2 (two loads and a shuffle a vector, `orientation.rs`) store vectors. On
    // a 4-lane target the channel-lane epilogue is cheap enough to keep.
    let (cin, cout, (h, w)) = (3, 32, (16, 32));
    let (xv, wv) = (data(cin * h * w, 31), data(cout * cin * 9, 32));
    let (oh, ow) = (h / 2, w / 2);
    let want: Vec<f32> = (0..cout * oh * ow)
        .map(|o| {
            let (co, oy, ox) = (o / (oh * ow), o / ow % oh, o % ow);
            let mut acc = 0f32;
            for ci in 0..cin {
                for ky in 0..3 {
                    for kx in 0..3 {
                        let (iy, ix) = ((2 * oy + ky) as i64 - 1, (2 * ox + kx) as i64 - 1);
                        if iy >= 0 && ix >= 0 && (iy as usize) < h && (ix as usize) < w {
                            acc += xv[(ci * h + iy as usize) * w + ix as usize]
                                * wv[((co * cin + ci) * 3 + ky) * 3 + kx];
                        }
                    }
                }
            }
            acc
        })
        .collect();
    for (v, pixel_lanes) in [(16, true), (4, false)] {
        let cfg = OptConfig::for_vec_width(v);
        let x = Tensor::from_slice(&xv, &[1, cin, h, w]);
        let wt = Tensor::from_slice(&wv, &[cout, cin, 3, 3]);
        let y = x.conv2d(&wt, None, &ConvOpts::default().padding(1).stride(&[2, 2]));
        let mut items = schedule_for(&[y.lazy().contiguous()], Some(&cfg)).unwrap();
        let it = items.pop().unwrap();
        run_schedule(&items).unwrap();
        let vector = lower_ast(&it.ast, buf_params(&it), Some(&cfg), false).unwrap();
        let count =
            |f: &dyn Fn(&UOpKind) -> bool| vector.uops.iter().filter(|u| f(&u.kind)).count();
        let vec_stores =
            count(&|k| matches!(k, UOpKind::VecStore { lanes } if usize::from(*lanes) == v));
        let scalar_stores = count(&|k| matches!(k, UOpKind::Store));
        if pixel_lanes {
            assert_eq!(
                (vec_stores, scalar_stores),
                (8, 0),
                "8 channels × 16 pixels:\n{vector}"
            );
        } else {
            assert_eq!(vec_stores, 0, "channel lanes store lane by lane:\n{vector}");
        }
        let unopt = lower_ast(&it.ast, buf_params(&it), None, false).unwrap();
        let (got, scalar) = (run(&vector, &it), run(&unopt, &it));
        assert_eq!(
            got, scalar,
            "{v} lanes: tiled and unoptimized kernels differ"
        );
        close("strided pixel lanes", &got, &want);
    }
}

/// A batch-1 pointwise conv from `cin` channels to `cout` over `h × w` pixels with a bias and a
/// residual added after the reduce (seeded data from `seed`), scheduled for `cfg`: its last
/// kernel (the ones before it run) and a naive loop's values.
fn pointwise_residual(
    cin: usize,
    cout: usize,
    (h, w): (usize, usize),
    seed: u32,
    cfg: &OptConfig,
) -> (ScheduleItem, Vec<f32>) {
    let hw = h * w;
    let (xv, wv) = (data(cin * hw, seed), data(cout * cin, seed + 1));
    let (bv, rv) = (data(cout, seed + 2), data(cout * hw, seed + 3));
    let x = Tensor::from_slice(&xv, &[1, cin, h, w]);
    let wt = Tensor::from_slice(&wv, &[cout, cin, 1, 1]);
    let b = Tensor::from_slice(&bv, &[cout]);
    let r = Tensor::from_slice(&rv, &[1, cout, h, w]);
    let t = x.conv2d(&wt, Some(&b), &ConvOpts::default()).add(&r);
    let mut items = schedule_for(&[t.lazy().contiguous()], Some(cfg)).unwrap();
    let it = items.pop().unwrap();
    run_schedule(&items).unwrap();
    let want = (0..cout * hw)
        .map(|o| {
            let (co, p) = (o / hw, o % hw);
            let sum: f32 = (0..cin).map(|ci| xv[ci * hw + p] * wv[co * cin + ci]).sum();
            sum + bv[co] + rv[o]
        })
        .collect();
    (it, want)
}

#[test]
fn a_long_reduce_the_channel_tile_would_block_takes_pixel_lanes() {
    // A batch-1 pointwise conv from 240 channels to 64 over 7 × 7 pixels on 16 lanes (the shape
    // of mobilenet_v2's late pointwise convs, smaller). The channel-lane tile (4 vectors × 2
    // pixels) feeds each weight to 2 pixels only, so its 240-step reduce would run in 4 blocks
    // (`strategy/block.rs`), paying its lane-by-lane epilogue 4 times and loading the partial
    // sums back 3 times; the orientation model counts that and takes 8 channels × a vector of
    // 16 pixels, looped (49 = 3 · 16 + 1). Without the blocks in the model it kept channel
    // lanes: the pixel tile streams the 47 KB input from the L2 once per 8 channels.
    let cfg = OptConfig::for_vec_width(16);
    let (t, want) = pointwise(1, 240, 64, (7, 7));
    let mut items = schedule_for(&[t.lazy().contiguous()], Some(&cfg)).unwrap();
    let it = items.pop().unwrap();
    run_schedule(&items).unwrap();
    let mut k = Kernel::new(&it.ast).unwrap();
    assert_eq!(k.describe(), "[64,49 | 240 | ]");
    let opts = hand_coded(&mut k, &cfg);
    assert_eq!(
        opts[..2],
        [
            Opt::Upcast { axis: 0, amount: 8 },
            Opt::LoopedUpcast {
                axis: 1,
                amount: 16,
                lanes: 16
            }
        ],
        "{opts:?} -> {}",
        k.describe()
    );
    assert!(
        !opts.iter().any(|o| matches!(o, Opt::ReduceBlock { .. })),
        "{opts:?}"
    );
    let vector = lower_ast(&it.ast, buf_params(&it), Some(&cfg), false).unwrap();
    let unopt = lower_ast(&it.ast, buf_params(&it), None, false).unwrap();
    let (got, scalar) = (run(&vector, &it), run(&unopt, &it));
    assert_eq!(got, scalar, "pixel-lane and unoptimized kernels differ");
    close("long pointwise", &got, &want);
}
