//! Kernel optimizations (upcast of output axes, unroll of reduce axes) change how a kernel is
//! lowered, never what it computes: each optimized kernel runs on the interpreter and on compiled
//! C and must give bit-identical results to the unoptimized kernel.

use std::sync::Arc;

#[path = "common/loop_depths.rs"]
mod loop_depths;

use picograd::codegen::kernel::{Kernel, Opt};
use picograd::codegen::linearizer::linearize;
use picograd::codegen::lower::{buf_params, lower_ast, lower_ast_with};
use picograd::codegen::uops::LinearKernel;
use picograd::device::{Buffer, Device};
use picograd::ops::{AluOp, ReduceOp};
use picograd::schedule::{schedule, schedule_for, ScheduleItem};
use picograd::Tensor;

use loop_depths::depths;

/// Runs `item` lowered with `opts` on `dev`, returning the output bytes.
fn run(item: &ScheduleItem, opts: &[Opt], dev: &Arc<dyn Device>) -> Vec<u8> {
    run_lowered(item, opts, dev, false)
}

/// [`run`], with multiply-accumulates `fused` or not.
fn run_lowered(item: &ScheduleItem, opts: &[Opt], dev: &Arc<dyn Device>, fused: bool) -> Vec<u8> {
    let mut k = Kernel::new(&item.ast).unwrap();
    for o in opts {
        k.apply_opt(*o).unwrap();
    }
    assert_eq!(
        k.rank() - k.first_upcast,
        opts.len(),
        "every opt adds one unrolled axis: {}",
        k.describe()
    );
    let mut lk = lower_ast_with(&item.ast, buf_params(item), None, Some(opts), fused).unwrap();
    lk.name = format!("opt_{}", k.name());
    use picograd::codegen::uops::UOpKind;
    let loops = lk.uops.iter().filter(|u| u.kind == UOpKind::Loop).count();
    let looped = k.full_shape[..k.first_upcast]
        .iter()
        .filter(|d| d.as_const() != Some(1))
        .count();
    // Loops over padded reads are split into border and interior parts (`pad_bounds.rs`),
    // one-iteration parts peeled into straight-line code: there, no more loops nest than the
    // kernel has looped axes. Without padding, each looped axis is exactly one loop.
    let padded = item
        .ast
        .nodes()
        .iter()
        .any(|n| matches!(n.op(), picograd::ast::AstOp::Load { st, .. } if st.has_mask()));
    if padded {
        let mut depth = 0usize;
        let mut deepest = 0usize;
        for u in &lk.uops {
            match u.kind {
                UOpKind::Loop => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                UOpKind::EndLoop => depth -= 1,
                _ => {}
            }
        }
        assert!(
            deepest <= looped,
            "unrolled axes must not loop: {} ({deepest} loops deep)",
            k.describe()
        );
    } else {
        assert_eq!(
            loops,
            looped,
            "unrolled axes must not loop: {}",
            k.describe()
        );
    }
    run_linear(item, &lk, dev)
}

/// Runs the lowered kernel `lk` of `item` on `dev`, returning the output bytes.
fn run_linear(item: &ScheduleItem, lk: &LinearKernel, dev: &Arc<dyn Device>) -> Vec<u8> {
    let prog = dev.compile(lk).unwrap();
    let out = Buffer::new(dev.clone(), item.out.dtype(), lk.bufs[0].size).unwrap();
    let ins: Vec<Arc<Buffer>> = item
        .inputs
        .iter()
        .map(|i| {
            let src = i.realized().unwrap();
            let b = Buffer::new(dev.clone(), src.dtype(), src.len()).unwrap();
            b.copy_in(&src.to_bytes().unwrap()).unwrap();
            Arc::new(b)
        })
        .collect();
    let mut ids = vec![out.id()];
    ids.extend(ins.iter().map(|b| b.id()));
    prog.run(&ids, &[]).unwrap();
    out.to_bytes().unwrap()
}

/// The one kernel of `t`, scheduled without the host's layout transforms (a conv's weights
/// would get channel blocks on some hosts and not others: 16-lane hosts block a 12-channel
/// conv over an 8-wide row, 8-lane ones do not), so each test lowers the same AST everywhere.
fn single_item(t: &Tensor) -> ScheduleItem {
    let items = schedule_for(&[t.lazy().contiguous()], None).unwrap();
    assert_eq!(items.len(), 1, "expected one kernel");
    items.into_iter().next().unwrap()
}

