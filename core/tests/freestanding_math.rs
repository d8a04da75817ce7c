//! picograd's freestanding C math (`pg_exp2f`, `pg_log2f`, `pg_sinf`, `pg_sqrtf`, `pg_fmodf`),
//! compiled with the host C compilers and compared densely against f64: ≥ 1M points per
//! function plus special values. Bounds: exp2/log2 ≤ 4 ulp over the whole float range, sin
//! ≤ 4 ulp for |x| ≤ 1e4, sqrt correctly rounded, fmod exact.

use std::path::PathBuf;
use std::process::Command;

use picograd_core::codegen::c::freestanding_math_c;

#[path = "common/strict_cc.rs"]
mod strict_cc;
use strict_cc::compile_strict;

const MAIN: &str = r#"
#include <stdio.h>
int main(int argc, char **argv) {
  FILE *in, *out;
  uint32_t op, a, b;
  float r = 0.0f;
  if (argc < 3) return 2;
  in = fopen(argv[1], "rb");
  out = fopen(argv[2], "wb");
  if (!in || !out) return 3;
  while (fread(&op, 4, 1, in) == 1 && fread(&a, 4, 1, in) == 1 && fread(&b, 4, 1, in) == 1) {
    float x = pg_bits_f32(a), y = pg_bits_f32(b);
    switch (op) {
      case 0: r = pg_exp2f(x); break;
      case 1: r = pg_log2f(x); break;
      case 2: r = pg_sinf(x); break;
      case 3: r = pg_sqrtf(x); break;
      default: r = pg_fmodf(x, y); break;
    }
    a = pg_f32_bits(r);
    fwrite(&a, 4, 1, out);
  }
  fclose(in);
  fclose(out);
  return 0;
}
"#;

/// (op, x, y) triples: dense strides over the bit patterns in each function's range.
fn cases() -> Vec<(u32, f32, f32)> {
    let mut v = Vec::new();
    let specials = [
        0.0f32,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
        1e-45,
        -1e-45,
        1.0,
        -1.0,
        127.99999,
        128.0,
        -149.5,
        -150.0,
        1e4,
        -1e4,
        3.0e38,
        1e10,
    ];
    for op in 0..5 {
        for &x in &specials {
            v.push((op, x, 1.5));
        }
    }
    for bits in (0..u32::MAX).step_by(1021) {
        let x = f32::from_bits(bits);
        if x.is_nan() {
            continue;
        }
        if x > -151.0 && x < 129.0 {
            v.push((0, x, 0.0));
        }
        if x >= 0.0 {
            v.push((1, x, 0.0));
            v.push((3, x, 0.0));
        }
        if x.abs() <= 1e4 {
            v.push((2, x, 0.0));
        }
        v.push((4, x, f32::from_bits(bits.wrapping_mul(2_654_435_761))));
    }
    v
}

fn run_c(cc: &str, cases: &[(u32, f32, f32)]) -> Option<Vec<f32>> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("pg-fmath-{cc}-{}-", cases.len()))
        .tempdir()
        .unwrap()
        .keep();
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("m.c");
    std::fs::write(&src, format!("{}{MAIN}", freestanding_math_c())).unwrap();
    let exe: PathBuf = dir.join("m");
    compile_strict(cc, &src, &exe, &["-O2"])?;
    let mut input = Vec::with_capacity(cases.len() * 12);
    for &(op, x, y) in cases {
        for w in [op, x.to_bits(), y.to_bits()] {
            input.extend_from_slice(&w.to_le_bytes());
        }
    }
    std::fs::write(dir.join("in.bin"), input).unwrap();
    let st = Command::new(&exe)
        .arg(dir.join("in.bin"))
        .arg(dir.join("out.bin"))
        .status()
        .unwrap();
    assert!(st.success());
    let bytes = std::fs::read(dir.join("out.bin")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    Some(
        bytes
            .chunks_exact(4)
            .map(|c| f32::from_bits(u32::from_le_bytes(c.try_into().unwrap())))
            .collect(),
    )
}

/// |got - exact| in units of the last place of the float nearest `exact`.
fn ulps(got: f32, exact: f64) -> f64 {
    if exact.is_nan() {
        return if got.is_nan() { 0.0 } else { f64::INFINITY };
    }
    if exact.is_infinite() || exact.abs() >= f32::MAX as f64 * (1.0 + f64::EPSILON) {
        return if got as f64 == exact
            || got.is_infinite() && got.is_sign_positive() == (exact > 0.0)
        {
            0.0
        } else {
            f64::INFINITY
        };
    }
    let e = if exact == 0.0 {
        -126
    } else {
        (exact.abs().log2().floor() as i32).max(-126)
    };
    (got as f64 - exact).abs() / 2f64.powi(e - 23)
}

fn reference(op: u32, x: f32, y: f32) -> f64 {
    let xd = x as f64;
    match op {
        0 => xd.exp2(),
        1 => xd.log2(),
        2 => xd.sin(),
        3 => (x.sqrt()) as f64,
        _ => (x % y) as f64,
    }
}

