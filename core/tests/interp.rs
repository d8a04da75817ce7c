//! Interp against hand-built kernels: every expected value is computed here with plain Rust
//! arithmetic (or written out), never by the interpreter's own helpers.

use std::sync::Arc;

use half::{bf16, f16};
use picograd_core::codegen::uops::{LinearKernel, UOpKind};
use picograd_core::device::{BufId, Device, Program};
use picograd_core::ops::{AluOp, Scalar};
use picograd_core::{DType, Error, Interp};

#[path = "common/kernel_builder.rs"]
mod kernel_builder;
use kernel_builder::KernelBuilder as K;

fn le<T: Copy, const N: usize>(v: &[T], f: fn(T) -> [u8; N]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

fn from_le<T, const N: usize>(b: &[u8], f: fn([u8; N]) -> T) -> Vec<T> {
    b.chunks_exact(N)
        .map(|c| f(c.try_into().unwrap()))
        .collect()
}

/// Runs `k` on a fresh device with buffers holding `bufs` (one per parameter), returning every
/// buffer's bytes afterwards.
fn run(k: &LinearKernel, bufs: &[Vec<u8>], vars: &[i64]) -> Result<Vec<Vec<u8>>, Error> {
    let dev = Interp::new();
    let mem = dev.allocator();
    let ids: Vec<BufId> = bufs
        .iter()
        .map(|b| {
            let id = mem.alloc(b.len()).unwrap();
            mem.copy_in(id, b).unwrap();
            id
        })
        .collect();
    dev.compile(k)?.run(&ids, vars)?;
    Ok(bufs
        .iter()
        .zip(&ids)
        .map(|(b, &id)| {
            let mut out = vec![0; b.len()];
            mem.copy_out(id, &mut out).unwrap();
            out
        })
        .collect())
}

/// `out[i] = op(a[i], b[i])` over `n` elements; out has dtype `dout`, inputs `din`.
fn binop(op: AluOp, din: DType, dout: DType, n: usize) -> LinearKernel {
    let mut k = K::default();
    let out = k.global(dout, n, true);
    let a = k.global(din, n, false);
    let b = k.global(din, n, false);
    let (zero, end) = (k.int(0), k.int(n as i64));
    let i = k.lp(zero, end);
    let (x, y) = (k.load(a, &[i]), k.load(b, &[i]));
    let r = k.alu(op, dout, &[x, y]);
    k.store(out, i, r);
    k.end(i);
    k.build(&format!("{op}_{din}"))
}

/// `out[i] = f(a[i])` over `n` elements, `f` one UOp of kind `kind` giving `dout`.
fn unop(kind: UOpKind, din: DType, dout: DType, n: usize) -> LinearKernel {
    let mut k = K::default();
    let out = k.global(dout, n, true);
    let a = k.global(din, n, false);
    let (zero, end) = (k.int(0), k.int(n as i64));
    let i = k.lp(zero, end);
    let x = k.load(a, &[i]);
    let r = k.push(kind, dout, &[x]);
    k.store(out, i, r);
    k.end(i);
    k.build("unop")
}

fn run_binop_i32(op: AluOp, a: &[i32], b: &[i32]) -> Vec<i32> {
    let k = binop(op, DType::I32, DType::I32, a.len());
    let bufs = [
        vec![0; a.len() * 4],
        le(a, i32::to_le_bytes),
        le(b, i32::to_le_bytes),
    ];
    from_le(&run(&k, &bufs, &[]).unwrap()[0], i32::from_le_bytes)
}

#[test]
fn elementwise_add_f32() {
    let a: Vec<f32> = (0..37).map(|i| i as f32 * 0.3 - 4.0).collect();
    let b: Vec<f32> = (0..37).map(|i| 1.0 / (i as f32 + 0.5)).collect();
    let k = binop(AluOp::Add, DType::F32, DType::F32, a.len());
    let bufs = [
        vec![0; 37 * 4],
        le(&a, f32::to_le_bytes),
        le(&b, f32::to_le_bytes),
    ];
    let out = from_le(&run(&k, &bufs, &[]).unwrap()[0], f32::from_le_bytes);
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_eq!(out, want);
}

/// `out[r] = sum_c x[r*cols + c]`: the accumulator is declared inside the row loop, so it restarts
/// at 0 for every row.
#[test]
fn row_sums_reset_the_accumulator() {
    let (rows, cols) = (3usize, 5usize);
    let mut k = K::default();
    let out = k.global(DType::F32, rows, true);
    let x = k.global(DType::F32, rows * cols, false);
    let (zero, nr, nc) = (k.int(0), k.int(rows as i64), k.int(cols as i64));
    let r = k.lp(zero, nr);
    let acc = k.push(
        UOpKind::DefineAcc(Scalar::zero(DType::F32)),
        DType::F32,
        &[],
    );
    let c = k.lp(zero, nc);
    let base = k.alu(AluOp::Mul, DType::I32, &[r, nc]);
    let idx = k.alu(AluOp::Add, DType::I32, &[base, c]);
    let v = k.load(x, &[idx]);
    let s = k.alu(AluOp::Add, DType::F32, &[acc, v]);
    k.push(UOpKind::Assign, DType::F32, &[acc, s]);
    k.end(c);
    k.store(out, r, acc);
    k.end(r);
    let k = k.build("row_sums");
    let xs: Vec<f32> = (0..rows * cols).map(|i| (i as f32).sin() * 10.0).collect();
    let bufs = [vec![0; rows * 4], le(&xs, f32::to_le_bytes)];
    let got = from_le(&run(&k, &bufs, &[]).unwrap()[0], f32::from_le_bytes);
    let want: Vec<f32> = xs
        .chunks(cols)
        .map(|row| row.iter().fold(0.0f32, |a, b| a + b))
        .collect();
    assert_eq!(got, want);
}

/// Padding: `out[i] = 1 <= i < 5 ? x[i-1] : 0`; the gated-off loads index -1 and 4.
#[test]
fn gated_load_pads_with_zero() {
    let mut k = K::default();
    let out = k.global(DType::F32, 6, true);
    let x = k.global(DType::F32, 4, false);
    let (zero, one, five, six) = (k.int(0), k.int(1), k.int(5), k.int(6));
    let i = k.lp(zero, six);
    let lo = k.alu(AluOp::CmpLt, DType::Bool, &[zero, i]);
    let hi = k.alu(AluOp::CmpLt, DType::Bool, &[i, five]);
    let gate = k.alu(AluOp::And, DType::Bool, &[lo, hi]);
    let idx = k.alu(AluOp::Sub, DType::I32, &[i, one]);
    let v = k.load(x, &[idx, gate]);
    k.store(out, i, v);
    k.end(i);
    let k = k.build("pad");
    let bufs = [
        vec![0xff; 24],
        le(&[1.5f32, -2.0, 3.25, 4.0], f32::to_le_bytes),
    ];
    let got = from_le(&run(&k, &bufs, &[]).unwrap()[0], f32::from_le_bytes);
    assert_eq!(got, [0.0, 1.5, -2.0, 3.25, 4.0, 0.0]);
}

#[test]
fn int32_add_and_mul_wrap() {
    let a = [i32::MAX, i32::MIN, -7, 123_456_789, i32::MAX];
    let b = [1, -1, 3, 1000, i32::MAX];
    let add = run_binop_i32(AluOp::Add, &a, &b);
    let mul = run_binop_i32(AluOp::Mul, &a, &b);
    let sub = run_binop_i32(AluOp::Sub, &a, &b);
    for j in 0..a.len() {
        assert_eq!(add[j], a[j].wrapping_add(b[j]));
        assert_eq!(mul[j], a[j].wrapping_mul(b[j]));
        assert_eq!(sub[j], a[j].wrapping_sub(b[j]));
    }
    assert_eq!(add[0], i32::MIN);
}

#[test]
fn int32_div_and_mod_truncate_and_guard() {
    let a = [7, -7, 7, -7, 5, i32::MIN, i32::MIN, 0, -1];
    let b = [2, 2, -2, -2, 0, -1, 0, 3, 5];
    let div = run_binop_i32(AluOp::Div, &a, &b);
    let rem = run_binop_i32(AluOp::Mod, &a, &b);
    for j in 0..a.len() {
        // Computed in i64, where MIN / -1 does not overflow, then wrapped back.
        let (x, y) = (i64::from(a[j]), i64::from(b[j]));
        let (q, r) = if y == 0 { (0, 0) } else { (x / y, x % y) };
        assert_eq!(div[j], q as i32, "{x} / {y}");
        assert_eq!(rem[j], r as i32, "{x} % {y}");
    }
    assert_eq!(&div[..4], &[3, -3, -3, 3]);
    assert_eq!(&rem[..4], &[1, -1, 1, -1]);
    assert_eq!(div[5], i32::MIN);
    assert_eq!(rem[5], 0);
}

#[test]
fn floordiv_and_floormod_with_negatives() {
    let a = [7, -7, 7, -7, 6, -6, 0, 5, i32::MIN];
    let b = [2, 2, -2, -2, 3, 3, -4, 0, -1];
    let fd = run_binop_i32(AluOp::FloorDiv, &a, &b);
    let fm = run_binop_i32(AluOp::FloorMod, &a, &b);
    for j in 0..a.len() - 1 {
        let (x, y) = (f64::from(a[j]), f64::from(b[j]));
        let q = if b[j] == 0 { 0 } else { (x / y).floor() as i32 };
        let m = if b[j] == 0 { 0 } else { a[j] - b[j] * q };
        assert_eq!(fd[j], q, "{x} // {y}");
        assert_eq!(fm[j], m, "{x} mod {y}");
    }
    assert_eq!(&fd[..4], &[3, -4, -4, 3]);
    assert_eq!(&fm[..4], &[1, 1, -1, -1]);
    assert_eq!((fd[8], fm[8]), (i32::MIN, 0));
}

#[test]
fn float_to_int_casts_saturate() {
    let xs = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e30,
        -1e30,
        3.7,
        -3.7,
        255.5,
        300.0,
    ];
    let cast = |to: DType| {
        let k = unop(UOpKind::Cast, DType::F32, to, xs.len());
        let bufs = [vec![0; xs.len() * to.itemsize()], le(&xs, f32::to_le_bytes)];
        run(&k, &bufs, &[]).unwrap().swap_remove(0)
    };
    let i32s = from_le(&cast(DType::I32), i32::from_le_bytes);
    let (mx, mn) = (i32::MAX, i32::MIN);
    assert_eq!(i32s, [0, mx, mn, mx, mn, 3, -3, 255, 300]);
    assert_eq!(cast(DType::U8), [0, 255, 0, 255, 0, 3, 0, 255, 255]);
    let i8s = from_le(&cast(DType::I8), i8::from_le_bytes);
    assert_eq!(i8s, [0, 127, -128, 127, -128, 3, -3, 127, 127]);
    let u64s = from_le(&cast(DType::U64), u64::from_le_bytes);
    assert_eq!(u64s, [0, u64::MAX, 0, u64::MAX, 0, 3, 0, 255, 300]);
    assert_eq!(cast(DType::Bool), [1, 1, 1, 1, 1, 1, 1, 1, 1]);
}

