//! The C renderer against independent Rust arithmetic: hand-built kernels are rendered into one
//! program, compiled with clang and gcc (`-std=c99 -Wall -Wextra -Werror -pedantic -O2`), run, and
//! every output element compared bit for bit with what plain Rust computes under the contract.
//! Plus a golden test pinning the exact C text of a small kernel.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::Command;

use half::{bf16, f16};
use picograd_core::codegen::c::{render_kernel, render_program, CRenderOpts};
use picograd_core::codegen::uops::{LinearKernel, UOpKind};
use picograd_core::ops::{AluOp, Scalar};
use picograd_core::symbolic::Node;
use picograd_core::DType;

// ---------------------------------------------------------------- kernel building

#[path = "common/kernel_builder.rs"]
mod kernel_builder;
#[path = "common/strict_cc.rs"]
mod strict_cc;
use kernel_builder::KernelBuilder as Kb;
use strict_cc::compile_strict;

/// `for i in 0..n { out_k[i] = f_k(in_0[i], in_1[i], ...) }` with `outs` output buffers of the
/// given dtypes and `ins` inputs of the given dtypes; `f` gets the loaded inputs.
fn elementwise(
    name: &str,
    outs: &[DType],
    ins: &[DType],
    n: usize,
    f: impl FnOnce(&mut Kb, &[u32]) -> Vec<u32>,
) -> LinearKernel {
    let mut b = Kb::default();
    let og: Vec<u32> = outs.iter().map(|&d| b.global(d, n, true)).collect();
    let ig: Vec<u32> = ins.iter().map(|&d| b.global(d, n, false)).collect();
    let (zero, end) = (b.int(0), b.int(n as i64));
    let i = b.lp(zero, end);
    let xs: Vec<u32> = ig.iter().map(|&g| b.load(g, &[i])).collect();
    let ys = f(&mut b, &xs);
    for (g, y) in og.iter().zip(ys) {
        b.store(*g, i, y);
    }
    b.end(i);
    b.build(name)
}

// ---------------------------------------------------------------- running C

/// One kernel run: inputs and expected outputs as raw element bits, in buffer order.
struct Case {
    kernel: LinearKernel,
    /// Every buffer's initial contents (outputs too: a sentinel shows untouched elements).
    init: Vec<Vec<u64>>,
    vars: Vec<i32>,
    /// Expected final contents of each writable buffer (in buffer order).
    want: Vec<Vec<u64>>,
}

fn bits_type(dt: DType) -> &'static str {
    match dt.itemsize() {
        1 => "uint8_t",
        2 => "uint16_t",
        4 => "uint32_t",
        _ => "uint64_t",
    }
}

/// A C `main` that runs every case and prints `name buf idx hexbits` for each output element.
fn harness(cases: &[Case], extra: &str) -> String {
    let mut m = String::from("\n#include <stdio.h>\n#include <string.h>\n");
    m.push_str(extra);
    for c in cases {
        let k = &c.kernel;
        writeln!(m, "static void run_{}(void) {{", k.name).unwrap();
        for (j, (bp, init)) in k.bufs.iter().zip(&c.init).enumerate() {
            let bt = bits_type(bp.dtype);
            let vals: Vec<String> = init.iter().map(|v| format!("{v:#x}u")).collect();
            writeln!(
                m,
                "  static const {bt} init{j}[{}] = {{{}}};",
                init.len(),
                vals.join(",")
            )
            .unwrap();
            writeln!(m, "  static {} b{j}[{}];", bp.dtype.c_storage(), init.len()).unwrap();
            writeln!(m, "  memcpy(b{j}, init{j}, sizeof b{j});").unwrap();
        }
        let ptrs: Vec<String> = (0..k.bufs.len()).map(|j| format!("b{j}")).collect();
        let mut vars: Vec<String> = c.vars.iter().map(|v| v.to_string()).collect();
        vars.push("0".into());
        writeln!(
            m,
            "  void *bufs[{}] = {{{}}};",
            ptrs.len().max(1),
            ptrs.join(",")
        )
        .unwrap();
        writeln!(
            m,
            "  const int32_t vars[{}] = {{{}}};",
            vars.len(),
            vars.join(",")
        )
        .unwrap();
        writeln!(m, "  {}_entry(bufs, vars);", k.name).unwrap();
        for (j, bp) in k.bufs.iter().enumerate().filter(|(_, b)| b.writable) {
            let bt = bits_type(bp.dtype);
            writeln!(
                m,
                "  {{ size_t i; for (i = 0; i < {}; i++) {{ {bt} o; memcpy(&o, &b{j}[i], sizeof o); \
                 printf(\"{} {j} %u %llx\\n\", (unsigned)i, (unsigned long long)o); }} }}",
                c.init[j].len(),
                k.name
            )
            .unwrap();
        }
        m.push_str("}\n");
    }
    m.push_str("int main(void) {\n");
    for c in cases {
        writeln!(m, "  run_{}();", c.kernel.name).unwrap();
    }
    m.push_str("  return 0;\n}\n");
    m
}

/// On top of [`strict_cc::STRICT`].
const FLAGS: &[&str] = &["-O2", "-ffp-contract=off", "-lm"];

/// Compiles `src` with `cc`, runs it, and returns its stdout. Panics (failing the test) when the
/// compiler is missing, warns, or the program fails.
fn compile_and_run(cc: &str, src: &str, tag: &str) -> String {
    let dir = tempfile::Builder::new()
        .prefix(&format!("picograd-render-c-{tag}-{cc}-"))
        .tempdir()
        .unwrap()
        .keep();
    std::fs::create_dir_all(&dir).unwrap();
    let (c, exe) = (dir.join("prog.c"), dir.join("prog"));
    std::fs::write(&c, src).unwrap();
    if compile_strict(cc, &c, &exe, FLAGS).is_none() {
        panic!("C compiler `{cc}` not runnable; it is required for this test");
    }
    let run = Command::new(&exe).output().expect("run compiled program");
    assert!(
        run.status.success(),
        "program built by {cc} failed: {run:?}"
    );
    std::fs::remove_dir_all(&dir).ok();
    String::from_utf8(run.stdout).unwrap()
}

