//! The scheduler's layout transforms (`core/src/schedule/layout.rs`): a conv with odd channel
//! counts and matmuls with remainder column counts get their copies (counted in the schedule),
//! and give bit-identical results to the untransformed schedule and to naive loops summing in
//! the same order. Gradients through transformed schedules match too, and so does every layout
//! option a measuring device may choose instead of the rules' (`schedule_with_layouts`).

use picograd_core::ast::AstOp;
use picograd_core::codegen::opt::OptConfig;
use picograd_core::realize::run_schedule;
use picograd_core::schedule::{schedule_for, schedule_with_layouts, LayoutOption};
use picograd_core::{ConvOpts, Tensor};

/// Deterministic values with varied magnitudes (so a changed summation order would show).
fn vals(n: usize, seed: usize) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let h = (i * 7919 + seed * 104_729) % 2003;
            (h as f32 - 1001.0) / 97.0 * if i % 5 == 0 { 13.0 } else { 1.0 }
        })
        .collect()
}

/// Schedules `t` with `cfg`'s layout transforms (`None`: none) and runs it: the values, and
/// how many layout copies and items the schedule had.
fn run(t: &Tensor, cfg: Option<&OptConfig>) -> (Vec<f32>, usize, usize) {
    let node = t.lazy().contiguous();
    let items = schedule_for(std::slice::from_ref(&node), cfg).unwrap();
    let copies = items.iter().filter(|i| i.layout_copy).count();
    let n = items.len();
    run_schedule(&items).unwrap();
    (Tensor::from_lazy(node).to_vec::<f32>().unwrap(), copies, n)
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// An AVX2-like desktop target (8 lanes, default caches).
fn desktop() -> OptConfig {
    OptConfig::for_vec_width(8)
}

/// Naive 2-D conv, stride 1, symmetric zero padding `p`, summing `(ci, ky, kx)` in order.
fn naive_conv(
    x: &[f32],
    [b, cin, h, w]: [usize; 4],
    wt: &[f32],
    [cout, k]: [usize; 2],
    p: usize,
) -> Vec<f32> {
    let (oh, ow) = (h + 2 * p - k + 1, w + 2 * p - k + 1);
    let mut out = vec![0f32; b * cout * oh * ow];
    for n in 0..b {
        for co in 0..cout {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = 0f32;
                    for ci in 0..cin {
                        for ky in 0..k {
                            for kx in 0..k {
                                let (iy, ix) = (
                                    (oy + ky) as isize - p as isize,
                                    (ox + kx) as isize - p as isize,
                                );
                                let xv = if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize
                                {
                                    0.0
                                } else {
                                    x[((n * cin + ci) * h + iy as usize) * w + ix as usize]
                                };
                                acc += xv * wt[((co * cin + ci) * k + ky) * k + kx];
                            }
                        }
                    }
                    out[((n * cout + co) * oh + oy) * ow + ox] = acc;
                }
            }
        }
    }
    out
}

/// Naive batched matmul `[bt, n, k] x [bt, k, m]`, summing over `k` in order.
fn naive_matmul(a: &[f32], b: &[f32], [bt, n, k, m]: [usize; 4]) -> Vec<f32> {
    let mut out = vec![0f32; bt * n * m];
    for t in 0..bt {
        for i in 0..n {
            for j in 0..m {
                let mut acc = 0f32;
                for q in 0..k {
                    acc += a[(t * n + i) * k + q] * b[(t * k + q) * m + j];
                }
                out[(t * n + i) * m + j] = acc;
            }
        }
    }
    out
}

/// A padded 3×3 conv of seeded values, `[2, cin, 9, 7]` → `cout` channels (padding 1).
fn padded_conv(cin: usize, cout: usize) -> Tensor {
    let x = Tensor::from_slice(&vals(2 * cin * 9 * 7, cin), &[2, cin, 9, 7]);
    let w = Tensor::from_slice(&vals(cout * cin * 9, cout), &[cout, cin, 3, 3]);
    x.conv2d(&w, None, &ConvOpts::default().padding(1))
}

/// [`padded_conv`] by naive loops.
fn padded_conv_naive(cin: usize, cout: usize) -> Vec<f32> {
    let (xv, wv) = (vals(2 * cin * 9 * 7, cin), vals(cout * cin * 9, cout));
    naive_conv(&xv, [2, cin, 9, 7], &wv, [cout, 3], 1)
}

/// The batched product `[3, 40, 24] @ [3, 24, m]` of seeded values.
fn batched_product(m: usize) -> Tensor {
    let a = Tensor::from_slice(&vals(3 * 40 * 24, 1), &[3, 40, 24]);
    let b = Tensor::from_slice(&vals(3 * 24 * m, m), &[3, 24, m]);
    a.matmul(&b)
}