fn data(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.37)
        .collect()
}

fn devices() -> Vec<Arc<dyn Device>> {
    picograd::init();
    vec![
        picograd::context::interp(),
        picograd::runtime::clang().expect("no C compiler: compiled-opt tests cannot run"),
    ]
}

#[test]
fn upcast_of_output_axes_keeps_results() {
    // Odd sizes: 7 rows (prime), 6 columns; upcast splits must divide.
    let a = Tensor::from_slice(&data(42), &[7, 6]);
    let b = Tensor::from_slice(&data(6), &[1, 6]);
    let y = a
        .try_alu(AluOp::Mul, &[&b])
        .unwrap()
        .try_alu(AluOp::Add, &[&a])
        .unwrap()
        .try_permute(&[1, 0])
        .unwrap();
    let item = single_item(&y);
    let k = Kernel::new(&item.ast).unwrap();
    let sizes: Vec<i64> = k.full_shape.iter().map(|d| d.as_const().unwrap()).collect();
    for dev in devices() {
        let base = run(&item, &[], &dev);
        for (axis, &s) in sizes.iter().enumerate().take(k.first_reduce) {
            for amount in [2, 3, 7] {
                if s % amount == 0 {
                    assert_eq!(
                        run(
                            &item,
                            &[Opt::Upcast {
                                axis,
                                amount: amount as usize
                            }],
                            &dev
                        ),
                        base,
                        "upcast {axis} by {amount} on {}",
                        dev.name()
                    );
                }
            }
        }
    }
}

#[test]
fn unroll_of_reduce_axes_keeps_results() {
    // A matmul-shaped reduce with a reduce axis of 6 and an output axis of 5 (not a multiple of 2).
    let a = Tensor::from_slice(&data(30), &[5, 1, 6]);
    let b = Tensor::from_slice(&data(24), &[1, 4, 6]);
    let y = a
        .try_alu(AluOp::Mul, &[&b])
        .unwrap()
        .try_reduce(ReduceOp::Sum, Some(&[2]), false)
        .unwrap();
    let item = single_item(&y);
    for dev in devices() {
        let base = run(&item, &[], &dev);
        for opts in [
            vec![Opt::Unroll { axis: 0, amount: 2 }],
            vec![Opt::Unroll { axis: 0, amount: 3 }],
            vec![Opt::Unroll { axis: 0, amount: 6 }],
            vec![
                Opt::Upcast { axis: 0, amount: 5 },
                Opt::Unroll { axis: 0, amount: 2 },
            ],
            vec![
                Opt::Upcast { axis: 1, amount: 2 },
                Opt::Upcast { axis: 0, amount: 5 },
            ],
        ] {
            // Summation order inside an unrolled group is unchanged (each copy folds into one
            // accumulator in index order), so results are bit-identical.
            assert_eq!(run(&item, &opts, &dev), base, "{opts:?} on {}", dev.name());
        }
    }
}

#[test]
fn bad_opts_are_errors() {
    let a = Tensor::from_slice(&data(35), &[5, 7]);
    let y = a.try_reduce(ReduceOp::Sum, Some(&[1]), false).unwrap();
    let mut k = Kernel::new(&single_item(&y).ast).unwrap();
    let e = k
        .apply_opt(Opt::Unroll { axis: 0, amount: 2 })
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not split by 2"), "{e}");
    let e = k
        .apply_opt(Opt::Upcast { axis: 3, amount: 5 })
        .unwrap_err()
        .to_string();
    assert!(e.contains("no such axis"), "{e}");
}

// ---- the heuristic optimizer, hoisting and thread splitting ----

use picograd::codegen::opt::OptConfig;
use picograd::codegen::strategy::hand_coded;
use picograd::codegen::uops::UOpKind;
use picograd::{ConvOpts, Padding};