/// Renders all cases into one program and checks them under clang and gcc.
fn check_cases(cases: &[Case], opts: &CRenderOpts, extra: &str, tag: &str) {
    let ks: Vec<&LinearKernel> = cases.iter().map(|c| &c.kernel).collect();
    let src = render_program(&ks, opts).unwrap() + &harness(cases, extra);
    if let Ok(p) = std::env::var("PG_DUMP_C") {
        std::fs::write(p, &src).unwrap();
    }
    for cc in ["clang", "gcc"] {
        let out = compile_and_run(cc, &src, tag);
        let mut got: BTreeMap<(String, usize), Vec<u64>> = BTreeMap::new();
        for line in out.lines() {
            let p: Vec<&str> = line.split(' ').collect();
            let v = u64::from_str_radix(p[3], 16).unwrap();
            got.entry((p[0].to_string(), p[1].parse().unwrap()))
                .or_default()
                .push(v);
        }
        for c in cases {
            let outs = c.kernel.bufs.iter().enumerate().filter(|(_, b)| b.writable);
            for ((j, _), want) in outs.zip(&c.want) {
                let g = &got[&(c.kernel.name.clone(), j)];
                for (e, (gv, wv)) in g.iter().zip(want).enumerate() {
                    assert_eq!(
                        gv, wv,
                        "{cc}: kernel {} buffer {j} element {e}: got {gv:#x}, want {wv:#x}",
                        c.kernel.name
                    );
                }
                assert_eq!(g.len(), want.len());
            }
        }
    }
}

// ---------------------------------------------------------------- value helpers

fn f32s(v: &[f32]) -> Vec<u64> {
    v.iter().map(|x| u64::from(x.to_bits())).collect()
}
fn i32s(v: &[i32]) -> Vec<u64> {
    v.iter().map(|x| u64::from(*x as u32)).collect()
}
const SENT32: u64 = 0xdead_beef;
fn sentinel(n: usize, dt: DType) -> Vec<u64> {
    let mask = if dt.itemsize() == 8 {
        u64::MAX
    } else {
        (1u64 << (dt.itemsize() * 8)) - 1
    };
    vec![SENT32 & mask; n]
}

/// The contract's float max, `a < b ? b : a`: `a` when either is NaN or they are equal (±0).
fn pg_max(a: f32, b: f32) -> f32 {
    if a < b {
        b
    } else {
        a
    }
}

// ---------------------------------------------------------------- the cases

fn case_add_max() -> Case {
    let a = [1.5f32, -2.0, f32::INFINITY, f32::NAN, 0.0, -0.0, 1e30, 3.0];
    let b = [2.25f32, 7.0, 1.0, 1.0, -0.0, 0.0, 1e30, f32::NAN];
    let k = elementwise(
        "k_add_max",
        &[DType::F32; 2],
        &[DType::F32; 2],
        8,
        |k, x| {
            vec![
                k.alu(AluOp::Add, DType::F32, &[x[0], x[1]]),
                k.alu(AluOp::Max, DType::F32, &[x[0], x[1]]),
            ]
        },
    );
    let add: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    let max: Vec<f32> = a.iter().zip(&b).map(|(x, y)| pg_max(*x, *y)).collect();
    Case {
        kernel: k,
        init: vec![
            sentinel(8, DType::F32),
            sentinel(8, DType::F32),
            f32s(&a),
            f32s(&b),
        ],
        vars: vec![],
        want: vec![f32s(&add), f32s(&max)],
    }
}

/// `out[r] = sum_j in[r*5+j]` and `out2[r] = max_j in[r*5+j]`, with accumulators.
fn case_reduce() -> Case {
    let mut b = Kb::default();
    let (out, out2) = (b.global(DType::F32, 3, true), b.global(DType::F32, 3, true));
    let inp = b.global(DType::F32, 15, false);
    let (z, three, five) = (b.int(0), b.int(3), b.int(5));
    let r = b.lp(z, three);
    let acc = b.push(
        UOpKind::DefineAcc(Scalar::zero(DType::F32)),
        DType::F32,
        &[],
    );
    let macc = b.push(
        UOpKind::DefineAcc(Scalar::lowest(DType::F32)),
        DType::F32,
        &[],
    );
    let j = b.lp(z, five);
    let base = b.alu(AluOp::Mul, DType::I32, &[r, five]);
    let idx = b.alu(AluOp::Add, DType::I32, &[base, j]);
    let x = b.load(inp, &[idx]);
    let s = b.alu(AluOp::Add, DType::F32, &[acc, x]);
    let a1 = b.push(UOpKind::Assign, DType::F32, &[acc, s]);
    let m = b.alu(AluOp::Max, DType::F32, &[macc, x]);
    b.push(UOpKind::Assign, DType::F32, &[macc, m]);
    b.end(j);
    b.store(out, r, a1);
    b.store(out2, r, macc);
    b.end(r);
    let data: Vec<f32> = (0..15).map(|i| (i as f32) * 0.37 - 2.0).collect();
    let mut data = data;
    data[7] = f32::NAN;
    let (mut sums, mut maxs) = (vec![], vec![]);
    for r in 0..3 {
        let (mut s, mut m) = (0.0f32, f32::NEG_INFINITY);
        for j in 0..5 {
            s += data[r * 5 + j];
            m = pg_max(m, data[r * 5 + j]);
        }
        sums.push(s);
        maxs.push(m);
    }
    Case {
        kernel: b.build("k_reduce"),
        init: vec![
            sentinel(3, DType::F32),
            sentinel(3, DType::F32),
            f32s(&data),
        ],
        vars: vec![],
        want: vec![f32s(&sums), f32s(&maxs)],
    }
}

/// Padding by one on each side: `out[i] = 0 < i && i < n+1 ? in[i-1] : 0`; the gated index is
/// out of bounds where the gate is false.
fn case_pad() -> Case {
    let n = 5;
    let mut b = Kb::default();
    let out = b.global(DType::F32, n + 2, true);
    let inp = b.global(DType::F32, n, false);
    let (z, one, end, hi) = (b.int(0), b.int(1), b.int(n as i64 + 2), b.int(n as i64 + 1));
    let i = b.lp(z, end);
    let g0 = b.alu(AluOp::CmpLt, DType::Bool, &[z, i]);
    let g1 = b.alu(AluOp::CmpLt, DType::Bool, &[i, hi]);
    let g = b.alu(AluOp::And, DType::Bool, &[g0, g1]);
    let idx = b.alu(AluOp::Sub, DType::I32, &[i, one]);
    let x = b.push(UOpKind::Load, DType::F32, &[inp, idx, g]);
    b.store(out, i, x);
    b.end(i);
    let data = [1.0f32, 2.0, 3.0, 4.0, 5.0];
    let want = [0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0, 0.0];
    Case {
        kernel: b.build("k_pad"),
        init: vec![sentinel(n + 2, DType::F32), f32s(&data)],
        vars: vec![],
        want: vec![f32s(&want)],
    }
}

