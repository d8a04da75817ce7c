//! Thread splitting (`codegen/split.rs`) on hand-made kernels: which loops `split_loops` divides
//! among cores when a kernel's side effects sit in one loop, in two sibling loops (a loop and
//! its looped tail), or outside every loop, and that the C renderer gives each split loop its
//! own share bounds.

#[path = "common/kernel_builder.rs"]
mod kernel_builder;

use kernel_builder::KernelBuilder;
use picograd_core::codegen::c::{render_kernel_split, CRenderOpts};
use picograd_core::codegen::split::split_loops;
use picograd_core::codegen::uops::LinearKernel;
use picograd_core::ops::{AluOp, Scalar};
use picograd_core::DType;

/// `out[i] = src[i] + 1` for `i` in `[0, 8)`, then a tail loop over `[8, 12)` writing the same
/// way; the tail reads `out` itself instead of `src` when `tail_reads_out`.
fn loop_and_tail(tail_reads_out: bool) -> (LinearKernel, [u32; 2]) {
    let mut b = KernelBuilder::default();
    let out = b.global(DType::F32, 12, true);
    let src = b.global(DType::F32, 12, false);
    let (zero, eight, four) = (b.int(0), b.int(8), b.int(4));
    let one = b.cst(Scalar::from_f64(1.0, DType::F32));
    let body = b.lp(zero, eight);
    let x = b.load(src, &[body]);
    let y = b.alu(AluOp::Add, DType::F32, &[x, one]);
    b.store(out, body, y);
    b.end(body);
    let tail = b.lp(zero, four);
    let at = b.alu(AluOp::Add, DType::I32, &[tail, eight]);
    let read = if tail_reads_out { out } else { src };
    let x = b.load(read, &[at]);
    let y = b.alu(AluOp::Add, DType::F32, &[x, one]);
    b.store(out, at, y);
    b.end(tail);
    (b.build("loop_and_tail"), [body, tail])
}

#[test]
fn a_loop_and_its_tail_are_each_split() {
    let (k, [body, tail]) = loop_and_tail(false);
    let split = split_loops(&k, 2);
    assert_eq!(split, Some(vec![body as usize, tail as usize]), "{k}");
    let src = render_kernel_split(&k, 2, &CRenderOpts::default()).unwrap();
    for name in ["ridx0_lo", "ridx1_lo"] {
        assert!(src.contains(name), "{name} missing:\n{src}");
    }
}

/// A core may run its part of the tail before another core finished its part of the loop, so
/// a tail reading what the kernel writes keeps the kernel whole.
#[test]
fn a_tail_reading_the_output_is_not_split() {
    let (k, _) = loop_and_tail(true);
    assert_eq!(split_loops(&k, 2), None, "{k}");
    let src = render_kernel_split(&k, 2, &CRenderOpts::default()).unwrap();
    assert!(!src.contains("core_id"), "{src}");
}

/// A store outside every loop leaves nothing to divide.
#[test]
fn a_store_outside_every_loop_is_not_split() {
    let mut b = KernelBuilder::default();
    let out = b.global(DType::F32, 9, true);
    let (zero, eight) = (b.int(0), b.int(8));
    let one = b.cst(Scalar::from_f64(1.0, DType::F32));
    let l = b.lp(zero, eight);
    b.store(out, l, one);
    b.end(l);
    b.store(out, eight, one);
    let k = b.build("loop_then_store");
    assert_eq!(split_loops(&k, 2), None, "{k}");
}
