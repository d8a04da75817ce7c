//! picograd's vectorizable C math (`pg_vexp2f`, `pg_vlog2f`, `pg_vsinf`), compiled with the host
//! C compilers — clang with the Clang device's flags (`-O2 -march=native`, no contraction), so
//! the vectorized code is what runs — over arrays in a loop, and compared against f64: a dense
//! stride over all f32 bit patterns plus windows around the edges (exp2's overflow and
//! underflow, log2 near 1 and subnormals, sin near multiples of π/2 and |x| ≥ 2^32). Bounds
//! pinned: exp2 ≤ 1.25 ulp, log2 ≤ 3 ulp, sin ≤ 2 ulp for every finite input; special values
//! in libm's classes.

use std::path::PathBuf;
use std::process::Command;

use picograd_core::codegen::c::vector_math_c;

#[path = "common/kernel_builder.rs"]
mod kernel_builder;
#[path = "common/strict_cc.rs"]
mod strict_cc;
use strict_cc::compile_strict;

/// Reads `n` floats, applies function `op` to each in one loop, writes the results.
const MAIN: &str = r#"
#include <stdio.h>
#include <stdlib.h>
static void apply(int op, float *restrict out, const float *restrict in, long n) {
  long i;
  if (op == 0) for (i = 0; i < n; i++) out[i] = pg_vexp2f(in[i]);
  else if (op == 1) for (i = 0; i < n; i++) out[i] = pg_vlog2f(in[i]);
  else for (i = 0; i < n; i++) out[i] = pg_vsinf(in[i]);
}
int main(int argc, char **argv) {
  FILE *in, *out;
  long n;
  float *x, *y;
  if (argc < 4) return 2;
  in = fopen(argv[2], "rb");
  out = fopen(argv[3], "wb");
  if (!in || !out) return 3;
  fseek(in, 0, SEEK_END);
  n = ftell(in) / 4;
  fseek(in, 0, SEEK_SET);
  x = malloc((size_t)n * 4 + 4);
  y = malloc((size_t)n * 4 + 4);
  if (!x || !y || fread(x, 4, (size_t)n, in) != (size_t)n) return 4;
  apply(atoi(argv[1]), y, x, n);
  fwrite(y, 4, (size_t)n, out);
  fclose(in);
  fclose(out);
  free(x);
  free(y);
  return 0;
}
"#;

/// The compilers to try and their flags: clang as the Clang device runs it, and plain builds.
const COMPILERS: &[(&str, &[&str])] = &[
    (
        "clang",
        &[
            "-O2",
            "-march=native",
            "-ffp-contract=off",
            "-fno-math-errno",
        ],
    ),
    ("cc", &["-O2"]),
    ("gcc", &["-O0"]),
];

/// Compiles the harness with `cc`; `None` when that compiler is absent.
fn build(cc: &str, flags: &[&str], dir: &std::path::Path) -> Option<PathBuf> {
    let src = dir.join("v.c");
    std::fs::write(&src, format!("{}{MAIN}", vector_math_c())).unwrap();
    let exe = dir.join(format!("v-{cc}"));
    compile_strict(cc, &src, &exe, flags)?;
    Some(exe)
}