#[test]
fn int_casts_wrap_and_bools_are_zero_or_one() {
    let xs = [300i32, -1, 128, -129, 0, 65536 + 7];
    let cast = |to: DType| {
        let k = unop(UOpKind::Cast, DType::I32, to, xs.len());
        let bufs = [vec![0; xs.len() * to.itemsize()], le(&xs, i32::to_le_bytes)];
        run(&k, &bufs, &[]).unwrap().swap_remove(0)
    };
    let want_i8: Vec<i8> = [44, -1, -128, 127, 0, 7].to_vec();
    assert_eq!(from_le(&cast(DType::I8), i8::from_le_bytes), want_i8);
    let want_u16: Vec<u16> = xs.iter().map(|&x| (x as u32 & 0xffff) as u16).collect();
    assert_eq!(from_le(&cast(DType::U16), u16::from_le_bytes), want_u16);
    assert_eq!(cast(DType::Bool), [1, 1, 1, 1, 0, 1]);
    let f = from_le(&cast(DType::F32), f32::from_le_bytes);
    assert_eq!(f, [300.0, -1.0, 128.0, -129.0, 0.0, 65543.0]);
}

fn f16_cases() -> Vec<f32> {
    let p = |e: i32| 2f32.powi(e);
    vec![
        1.0 + p(-11),       // tie between 1 and 1+2^-10: to even, 1
        1.0 + 3.0 * p(-11), // tie: to even, 1+2^-9
        p(-24),             // smallest subnormal
        p(-25),             // tie between 0 and 2^-24: 0
        3.0 * p(-25),       // tie: 2^-23
        65504.0,            // largest finite
        65520.0,            // rounds to inf
        f32::INFINITY,
        f32::NEG_INFINITY,
        -0.0,
        0.1,
        -2.71,
    ]
}