/// Kernels of awkward sizes: primes, 1, and sizes that are not multiples of a vector width.
fn awkward_items() -> Vec<ScheduleItem> {
    // `init` installs the default device; done first, or a test thread running it meanwhile
    // could put one operand of a matmul below on another device than the other.
    picograd::init();
    let mut items = Vec::new();
    for (m, k, n) in [
        (1, 5, 7),
        (13, 17, 19),
        (16, 3, 33),
        (24, 7, 48),
        (1, 64, 1),
    ] {
        let a = Tensor::from_slice(&data(m * k), &[m, k]);
        let b = Tensor::from_slice(&data(k * n), &[k, n]);
        items.push(single_item(&a.matmul(&b)));
        let bt = Tensor::from_slice(&data(k * n), &[n, k]);
        items.push(single_item(&a.matmul(&bt.transpose(0, 1)).relu()));
    }
    for n in [1, 7, 37, 64, 100, 131] {
        let x = Tensor::from_slice(&data(n), &[n]);
        items.push(single_item(&(x.mul(2.0).add(1.0).relu().mul(x.sigmoid()))));
    }
    let x = Tensor::from_slice(&data(2 * 3 * 7 * 9), &[2, 3, 7, 9]);
    let w = Tensor::from_slice(&data(5 * 3 * 3 * 3), &[5, 3, 3, 3]);
    let opts = ConvOpts {
        padding: Padding::All(1),
        ..ConvOpts::default()
    };
    let y = x.conv2d(&w, None, &opts).relu();
    items.push(last_item(&y));
    items
}

/// The last kernel of `t`'s schedule, after running the ones before it (a padded conv input
/// is its own kernel), so that all its inputs are realized.
fn last_item(t: &Tensor) -> ScheduleItem {
    let mut items = schedule(&[t.lazy().contiguous()]).unwrap();
    let last = items.pop().unwrap();
    picograd::realize::run_schedule(&items).unwrap();
    last
}

/// [`last_item`] scheduled without layout transforms.
fn last_plain_item(t: &Tensor) -> ScheduleItem {
    let mut items = picograd::schedule::schedule_for(&[t.lazy().contiguous()], None).unwrap();
    let last = items.pop().unwrap();
    picograd::realize::run_schedule(&items).unwrap();
    last
}

fn realize_inputs(items: &[ScheduleItem]) {
    for it in items {
        for i in &it.inputs {
            assert!(
                i.realized().is_some(),
                "inputs of test kernels are realized"
            );
        }
    }
}

#[test]
fn heuristic_opts_keep_results_on_awkward_sizes() {
    let items = awkward_items();
    realize_inputs(&items);
    for dev in devices() {
        for item in &items {
            let base = run(item, &[], &dev);
            for width in [4, 8, 16] {
                let mut k = Kernel::new(&item.ast).unwrap();
                let opts = hand_coded(&mut k, &OptConfig::for_vec_width(width));
                assert_eq!(
                    run(item, &opts, &dev),
                    base,
                    "{opts:?} ({}) on {}",
                    k.describe(),
                    dev.name()
                );
            }
        }
    }
}

/// With fused multiply-adds (one rounding per step) the same holds, and the interpreter and
/// compiled C agree bit for bit on every fused kernel.
#[test]
fn fused_kernels_keep_results_on_awkward_sizes_on_both_backends() {
    let items = awkward_items();
    realize_inputs(&items);
    let devs = devices();
    for item in &items {
        let base = run_lowered(item, &[], &devs[0], true);
        for dev in &devs {
            assert_eq!(run_lowered(item, &[], dev, true), base, "on {}", dev.name());
            for width in [4, 8, 16] {
                let mut k = Kernel::new(&item.ast).unwrap();
                let opts = hand_coded(&mut k, &OptConfig::for_vec_width(width));
                assert_eq!(
                    run_lowered(item, &opts, dev, true),
                    base,
                    "fused {opts:?} ({}) on {}",
                    k.describe(),
                    dev.name()
                );
            }
        }
    }
}

