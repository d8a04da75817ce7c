//! Golden `PICOGRAD_DEBUG=3` listings (the `Display` of a lowered kernel, which DEBUG=3 logs)
//! of a small matmul and a small conv lowered for 4-lane vectors: the vector UOps the
//! optimizer's `Opt::Vectorize` made — `f32x4` accumulators, vector loads of consecutive
//! elements, broadcasts (`VECTORIZE` of one scalar), multiply-accumulates, vector stores — are
//! the UOps that run. Each kernel also runs on the interpreter (vector UOps lane by lane) and
//! must give the scalar lowering's bits, which must match a naive reference.
//!
//! A third listing pins an axis the lanes do not divide (10 columns at 8 lanes): a vector body
//! and a scalar tail.
//!
//! The listings live in `tests/data/vector_uops_*.txt`; after a deliberate change to the
//! lowering, regenerate them with `PICOGRAD_BLESS=1`.

#[path = "common/interp_run.rs"]
mod interp_run;

use interp_run::{run, seeded_data as data};
use picograd_core::codegen::lower::{buf_params, lower_ast};
use picograd_core::codegen::opt::OptConfig;
use picograd_core::codegen::uops::LinearKernel;
use picograd_core::schedule::{schedule, ScheduleItem};
use picograd_core::tensor::ConvOpts;
use picograd_core::Tensor;

fn last_item(t: &Tensor) -> ScheduleItem {
    schedule(&[t.lazy().contiguous()]).unwrap().pop().unwrap()
}

/// The item lowered (multiply-accumulates unfused, as the interpreter runs them), optimized
/// for `width`-lane vectors or not at all.
fn lowered(item: &ScheduleItem, width: Option<usize>) -> LinearKernel {
    let cfg = width.map(OptConfig::for_vec_width);
    lower_ast(&item.ast, buf_params(item), cfg.as_ref(), false).unwrap()
}

fn check(name: &str, t: &Tensor, want: &[f32]) {
    check_width(name, t, want, 4);
}

fn check_width(name: &str, t: &Tensor, want: &[f32], width: usize) {
    let item = last_item(t);
    let vector = lowered(&item, Some(width));
    let listing = format!("{vector}");
    let path = format!(
        "{}/tests/data/vector_uops_{name}.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    if std::env::var("PICOGRAD_BLESS").is_ok() {
        std::fs::write(&path, &listing).unwrap();
    }
    let golden = std::fs::read_to_string(&path).unwrap();
    assert_eq!(listing, golden, "{name}: the vector UOps changed");
    let (acc, store) = (
        format!("f32x{width} DEFINE_ACC"),
        format!("f32x{width} STORE"),
    );
    assert!(listing.contains(&acc) && listing.contains(&store));
    let (got, scalar) = (run(&vector, &item), run(&lowered(&item, None), &item));
    assert_eq!(got, scalar, "{name}: vector and scalar kernels differ");
    let got: Vec<f32> = got.into_iter().map(f32::from_bits).collect();
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "{name}[{i}]: {g} vs {w}"
        );
    }
}

#[test]
fn matmul_vector_uops_are_pinned() {
    let (m, k, n) = (2, 3, 8);
    let (a, b) = (data(m * k, 1), data(k * n, 2));
    let want: Vec<f32> = (0..m * n)
        .map(|o| (0..k).map(|j| a[o / n * k + j] * b[j * n + o % n]).sum())
        .collect();
    let t = Tensor::from_slice(&a, &[m, k]).matmul(&Tensor::from_slice(&b, &[k, n]));
    check("matmul", &t, &want);
}

#[test]
fn conv_vector_uops_are_pinned() {
    // x [1, 1, 3, 5] * w [2, 1, 2, 2] -> [1, 2, 2, 4]: a 4-wide output row is one vector.
    let (x, w) = (data(15, 3), data(8, 4));
    let want: Vec<f32> = (0..16)
        .map(|o| {
            let (c, y, xo) = (o / 8, o / 4 % 2, o % 4);
            let tap = |ky: usize, kx: usize| x[(y + ky) * 5 + xo + kx] * w[c * 4 + ky * 2 + kx];
            tap(0, 0) + tap(0, 1) + tap(1, 0) + tap(1, 1)
        })
        .collect();
    let xt = Tensor::from_slice(&x, &[1, 1, 3, 5]);
    let t = xt.conv2d(
        &Tensor::from_slice(&w, &[2, 1, 2, 2]),
        None,
        &ConvOpts::default(),
    );
    check("conv", &t, &want);
}

#[test]
fn a_remainder_is_a_vector_body_and_a_scalar_tail() {
    // [2, 3] · [3, 10] for 8 lanes: each output row is one f32x8 vector (columns 0-7) and two
    // scalar accumulators and stores (columns 8 and 9), as an MLP's 10 logits are.
    let (m, k, n) = (2, 3, 10);
    let (a, b) = (data(m * k, 5), data(k * n, 6));
    let want: Vec<f32> = (0..m * n)
        .map(|o| (0..k).map(|j| a[o / n * k + j] * b[j * n + o % n]).sum())
        .collect();
    let t = Tensor::from_slice(&a, &[m, k]).matmul(&Tensor::from_slice(&b, &[k, n]));
    check_width("matmul_remainder", &t, &want, 8);
    let listing = format!("{}", lowered(&last_item(&t), Some(8)));
    let scalar_stores = listing
        .lines()
        .filter(|l| l.contains(" STORE") && !l.contains("f32x"))
        .count();
    assert_eq!(
        scalar_stores, 4,
        "two rows, each with a tail of two scalar stores:\n{listing}"
    );
}

#[test]
fn a_matrix_vector_product_takes_several_vector_accumulators() {
    // x [37] · w [37, 40] at 8 lanes: 40 outputs are 5 vectors, which neither 4 nor 2 vectors
    // divide; all 5 are kept side by side (five accumulator chains, not one).
    let (k, n) = (37, 40);
    let (x, w) = (data(k, 9), data(k * n, 10));
    let want: Vec<f32> = (0..n)
        .map(|o| (0..k).map(|j| x[j] * w[j * n + o]).sum())
        .collect();
    let t = Tensor::from_slice(&x, &[1, k]).matmul(&Tensor::from_slice(&w, &[k, n]));
    let item = last_item(&t);
    let listing = format!("{}", lowered(&item, Some(8)));
    assert_eq!(
        listing.matches("f32x8 DEFINE_ACC").count(),
        5,
        "five vector accumulators:\n{listing}"
    );
    let (got, scalar) = (
        run(&lowered(&item, Some(8)), &item),
        run(&lowered(&item, None), &item),
    );
    assert_eq!(got, scalar, "vector and scalar kernels differ");
    for (i, (g, w)) in got
        .iter()
        .map(|b| f32::from_bits(*b))
        .zip(&want)
        .enumerate()
    {
        assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "[{i}]: {g} vs {w}");
    }
}
