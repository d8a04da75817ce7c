//! Blocked reduces (`Opt::ReduceBlock`): the outermost reduce loop runs in blocks from a loop
//! outside the output loops, the partial sums carried through the output, the bias, residual
//! and ReLU applied once after the last block. Checked on the interpreter against the
//! unoptimized kernel (bit for bit) and a naive reference, on a pointwise conv with a bias, a
//! residual and a ReLU over a reduce of 45 channels that no block divides (a shorter last
//! block), in every lowering path: scalar accumulators, pixel lanes (consecutive: vector loads
//! back), channel lanes (strided: lane-by-lane loads back), a looped remainder, an unrolled
//! reduce; the heuristic's pick when the reused weights outgrow the L1; and the opt's refusals.
//! A golden `PICOGRAD_DEBUG=3` listing (`tests/data/reduce_block_conv.txt`) pins the blocked
//! kernel's UOps.

#[path = "common/interp_run.rs"]
mod interp_run;

use interp_run::{run, seeded_data as data};
use picograd_core::codegen::kernel::{Kernel, Opt};
use picograd_core::codegen::lower::{buf_params, lower_ast, lower_ast_with};
use picograd_core::codegen::opt::OptConfig;
use picograd_core::codegen::strategy::hand_coded;
use picograd_core::realize::run_schedule;
use picograd_core::schedule::{schedule, schedule_for, ScheduleItem};
use picograd_core::tensor::ConvOpts;
use picograd_core::Tensor;

const CIN: usize = 45;
const COUT: usize = 24;
const PIXELS: usize = 13;

/// `relu(conv1x1(x, w) + b + r)` over `x [1, CIN, 1, PIXELS]`, the weights stored `[cin, cout]`
/// (contiguous along the output channels), as one schedule item, and the naive result.
fn conv_item() -> (ScheduleItem, Vec<f32>) {
    let (x, w, b, r) = (
        data(CIN * PIXELS, 1),
        data(CIN * COUT, 2),
        data(COUT, 3),
        data(COUT * PIXELS, 4),
    );
    let want: Vec<f32> = (0..COUT * PIXELS)
        .map(|o| {
            let (co, p) = (o / PIXELS, o % PIXELS);
            let s: f32 = (0..CIN)
                .map(|ci| x[ci * PIXELS + p] * w[ci * COUT + co])
                .sum();
            (s + b[co] + r[o]).max(0.0)
        })
        .collect();
    let xt = Tensor::from_slice(&x, &[1, CIN, 1, PIXELS]);
    let wt = Tensor::from_slice(&w, &[CIN, COUT, 1, 1]).permute(&[1, 0, 2, 3]);
    let bt = Tensor::from_slice(&b, &[COUT]);
    let rt = Tensor::from_slice(&r, &[1, COUT, 1, PIXELS]);
    let y = (xt.conv2d(&wt, Some(&bt), &ConvOpts::default()) + rt).relu();
    let mut items = schedule(&[y.lazy().contiguous()]).unwrap();
    assert_eq!(
        items.len(),
        1,
        "conv, bias, residual and ReLU fuse into one kernel"
    );
    (items.pop().unwrap(), want)
}