#[test]
fn heuristic_tiles_matmuls_and_vectorizes_elementwise() {
    let a = Tensor::from_slice(&data(64 * 32), &[64, 32]);
    let b = Tensor::from_slice(&data(32 * 48), &[32, 48]);
    let mut k = Kernel::new(&single_item(&a.matmul(&b)).ast).unwrap();
    let opts = hand_coded(&mut k, &OptConfig::for_vec_width(8));
    // A 2-D register tile of 4 rows × 2 vectors of 8 columns (fewest loads per multiply-add
    // within 8 vector accumulators): upcast axes rows, lanes and vector groups.
    assert_eq!(
        k.rank() - k.first_upcast,
        3,
        "a 2-D register tile: {}",
        k.describe()
    );
    let tile: i64 = (k.first_upcast..k.rank())
        .map(|a| k.full_shape[a].as_const().unwrap_or(0))
        .product();
    assert_eq!(tile, 4 * 16, "a 4 × 16 tile: {}", k.describe());
    assert!(opts.len() >= 2, "{opts:?}");
    let x = Tensor::from_slice(&data(4096), &[4096]);
    let mut k = Kernel::new(&single_item(&x.relu()).ast).unwrap();
    let opts = hand_coded(&mut k, &OptConfig::for_vec_width(8));
    // The output is f32 and contiguous: the upcast is vector lanes (`Opt::Vectorize`).
    assert_eq!(opts, vec![Opt::Vectorize { axis: 0, amount: 8 }]);
}

/// Softmax's sum of exps over rows (no operand broadcast): the rows take vector lanes, one row
/// per lane summed in order, so the exps run as vectors and the result keeps its bits on both
/// backends.
#[test]
fn row_sums_take_vector_lanes_and_keep_their_bits() {
    picograd::init();
    let x = Tensor::from_slice(&data(64 * 24), &[64, 24]);
    let y = x.exp().sum(&[1], false);
    let item = single_item(&y);
    let mut k = Kernel::new(&item.ast).unwrap();
    let opts = hand_coded(&mut k, &OptConfig::for_vec_width(8));
    assert_eq!(
        opts,
        vec![Opt::Vectorize { axis: 0, amount: 8 }],
        "{}",
        k.describe()
    );
    realize_inputs(std::slice::from_ref(&item));
    for dev in devices() {
        let base = run(&item, &[], &dev);
        assert_eq!(run(&item, &opts, &dev), base, "on {}", dev.name());
    }
}

/// A long float sum splits into block sums in the graph (README, "Sizes, NaN and long-running
/// processes"), before any kernel is optimized: each of its kernels — the block sums, the
/// leftover's sum, the sum of block sums — gives the same bits optimized as unoptimized, with
/// and without fused multiply-adds.
#[test]
fn heuristic_opts_keep_results_of_split_reductions() {
    picograd::init();
    let len = 70_001; // above the split threshold, with a leftover
    let a = Tensor::from_slice(&data(3 * len), &[3, len]);
    let b = Tensor::from_slice(&data(len), &[1, len]);
    let dots = a
        .try_alu(AluOp::Mul, &[&b.try_expand(&[3, len]).unwrap()])
        .unwrap()
        .try_reduce(ReduceOp::Sum, Some(&[1]), false)
        .unwrap();
    let items = schedule(&[dots.lazy().contiguous()]).unwrap();
    assert_eq!(items.len(), 3, "blocks, leftover, sum of blocks");
    let devs = devices();
    let mut optimized = false;
    for item in &items {
        for fused in [false, true] {
            let base = run_lowered(item, &[], &devs[0], fused);
            for dev in &devs {
                assert_eq!(
                    run_lowered(item, &[], dev, fused),
                    base,
                    "on {}",
                    dev.name()
                );
                for width in [4, 8, 16] {
                    let mut k = Kernel::new(&item.ast).unwrap();
                    let opts = hand_coded(&mut k, &OptConfig::for_vec_width(width));
                    optimized |= !opts.is_empty();
                    assert_eq!(
                        run_lowered(item, &opts, dev, fused),
                        base,
                        "fused={fused} {opts:?} ({}) on {}",
                        k.describe(),
                        dev.name()
                    );
                }
            }
        }
        // Realize this kernel's output so the next kernel's inputs exist.
        picograd::realize::run_schedule(std::slice::from_ref(item)).unwrap();
    }
    assert!(
        optimized,
        "the heuristic optimized none of the split kernels"
    );
}

