//! The static memory plan: placement properties (no two simultaneously live blocks overlap,
//! every block fits, arena >= lower bound, arena == bound for chain-shaped lifetimes), the
//! in-place rule on real kernels, and plan facts on small captures.

use picograd_core::context::interp;
use picograd_core::export::place::{lower_bound, place, Block, ALIGN};
use picograd_core::export::plan::{elementwise_in_place, plan, reads_before_writes, Home, Role};
use picograd_core::jit::Capture;
use picograd_core::ops::{AluOp, ReduceOp};
use picograd_core::Tensor;
use proptest::prelude::*;

fn check_placement(blocks: &[Block]) -> (usize, usize) {
    let p = place(blocks);
    assert_eq!(p.lower_bound_bytes, lower_bound(blocks));
    assert!(p.arena_bytes >= p.lower_bound_bytes);
    for (i, a) in blocks.iter().enumerate() {
        let oa = p.offsets[i];
        assert_eq!(oa % ALIGN, 0);
        assert!(oa + a.bytes <= p.arena_bytes, "block {i} fits");
        for (j, b) in blocks.iter().enumerate().skip(i + 1) {
            let ob = p.offsets[j];
            let live_together = a.start <= b.end && b.start <= a.end;
            let disjoint = oa + a.bytes <= ob || ob + b.bytes <= oa;
            assert!(
                !live_together || disjoint,
                "blocks {i} and {j} overlap: {blocks:?} {p:?}"
            );
        }
    }
    (p.arena_bytes, p.lower_bound_bytes)
}

proptest! {
    #[test]
    fn random_lifetimes_never_overlap(raw in prop::collection::vec((1usize..300, 0usize..20, 0usize..6), 0..24)) {
        let blocks: Vec<Block> = raw.iter().map(|&(bytes, start, len)| Block { bytes, start, end: start + len }).collect();
        let (arena, bound) = check_placement(&blocks);
        // Greedy placement stays close to the bound on these small random sets.
        prop_assert!(arena as f64 <= bound as f64 * 2.0 + 1.0);
    }

    #[test]
    fn chain_lifetimes_meet_the_bound(sizes in prop::collection::vec(1usize..4096, 1..40)) {
        // Buffer i is written by step i and read by step i + 1: a chain-shaped model.
        let blocks: Vec<Block> = sizes.iter().enumerate().map(|(i, &bytes)| Block { bytes, start: i, end: i + 1 }).collect();
        let (arena, bound) = check_placement(&blocks);
        prop_assert_eq!(arena, bound);
    }
}

#[test]
fn greedy_by_size_counterexample_is_solved() {
    // Chain L(4) - b(3) - R(4) - R2(5): first-fit by size alone needs 12 bytes (x16); the bound is 9.
    let sizes = [4usize, 3, 4, 5];
    let blocks: Vec<Block> = sizes
        .iter()
        .enumerate()
        .map(|(i, &s)| Block {
            bytes: s * 16,
            start: i,
            end: i + 1,
        })
        .collect();
    assert_eq!(check_placement(&blocks), (9 * 16, 9 * 16));
}

#[test]
fn in_place_rule_on_real_kernels() {
    let dev = interp();
    let x = Tensor::try_from_slice_on(&[1.0f32, 2.0, 3.0, 4.0], &[4], &dev).unwrap();
    let w = Tensor::try_from_slice_on(&[0.5f32, 0.25, 2.0, 1.0], &[4], &dev).unwrap();
    let y = x
        .try_alu(AluOp::Mul, &[&w])
        .unwrap()
        .try_alu(AluOp::Sin, &[])
        .unwrap();
    let (cap, _) = Capture::record(&[&x], &[&y]).unwrap();
    let k = cap.steps()[0].kernel.clone().unwrap();
    assert!(
        elementwise_in_place(&k, 1) && elementwise_in_place(&k, 2),
        "{k}"
    );

    let flipped = x
        .try_flip(&[0])
        .unwrap()
        .try_alu(AluOp::Add, &[&w])
        .unwrap();
    let (cap, _) = Capture::record(&[&x], &[&flipped]).unwrap();
    let k = cap.steps()[0].kernel.clone().unwrap();
    let xi = cap.steps()[0]
        .slots
        .iter()
        .position(|&s| s == cap.input_slots()[0])
        .unwrap();
    assert!(
        !elementwise_in_place(&k, xi),
        "a flipped read is not in place: {k}"
    );

    let s = x.try_reduce(ReduceOp::Sum, None, false).unwrap();
    let (cap, _) = Capture::record(&[&x], &[&s]).unwrap();
    let k = cap.steps()[0].kernel.clone().unwrap();
    assert!(!elementwise_in_place(&k, 1), "a reduce is not in place");
}