fn floordiv(a: i32, b: i32) -> i32 {
    if b == 0 {
        return 0;
    }
    (a as f64 / b as f64).floor() as i64 as i32
}
fn floormod(a: i32, b: i32) -> i32 {
    if b == 0 {
        return 0;
    }
    (i64::from(a) - i64::from(b) * (a as f64 / b as f64).floor() as i64) as i32
}

/// Wrapping add/sub/mul/neg, truncating div/mod with the zero and MIN/-1 rules, floor div/mod,
/// max, xor, and int → int casts.
fn case_int() -> Case {
    let pairs: [(i32, i32); 12] = [
        (i32::MAX, 1),
        (i32::MIN, -1),
        (7, 0),
        (-7, 2),
        (7, -2),
        (-7, -2),
        (i32::MIN, 0),
        (123_456, 654_321),
        (-9, 3),
        (i32::MIN, 2),
        (0, -1),
        (-1, i32::MIN),
    ];
    let (a, b): (Vec<i32>, Vec<i32>) = pairs.iter().copied().unzip();
    use AluOp::*;
    let ops = [Add, Sub, Mul, Div, Mod, FloorDiv, FloorMod, Max, Xor];
    let mut outs = vec![DType::I32; ops.len() + 1];
    outs.extend([DType::I8, DType::U16]);
    let k = elementwise(
        "k_int",
        &outs,
        &[DType::I32, DType::I32],
        pairs.len(),
        |k, x| {
            let mut ys: Vec<u32> = ops
                .iter()
                .map(|&op| k.alu(op, DType::I32, &[x[0], x[1]]))
                .collect();
            ys.push(k.alu(Neg, DType::I32, &[x[0]]));
            ys.push(k.cast(x[0], DType::I8));
            ys.push(k.cast(x[1], DType::U16));
            ys
        },
    );
    let f: [fn(i32, i32) -> i32; 9] = [
        i32::wrapping_add,
        i32::wrapping_sub,
        i32::wrapping_mul,
        |a, b| if b == 0 { 0 } else { a.wrapping_div(b) },
        |a, b| if b == 0 { 0 } else { a.wrapping_rem(b) },
        floordiv,
        floormod,
        |a, b| a.max(b),
        |a, b| a ^ b,
    ];
    let mut want: Vec<Vec<u64>> = f
        .iter()
        .map(|g| i32s(&a.iter().zip(&b).map(|(x, y)| g(*x, *y)).collect::<Vec<_>>()))
        .collect();
    want.push(i32s(
        &a.iter().map(|x| x.wrapping_neg()).collect::<Vec<_>>(),
    ));
    want.push(a.iter().map(|x| u64::from(*x as i8 as u8)).collect());
    want.push(b.iter().map(|x| u64::from(*x as u16)).collect());
    let n = pairs.len();
    let mut init: Vec<Vec<u64>> = outs.iter().map(|d| sentinel(n, *d)).collect();
    init.push(i32s(&a));
    init.push(i32s(&b));
    Case {
        kernel: k,
        init,
        vars: vec![],
        want,
    }
}

/// Saturating float → int casts (f32 and f64 sources), int → float, float → bool.
fn case_casts() -> Case {
    let xs = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1e10,
        -1e10,
        3.7,
        -3.7,
        255.5,
        256.0,
        -0.5,
        2_147_483_520.0,
        2_147_483_648.0,
        -2_147_483_648.0,
        -129.0,
        0.0,
        4_294_967_040.0,
    ];
    let ds = xs.map(|x| f64::from(x) * 4.3e9);
    let outs = [
        DType::I32,
        DType::U8,
        DType::I8,
        DType::I64,
        DType::U32,
        DType::I64,
        DType::U64,
        DType::Bool,
        DType::F32,
    ];
    let k = elementwise(
        "k_casts",
        &outs,
        &[DType::F32, DType::F64, DType::I32],
        xs.len(),
        |k, x| {
            let mut ys: Vec<u32> = outs[..5].iter().map(|&d| k.cast(x[0], d)).collect();
            ys.push(k.cast(x[1], DType::I64));
            ys.push(k.cast(x[1], DType::U64));
            ys.push(k.cast(x[0], DType::Bool));
            ys.push(k.cast(x[2], DType::F32));
            ys
        },
    );
    let ints: Vec<i32> = (0..xs.len() as i32)
        .map(|i| i.wrapping_mul(0x1357_9bdf))
        .collect();
    let want = vec![
        xs.iter().map(|x| u64::from(*x as i32 as u32)).collect(),
        xs.iter().map(|x| u64::from(*x as u8)).collect(),
        xs.iter().map(|x| u64::from(*x as i8 as u8)).collect(),
        xs.iter().map(|x| *x as i64 as u64).collect(),
        xs.iter().map(|x| u64::from(*x as u32)).collect(),
        ds.iter().map(|x| *x as i64 as u64).collect(),
        ds.iter().map(|x| *x as u64).collect(),
        xs.iter().map(|x| u64::from(*x != 0.0)).collect(),
        ints.iter()
            .map(|x| u64::from((*x as f32).to_bits()))
            .collect(),
    ];
    let n = xs.len();
    let mut init: Vec<Vec<u64>> = outs.iter().map(|d| sentinel(n, *d)).collect();
    init.push(f32s(&xs));
    init.push(ds.iter().map(|x| x.to_bits()).collect());
    init.push(i32s(&ints));
    Case {
        kernel: k,
        init,
        vars: vec![],
        want,
    }
}