#[test]
fn hoisting_leaves_no_invariant_arithmetic_in_loops() {
    for item in awkward_items() {
        let cfg = OptConfig::for_vec_width(8);
        // The whole sequence of passes (hand-coded opts, linearize, then hoist).
        let lk = lower_ast(&item.ast, buf_params(&item), Some(&cfg), false).unwrap();
        let depth = depths(&lk);
        // A loop's counter lives one level deeper than the Loop UOp itself.
        let defined_at = |s: u32| {
            let u = &lk.uops[s as usize];
            depth[s as usize] + usize::from(u.kind == UOpKind::Loop)
        };
        for (i, u) in lk.uops.iter().enumerate() {
            if matches!(u.kind, UOpKind::Alu(_)) && u.dtype.is_int() && depth[i] > 0 {
                let need = u.src.iter().map(|&s| defined_at(s)).max().unwrap_or(0);
                assert_eq!(need, depth[i], "uop {i} could move out of its loop:\n{lk}");
            }
        }
    }
}

#[test]
fn threaded_kernels_equal_single_threaded_ones() {
    picograd::init();
    let Ok(clang) = picograd::runtime::Clang::new() else {
        panic!("no C compiler: threaded tests cannot run");
    };
    let one: Arc<dyn Device> =
        Arc::new(picograd::runtime::Clang::new().unwrap().with_threads(1, 0));
    let three: Arc<dyn Device> = Arc::new(clang.with_threads(3, 0));
    let items = awkward_items();
    realize_inputs(&items);
    for item in &items {
        let mut k = Kernel::new(&item.ast).unwrap();
        let opts = hand_coded(&mut k, &OptConfig::for_vec_width(8));
        let base = run(item, &opts, &one);
        assert_eq!(
            run(item, &opts, &three),
            base,
            "{} split over 3",
            k.describe()
        );
    }
    // The split kernel really takes the core arguments.
    let x = Tensor::from_slice(&data(37), &[37]);
    let k = Kernel::new(&single_item(&x.relu()).ast).unwrap();
    let lk = linearize(
        &k,
        buf_params(&single_item(&x.relu())),
        k.name(),
        false,
        false,
    )
    .unwrap();
    let src = picograd::codegen::c::render_kernel_split(&lk, 2, &Default::default()).unwrap();
    assert!(src.contains("int32_t core_id, int32_t core_count"), "{src}");
}

/// A kernel over `[3, 14]` whose axes do not merge (the input is read transposed): 2 cores
/// split the 14-iteration loop inside (3 blocks over 2 cores would give one of them 2), 3
/// cores the outer one; both compute what one core does.
#[test]
fn threads_split_the_loop_that_divides_evenly() {
    use picograd::codegen::split::split_loops;
    use picograd::codegen::uops::UOpKind;
    picograd::init();
    let x = Tensor::from_slice(&data(42), &[14, 3]).permute(&[1, 0]);
    let item = single_item(&(x.relu() + 1.0));
    let k = Kernel::new(&item.ast).unwrap();
    assert_eq!(
        k.first_reduce,
        2,
        "the axes must not merge: {}",
        k.describe()
    );
    let lk = linearize(&k, buf_params(&item), k.name(), false, false).unwrap();
    let trips = |i: usize| match lk.uops[lk.uops[i].src[1] as usize].kind {
        UOpKind::Const(v) => v.as_i64(),
        ref other => panic!("loop {i} ends at {other:?}"),
    };
    assert_eq!(trips(split_loops(&lk, 2).unwrap()[0]), 14, "{lk}");
    assert_eq!(trips(split_loops(&lk, 3).unwrap()[0]), 3, "{lk}");
    realize_inputs(std::slice::from_ref(&item));
    let clang = |threads| -> Arc<dyn Device> {
        let dev =
            picograd::runtime::Clang::new().expect("no C compiler: threaded tests cannot run");
        Arc::new(dev.with_threads(threads, 0))
    };
    let base = run(&item, &[], &clang(1));
    for threads in [2, 3] {
        assert_eq!(
            run(&item, &[], &clang(threads)),
            base,
            "split over {threads}"
        );
    }
}