#[test]
fn reads_before_writes_rule_on_real_kernels() {
    use picograd_core::codegen::opt::OptConfig;
    // A matrix-vector product h[8] = x[4] . w[4, 8]: its unoptimized kernel loops over the 8
    // outputs and reads x inside that loop after earlier stores; the small-core kernel keeps
    // the 8 outputs in registers and stores them after the reduce loop.
    let dev = interp();
    let x = Tensor::try_from_slice_on(&[1.0f32, 2.0, 3.0, 4.0], &[4, 1], &dev).unwrap();
    let w = Tensor::try_from_slice_on(&[0.5f32; 32], &[4, 8], &dev).unwrap();
    let h = x
        .try_expand(&[4, 8])
        .unwrap()
        .try_alu(AluOp::Mul, &[&w])
        .unwrap()
        .try_reduce(ReduceOp::Sum, Some(&[0]), false)
        .unwrap();
    let (cap, _) = Capture::record(&[&x], &[&h]).unwrap();
    let xi = |c: &Capture| {
        c.steps()[0]
            .slots
            .iter()
            .position(|&s| s == c.input_slots()[0])
            .unwrap()
    };
    let plain = cap.relowered_with(None, false, &|_| None).unwrap();
    let k = plain.steps()[0].kernel.clone().unwrap();
    assert!(
        !reads_before_writes(&k, xi(&plain)),
        "loop around both: {k}"
    );
    let small = cap
        .relowered_with(Some(&OptConfig::small_device()), false, &|_| None)
        .unwrap();
    let k = small.steps()[0].kernel.clone().unwrap();
    assert!(reads_before_writes(&k, xi(&small)), "all reads first: {k}");
}

#[test]
fn plan_roles_and_homes() {
    let dev = interp();
    let x = Tensor::try_from_slice_on(&[1.0f32; 8], &[8], &dev).unwrap();
    let w = Tensor::try_from_slice_on(&[2.0f32; 8], &[8], &dev).unwrap();
    let a = x
        .try_alu(AluOp::Mul, &[&w])
        .unwrap()
        .try_reshape(&[8, 1])
        .unwrap()
        .try_expand(&[8, 2])
        .unwrap()
        .try_reduce(ReduceOp::Sum, Some(&[1]), false)
        .unwrap();
    let y = a
        .try_reshape(&[8, 1])
        .unwrap()
        .try_expand(&[8, 2])
        .unwrap()
        .try_reduce(ReduceOp::Sum, Some(&[1]), false)
        .unwrap();
    let (cap, _) = Capture::record(&[&x], &[&y]).unwrap();
    let p = plan(&cap, false).unwrap();
    let role = |r: Role| p.buffers.iter().filter(|b| b.role == r).count();
    assert_eq!(
        (
            role(Role::Input(0)),
            role(Role::Output(0)),
            role(Role::Weight)
        ),
        (1, 1, 1)
    );
    assert!(role(Role::Intermediate) >= 1);
    for b in &p.buffers {
        let want_arena = b.role == Role::Intermediate;
        assert_eq!(matches!(b.home, Home::Arena { .. }), want_arena, "{b:?}");
    }
    assert_eq!(p.arena_bytes, p.lower_bound_bytes, "{p:?}");
    let with_io = plan(&cap, true).unwrap();
    assert_eq!(
        with_io.arena_bytes, with_io.lower_bound_bytes,
        "{with_io:?}"
    );
    assert!(with_io.arena_bytes >= p.arena_bytes);
}

/// model.c of a matmul `x @ w` on `dt`, exported with or without fused multiply-adds.
fn exported_matmul_c(dt: picograd_core::DType, fused: bool) -> String {
    use picograd_core::export::{export, ExportNames, ExportOptions};
    let dev = interp();
    let v: Vec<f64> = (0..16).map(|i| f64::from(i) * 0.25 - 1.0).collect();
    let x = Tensor::try_from_slice_on(&v[..8], &[2, 4], &dev).unwrap();
    let w = Tensor::try_from_slice_on(&v[..], &[4, 4], &dev).unwrap();
    let (x, w) = (x.cast(dt), w.cast(dt));
    x.realize().unwrap();
    w.realize().unwrap();
    let y = x.try_matmul(&w).unwrap();
    let (cap, _) = Capture::record(&[&x], &[&y]).unwrap();
    let opts = ExportOptions {
        fused_mulacc: fused,
        ..ExportOptions::default()
    };
    let b = export(&cap, &ExportNames::new(&["x"], &["y"]), &opts).unwrap();
    assert!(b
        .manifest_json
        .contains(&format!("\"fused_mulacc\": {fused}")));
    String::from_utf8(b.file("model.c").unwrap().to_vec()).unwrap()
}

#[test]
fn fused_mulacc_option_renders_fmaf_for_f32_only() {
    use picograd_core::DType;
    // Default export (no FMA assumed): two roundings, no builtin that could be a libm call.
    let plain = exported_matmul_c(DType::F32, false);
    assert!(!plain.contains("__builtin_fma"), "{plain}");
    let fused = exported_matmul_c(DType::F32, true);
    assert!(fused.contains("__builtin_fmaf("), "{fused}");
    // Device FPUs with FMA are single precision: a double fma would be a software call.
    let fused64 = exported_matmul_c(DType::F64, true);
    assert!(fused64.contains("double"), "{fused64}");
    assert!(!fused64.contains("__builtin_fma"), "{fused64}");
}