#[test]
fn f16_cast_and_store_round_to_nearest_even() {
    let xs = f16_cases();
    // Cast to f16 in a register, then store: the cast rounds, the store keeps it.
    let k = unop(UOpKind::Cast, DType::F32, DType::F16, xs.len());
    let bufs = [vec![0; xs.len() * 2], le(&xs, f32::to_le_bytes)];
    let got = from_le(&run(&k, &bufs, &[]).unwrap()[0], u16::from_le_bytes);
    let want: Vec<u16> = xs.iter().map(|&x| f16::from_f32(x).to_bits()).collect();
    assert_eq!(got, want);
    assert_eq!(
        &got[..7],
        &[0x3c00, 0x3c02, 0x0001, 0x0000, 0x0002, 0x7bff, 0x7c00]
    );
    // NaN stays NaN.
    let bufs = [vec![0; 2], le(&[f32::NAN], f32::to_le_bytes)];
    let k = unop(UOpKind::Cast, DType::F32, DType::F16, 1);
    let nan = from_le(&run(&k, &bufs, &[]).unwrap()[0], u16::from_le_bytes)[0];
    assert!(f16::from_bits(nan).is_nan());
}

#[test]
fn f16_loads_widen_and_arithmetic_rounds_on_store() {
    let a: Vec<f16> = f16_cases().iter().map(|&x| f16::from_f32(x)).collect();
    let b: Vec<f16> = (0..a.len())
        .map(|i| f16::from_f32(i as f32 * 0.37))
        .collect();
    // f16 -> f32 widening is exact.
    let k = unop(UOpKind::Cast, DType::F16, DType::F32, a.len());
    let bufs = [vec![0; a.len() * 4], le(&a, f16::to_le_bytes)];
    let got = from_le(&run(&k, &bufs, &[]).unwrap()[0], f32::from_le_bytes);
    let want: Vec<f32> = a.iter().map(|x| x.to_f32()).collect();
    assert_eq!(got, want);
    // f16 + f16 computes in f32 and rounds once, on store.
    let k = binop(AluOp::Add, DType::F16, DType::F16, a.len());
    let bufs = [
        vec![0; a.len() * 2],
        le(&a, f16::to_le_bytes),
        le(&b, f16::to_le_bytes),
    ];
    let got = from_le(&run(&k, &bufs, &[]).unwrap()[0], u16::from_le_bytes);
    let want: Vec<u16> = a
        .iter()
        .zip(&b)
        .map(|(x, y)| f16::from_f32(x.to_f32() + y.to_f32()).to_bits())
        .collect();
    assert_eq!(got, want);
}