/// [`batched_product`] by naive loops.
fn batched_product_naive(m: usize) -> Vec<f32> {
    naive_matmul(&vals(3 * 40 * 24, 1), &vals(3 * 24 * m, m), [3, 40, 24, m])
}

#[test]
fn convs_with_odd_channel_counts_get_padded_inputs_and_channel_blocks_bit_exactly() {
    // 24 and 40 channels: blocks of 8 (the vector width); 100: blocks of 4; 5: no whole block
    // of 2 or more lanes, so only the padded input is copied.
    for (cin, cout) in [(3, 24), (5, 40), (3, 100), (4, 5)] {
        let conv = || padded_conv(cin, cout);
        let (plain, plain_copies, plain_items) = run(&conv(), None);
        let (laid, copies, items) = run(&conv(), Some(&desktop()));
        // The padded input and the weight's channel blocks: two copies, two more kernels.
        let want = if cout % 2 == 0 { 2 } else { 1 };
        assert_eq!((plain_copies, copies), (0, want), "cin {cin}, cout {cout}");
        assert_eq!(items, plain_items + want, "cin {cin}, cout {cout}");
        assert_eq!(bits(&laid), bits(&plain), "cin {cin}, cout {cout}");
        assert_eq!(
            bits(&laid),
            bits(&padded_conv_naive(cin, cout)),
            "cin {cin}, cout {cout}"
        );
    }
}

#[test]
fn narrow_channel_blocks_give_way_to_full_vectors_along_the_row() {
    // 100 channels make blocks of 4 on 8 lanes. On a 7-wide output row (no 8-lane vectors
    // along it) the conv tile vectorizes the blocks, so they are made; on a 16-wide row the
    // row takes full vectors and the weights keep their layout: only the padded input is
    // copied. 24 channels (full blocks of 8) are blocked on either row.
    for (cout, width, want) in [(100, 7, 2), (100, 16, 1), (24, 16, 2)] {
        let (cin, xs, ws) = (3, [1, 3, 5, width], [cout, 3]);
        let xv = vals(cin * 5 * width, cout + width);
        let wv = vals(cout * cin * 9, cout);
        let conv = || {
            let x = Tensor::from_slice(&xv, &xs);
            let w = Tensor::from_slice(&wv, &[cout, cin, 3, 3]);
            x.conv2d(&w, None, &ConvOpts::default().padding(1))
        };
        let (plain, _, _) = run(&conv(), None);
        let (laid, copies, _) = run(&conv(), Some(&desktop()));
        assert_eq!(copies, want, "cout {cout}, row {width}");
        assert_eq!(bits(&laid), bits(&plain), "cout {cout}, row {width}");
        assert_eq!(bits(&laid), bits(&naive_conv(&xv, xs, &wv, ws, 1)));
    }
}

#[test]
fn batched_matmuls_with_remainder_columns_get_panels_bit_exactly() {
    // A small L2 (4 KiB) so these small operands overflow it; 100 columns are 6 panels of 16 and
    // a zero-padded remainder panel; 96 columns are 6 whole panels, run panels-outermost.
    let small_l2 = desktop().with_caches(1024, 4096);
    for m in [100, 96] {
        let mm = || batched_product(m);
        let (plain, _, plain_items) = run(&mm(), None);
        let (laid, copies, items) = run(&mm(), Some(&small_l2));
        assert_eq!((copies, items), (1, plain_items + 1), "m {m}");
        assert_eq!(bits(&laid), bits(&plain), "m {m}");
        assert_eq!(bits(&laid), bits(&batched_product_naive(m)), "m {m}");
        // 96 columns: the product kernel runs panel by panel, so it stores through a permuted
        // view of its output; 100: in plain order.
        let items = schedule_for(&[mm().lazy().contiguous()], Some(&small_l2)).unwrap();
        let product = items.iter().find(|i| !i.layout_copy).unwrap();
        let AstOp::Store { st, .. } = product.ast.op() else {
            panic!("a kernel stores")
        };
        assert_eq!(st.contiguous(), m == 100, "m {m}: {st}");
        // With the default L2 the operand fits: no copy.
        let (_, copies, _) = run(&mm(), Some(&desktop()));
        assert_eq!(copies, 0, "m {m}");
    }
}