#[test]
fn freestanding_math_is_accurate() {
    let cases = cases();
    assert!(cases.len() > 5_000_000, "{} cases", cases.len());
    // The compilers' runs are separate processes in separate folders: side by side.
    let runs: Vec<(&str, Option<Vec<f32>>)> = std::thread::scope(|s| {
        let handles: Vec<_> = ["cc", "clang", "gcc"]
            .map(|cc| (cc, s.spawn(|| run_c(cc, &cases))))
            .into_iter()
            .collect();
        handles
            .into_iter()
            .map(|(cc, h)| (cc, h.join().unwrap()))
            .collect()
    });
    let (ran, gots): (Vec<&str>, Vec<Vec<f32>>) = runs
        .into_iter()
        .filter_map(|(cc, got)| Some((cc, got?)))
        .unzip();
    assert!(!ran.is_empty(), "no C compiler found");
    for (cc, (worst, at)) in ran.iter().zip(worst_errors(&cases, &gots)) {
        eprintln!("{cc}: max ulp exp2 {:.3} (at {:e}), log2 {:.3} (at {:e}), sin {:.3} (at {:e}), sqrt {}, fmod {}", worst[0], at[0], worst[1], at[1], worst[2], at[2], worst[3], worst[4]);
        assert!(
            worst[0] <= 4.0 && worst[1] <= 4.0 && worst[2] <= 4.0,
            "{cc}: {worst:?} at {at:?}"
        );
        assert_eq!(
            (worst[3], worst[4]),
            (0.0, 0.0),
            "{cc}: sqrt and fmod are exact"
        );
    }
}

/// Per output, per function: the largest error (ulp for exp2/log2/sin; 0 or infinite for the
/// exact sqrt and fmod) and the first input where it is reached. The f64 reference does not
/// depend on the compiler, so it is computed once per case for all outputs; the cases are split
/// in two halves checked on two threads (the debug-build arithmetic is this test's cost), and
/// the halves merged keeping the first maximum, as one pass in order would.
fn worst_errors(cases: &[(u32, f32, f32)], gots: &[Vec<f32>]) -> Vec<([f64; 5], [f32; 5])> {
    for got in gots {
        assert_eq!(got.len(), cases.len(), "one output per case");
    }
    let part = |range: std::ops::Range<usize>| {
        let mut worst = vec![([0.0f64; 5], [0.0f32; 5]); gots.len()];
        for i in range {
            let (op, x, y) = cases[i];
            if op == 2 && x.abs() > 1e4 {
                continue; // sin is only bounded (not accurate) for |x| >= 2^32
            }
            let want = reference(op, x, y);
            for ((worst, at), got) in worst.iter_mut().zip(gots) {
                let g = got[i];
                let e = if op >= 3 {
                    if g.to_bits() == (want as f32).to_bits() || g.is_nan() && want.is_nan() {
                        0.0
                    } else {
                        f64::INFINITY
                    }
                } else {
                    ulps(g, want)
                };
                if e > worst[op as usize] {
                    worst[op as usize] = e;
                    at[op as usize] = x;
                }
            }
        }
        worst
    };
    let half = cases.len() / 2;
    let (first, second) = std::thread::scope(|s| {
        let second = s.spawn(|| part(half..cases.len()));
        (part(0..half), second.join().unwrap())
    });
    first
        .into_iter()
        .zip(second)
        .map(|((mut worst, mut at), (w2, a2))| {
            for f in 0..5 {
                if w2[f] > worst[f] {
                    worst[f] = w2[f];
                    at[f] = a2[f];
                }
            }
            (worst, at)
        })
        .collect()
}

#[test]
fn freestanding_math_special_values() {
    let cases: Vec<(u32, f32, f32)> = vec![
        (0, f32::INFINITY, 0.0),
        (0, f32::NEG_INFINITY, 0.0),
        (0, f32::NAN, 0.0),
        (1, 0.0, 0.0),
        (1, -0.0, 0.0),
        (1, -1.0, 0.0),
        (1, f32::INFINITY, 0.0),
        (1, 1e-45, 0.0),
        (2, f32::INFINITY, 0.0),
        (2, -0.0, 0.0),
        (3, -1.0, 0.0),
        (3, f32::INFINITY, 0.0),
        (4, 1.0, 0.0),
        (4, f32::INFINITY, 2.0),
    ];
    let Some(got) = run_c("cc", &cases) else {
        return;
    };
    assert_eq!(got[0], f32::INFINITY);
    assert_eq!(got[1].to_bits(), 0);
    assert!(got[2].is_nan());
    assert_eq!(got[3], f32::NEG_INFINITY);
    assert_eq!(got[4], f32::NEG_INFINITY);
    assert!(got[5].is_nan());
    assert_eq!(got[6], f32::INFINITY);
    assert_eq!(got[7], -149.0);
    assert!(got[8].is_nan());
    assert_eq!(got[9].to_bits(), (-0.0f32).to_bits());
    assert!(got[10].is_nan());
    assert_eq!(got[11], f32::INFINITY);
    assert!(got[12].is_nan() && got[13].is_nan());
}