#[test]
fn bf16_round_trip() {
    let p = |e: i32| 2f32.powi(e);
    let xs = [
        1.0 + p(-8),
        1.0 + 3.0 * p(-8),
        p(-133),
        f32::MAX,
        f32::INFINITY,
        -0.0,
        0.1,
        f32::NAN,
    ];
    let k = unop(UOpKind::Cast, DType::F32, DType::BF16, xs.len());
    let bufs = [vec![0; xs.len() * 2], le(&xs, f32::to_le_bytes)];
    let got = from_le(&run(&k, &bufs, &[]).unwrap()[0], u16::from_le_bytes);
    for (g, x) in got.iter().zip(xs) {
        let want = bf16::from_f32(x);
        if x.is_nan() {
            assert!(bf16::from_bits(*g).is_nan());
        } else {
            assert_eq!(*g, want.to_bits(), "{x}");
        }
    }
    assert_eq!(&got[..2], &[0x3f80, 0x3f82]);
    assert_eq!(got[3], 0x7f80, "f32::MAX rounds to inf in bf16");
    // bf16 -> f32 is exact.
    let k = unop(UOpKind::Cast, DType::BF16, DType::F32, got.len());
    let bufs = [vec![0; got.len() * 4], le(&got, u16::to_le_bytes)];
    let back = from_le(&run(&k, &bufs, &[]).unwrap()[0], f32::from_le_bytes);
    for (b, g) in back.iter().zip(&got) {
        assert_eq!(b.to_bits(), bf16::from_bits(*g).to_f32().to_bits());
    }
}