/// f32 values probing f16/bf16 rounding: ties, subnormals, overflow, specials, and a spread of
/// arbitrary bit patterns.
fn f16_probe_values() -> Vec<f32> {
    let mut v = vec![
        1.0,
        65504.0,
        65519.99,
        65520.0,
        1.0 + 2f32.powi(-11),
        1.0 + 3.0 * 2f32.powi(-11),
        2f32.powi(-24),
        2f32.powi(-25),
        2f32.powi(-25) * 1.0001,
        3.0 * 2f32.powi(-25),
        6e-5,
        6.1e-5,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::from_bits(0x7f80_0001),
        f32::from_bits(0xffc1_2345),
        1e-10,
        -1e10,
        f32::MAX,
        f32::MIN_POSITIVE,
        f32::from_bits(1),
        1.0 + 2f32.powi(-8),
        1.0 + 3.0 * 2f32.powi(-8),
        f32::from_bits(0x7f7f_8000),
    ];
    v.extend((0..4000u32).map(|i| f32::from_bits(i.wrapping_mul(0x9e37_79b1))));
    v
}

/// f32 → f16/bf16 by Cast + Store, and every f16/bf16 bit pattern → f32 by Load + Cast.
fn case_half() -> Case {
    let xs = f16_probe_values();
    let n = 65536;
    let mut b = Kb::default();
    let (oh, ob) = (
        b.global(DType::F16, n, true),
        b.global(DType::BF16, n, true),
    );
    let (of, og) = (b.global(DType::F32, n, true), b.global(DType::F32, n, true));
    let (x, ih, ib) = (
        b.global(DType::F32, n, false),
        b.global(DType::F16, n, false),
        b.global(DType::BF16, n, false),
    );
    let (z, m, nn) = (b.int(0), b.int(xs.len() as i64), b.int(n as i64));
    let i = b.lp(z, m);
    let v = b.load(x, &[i]);
    let h = b.cast(v, DType::F16);
    b.store(oh, i, h);
    let bb = b.cast(v, DType::BF16);
    b.store(ob, i, bb);
    b.end(i);
    let i = b.lp(z, nn);
    let h = b.load(ih, &[i]);
    let hf = b.cast(h, DType::F32);
    b.store(of, i, hf);
    let bb = b.load(ib, &[i]);
    let bf = b.cast(bb, DType::F32);
    b.store(og, i, bf);
    b.end(i);
    let pad = |mut v: Vec<u64>, fill: u64| {
        v.resize(n, fill);
        v
    };
    let all: Vec<u64> = (0..n as u64).collect();
    let want = vec![
        pad(
            xs.iter()
                .map(|x| u64::from(f16::from_f32(*x).to_bits()))
                .collect(),
            0xbeef,
        ),
        pad(
            xs.iter()
                .map(|x| u64::from(bf16::from_f32(*x).to_bits()))
                .collect(),
            0xbeef,
        ),
        (0..=u16::MAX)
            .map(|h| u64::from(f16::from_bits(h).to_f32().to_bits()))
            .collect(),
        (0..=u16::MAX)
            .map(|h| u64::from(bf16::from_bits(h).to_f32().to_bits()))
            .collect(),
    ];
    let init = vec![
        sentinel(n, DType::F16),
        sentinel(n, DType::BF16),
        sentinel(n, DType::F32),
        sentinel(n, DType::F32),
        pad(f32s(&xs), 0),
        all.clone(),
        all,
    ];
    Case {
        kernel: b.build("k_half"),
        init,
        vars: vec![],
        want,
    }
}

/// A symbolic bound: `for i in 0..n { out[i] = in[i] * 2 }`, and i64 index arithmetic with a
/// floor division: `out2[i] = floordiv(i - 3, 2)` over an i64 loop.
fn case_var_loop() -> Case {
    let mut b = Kb::default();
    let (out, out2) = (b.global(DType::F32, 8, true), b.global(DType::I64, 8, true));
    let inp = b.global(DType::F32, 8, false);
    let nv = b.var("n", 1, 8);
    let (z, two) = (b.int(0), b.cst(Scalar::from_f64(2.0, DType::F32)));
    let i = b.lp(z, nv);
    let x = b.load(inp, &[i]);
    let y = b.alu(AluOp::Mul, DType::F32, &[x, two]);
    b.store(out, i, y);
    b.end(i);
    let (z64, e64) = (
        b.cst(Scalar::from_i64(0, DType::I64)),
        b.cst(Scalar::from_i64(8, DType::I64)),
    );
    let (three, two64) = (
        b.cst(Scalar::from_i64(3, DType::I64)),
        b.cst(Scalar::from_i64(2, DType::I64)),
    );
    let j = b.lp(z64, e64);
    let d = b.alu(AluOp::Sub, DType::I64, &[j, three]);
    let q = b.alu(AluOp::FloorDiv, DType::I64, &[d, two64]);
    let r = b.alu(AluOp::FloorMod, DType::I64, &[d, three]);
    let s = b.alu(AluOp::Add, DType::I64, &[q, r]);
    b.store(out2, j, s);
    b.end(j);
    let data: Vec<f32> = (0..8).map(|i| i as f32 + 0.5).collect();
    let mut want0: Vec<u64> = data[..5]
        .iter()
        .map(|x| u64::from((x * 2.0).to_bits()))
        .collect();
    want0.resize(8, SENT32);
    let want1: Vec<u64> = (0..8i64)
        .map(|j| ((j - 3).div_euclid(2) + (j - 3).rem_euclid(3)) as u64)
        .collect();
    Case {
        kernel: b.build("k_var_loop"),
        init: vec![
            sentinel(8, DType::F32),
            sentinel(8, DType::I64),
            f32s(&data),
        ],
        vars: vec![5],
        want: vec![want0, want1],
    }
}

