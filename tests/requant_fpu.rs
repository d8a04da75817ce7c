//! `pg_requant` on a core with a single-precision FPU (Arm's `__ARM_FP`, RISC-V's F extension)
//! computes the requantize in f32 (int to float, a fused multiply-add, `vcvtr` / `fcvt.w.s`
//! with `rne`) where it can and sends the rest to the integer general form. Checked here under
//! QEMU on Cortex-M4F and RV32IMAFC (one run each) and on the host (the integer path),
//! against two references computed independently of `picograd::ops::requant`: exact integers
//! (`|a|` and the product rounded to 24 significant bits, then half to even, over i128) for
//! every operand, and Rust's own f32 arithmetic, `rint(float(a) * scale)` (onnxruntime's rule),
//! for the operands whose multiplier is an f32 scale. The operands cover what the float path
//! takes (f32 multipliers at every shift 1..=62: random accumulators over the whole i32 range,
//! accumulators next to ties) and each way out of it: results at and beyond ±2^30 (the
//! saturation test), zero points in the tie, multipliers with more than 24 significant bits,
//! negative or small multipliers, and packed shifts outside `[1, 62]`.

use picograd::ops::{fixed_point, pack_shift, AluOp};
use picograd::runtime::export::write_bundle;
use picograd::runtime::private_fs::private_temp_dir;
use picograd::runtime::target::{build_and_run, BuildOptions, Target, Values};
use picograd::{DType, Tensor};

#[path = "common/int_bundle.rs"]
mod int_bundle;

#[path = "common/rng.rs"]
mod rng;
use rng::Rng;

#[path = "common/requant_ref.rs"]
mod requant_ref;
use requant_ref::reference_requant_z;

/// `Requant(a, m, sz)` as its definition reads, over exact integers (the result wrapped to
/// i32, the shift clamped to `[1, 62]`, the zero point in the tie).
fn reference(a: i32, m: i32, sz: i32) -> i32 {
    reference_requant_z(a, m, sz & 0xff, (sz - (sz & 0xff)) / 256)
}

/// The operands `(a, m, sz)`.
fn operands() -> Vec<(i32, i32, i32)> {
    let mut r = Rng(0x0017_f0a7_5eed);
    let mut out = Vec::new();
    for s in 1..=62i32 {
        for i in 0..36 {
            // An f32 multiplier, as `fixed_point` makes them.
            let m = (r.range(1 << 23, (1 << 24) - 1) << 7) as i32;
            let a = if i < 12 {
                r.range(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
            } else if i < 24 {
                // Next to a tie `(k + 1/2)·2^s / m`.
                let k = r.range(-3000, 3000) as f64 + 0.5;
                let near = (k * 2f64.powi(s) / f64::from(m)).round() + [-1.0, 0.0, 1.0][i % 3];
                near.clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
            } else if i < 30 {
                // Results around ±2^30 and ±2^31 (where `vcvtr` saturates).
                let target = [
                    1i64 << 30,
                    (1 << 30) - 1,
                    1 << 31,
                    -(1 << 30),
                    -(1 << 30) - 1,
                    -(1 << 31),
                ][i - 24];
                let a = (target as f64 * 2f64.powi(s) / f64::from(m)).round();
                a.clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
            } else {
                r.range(-(1 << 20), 1 << 20) as i32
            };
            let (m, sz) = match i {
                // A zero point (in the tie): the general form.
                30 => (m, pack_shift(s, r.range(-130, 130) as i32)),
                // More than 24 significant bits, negative, small.
                31 => (r.range(1 << 30, (1 << 31) - 1) as i32 | 1, s),
                32 => (-m, s),
                33 => (r.range(1, 1 << 20) as i32, s),
                _ => (m, s),
            };
            out.push((a, m, sz));
        }
    }
    // Shifts outside [1, 62] (clamped by the definition).
    for sz in [0, 63, 64, 200, 255] {
        out.push((r.range(-(1 << 24), 1 << 24) as i32, 3 << 29, sz));
    }
    out
}

#[test]
fn fpu_requant_agrees_with_the_exact_and_the_f32_references_on_cortex_m4_and_rv32imafc() {
    picograd::init();
    let ops = operands();
    let want: Vec<i32> = ops.iter().map(|&(a, m, sz)| reference(a, m, sz)).collect();
    // Rust's f32 arithmetic agrees wherever the multiplier is an f32 scale and no zero point
    // takes part (an independent check of the exact reference on those operands).
    let mut f32_checked = 0;
    for (&(a, m, sz), &w) in ops.iter().zip(&want) {
        let s = sz & 0xff;
        if sz == s && (1..=62).contains(&s) && m >= 1 << 30 && m & 127 == 0 {
            let scale = f32::from_bits((((157 - s) as u32) << 23) | ((m as u32 >> 7) & 0x7f_ffff));
            assert_eq!(fixed_point(scale), Some((m, s)));
            let f = ((a as f32) * scale).round_ties_even();
            if f.abs() < 2f32.powi(31) {
                assert_eq!(f as i32, w, "f32 reference at a={a} m={m} s={s}");
                f32_checked += 1;
            }
        }
    }
    assert!(f32_checked > 1500, "{f32_checked} operands checked in f32");

    let n = ops.len();
    let col = |k: usize| -> Vec<i32> { ops.iter().map(|o| [o.0, o.1, o.2][k]).collect() };
    let x = Tensor::from_slice(&col(0), &[n]);
    let m = Tensor::from_slice(&col(1), &[n]);
    let sz = Tensor::from_slice(&col(2), &[n]);
    x.realize().unwrap();
    m.realize().unwrap();
    sz.realize().unwrap();
    let y = x.try_alu(AluOp::Requant, &[&m, &sz]).unwrap();
    let bundle = int_bundle::export_for_cortex_m4(&x, &y, &want);
    let c = String::from_utf8(bundle.file("model.c").unwrap().to_vec()).unwrap();
    assert!(
        c.contains("vcvtr.s32.f32") && c.contains("fcvt.w.s"),
        "the f32 paths are in the C"
    );
    let xs = Values {
        dtype: DType::I32,
        bits: col(0).iter().map(|&v| u64::from(v as u32)).collect(),
    };
    // The host (the integer path), Cortex-M4F and RV32IMAFC (the f32 path): one QEMU run each.
    let tmp = private_temp_dir("picograd-requant-fpu-").unwrap();
    let dir = tmp.path().join("bundle");
    write_bundle(&bundle, &dir).unwrap();
    int_bundle::check_host_and_cortex_m4(&dir, &[("x", xs.clone())], &want);
    let t = Target::by_name("riscv32imafc").unwrap();
    let r = build_and_run(&t, &dir, &[("x", xs)], &BuildOptions::default())
        .unwrap_or_else(|e| panic!("riscv32imafc: {e}"));
    let got: Vec<i32> = r.output("y").expect("output y").to_i64().unwrap()[..]
        .iter()
        .map(|&v| v as i32)
        .collect();
    assert_eq!(got, want, "exported C on riscv32imafc");
}