/// `out[i] = 2*i` for `i < n`, with `n` a variable in [1, 8].
fn symbolic_kernel() -> LinearKernel {
    let mut k = K::default();
    let out = k.global(DType::I32, 8, true);
    let n = k.var("n", 1, 8);
    let (zero, two) = (k.int(0), k.int(2));
    let i = k.lp(zero, n);
    let v = k.alu(AluOp::Mul, DType::I32, &[i, two]);
    k.store(out, i, v);
    k.end(i);
    k.build("sym")
}

#[test]
fn symbolic_variable_bounds_a_loop() {
    let k = symbolic_kernel();
    let init = le(&[-1i32; 8], i32::to_le_bytes);
    let got = from_le(
        &run(&k, std::slice::from_ref(&init), &[5]).unwrap()[0],
        i32::from_le_bytes,
    );
    assert_eq!(got, [0, 2, 4, 6, 8, -1, -1, -1]);
    let err = run(&k, std::slice::from_ref(&init), &[9]).unwrap_err();
    assert!(err.to_string().contains("n = 9"), "{err}");
    let err = run(&k, &[init], &[]).unwrap_err();
    assert!(
        matches!(&err, Error::Device(m) if m.contains("sym") && m.contains("variable")),
        "{err}"
    );
}

#[test]
fn empty_loop_skips_its_body() {
    let mut k = K::default();
    let out = k.global(DType::I32, 1, true);
    let (three, one, zero) = (k.int(3), k.int(1), k.int(0));
    let i = k.lp(three, one);
    k.store(out, zero, i);
    k.end(i);
    let got = run(&k.build("empty"), &[vec![9, 0, 0, 0]], &[]).unwrap();
    assert_eq!(got[0], [9, 0, 0, 0]);
}

#[test]
fn u64_large_values_are_exact() {
    let a = [u64::MAX, u64::MAX - 1, 1 << 63, 12_345_678_901_234_567_890];
    let b = [1u64, u64::MAX, (1 << 63) + 5, 3];
    let k = binop(AluOp::Add, DType::U64, DType::U64, a.len());
    let bufs = [
        vec![0; 32],
        le(&a, u64::to_le_bytes),
        le(&b, u64::to_le_bytes),
    ];
    let got = from_le(&run(&k, &bufs, &[]).unwrap()[0], u64::from_le_bytes);
    let want: Vec<u64> = a.iter().zip(&b).map(|(x, y)| x.wrapping_add(*y)).collect();
    assert_eq!(got, want);
    for (op, f) in [
        (AluOp::Div, (|x, y| x / y) as fn(u64, u64) -> u64),
        (AluOp::Mod, |x, y| x % y),
        (AluOp::Max, |x: u64, y| x.max(y)),
    ] {
        let k = binop(op, DType::U64, DType::U64, a.len());
        let got = from_le(&run(&k, &bufs, &[]).unwrap()[0], u64::from_le_bytes);
        let want: Vec<u64> = a.iter().zip(&b).map(|(x, y)| f(*x, *y)).collect();
        assert_eq!(got, want, "{op}");
    }
    let lt = binop(AluOp::CmpLt, DType::U64, DType::Bool, a.len());
    let got = run(&lt, &[vec![0; 4], bufs[1].clone(), bufs[2].clone()], &[]).unwrap();
    assert_eq!(got[0], [0, 1, 1, 0]);
    // u64 -> f64 -> and u64 -> i64 -> u64 casts.
    let k = unop(UOpKind::Cast, DType::U64, DType::I64, a.len());
    let got = from_le(
        &run(&k, &[vec![0; 32], bufs[1].clone()], &[]).unwrap()[0],
        i64::from_le_bytes,
    );
    assert_eq!(got, a.map(|x| x as i64));
}