/// Bitcasts, where/comparisons, float mod, sqrt, recip, neg.
fn case_misc() -> Case {
    let xs = [2.0f32, -7.5, 0.25, 9.0, -0.0, 16.0];
    let ys = [3.0f32, 2.0, 0.25, -4.0, 1.0, 5.0];
    let outs = [
        DType::U32,
        DType::F32,
        DType::F32,
        DType::F32,
        DType::F32,
        DType::F32,
        DType::F32,
    ];
    let k = elementwise(
        "k_misc",
        &outs,
        &[DType::F32, DType::F32],
        xs.len(),
        |k, x| {
            let bits = k.push(UOpKind::Bitcast, DType::U32, &[x[0]]);
            let back = k.push(UOpKind::Bitcast, DType::F32, &[bits]);
            let lt = k.alu(AluOp::CmpLt, DType::Bool, &[x[0], x[1]]);
            let w = k.alu(AluOp::Where, DType::F32, &[lt, x[0], x[1]]);
            let m = k.alu(AluOp::Mod, DType::F32, &[x[0], x[1]]);
            let a = k.alu(AluOp::Max, DType::F32, &[x[0], x[1]]);
            let sq = k.alu(AluOp::Sqrt, DType::F32, &[a]);
            let r = k.alu(AluOp::Recip, DType::F32, &[x[1]]);
            let ng = k.alu(AluOp::Neg, DType::F32, &[x[0]]);
            let ma = k.alu(AluOp::MulAcc, DType::F32, &[x[0], x[1], r]);
            vec![bits, back, w, m, sq, ng, ma]
        },
    );
    let z = xs.iter().zip(&ys);
    let want = vec![
        xs.iter().map(|x| u64::from(x.to_bits())).collect(),
        f32s(&xs),
        f32s(
            &z.clone()
                .map(|(a, b)| if a < b { *a } else { *b })
                .collect::<Vec<_>>(),
        ),
        f32s(&z.clone().map(|(a, b)| a % b).collect::<Vec<_>>()),
        f32s(
            &z.clone()
                .map(|(a, b)| pg_max(*a, *b).sqrt())
                .collect::<Vec<_>>(),
        ),
        f32s(&xs.iter().map(|a| -a).collect::<Vec<_>>()),
        f32s(&z.map(|(a, b)| a * b + 1.0 / b).collect::<Vec<_>>()),
    ];
    let n = xs.len();
    let mut init: Vec<Vec<u64>> = outs.iter().map(|d| sentinel(n, *d)).collect();
    init.push(f32s(&xs));
    init.push(f32s(&ys));
    Case {
        kernel: k,
        init,
        vars: vec![],
        want,
    }
}

/// Bool arithmetic (add = or, mul = and, sub = xor, neg = not), comparisons, bool → int cast,
/// and i8/u16 wrapping arithmetic (which C would otherwise promote to int).
/// `Fma` rounds once (C's `__builtin_fmaf`/`__builtin_fma`), `MulAcc` twice: checked against
/// Rust's `mul_add` and `a * b + c`, on values where the two differ.
fn case_fma() -> Case {
    let e = 1.0 + 2f32.powi(-12);
    let xs = [e, 0.1, -3.7, 1e30, 7.0];
    let ys = [e, 0.3, 0.3, 1e10, -0.5];
    let cs = [-(1.0 + 2f32.powi(-11)), -0.03, 1.11, 1.0, 3.5];
    let wide = |v: &[f32]| v.iter().map(|&x| f64::from(x) / 3.0).collect::<Vec<f64>>();
    let (xd, yd, cd) = (wide(&xs), wide(&ys), wide(&cs));
    let outs = [DType::F32, DType::F32, DType::F64];
    let ins = [
        DType::F32,
        DType::F32,
        DType::F32,
        DType::F64,
        DType::F64,
        DType::F64,
    ];
    let k = elementwise("k_fma", &outs, &ins, xs.len(), |k, x| {
        vec![
            k.alu(AluOp::Fma, DType::F32, &[x[0], x[1], x[2]]),
            k.alu(AluOp::MulAcc, DType::F32, &[x[0], x[1], x[2]]),
            k.alu(AluOp::Fma, DType::F64, &[x[3], x[4], x[5]]),
        ]
    });
    let fused: Vec<f32> = (0..xs.len()).map(|i| xs[i].mul_add(ys[i], cs[i])).collect();
    let twice: Vec<f32> = (0..xs.len()).map(|i| xs[i] * ys[i] + cs[i]).collect();
    assert_eq!(
        fused[0],
        2f32.powi(-24),
        "the probe tells fused from unfused"
    );
    assert_eq!(twice[0], 0.0);
    let f64s = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<u64>>();
    let fused64: Vec<f64> = (0..xs.len()).map(|i| xd[i].mul_add(yd[i], cd[i])).collect();
    let n = xs.len();
    let mut init: Vec<Vec<u64>> = outs.iter().map(|d| sentinel(n, *d)).collect();
    init.extend([
        f32s(&xs),
        f32s(&ys),
        f32s(&cs),
        f64s(&xd),
        f64s(&yd),
        f64s(&cd),
    ]);
    Case {
        kernel: k,
        init,
        vars: vec![],
        want: vec![f32s(&fused), f32s(&twice), f64s(&fused64)],
    }
}

fn case_small_ints() -> Case {
    let a: [u8; 4] = [0, 0, 1, 1];
    let b: [u8; 4] = [0, 1, 0, 1];
    let p: [i8; 4] = [127, -128, 100, -7];
    let q: [i8; 4] = [1, -1, 100, 3];
    use AluOp::*;
    let outs = [
        DType::Bool,
        DType::Bool,
        DType::Bool,
        DType::Bool,
        DType::Bool,
        DType::I32,
        DType::I8,
        DType::I8,
        DType::U16,
    ];
    let ins = [DType::Bool, DType::Bool, DType::I8, DType::I8];
    let k = elementwise("k_small_ints", &outs, &ins, 4, |k, x| {
        let mut ys: Vec<u32> = [Add, Mul, Sub]
            .iter()
            .map(|&op| k.alu(op, DType::Bool, &[x[0], x[1]]))
            .collect();
        ys.push(k.alu(Neg, DType::Bool, &[x[0]]));
        ys.push(k.alu(CmpEq, DType::Bool, &[x[2], x[3]]));
        ys.push(k.cast(x[0], DType::I32));
        ys.push(k.alu(Add, DType::I8, &[x[2], x[3]]));
        ys.push(k.alu(Mul, DType::I8, &[x[2], x[3]]));
        let w = k.cast(x[2], DType::U16);
        ys.push(k.alu(Mul, DType::U16, &[w, w]));
        ys
    });
    let z = || a.iter().zip(&b);
    let zi = || p.iter().zip(&q);
    let u = |v: Vec<u8>| v.into_iter().map(u64::from).collect::<Vec<u64>>();
    let want = vec![
        u(z().map(|(x, y)| x | y).collect()),
        u(z().map(|(x, y)| x & y).collect()),
        u(z().map(|(x, y)| x ^ y).collect()),
        u(a.iter().map(|x| u8::from(*x == 0)).collect()),
        u(zi().map(|(x, y)| u8::from(x == y)).collect()),
        a.iter().map(|x| u64::from(*x)).collect(),
        u(zi().map(|(x, y)| x.wrapping_add(*y) as u8).collect()),
        u(zi().map(|(x, y)| x.wrapping_mul(*y) as u8).collect()),
        p.iter()
            .map(|x| u64::from((*x as u16).wrapping_mul(*x as u16)))
            .collect(),
    ];
    let mut init: Vec<Vec<u64>> = outs.iter().map(|d| sentinel(4, *d)).collect();
    init.push(u(a.to_vec()));
    init.push(u(b.to_vec()));
    init.push(u(p.iter().map(|x| *x as u8).collect()));
    init.push(u(q.iter().map(|x| *x as u8).collect()));
    Case {
        kernel: k,
        init,
        vars: vec![],
        want,
    }
}