/// A batch-1 conv to 12 channels whose tile loops 8 channels per step with a tail of 4: the
/// loop and the tail are sibling loops, and threads split each (`split_loops` finds two
/// regions); 2 and 3 cores compute what one does, bit for bit.
#[test]
fn threads_split_a_loop_and_its_tail() {
    use picograd::codegen::split::split_loops;
    picograd::init();
    let x = Tensor::from_slice(&data(3 * 10 * 10), &[1, 3, 10, 10]);
    let w = Tensor::from_slice(&data(12 * 3 * 9), &[12, 3, 3, 3]);
    let item = single_item(&x.conv2d(&w, None, &ConvOpts::default()));
    let cfg = OptConfig::for_vec_width(8);
    let lk = lower_ast(&item.ast, buf_params(&item), Some(&cfg), false).unwrap();
    let regions = split_loops(&lk, 2).map(|s| s.len());
    assert_eq!(regions, Some(2), "a loop and its tail: {lk}");
    realize_inputs(std::slice::from_ref(&item));
    let clang = |threads| -> Arc<dyn Device> {
        let dev =
            picograd::runtime::Clang::new().expect("no C compiler: threaded tests cannot run");
        Arc::new(dev.with_threads(threads, 0))
    };
    let unopt = lower_ast(&item.ast, buf_params(&item), None, false).unwrap();
    let base = run_linear(&item, &unopt, &clang(1));
    for threads in [1, 2, 3] {
        let got = run_linear(&item, &lk, &clang(threads));
        assert_eq!(got, base, "split over {threads}");
    }
}

// ---- convolutions: conv-shaped tiles against unoptimized kernels and a naive reference ----

/// One conv case: input `[n, c, h, w]`, weight `[o, c/g, kh, kw]`, groups, stride, dilation,
/// padding `(top, bottom, left, right)`, bias.
struct ConvCase {
    xs: [usize; 4],
    ws: [usize; 4],
    groups: usize,
    stride: [usize; 2],
    dilation: [usize; 2],
    pad: [usize; 4],
    bias: bool,
}

impl ConvCase {
    fn out_hw(&self) -> [usize; 2] {
        let o =
            |i: usize, k: usize, s: usize, d: usize, p: usize| (i + p - d * (k - 1) - 1) / s + 1;
        [
            o(
                self.xs[2],
                self.ws[2],
                self.stride[0],
                self.dilation[0],
                self.pad[0] + self.pad[1],
            ),
            o(
                self.xs[3],
                self.ws[3],
                self.stride[1],
                self.dilation[1],
                self.pad[2] + self.pad[3],
            ),
        ]
    }

    fn tensor(&self) -> Tensor {
        let x = Tensor::from_slice(&data(self.xs.iter().product()), &self.xs);
        let w = Tensor::from_slice(&self.weights(), &self.ws);
        let b = Tensor::from_slice(&data(self.ws[0]), &[self.ws[0]]);
        let [t, bo, l, r] = self.pad;
        let opts = ConvOpts::default()
            .groups(self.groups)
            .stride(&self.stride)
            .dilation(&self.dilation)
            .padding(Padding::PerSide(vec![l, r, t, bo]));
        x.conv2d(&w, self.bias.then_some(&b), &opts)
    }

    /// Weights a third the size of the inputs, so sums stay moderate.
    fn weights(&self) -> Vec<f32> {
        let n = self.ws.iter().product();
        data(n).iter().map(|v| v * 0.3).collect()
    }

    /// Direct loops in f64 over the same data.
    fn reference(&self) -> Vec<f64> {
        let (x, w, b) = (
            data(self.xs.iter().product()),
            self.weights(),
            data(self.ws[0]),
        );
        let ([n, c, h, wd], [o, cg, kh, kw]) = (self.xs, self.ws);
        let [oh, ow] = self.out_hw();
        let mut out = Vec::with_capacity(n * o * oh * ow);
        for (bi, oc, y, xx) in (0..n).flat_map(|bi| {
            (0..o).flat_map(move |oc| {
                (0..oh).flat_map(move |y| (0..ow).map(move |xx| (bi, oc, y, xx)))
            })
        }) {
            let ch0 = oc / (o / self.groups) * cg;
            let mut acc = if self.bias { f64::from(b[oc]) } else { 0.0 };
            for (ic, ky, kx) in (0..cg)
                .flat_map(|ic| (0..kh).flat_map(move |ky| (0..kw).map(move |kx| (ic, ky, kx))))
            {
                let iy = (y * self.stride[0] + ky * self.dilation[0]) as i64 - self.pad[0] as i64;
                let ix = (xx * self.stride[1] + kx * self.dilation[1]) as i64 - self.pad[2] as i64;
                if iy < 0 || ix < 0 || iy >= h as i64 || ix >= wd as i64 {
                    continue;
                }
                let xi = ((bi * c + ch0 + ic) * h + iy as usize) * wd + ix as usize;
                let wi = ((oc * cg + ic) * kh + ky) * kw + kx;
                acc += f64::from(x[xi]) * f64::from(w[wi]);
            }
            out.push(acc);
        }
        out
    }
}