fn close(name: &str, got: &[u32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{name}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let g = f32::from_bits(*g);
        assert!(
            (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
            "{name}[{i}]: {g} vs {w}"
        );
    }
}

fn loops(listing: &str) -> usize {
    listing.lines().filter(|l| l.contains(" LOOP ")).count()
}

#[test]
fn explicit_blocks_equal_the_unoptimized_kernel_in_every_path() {
    let (it, want) = conv_item();
    assert_eq!(
        Kernel::new(&it.ast).unwrap().describe(),
        format!("[{COUT},{PIXELS} | {CIN} | ]")
    );
    let unopt = lower_ast(&it.ast, buf_params(&it), None, false).unwrap();
    let reference = run(&unopt, &it);
    close("unoptimized", &reference, &want);
    let block = |amount| Opt::ReduceBlock { axis: 0, amount };
    let plans: Vec<Vec<Opt>> = vec![
        // Scalar accumulators: 45 = 6 blocks of 7, then one of 3.
        vec![block(7)],
        // A block of one iteration (45 blocks), and one short of the whole loop (44 + 1).
        vec![block(1)],
        vec![block(44)],
        // Pixel lanes: 8 consecutive outputs, loaded back with one vector load; a scalar tail.
        vec![
            Opt::Upcast { axis: 0, amount: 4 },
            Opt::Vectorize { axis: 1, amount: 8 },
            block(10),
        ],
        // Channel lanes: 8 outputs a row apart, loaded back lane by lane.
        vec![
            Opt::Vectorize { axis: 0, amount: 8 },
            Opt::Upcast {
                axis: 1,
                amount: 13,
            },
            block(16),
        ],
        // A looped remainder over the pixels (4 per step, a tail of 1); the block applies to
        // both parts.
        vec![
            Opt::Vectorize { axis: 0, amount: 8 },
            Opt::LoopedUpcast {
                axis: 1,
                amount: 4,
                lanes: 0,
            },
            block(9),
        ],
        // An unrolled reduce: 15 steps of 3 channels, blocks of 4 steps (4, 4, 4, 3).
        vec![
            Opt::Upcast { axis: 0, amount: 8 },
            Opt::Unroll { axis: 0, amount: 3 },
            block(4),
        ],
    ];
    for opts in plans {
        let lk = lower_ast_with(&it.ast, buf_params(&it), None, Some(&opts), false).unwrap();
        let listing = format!("{lk}");
        // The block loop, the reduce loop over one block, the resume and the last-block parts
        // (one-iteration loops) sit around and inside the output loops.
        assert!(
            loops(&listing) >= loops(&format!("{unopt}")) + 2,
            "{opts:?}: no block loops\n{listing}"
        );
        let got = run(&lk, &it);
        assert_eq!(got, reference, "{opts:?}: blocked and unoptimized differ");
    }
}

#[test]
fn the_blocked_uops_are_pinned() {
    // The `PICOGRAD_DEBUG=3` listing of the conv blocked by 7 with 8 pixel lanes (regenerate
    // with `PICOGRAD_BLESS=1` after a deliberate change): the block loop outermost, the reduce
    // loop over one block (`[7·b, min(7·b + 7, 45))`), the accumulators loaded back in a loop
    // of one iteration on every block but the first, the raw sums stored, and the bias,
    // residual and ReLU in a loop of one iteration on the last block.
    let (it, _) = conv_item();
    let opts = [
        Opt::Vectorize { axis: 1, amount: 8 },
        Opt::ReduceBlock { axis: 0, amount: 7 },
    ];
    let lk = lower_ast_with(&it.ast, buf_params(&it), None, Some(&opts), false).unwrap();
    let listing = format!("{lk}");
    let path = format!(
        "{}/tests/data/reduce_block_conv.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    if std::env::var("PICOGRAD_BLESS").is_ok() {
        std::fs::write(&path, &listing).unwrap();
    }
    let golden = std::fs::read_to_string(&path).unwrap();
    assert_eq!(listing, golden, "the blocked UOps changed");
}

#[test]
fn the_heuristic_blocks_a_long_reduce_whose_weights_outgrow_the_l1() {
    // A 7 × 7 pointwise conv over 301 channels to 64, with a bias, a residual and a ReLU, its
    // weights copied into channel blocks as the scheduler lays them out for 8 lanes: the conv
    // tile takes 32 channels × 2 pixels (each weight feeds 2 multiply-adds), whose operands
    // over the whole reduce (301 × (32 + 2) × 4 bytes) outgrow the default 32 KiB L1, so the
    // reduce runs in blocks — 301 is no multiple of them, so the last block is shorter.
    let (cin, cout, px) = (301, 64, 49);
    let (x, w, b, r) = (
        data(cin * px, 5),
        data(cout * cin, 6),
        data(cout, 7),
        data(cout * px, 8),
    );
    let want: Vec<f32> = (0..cout * px)
        .map(|o| {
            let (co, p) = (o / px, o % px);
            let s: f32 = (0..cin).map(|ci| x[ci * px + p] * w[co * cin + ci]).sum();
            (s + b[co] + r[o]).max(0.0)
        })
        .collect();
    let xt = Tensor::from_slice(&x, &[1, cin, 7, 7]);
    let wt = Tensor::from_slice(&w, &[cout, cin, 1, 1]);
    let bt = Tensor::from_slice(&b, &[cout]);
    let rt = Tensor::from_slice(&r, &[1, cout, 7, 7]);
    let y = (xt.conv2d(&wt, Some(&bt), &ConvOpts::default()) + rt).relu();
    let cfg = OptConfig::for_vec_width(8);
    let mut items = schedule_for(&[y.lazy().contiguous()], Some(&cfg)).unwrap();
    let it = items.pop().unwrap();
    run_schedule(&items).unwrap();
    let mut k = Kernel::new(&it.ast).unwrap();
    let opts = hand_coded(&mut k, &cfg);
    let Some(Opt::ReduceBlock { amount, .. }) = opts.last().copied() else {
        panic!("no block: {opts:?} -> {}", k.describe());
    };
    assert!(
        cin % amount != 0 && cin.div_ceil(amount) >= 2,
        "{opts:?} -> {}",
        k.describe()
    );
    assert!(k.describe().contains(&format!("reduce blocks of {amount}")));
    let lk = lower_ast(&it.ast, buf_params(&it), Some(&cfg), false).unwrap();
    let unopt = lower_ast(&it.ast, buf_params(&it), None, false).unwrap();
    let got = run(&lk, &it);
    assert_eq!(got, run(&unopt, &it), "blocked and unoptimized differ");
    close("heuristic", &got, &want);
    // Without a data cache nothing is blocked; with a 256 KiB L1 the weights fit.
    for cfg in [
        OptConfig::small_device(),
        cfg.with_caches(256 * 1024, 1024 * 1024),
    ] {
        let mut items = schedule_for(&[y.lazy().contiguous()], Some(&cfg)).unwrap();
        let mut k = Kernel::new(&items.pop().unwrap().ast).unwrap();
        let opts = hand_coded(&mut k, &cfg);
        assert!(k.reduce_block.is_none(), "{opts:?} -> {}", k.describe());
    }
    // The conv above at 8 × 13 pixels over 45 channels: its tile feeds each weight to 8
    // pixels, so even a 2 KiB L1 (which its operands outgrow) gets no block.
    let (it, _) = conv_item();
    let mut k = Kernel::new(&it.ast).unwrap();
    let opts = hand_coded(&mut k, &cfg.with_caches(2048, 64 * 1024));
    assert!(k.reduce_block.is_none(), "{opts:?} -> {}", k.describe());
}

#[test]
fn a_block_is_refused_where_it_would_change_a_value() {
    let (it, _) = conv_item();
    let fits = |opts: &[Opt]| {
        let mut k = Kernel::new(&it.ast).unwrap();
        opts.iter().try_for_each(|o| k.apply_opt(*o)).is_ok()
    };
    let block = |axis, amount| Opt::ReduceBlock { axis, amount };
    assert!(fits(&[block(0, 7)]));
    // The whole loop (one block), no iterations per block, and an unroll after the block
    // (it would reshape the loop the block counts).
    assert!(!fits(&[block(0, CIN)]));
    assert!(!fits(&[block(0, 0)]));
    assert!(!fits(&[block(0, 7), Opt::Unroll { axis: 0, amount: 3 }]));
    assert!(!fits(&[block(0, 7), block(0, 5)]));
    // A max reduce (its start is not the zero a first block resumes from) and an elementwise
    // kernel.
    let x = Tensor::from_slice(&data(6 * 40, 5), &[6, 40]);
    let max = schedule(&[x.max(&[1], false).lazy().contiguous()]).unwrap();
    let mut k = Kernel::new(&max.last().unwrap().ast).unwrap();
    assert!(k.apply_opt(block(0, 8)).is_err());
    let add = schedule(&[(&x + &x).lazy().contiguous()]).unwrap();
    let mut k = Kernel::new(&add.last().unwrap().ast).unwrap();
    assert!(k.apply_opt(block(0, 8)).is_err());
}