/// Unused parameters, dead loads and a dead accumulator must not trip `-Wunused`; a store with a
/// gate (fourth source) writes only where the gate holds.
fn case_dead_and_gated_store() -> Case {
    let mut b = Kb::default();
    let out = b.global(DType::F32, 4, true);
    let unused = b.global(DType::F32, 4, false);
    let inp = b.global(DType::F32, 4, false);
    b.var("m", 0, 9);
    let (z, four, two) = (b.int(0), b.int(4), b.int(2));
    let acc = b.push(
        UOpKind::DefineAcc(Scalar::zero(DType::F32)),
        DType::F32,
        &[],
    );
    let i = b.lp(z, four);
    let _dead = b.load(unused, &[i]);
    let x = b.load(inp, &[i]);
    let s = b.alu(AluOp::Add, DType::F32, &[acc, x]);
    b.push(UOpKind::Assign, DType::F32, &[acc, s]);
    let g = b.alu(AluOp::CmpLt, DType::Bool, &[i, two]);
    b.push(UOpKind::Store, DType::F32, &[out, i, x, g]);
    b.end(i);
    let data = [1.0f32, 2.0, 3.0, 4.0];
    let mut want = f32s(&data[..2]);
    want.extend([SENT32, SENT32]);
    Case {
        kernel: b.build("k_dead"),
        init: vec![sentinel(4, DType::F32), f32s(&data), f32s(&data)],
        vars: vec![3],
        want: vec![want],
    }
}

/// Without libm the math ops call `pg_<fn>` functions the target supplies (here: stand-ins).
#[test]
fn without_libm_math_calls_target_functions() {
    use AluOp::*;
    let xs = [1.0f32, 2.0, 3.0];
    let k = elementwise("k_nolibm", &[DType::F32; 5], &[DType::F32], 3, |k, x| {
        let mut ys: Vec<u32> = [Exp2, Log2, Sin, Sqrt]
            .iter()
            .map(|&op| k.alu(op, DType::F32, &[x[0]]))
            .collect();
        ys.push(k.alu(Mod, DType::F32, &[x[0], x[0]]));
        ys
    });
    let opts = CRenderOpts {
        libm: false,
        ..CRenderOpts::default()
    };
    assert!(!render_kernel(&k, &opts).unwrap().contains("math.h"));
    let extra = "float pg_exp2f(float x) { return x + 100.0f; }\n\
                 float pg_log2f(float x) { return x + 200.0f; }\n\
                 float pg_sinf(float x) { return x + 300.0f; }\n\
                 float pg_sqrtf(float x) { return x + 400.0f; }\n\
                 float pg_fmodf(float a, float b) { return a * b; }\n";
    let want: Vec<Vec<u64>> = [100.0f32, 200.0, 300.0, 400.0]
        .iter()
        .map(|c| f32s(&xs.map(|x| x + c)))
        .chain([f32s(&xs.map(|x| x * x))])
        .collect();
    let mut init: Vec<Vec<u64>> = (0..5).map(|_| sentinel(3, DType::F32)).collect();
    init.push(f32s(&xs));
    let case = Case {
        kernel: k,
        init,
        vars: vec![],
        want,
    };
    check_cases(&[case], &opts, extra, "nolibm");
}

#[test]
fn kernels_compute_the_contract_under_clang_and_gcc() {
    let cases = [
        case_add_max(),
        case_reduce(),
        case_pad(),
        case_int(),
        case_casts(),
        case_half(),
        case_var_loop(),
        case_misc(),
        case_fma(),
        case_small_ints(),
        case_dead_and_gated_store(),
    ];
    // The symbolic layer's C must compile against the prelude's floor helpers.
    let s = Node::var("s", -5, 5);
    let extra = format!(
        "int32_t sym_check(int32_t s);\nint32_t sym_check(int32_t s) {{ return (int32_t)({} + {}); }}\n",
        s.floordiv(2).render_c(),
        (&s * 3).modulo(4).render_c()
    );
    check_cases(&cases, &CRenderOpts::default(), &extra, "main");
}

/// Float max under the contract's NaN rule on every pair of special values (two NaN payloads of
/// either sign, ±0, ±inf, numbers): the interpreter gives `pg_max` bit for bit, and the C
/// (clang and gcc) gives exactly what the interpreter gave.
#[test]
fn float_max_is_bit_identical_on_the_interpreter_and_in_c() {
    use picograd_core::device::{BufId, Device};
    let specials = [
        f32::from_bits(0x7fc0_0001),
        f32::from_bits(0xffc0_0002),
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1.5,
        -2.0,
        f32::MIN_POSITIVE,
    ];
    let pairs: Vec<(f32, f32)> = specials
        .iter()
        .flat_map(|&a| specials.iter().map(move |&b| (a, b)))
        .collect();
    let (a, b): (Vec<f32>, Vec<f32>) = pairs.iter().copied().unzip();
    let n = pairs.len();
    let k = elementwise("k_max_nan", &[DType::F32], &[DType::F32; 2], n, |k, x| {
        vec![k.alu(AluOp::Max, DType::F32, &[x[0], x[1]])]
    });
    let dev = picograd_core::Interp::new();
    let mem = dev.allocator();
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let ids: Vec<BufId> = [bytes(&vec![0.0; n]), bytes(&a), bytes(&b)]
        .iter()
        .map(|buf| {
            let id = mem.alloc(buf.len()).unwrap();
            mem.copy_in(id, buf).unwrap();
            id
        })
        .collect();
    dev.compile(&k).unwrap().run(&ids, &[]).unwrap();
    let mut out = vec![0u8; n * 4];
    mem.copy_out(ids[0], &mut out).unwrap();
    let interp: Vec<u64> = out
        .chunks_exact(4)
        .map(|c| u64::from(u32::from_le_bytes(c.try_into().unwrap())))
        .collect();
    let want = f32s(&pairs.iter().map(|&(x, y)| pg_max(x, y)).collect::<Vec<_>>());
    for (i, (g, w)) in interp.iter().zip(&want).enumerate() {
        assert_eq!(
            g, w,
            "interpreter max{:?}: got {g:#x}, want {w:#x}",
            pairs[i]
        );
    }
    let case = Case {
        kernel: k,
        init: vec![sentinel(n, DType::F32), f32s(&a), f32s(&b)],
        vars: vec![],
        want: vec![interp],
    };
    check_cases(&[case], &CRenderOpts::default(), "", "maxnan");
}