/// `x[i] = x[i] * 2 + 1`, with the same buffer passed as output and input.
#[test]
fn in_place_update_with_one_buffer_in_two_slots() {
    let mut k = K::default();
    let out = k.global(DType::F32, 4, true);
    let inp = k.global(DType::F32, 4, false);
    let (zero, four) = (k.int(0), k.int(4));
    let (two, one) = (
        k.cst(Scalar::from_f64(2.0, DType::F32)),
        k.cst(Scalar::from_f64(1.0, DType::F32)),
    );
    let i = k.lp(zero, four);
    let x = k.load(inp, &[i]);
    let y = k.alu(AluOp::MulAcc, DType::F32, &[x, two, one]);
    k.store(out, i, y);
    k.end(i);
    let k = k.build("inplace");
    let dev = Interp::new();
    let id = dev.allocator().alloc(16).unwrap();
    let xs = [1.0f32, -2.5, 0.0, 7.0];
    dev.allocator()
        .copy_in(id, &le(&xs, f32::to_le_bytes))
        .unwrap();
    let p = dev.compile(&k).unwrap();
    p.run(&[id, id], &[]).unwrap();
    p.run(&[id, id], &[]).unwrap();
    let mut b = [0u8; 16];
    dev.allocator().copy_out(id, &mut b).unwrap();
    let want: Vec<f32> = xs.iter().map(|x| (x * 2.0 + 1.0) * 2.0 + 1.0).collect();
    assert_eq!(from_le(&b, f32::from_le_bytes), want);
}

#[test]
fn float_ops_match_plain_rust() {
    let a = [1.0 + 2f32.powi(-12), f32::NAN, 1.0, -0.0, 5.5, -7.25, 2.0];
    let b = [
        1.0 + 2f32.powi(-12),
        1.0,
        f32::NAN,
        3.0,
        2.0,
        2.0,
        f32::INFINITY,
    ];
    let run_op = |op: AluOp, dout: DType| {
        let k = binop(op, DType::F32, dout, a.len());
        let bufs = [
            vec![0; a.len() * dout.itemsize()],
            le(&a, f32::to_le_bytes),
            le(&b, f32::to_le_bytes),
        ];
        run(&k, &bufs, &[]).unwrap().swap_remove(0)
    };
    let max = from_le(&run_op(AluOp::Max, DType::F32), f32::from_le_bytes);
    // The NaN rule `a < b ? b : a`: a NaN first operand passes through, a NaN second one is
    // dropped (README, "Sizes, NaN and long-running processes").
    assert!(max[1].is_nan());
    assert_eq!(
        [max[0], max[2], max[3], max[4], max[5], max[6]],
        [a[0], 1.0, 3.0, 5.5, 2.0, f32::INFINITY]
    );
    let rem = from_le(&run_op(AluOp::Mod, DType::F32), f32::from_le_bytes);
    assert_eq!([rem[4], rem[5]], [5.5 % 2.0, -7.25 % 2.0]);
    let div = from_le(&run_op(AluOp::Div, DType::F32), f32::from_le_bytes);
    assert_eq!(div[6], 0.0);
    assert_eq!(run_op(AluOp::CmpLt, DType::Bool), [0, 0, 0, 1, 0, 1, 1]);
    assert_eq!(run_op(AluOp::CmpEq, DType::Bool), [1, 0, 0, 0, 0, 0, 0]);
    // MulAcc rounds twice: (1+2^-12)^2 rounds to 1+2^-11, so adding -(1+2^-11) gives exactly 0
    // (a fused multiply-add would give 2^-24).
    let mut k = K::default();
    let out = k.global(DType::F32, 1, true);
    let x = k.cst(Scalar::from_f64(a[0].into(), DType::F32));
    let c = k.cst(Scalar::from_f64(-(1.0 + 2f64.powi(-11)), DType::F32));
    let zero = k.int(0);
    let m = k.alu(AluOp::MulAcc, DType::F32, &[x, x, c]);
    k.store(out, zero, m);
    let got = from_le(
        &run(&k.build("mulacc"), &[vec![0; 4]], &[]).unwrap()[0],
        f32::from_le_bytes,
    );
    assert_eq!(got[0], a[0] * a[0] + -(1.0 + 2f32.powi(-11)));
    assert_eq!(got[0], 0.0);
}