#[test]
fn transposed_weights_get_panels_whatever_the_cache() {
    // x @ wᵀ (a linear layer): the lanes along the output's columns would be gathers.
    let (n, k, m) = (64, 20, 30);
    let xv = vals(n * k, 3);
    let wv = vals(m * k, 4);
    let lin = || {
        let x = Tensor::from_slice(&xv, &[n, k]);
        let w = Tensor::from_slice(&wv, &[m, k]);
        x.matmul(&w.transpose(0, 1))
    };
    let (plain, _, _) = run(&lin(), None);
    let (laid, copies, _) = run(&lin(), Some(&desktop()));
    assert_eq!(copies, 1);
    assert_eq!(bits(&laid), bits(&plain));
    let wt: Vec<f32> = (0..k * m).map(|i| wv[(i % m) * k + i / m]).collect();
    assert_eq!(bits(&laid), bits(&naive_matmul(&xv, &wt, [1, n, k, m])));
}

/// One row times a transposed weight marked constant (an ONNX model's weight): its copy is
/// made once per capture, so it gets one-vector panels even though each element is read once;
/// the same product of an unmarked weight gets none. Both equal a naive loop bit for bit.
#[test]
fn constant_transposed_weights_get_panels_even_when_read_once() {
    let (k, m) = (20, 30);
    let (xv, wv) = (vals(k, 5), vals(m * k, 6));
    let lin = |constant: bool| {
        let x = Tensor::from_slice(&xv, &[1, k]);
        let w = Tensor::from_slice(&wv, &[m, k]);
        if constant {
            w.lazy().realized().unwrap().mark_constant();
        }
        x.matmul(&w.transpose(0, 1))
    };
    let (plain, _, _) = run(&lin(true), None);
    let (laid, copies, _) = run(&lin(true), Some(&desktop()));
    assert_eq!(copies, 1, "a constant's strided lanes get a copy");
    assert_eq!(
        run(&lin(false), Some(&desktop())).1,
        0,
        "a plain weight does not"
    );
    assert_eq!(bits(&laid), bits(&plain));
    let wt: Vec<f32> = (0..k * m).map(|i| wv[(i % m) * k + i / m]).collect();
    assert_eq!(bits(&laid), bits(&naive_matmul(&xv, &wt, [1, 1, k, m])));
}

/// A batch-1 pointwise conv over a 7 × 7 image, 32 → 48 channels, on a 16-lane target: each
/// weight is used 49 times, fewer than the copy rule's 4 vectors of reuse (64), so a plain weight
/// keeps its layout (and the conv tile cannot load channel vectors from it). The same weight
/// marked constant (an ONNX model's weight, copied once per capture) gets its channel blocks.
/// Both equal a naive loop bit for bit.
#[test]
fn constant_conv_weights_get_channel_blocks_whatever_the_reuse() {
    let (cin, cout) = (32, 48);
    let xs = [1, cin, 7, 7];
    let xv = vals(cin * 49, 7);
    let wv = vals(cout * cin, 8);
    let conv = |constant: bool| {
        let x = Tensor::from_slice(&xv, &xs);
        let w = Tensor::from_slice(&wv, &[cout, cin, 1, 1]);
        if constant {
            w.lazy().realized().unwrap().mark_constant();
        }
        x.conv2d(&w, None, &ConvOpts::default())
    };
    let wide = OptConfig::for_vec_width(16);
    let (plain, _, _) = run(&conv(true), None);
    let (laid, copies, _) = run(&conv(true), Some(&wide));
    assert_eq!(copies, 1, "a constant weight gets channel blocks");
    assert_eq!(run(&conv(false), Some(&wide)).1, 0, "a plain one does not");
    assert_eq!(bits(&laid), bits(&plain));
    assert_eq!(bits(&laid), bits(&naive_conv(&xv, xs, &wv, [cout, 1], 0)));
}

#[test]
fn small_products_and_cacheless_targets_get_no_copies() {
    // One row: each weight is used once, a copy would cost as much as the product.
    let v = Tensor::from_slice(&vals(20, 1), &[1, 20]);
    let w = Tensor::from_slice(&vals(600, 2), &[30, 20]);
    assert_eq!(run(&v.matmul(&w.transpose(0, 1)), Some(&desktop())).1, 0);
    // A microcontroller (no cache): no copy grows its arena.
    let x = Tensor::from_slice(&vals(2 * 3 * 81, 1), &[2, 3, 9, 9]);
    let w = Tensor::from_slice(&vals(24 * 27, 2), &[24, 3, 3, 3]);
    let y = x.conv2d(&w, None, &ConvOpts::default().padding(1));
    assert_eq!(run(&y, Some(&OptConfig::small_device())).1, 0);
}