/// `for i in 0..n { out[i] = max(a[i], 0) + a[(i - 1) mod n] }`: a var bound, floor modulo
/// of a possibly negative index, a relu.
#[test]
fn golden_relu_roll() {
    let mut b = Kb::default();
    let out = b.global(DType::F32, 16, true);
    let a = b.global(DType::F32, 16, false);
    let n = b.var("n", 1, 16);
    let (z, one, fz) = (b.int(0), b.int(1), b.cst(Scalar::zero(DType::F32)));
    let i = b.lp(z, n);
    let x = b.load(a, &[i]);
    let r = b.alu(AluOp::Max, DType::F32, &[x, fz]);
    let im1 = b.alu(AluOp::Sub, DType::I32, &[i, one]);
    let j = b.alu(AluOp::FloorMod, DType::I32, &[im1, n]);
    let y = b.load(a, &[j]);
    let s = b.alu(AluOp::Add, DType::F32, &[r, y]);
    b.store(out, i, s);
    b.end(i);
    let got = render_kernel(&b.build("E_n"), &CRenderOpts::default()).unwrap();
    let want = r#"/* generated by picograd */
#include <stdint.h>

static inline __attribute__((unused)) long long pg_floormod(long long a, long long b) {
  long long r;
  if (b == 0 || b == -1) return 0;
  r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

void E_n(float *restrict data0, const float *restrict data1, int32_t n) {
  for (int32_t ridx0 = 0; ridx0 < n; ridx0++) {
    const float val7 = data1[ridx0];
    const float val8 = val7 < 0.0f ? 0.0f : val7;
    const int32_t val9 = ridx0 - 1;
    const int32_t val10 = (int32_t)pg_floormod(val9, n);
    const float val11 = data1[val10];
    const float val12 = val8 + val11;
    data0[ridx0] = val12;
  }
}

void E_n_entry(void **bufs, const int32_t *vars) {
  E_n((float *)bufs[0], (const float *)bufs[1], vars[0]);
}
"#;
    assert_eq!(got, want, "\n{got}");
}

// ---------------------------------------------------------------- vector UOps

/// A register tile in vector UOps, as the linearizer makes one for an `Opt::Vectorize`: per row
/// `r`, a 4-lane accumulator (lanes `l = 0..4`) folding `x[r][j][l] * w[j]` over `j` — unfused
/// (`MulAcc`) and fused (`Fma`) — with `w[j]` broadcast (`Vectorize` of one scalar), then stored
/// to consecutive elements, and once more through a ReLU read lane by lane (`Gep`).
fn packed_tile() -> (LinearKernel, Vec<f32>, Vec<f32>) {
    const ROWS: usize = 2;
    const J: usize = 5;
    let mut b = Kb::default();
    let outs: Vec<u32> = (0..3)
        .map(|_| b.global(DType::F32, ROWS * 4, true))
        .collect();
    let (x, w) = (
        b.global(DType::F32, ROWS * J * 4, false),
        b.global(DType::F32, J, false),
    );
    let (z, rows, js) = (b.int(0), b.int(ROWS as i64), b.int(J as i64));
    let (four, twenty) = (b.int(4), b.int((J * 4) as i64));
    let fz = b.cst(Scalar::zero(DType::F32));
    let r = b.lp(z, rows);
    let vacc = |b: &mut Kb| {
        let kind = UOpKind::VecAcc {
            init: Scalar::zero(DType::F32),
            lanes: 4,
        };
        b.push(kind, DType::F32, &[])
    };
    let (unfused, fused) = (vacc(&mut b), vacc(&mut b));
    let j = b.lp(z, js);
    let row = b.alu(AluOp::Mul, DType::I32, &[r, twenty]);
    let col = b.alu(AluOp::Mul, DType::I32, &[j, four]);
    let base = b.alu(AluOp::Add, DType::I32, &[row, col]);
    let wj = b.load(w, &[j]);
    let xv = b.push(
        UOpKind::VecLoad {
            lanes: 4,
            stride: 1,
        },
        DType::F32,
        &[x, base],
    );
    let wv = b.push(UOpKind::Vectorize, DType::F32, &[wj; 4]);
    let valu = |op| UOpKind::VecAlu { op, lanes: 4 };
    let m = b.push(valu(AluOp::MulAcc), DType::F32, &[xv, wv, unfused]);
    b.push(UOpKind::Assign, DType::F32, &[unfused, m]);
    let f = b.push(valu(AluOp::Fma), DType::F32, &[xv, wv, fused]);
    b.push(UOpKind::Assign, DType::F32, &[fused, f]);
    b.end(j);
    let obase = b.alu(AluOp::Mul, DType::I32, &[r, four]);
    let vstore = UOpKind::VecStore { lanes: 4 };
    b.push(vstore.clone(), DType::F32, &[outs[0], obase, unfused]);
    for l in 0..4 {
        let lane = b.push(UOpKind::Gep(l), DType::F32, &[unfused]);
        let relu = b.alu(AluOp::Max, DType::F32, &[lane, fz]);
        let off = b.int(i64::from(l));
        let o = b.alu(AluOp::Add, DType::I32, &[obase, off]);
        b.store(outs[1], o, relu);
    }
    b.push(vstore, DType::F32, &[outs[2], obase, fused]);
    b.end(r);
    let xs: Vec<f32> = (0..ROWS * J * 4)
        .map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.37 + 1e-3)
        .collect();
    let ws: Vec<f32> = (0..J).map(|i| (i as f32 - 2.2) * 0.71).collect();
    (b.build("r_packed"), xs, ws)
}