#[test]
fn fma_rounds_once() {
    // x = 1+2^-h: x*x - (1+2^-(h-1)) is exactly 2^-2h, which a fused multiply-add keeps and two
    // roundings lose (2^-2h is below half an ulp of x*x in the dtype).
    for (dt, h, want) in [
        (DType::F32, 12, 2f32.powi(-24).to_le_bytes().to_vec()),
        (DType::F64, 30, 2f64.powi(-60).to_le_bytes().to_vec()),
    ] {
        let mut k = K::default();
        let out = k.global(dt, 1, true);
        let x = k.cst(Scalar::from_f64(1.0 + 2f64.powi(-h), dt));
        let c = k.cst(Scalar::from_f64(-(1.0 + 2f64.powi(1 - h)), dt));
        let zero = k.int(0);
        let m = k.alu(AluOp::Fma, dt, &[x, x, c]);
        k.store(out, zero, m);
        let got = run(&k.build("fma"), &[vec![0; dt.itemsize()]], &[]).unwrap();
        assert_eq!(got[0], want, "{dt}");
    }
}

#[test]
fn unary_float_ops() {
    let xs = [0.0f32, 1.0, 2.0, 0.5, 9.0, -1.0];
    let run_op = |op: AluOp| {
        let k = unop(UOpKind::Alu(op), DType::F32, DType::F32, xs.len());
        let bufs = [vec![0; xs.len() * 4], le(&xs, f32::to_le_bytes)];
        from_le(&run(&k, &bufs, &[]).unwrap()[0], f32::from_le_bytes)
    };
    let sqrt = run_op(AluOp::Sqrt);
    assert_eq!(
        &sqrt[..5],
        &xs[..5].iter().map(|x| x.sqrt()).collect::<Vec<_>>()
    );
    assert!(sqrt[5].is_nan());
    assert_eq!(run_op(AluOp::Exp2)[..4], [1.0, 2.0, 4.0, 2f32.sqrt()]);
    assert_eq!(run_op(AluOp::Log2)[1..4], [0.0, 1.0, -1.0]);
    assert_eq!(run_op(AluOp::Recip), xs.map(|x| 1.0 / x));
    assert_eq!(run_op(AluOp::Neg), xs.map(|x| -x));
    assert_eq!(run_op(AluOp::Sin)[0], 0.0);
}

#[test]
fn bitcast_reinterprets_bits() {
    let xs = [1.0f32, -0.0, f32::INFINITY, 3.5];
    let k = unop(UOpKind::Bitcast, DType::F32, DType::U32, xs.len());
    let bufs = [vec![0; 16], le(&xs, f32::to_le_bytes)];
    let got = from_le(&run(&k, &bufs, &[]).unwrap()[0], u32::from_le_bytes);
    assert_eq!(got, xs.map(f32::to_bits));
    let hs = [0x3c00u16, 0x8001, 0x7c00];
    let k = unop(UOpKind::Bitcast, DType::F16, DType::I16, hs.len());
    let bufs = [vec![0; 6], le(&hs, u16::to_le_bytes)];
    let got = from_le(&run(&k, &bufs, &[]).unwrap()[0], i16::from_le_bytes);
    assert_eq!(got, hs.map(|h| h as i16));
}

#[test]
fn where_and_bitwise_ops() {
    let a = [0b1100i32, -1, 5];
    let b = [0b1010i32, 7, 0];
    assert_eq!(run_binop_i32(AluOp::Xor, &a, &b), [0b0110, -8, 5]);
    assert_eq!(run_binop_i32(AluOp::And, &a, &b), [0b1000, 7, 0]);
    assert_eq!(run_binop_i32(AluOp::Or, &a, &b), [0b1110, -1, 5]);
    assert_eq!(run_binop_i32(AluOp::Max, &a, &b), [12, 7, 5]);
    // out[i] = a[i] < b[i] ? a[i] : -a[i]
    let mut k = K::default();
    let out = k.global(DType::I32, 3, true);
    let (ga, gb) = (
        k.global(DType::I32, 3, false),
        k.global(DType::I32, 3, false),
    );
    let (zero, three) = (k.int(0), k.int(3));
    let i = k.lp(zero, three);
    let (x, y) = (k.load(ga, &[i]), k.load(gb, &[i]));
    let c = k.alu(AluOp::CmpLt, DType::Bool, &[x, y]);
    let n = k.alu(AluOp::Neg, DType::I32, &[x]);
    let w = k.alu(AluOp::Where, DType::I32, &[c, x, n]);
    k.store(out, i, w);
    k.end(i);
    let bufs = [
        vec![0; 12],
        le(&a, i32::to_le_bytes),
        le(&b, i32::to_le_bytes),
    ];
    let got = from_le(
        &run(&k.build("where"), &bufs, &[]).unwrap()[0],
        i32::from_le_bytes,
    );
    assert_eq!(got, [-12, -1, -5]);
}