#[test]
fn conv_gradients_through_transformed_schedules_are_bit_identical() {
    let (xv, wv) = (vals(2 * 3 * 8 * 8, 5), vals(40 * 27, 6));
    let grads = |cfg: Option<&OptConfig>| {
        let x = Tensor::from_slice(&xv, &[2, 3, 8, 8]).requires_grad_(true);
        let w = Tensor::from_slice(&wv, &[40, 3, 3, 3]).requires_grad_(true);
        let y = x.conv2d(&w, None, &ConvOpts::default().padding(1));
        let loss = y.mul(&y).sum(&[0, 1, 2, 3], false);
        loss.backward().unwrap();
        let (gx, cx, _) = run(&x.grad().unwrap(), cfg);
        let (gw, cw, _) = run(&w.grad().unwrap(), cfg);
        (bits(&gx), bits(&gw), cx + cw)
    };
    let (px, pw, none) = grads(None);
    let (lx, lw, copies) = grads(Some(&desktop()));
    assert_eq!(none, 0);
    assert!(copies > 0, "the backward convs are transformed too");
    assert_eq!((lx, lw), (px, pw));
}

/// Schedules `t` with `cfg`, taking option `k` (when it has one) among every reduce kernel's
/// layout options, and runs it: the values, and each kernel's option labels.
fn run_option(t: &Tensor, cfg: &OptConfig, k: usize) -> (Vec<f32>, Vec<Vec<String>>) {
    let seen = std::cell::RefCell::new(Vec::new());
    let pick = |options: &[LayoutOption]| {
        seen.borrow_mut()
            .push(options.iter().map(|o| o.label.clone()).collect::<Vec<_>>());
        (k < options.len()).then_some(k)
    };
    let node = t.lazy().contiguous();
    let items = schedule_with_layouts(std::slice::from_ref(&node), Some(cfg), &pick).unwrap();
    run_schedule(&items).unwrap();
    let vals = Tensor::from_lazy(node).to_vec::<f32>().unwrap();
    (vals, seen.into_inner())
}

/// Every layout a measuring device may pick (`PICOGRAD_SEARCH`'s layout stage) — the rules'
/// choice, no copies, other block and panel widths, panels with and without the loop reorder —
/// gives the same bits as a naive loop, for convs with odd channel counts and a batched matmul
/// with remainder columns. The rules' choice is option 0, and the options are distinct.
#[test]
fn every_layout_option_gives_naive_loop_bits() {
    let wide = OptConfig::for_vec_width(16);
    for (cin, cout) in [(3, 24), (5, 40), (3, 100)] {
        let conv = || padded_conv(cin, cout);
        let want = bits(&padded_conv_naive(cin, cout));
        let (rules, _, _) = run(&conv(), Some(&wide));
        assert_eq!(bits(&rules), want, "cin {cin}, cout {cout}");
        let (_, labels) = run_option(&conv(), &wide, 0);
        let [labels] = &labels[..] else {
            panic!("one reduce kernel: {labels:?}")
        };
        assert!(labels.len() >= 3, "cin {cin}, cout {cout}: {labels:?}");
        if (cin, cout) == (3, 24) {
            // Golden: the rules' choice (an unpadded input, weight blocks of 8: 24 channels on
            // 16 lanes), no copies, then each operand's other layouts one at a time.
            let golden = [
                "buf1 unpadded, buf2 in blocks of 8 along axis 2",
                "plain",
                "buf2 in blocks of 8 along axis 2",
                "buf1 unpadded, buf2 in blocks of 4 along axis 2",
                "buf1 unpadded, buf2 in blocks of 2 along axis 2",
                "buf1 unpadded",
            ];
            assert_eq!(labels, &golden, "the layout options of a 3 → 24 conv");
        }
        assert!(labels.contains(&"plain".to_string()), "{labels:?}");
        let mut distinct = labels.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), labels.len(), "{labels:?}");
        for (k, label) in labels.iter().enumerate() {
            let (got, _) = run_option(&conv(), &wide, k);
            assert_eq!(bits(&got), want, "cin {cin}, cout {cout}: {label}");
        }
    }
    // A small L2, so the operand overflows it: panels of 4, 2 and 1 vectors, outermost or not.
    let small_l2 = desktop().with_caches(1024, 4096);
    for m in [100, 96] {
        let mm = || batched_product(m);
        let want = bits(&batched_product_naive(m));
        let (_, labels) = run_option(&mm(), &small_l2, 0);
        let [labels] = &labels[..] else {
            panic!("one reduce kernel: {labels:?}")
        };
        assert!(labels.len() >= 4, "m {m}: {labels:?}");
        assert!(
            labels.iter().any(|l| l.contains("panels outermost")) == (m == 96),
            "m {m}: {labels:?}"
        );
        for (k, label) in labels.iter().enumerate() {
            let (got, _) = run_option(&mm(), &small_l2, k);
            assert_eq!(bits(&got), want, "m {m}: {label}");
        }
    }
}