fn run(exe: &PathBuf, dir: &std::path::Path, op: u32, xs: &[f32]) -> Vec<f32> {
    let bytes: Vec<u8> = xs.iter().flat_map(|x| x.to_le_bytes()).collect();
    let (i, o) = (dir.join("in.bin"), dir.join("out.bin"));
    std::fs::write(&i, bytes).unwrap();
    let st = Command::new(exe)
        .arg(op.to_string())
        .arg(&i)
        .arg(&o)
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::read(&o)
        .unwrap()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// |got - exact| in units of the last place of the float nearest `exact`; infinite when the
/// classes differ (NaN, ±inf).
fn ulps(got: f32, exact: f64) -> f64 {
    if exact.is_nan() || got.is_nan() {
        return if got.is_nan() && exact.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    if exact.is_infinite() || exact.abs() >= f32::MAX as f64 * (1.0 + f64::EPSILON) {
        let same = got.is_infinite() && got.is_sign_positive() == (exact > 0.0);
        return if same { 0.0 } else { f64::INFINITY };
    }
    let e = if exact == 0.0 {
        -126
    } else {
        (exact.abs().log2().floor() as i32).max(-126)
    };
    (got as f64 - exact).abs() / 2f64.powi(e - 23)
}

/// Every 1021st bit pattern (all signs and exponents), without NaNs.
fn stride() -> impl Iterator<Item = f32> {
    (0..u32::MAX)
        .step_by(1021)
        .map(f32::from_bits)
        .filter(|x| !x.is_nan())
}

/// All floats in `[x, x + n ulp)` walking up the bit patterns.
fn window(x: f32, n: u32) -> impl Iterator<Item = f32> {
    let b = x.to_bits();
    (b..b.saturating_add(n)).map(f32::from_bits)
}

fn inputs(op: u32) -> Vec<f32> {
    let mut v: Vec<f32> = stride().collect();
    let windows: &[(f32, u32)] = match op {
        0 => &[
            (127.0, 1 << 20),
            (-126.5, 1 << 20),
            (-150.0, 1 << 18),
            (-0.5, 1 << 20),
        ],
        1 => &[
            (0.7, 1 << 21),
            (1.0, 1 << 20),
            (1e-45, 1 << 20),
            (1.4, 1 << 20),
        ],
        _ => &[
            (std::f32::consts::FRAC_PI_2 - 0.01, 1 << 18),
            (std::f32::consts::PI - 0.02, 1 << 18),
            (4.29e9, 1 << 18),
            (1e38, 1 << 16),
        ],
    };
    for &(x, n) in windows {
        v.extend(window(x, n));
        v.extend(window(-x, n));
    }
    v
}

fn reference(op: u32, x: f32) -> f64 {
    let x = f64::from(x);
    match op {
        0 => x.exp2(),
        1 => x.log2(),
        _ => x.sin(),
    }
}

#[test]
fn vector_math_is_accurate_everywhere() {
    let dir = tempfile::Builder::new()
        .prefix("pg-vmath-")
        .tempdir()
        .unwrap()
        .keep();
    std::fs::create_dir_all(&dir).unwrap();
    let bounds = [1.25, 3.0, 2.0];
    let exes: Vec<(&str, PathBuf)> = COMPILERS
        .iter()
        .filter_map(|&(cc, flags)| Some((cc, build(cc, flags, &dir)?)))
        .collect();
    assert!(!exes.is_empty(), "no C compiler found");
    for op in 0..3u32 {
        let xs = inputs(op);
        let gots: Vec<Vec<f32>> = exes
            .iter()
            .map(|(_, exe)| run(exe, &dir, op, &xs))
            .collect();
        for ((cc, _), (worst, at)) in exes.iter().zip(worst_ulps(op, &xs, &gots)) {
            eprintln!(
                "{cc}: op {op}: max {worst:.3} ulp at {x:e} over {n} inputs",
                x = at,
                n = xs.len()
            );
            assert!(
                worst <= bounds[op as usize],
                "{cc}: op {op}: {worst} ulp at {at:e}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Each output's largest error in ulp and the first input where it is reached. The f64 reference
/// does not depend on the compiler, so it is computed once per input for all outputs; the inputs
/// are split in two halves checked on two threads (the debug-build arithmetic is this test's
/// cost), and the halves merged keeping the first maximum, as one pass in order would.
fn worst_ulps(op: u32, xs: &[f32], gots: &[Vec<f32>]) -> Vec<(f64, f32)> {
    for got in gots {
        assert_eq!(got.len(), xs.len(), "op {op}: one output per input");
    }
    let part = |range: std::ops::Range<usize>| {
        let mut worst = vec![(0.0f64, 0.0f32); gots.len()];
        for i in range {
            let exact = reference(op, xs[i]);
            for (w, got) in worst.iter_mut().zip(gots) {
                let e = ulps(got[i], exact);
                if e > w.0 {
                    *w = (e, xs[i]);
                }
            }
        }
        worst
    };
    let half = xs.len() / 2;
    let (first, second) = std::thread::scope(|s| {
        let second = s.spawn(|| part(half..xs.len()));
        (part(0..half), second.join().unwrap())
    });
    first
        .into_iter()
        .zip(second)
        .map(|(a, b)| if b.0 > a.0 { b } else { a })
        .collect()
}

#[test]
fn vector_math_special_values() {
    let dir = tempfile::Builder::new()
        .prefix("pg-vmath-sp-")
        .tempdir()
        .unwrap()
        .keep();
    std::fs::create_dir_all(&dir).unwrap();
    let Some(exe) = build(COMPILERS[0].0, COMPILERS[0].1, &dir)
        .or_else(|| build(COMPILERS[1].0, COMPILERS[1].1, &dir))
    else {
        return;
    };
    let inf = f32::INFINITY;
    let xs = [
        inf,
        -inf,
        f32::NAN,
        128.0,
        200.0,
        -150.0,
        -151.0,
        -1e30,
        0.0,
        -0.0,
        -1.0,
        1e-45,
        1.0,
    ];
    let exp2 = run(&exe, &dir, 0, &xs);
    let log2 = run(&exe, &dir, 1, &xs);
    let sin = run(&exe, &dir, 2, &xs);
    let _ = std::fs::remove_dir_all(&dir);
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let nan = f32::NAN;
    // exp2: inf, +0, NaN, overflow to inf, underflow to +0, 2^0 = 1.
    let want_exp2 = [
        inf, 0.0, nan, inf, inf, 0.0, 0.0, 0.0, 1.0, 1.0, 0.5, 1.0, 2.0,
    ];
    // log2: inf, NaN (negative), NaN, ..., -inf at ±0, NaN below 0, -149 at the least subnormal.
    let want_log2 = [
        inf,
        nan,
        nan,
        7.0,
        200f32.log2(),
        nan,
        nan,
        nan,
        -inf,
        -inf,
        nan,
        -149.0,
        0.0,
    ];
    for (i, (&g, &w)) in exp2.iter().zip(&want_exp2).enumerate() {
        assert!(
            g.to_bits() == w.to_bits() || g.is_nan() && w.is_nan(),
            "exp2({}) = {g}",
            xs[i]
        );
    }
    for (i, (&g, &w)) in log2.iter().zip(&want_log2).enumerate() {
        let ok = g.to_bits() == w.to_bits()
            || g.is_nan() && w.is_nan()
            || (g - w).abs() <= 1e-6 * w.abs();
        assert!(ok, "log2({}) = {g}, want {w}", xs[i]);
    }
    // sin: NaN at ±inf and NaN, ±0 keep their sign, bounded elsewhere.
    assert!(sin[0].is_nan() && sin[1].is_nan() && sin[2].is_nan());
    assert_eq!(bits(&sin[8..10]), bits(&[0.0, -0.0]));
    assert!(sin.iter().skip(3).all(|s| s.abs() <= 1.0), "{sin:?}");
}

/// `out[16i + c] = exp2(x) + log2(x) + sin(x)` for `x = in[16i + c]`, 16 straight-line copies
/// (an upcast loop), then a plain loop `out2[j] = exp2(in[j])`.
fn upcast_kernel() -> picograd_core::codegen::uops::LinearKernel {
    use picograd_core::ops::AluOp::{Add, Exp2, Log2, Mul, Sin};
    use picograd_core::DType::{F32, I32};
    let mut b = kernel_builder::KernelBuilder::default();
    let (out, out2, inp) = (
        b.global(F32, 256, true),
        b.global(F32, 256, true),
        b.global(F32, 256, false),
    );
    let (z, n, w) = (b.int(0), b.int(16), b.int(16));
    let i = b.lp(z, n);
    let base = b.alu(Mul, I32, &[i, w]);
    for c in 0..16 {
        let off = b.int(c);
        let idx = b.alu(Add, I32, &[base, off]);
        let x = b.load(inp, &[idx]);
        let e = b.alu(Exp2, F32, &[x]);
        let l = b.alu(Log2, F32, &[x]);
        let s = b.alu(Sin, F32, &[x]);
        let el = b.alu(Add, F32, &[e, l]);
        let y = b.alu(Add, F32, &[el, s]);
        b.store(out, idx, y);
    }
    b.end(i);
    let m = b.int(256);
    let j = b.lp(z, m);
    let x = b.load(inp, &[j]);
    let e = b.alu(Exp2, F32, &[x]);
    b.store(out2, j, e);
    b.end(j);
    b.build("E_up")
}

#[test]
fn host_rendering_calls_vector_math_and_leaves_upcast_copies_to_slp() {
    use picograd_core::codegen::c::{render_kernel, CRenderOpts};
    let c = render_kernel(&upcast_kernel(), &CRenderOpts::host()).unwrap();
    assert!(c.contains("pg_vexp2f(") && c.contains("pg_vlog2f(") && c.contains("pg_vsinf("));
    assert!(!c.contains("math.h") && !c.contains(" exp2f("), "{c}");
    // Only the 16-copy loop is left to the SLP vectorizer; the plain loop keeps the loop
    // vectorizer.
    let pragma = "#pragma clang loop vectorize(disable)\n#endif\n  for (int64_t ridx0 ";
    assert_eq!(c.matches("#pragma clang loop").count(), 1, "{c}");
    assert!(c.contains(pragma), "{c}");
    let plain = render_kernel(&upcast_kernel(), &CRenderOpts::default()).unwrap();
    assert!(
        !plain.contains("#pragma") && plain.contains("exp2f("),
        "{plain}"
    );
    // clang really vectorizes both loops (where clang is installed).
    let dir = tempfile::Builder::new()
        .prefix("pg-vmath-slp-")
        .tempdir()
        .unwrap()
        .keep();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("k.c"), &c).unwrap();
    let flags = [
        "-O2",
        "-march=native",
        "-ffp-contract=off",
        "-fno-math-errno",
        "-c",
        "-Rpass=slp-vectorizer|loop-vectorize", // one regex: a second -Rpass replaces the first
    ];
    let out = compile_strict("clang", &dir.join("k.c"), &dir.join("k.o"), &flags);
    let _ = std::fs::remove_dir_all(&dir);
    let Some(out) = out else {
        return;
    };
    let remarks = String::from_utf8_lossy(&out.stderr);
    assert!(remarks.contains("SLP vectorized"), "{remarks}");
    assert!(remarks.contains("vectorized loop"), "{remarks}");
}