#[test]
fn ungated_out_of_range_load_is_an_error() {
    let mut k = K::default();
    let out = k.global(DType::F32, 4, true);
    let x = k.global(DType::F32, 4, false);
    let (zero, four, ten) = (k.int(0), k.int(4), k.int(10));
    let i = k.lp(zero, four);
    let idx = k.alu(AluOp::Add, DType::I32, &[i, ten]);
    let v = k.load(x, &[idx]);
    k.store(out, i, v);
    k.end(i);
    let err = run(&k.build("oob"), &[vec![0; 16], vec![0; 16]], &[]).unwrap_err();
    let Error::Device(m) = &err else {
        panic!("{err}")
    };
    assert!(
        m.contains("oob") && m.contains("buffer 1") && m.contains("index 10"),
        "{m}"
    );
}

#[test]
fn malformed_kernels_and_bad_buffers_are_errors() {
    // A store to a read-only buffer does not compile.
    let mut k = K::default();
    let x = k.global(DType::F32, 1, false);
    let zero = k.int(0);
    let v = k.load(x, &[zero]);
    k.store(x, zero, v);
    let dev = Interp::new();
    assert!(matches!(
        dev.compile(&k.build("ro")),
        Err(Error::Compile(_))
    ));
    // A loop that never ends does not compile.
    let mut k = K::default();
    let zero = k.int(0);
    k.lp(zero, zero);
    assert!(matches!(
        dev.compile(&k.build("open")),
        Err(Error::Compile(_))
    ));
    // Unknown ids, wrong buffer counts, size mismatches.
    let p = dev.compile(&symbolic_kernel()).unwrap();
    assert!(p.run(&[BufId(999)], &[3]).is_err());
    assert!(p.run(&[], &[3]).is_err());
    let mem = dev.allocator();
    let id = mem.alloc(4).unwrap();
    let e = mem.copy_in(id, &[0; 8]).unwrap_err();
    assert!(
        e.to_string().contains("8 bytes") && e.to_string().contains("4 bytes"),
        "{e}"
    );
    assert!(mem.copy_out(id, &mut [0; 5]).is_err());
    mem.free(id);
    assert!(mem.copy_in(id, &[0; 4]).is_err());
}

#[test]
fn interp_is_send_and_sync_and_runs_on_two_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Interp>();
    send_sync::<Arc<dyn Program>>();
    let dev = Arc::new(Interp::new());
    let n = 1000;
    let k = binop(AluOp::Add, DType::F32, DType::F32, n);
    let prog = dev.compile(&k).unwrap();
    let mem = dev.allocator();
    // Both threads read the same input `shared`, each writes its own output.
    let shared = mem.alloc(n * 4).unwrap();
    let ones = le(&vec![1.0f32; n], f32::to_le_bytes);
    mem.copy_in(shared, &ones).unwrap();
    let threads: Vec<_> = (0..2)
        .map(|t| {
            let (dev, prog) = (dev.clone(), prog.clone());
            std::thread::spawn(move || {
                let mem = dev.allocator();
                let (out, b) = (mem.alloc(n * 4).unwrap(), mem.alloc(n * 4).unwrap());
                let bs: Vec<f32> = (0..n).map(|i| (i * (t + 1)) as f32).collect();
                mem.copy_in(b, &le(&bs, f32::to_le_bytes)).unwrap();
                for _ in 0..50 {
                    prog.run(&[out, shared, b], &[]).unwrap();
                }
                let mut bytes = vec![0; n * 4];
                mem.copy_out(out, &mut bytes).unwrap();
                let got = from_le(&bytes, f32::from_le_bytes);
                let want: Vec<f32> = bs.iter().map(|x| 1.0 + x).collect();
                assert_eq!(got, want);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}