/// Odd convs: primes, stride 2, dilation, groups, asymmetric padding, widths that are and are
/// not multiples of a vector, a 1×1 conv, and enough channels for a full channel tile.
fn conv_cases() -> Vec<ConvCase> {
    let case = |xs, ws, groups, stride, dilation, pad, bias| ConvCase {
        xs,
        ws,
        groups,
        stride,
        dilation,
        pad,
        bias,
    };
    vec![
        case(
            [2, 3, 7, 13],
            [5, 3, 3, 3],
            1,
            [1, 1],
            [1, 1],
            [1, 1, 1, 1],
            false,
        ),
        case(
            [1, 4, 11, 16],
            [6, 2, 3, 3],
            2,
            [2, 1],
            [1, 2],
            [0, 2, 1, 0],
            true,
        ),
        case(
            [3, 2, 9, 9],
            [7, 2, 2, 3],
            1,
            [2, 2],
            [2, 1],
            [2, 0, 0, 3],
            false,
        ),
        case(
            [2, 8, 6, 32],
            [16, 8, 3, 3],
            1,
            [1, 1],
            [1, 1],
            [1, 1, 1, 1],
            true,
        ),
        case(
            [1, 6, 5, 17],
            [12, 3, 1, 1],
            2,
            [1, 1],
            [1, 1],
            [0, 0, 0, 0],
            false,
        ),
        case(
            [1, 1, 1, 1],
            [3, 1, 1, 1],
            1,
            [1, 1],
            [1, 1],
            [0, 0, 0, 0],
            false,
        ),
    ]
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

#[test]
fn conv_kernels_match_reference_optimized_and_not() {
    for (ci, case) in conv_cases().iter().enumerate() {
        let item = last_item(&case.tensor());
        let want = case.reference();
        for dev in devices() {
            let base = run(&item, &[], &dev);
            let got = f32s(&base);
            assert_eq!(got.len(), want.len(), "conv case {ci}");
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let tol = 1e-4 * (1.0 + w.abs());
                assert!(
                    (f64::from(*g) - w).abs() <= tol,
                    "conv case {ci} [{i}]: {g} vs {w} on {}",
                    dev.name()
                );
            }
            for width in [2, 4, 8, 16] {
                for cfg in [OptConfig::for_vec_width(width), OptConfig::small_device()] {
                    let mut k = Kernel::new(&item.ast).unwrap();
                    let opts = hand_coded(&mut k, &cfg);
                    assert_eq!(
                        run(&item, &opts, &dev),
                        base,
                        "conv case {ci}: {opts:?} ({}) on {}",
                        k.describe(),
                        dev.name()
                    );
                }
            }
        }
    }
}

#[test]
fn heuristic_tiles_convs_over_channels_and_width() {
    // [b, cout, oy, ox | cin, ky, kx]: the tile pairs output channels (one input vector feeds
    // them all) with the output's contiguous axis (one broadcast weight feeds a vector): 8
    // channels × 8 lanes fill AVX2's accumulator budget. With torch's weight layout, so the
    // schedule is taken without the scheduler's layout transforms (which would block the
    // weights by channels and turn the tile around, see `tests/vector_types.rs`).
    let case = &conv_cases()[3];
    let item = last_plain_item(&case.tensor());
    let mut k = Kernel::new(&item.ast).unwrap();
    let opts = hand_coded(&mut k, &OptConfig::for_vec_width(8));
    assert_eq!(
        opts[..2],
        [
            Opt::Upcast { axis: 1, amount: 8 },
            Opt::Vectorize { axis: 3, amount: 8 }
        ],
        "{}",
        k.describe()
    );
}
