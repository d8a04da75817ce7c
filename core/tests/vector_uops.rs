//! Golden `PICOGRAD_DEBUG=3` listings (the `Display` of a lowered kernel, which DEBUG=3 logs)
//! of a small matmul and a small conv lowered for 4-lane vectors: the vector UOps the
//! optimizer's `Opt::Vectorize` made — `f32x4` accumulators, vector loads of consecutive
//! elements, broadcasts (`VECTORIZE` of one scalar), multiply-accumulates, vector stores — are
//! the UOps that run. Each kernel also runs on the interpreter (vector UOps lane by lane) and
//! must give the scalar lowering's bits, which must match a naive reference.
//!
//! The listings live in `tests/data/vector_uops_*.txt`; after a deliberate change to the
//! lowering, regenerate them with `PICOGRAD_BLESS=1`.

#[path = "common/interp_run.rs"]
mod interp_run;

use interp_run::run;
use picograd_core::codegen::lower::{buf_params, lower_ast};
use picograd_core::codegen::opt::OptConfig;
use picograd_core::codegen::uops::LinearKernel;
use picograd_core::schedule::{schedule, ScheduleItem};
use picograd_core::tensor::ConvOpts;
use picograd_core::Tensor;

fn data(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let h = (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 8;
            (h % 17) as f32 / 8.0 - 1.0
        })
        .collect()
}

fn last_item(t: &Tensor) -> ScheduleItem {
    schedule(&[t.lazy().contiguous()]).unwrap().pop().unwrap()
}

/// The item lowered (multiply-accumulates unfused, as the interpreter runs them), optimized
/// for 4-lane vectors or not at all.
fn lowered(item: &ScheduleItem, vector: bool) -> LinearKernel {
    let cfg = OptConfig::for_vec_width(4);
    lower_ast(&item.ast, buf_params(item), vector.then_some(&cfg), false).unwrap()
}

fn check(name: &str, t: &Tensor, want: &[f32]) {
    let item = last_item(t);
    let vector = lowered(&item, true);
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
    assert!(listing.contains("f32x4 DEFINE_ACC") && listing.contains("f32x4 STORE"));
    let (got, scalar) = (run(&vector, &item), run(&lowered(&item, false), &item));
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