/// The vector tile computes, lane by lane, the scalar contract: two roundings per `MulAcc`,
/// one per `Fma`, in the reduce's order (clang and gcc; without `-march`, so the FMA helper's
/// lane-by-lane fallback runs).
#[test]
fn packed_lanes_compute_the_contract() {
    let (k, xs, ws) = packed_tile();
    let (mut unfused, mut relu, mut fused) = (vec![], vec![], vec![]);
    for r in 0..2 {
        for l in 0..4 {
            let (mut a, mut f) = (0.0f32, 0.0f32);
            for (j, w) in ws.iter().enumerate() {
                let x = xs[(r * ws.len() + j) * 4 + l];
                a += x * w;
                f = x.mul_add(*w, f);
            }
            unfused.push(a);
            relu.push(pg_max(a, 0.0));
            fused.push(f);
        }
    }
    let case = Case {
        kernel: k,
        init: vec![sentinel(8, DType::F32); 3]
            .into_iter()
            .chain([f32s(&xs), f32s(&ws)])
            .collect(),
        vars: vec![],
        want: vec![f32s(&unfused), f32s(&relu), f32s(&fused)],
    };
    check_cases(&[case], &CRenderOpts::default(), "", "packed");
}

/// The vector tile's C, pinned: vector accumulators, one vector load per `j`, the broadcast
/// weight, vector multiply-adds, vector stores, and the ReLU reading accumulator lanes.
#[test]
fn golden_packed_tile() {
    let (k, _, _) = packed_tile();
    let got = render_kernel(&k, &CRenderOpts::default()).unwrap();
    let body = &got[got.find("void r_packed(").unwrap()..];
    let want = r#"void r_packed(float *restrict data0, float *restrict data1, float *restrict data2, const float *restrict data3, const float *restrict data4) {
  for (int32_t ridx0 = 0; ridx0 < 2; ridx0++) {
    pg_f32x4 acc0 = {0.0f, 0.0f, 0.0f, 0.0f};
    pg_f32x4 acc1 = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int32_t ridx1 = 0; ridx1 < 5; ridx1++) {
      const int32_t val15 = ridx0 * 20;
      const int32_t val16 = ridx1 * 4;
      const int32_t val17 = val15 + val16;
      const float val18 = data4[ridx1];
      const pg_f32x4 val19 = *(const pg_f32x4u *)(data3 + val17);
      const pg_f32x4 val20 = pg_splat_f32x4(val18);
      const pg_f32x4 val21 = val19 * val20 + acc0;
      acc0 = val21;
      const pg_f32x4 val23 = pg_fma_f32x4(val19, val20, acc1);
      acc1 = val23;
    }
    const int32_t val26 = ridx0 * 4;
    *(pg_f32x4u *)(data0 + val26) = acc0;
    const float val28 = acc0[0];
    const float val29 = val28 < 0.0f ? 0.0f : val28;
    const int32_t val31 = val26 + 0;
    data1[val31] = val29;
    const float val33 = acc0[1];
    const float val34 = val33 < 0.0f ? 0.0f : val33;
    const int32_t val36 = val26 + 1;
    data1[val36] = val34;
    const float val38 = acc0[2];
    const float val39 = val38 < 0.0f ? 0.0f : val38;
    const int32_t val41 = val26 + 2;
    data1[val41] = val39;
    const float val43 = acc0[3];
    const float val44 = val43 < 0.0f ? 0.0f : val43;
    const int32_t val46 = val26 + 3;
    data1[val46] = val44;
    *(pg_f32x4u *)(data2 + val26) = acc1;
  }
}

void r_packed_entry(void **bufs, const int32_t *vars) {
  (void)vars;
  r_packed((float *)bufs[0], (float *)bufs[1], (float *)bufs[2], (const float *)bufs[3], (const float *)bufs[4]);
}
"#;
    assert_eq!(body, want, "\n{body}");
}

/// An op on a dtype it is not defined for never reaches C as a guess: the graph refuses it where
/// it is made (a dtype error naming the op), and a kernel that carries one anyway (a bug in an
/// earlier pass) renders to an internal error, not a panic and not `|` or `/` printed blindly.
#[test]
fn undefined_ops_are_errors_not_panics() {
    use picograd_core::{Error, Tensor};
    let x = Tensor::from_slice(&[1.5f32, 2.0], &[2]);
    let e = x.try_alu(AluOp::Or, &[&x]).unwrap_err();
    assert!(matches!(e, Error::DType { op: "or", .. }), "{e}");
    assert!(e.to_string().contains("not defined on f32"), "{e}");
    let i = Tensor::from_slice(&[3i32, 4], &[2]);
    assert!(matches!(
        i.try_alu(AluOp::Sin, &[]),
        Err(Error::DType { .. })
    ));
    assert_eq!(
        i.try_alu(AluOp::Or, &[&i])
            .unwrap()
            .to_vec::<i32>()
            .unwrap(),
        [3, 4]
    );
    for (op, dt) in [
        (AluOp::Or, DType::F32),
        (AluOp::Sin, DType::I32),
        (AluOp::Fma, DType::I32),
        (AluOp::MulWide, DType::F32),
        (AluOp::Requant, DType::F32),
        (AluOp::Clamp, DType::F32),
        (AluOp::Clamp, DType::I8),
    ] {
        let mut b = Kb::default();
        let out = b.global(dt, 4, true);
        let a = b.global(dt, 4, false);
        let (z, n) = (b.int(0), b.int(4));
        let i = b.lp(z, n);
        let v = b.load(a, &[i]);
        let srcs = vec![v; op.arity()];
        let r = b.alu(op, dt, &srcs);
        b.store(out, i, r);
        b.end(i);
        match render_kernel(&b.build("E_4"), &CRenderOpts::default()) {
            Err(Error::Internal(m)) => {
                assert!(m.contains("E_4") && m.contains(op.name()), "{m}")
            }
            other => panic!("{op} on {dt}: {other:?}"),
        }
    }
}
