//! ONNX `Round` (and so `QuantizeLinear`'s rounding of `x / scale`) on f32 and f64: round half
//! to even by the magic-number identity `(|x| + 2^p) - 2^p` for `|x| < 2^p`, the sign put back
//! by a select. Checked bit for bit against Rust's `round_ties_even` (the independent
//! reference) on ties, on both sides of every boundary of the identity (2^(p-1), 2^p, 2^(p+1)),
//! signed zeros, subnormals, infinities, NaN and pseudo-random bit patterns: on the
//! interpreter, the Clang device, and the exported C on the host and under QEMU on Cortex-M4
//! (hard-float f32, soft-float f64). And `QuantizeLinear`'s select-free form for outputs it
//! saturates to 8 or 16 bits (`round_for_saturation`): exact below 2^22, and beyond it on the
//! same side of every such range, on the interpreter and the Clang device.

use std::sync::Arc;

use picograd::device::Device;
use picograd::export::{export, ExportNames};
use picograd::interp::Interp;
use picograd::jit::Capture;
use picograd::runtime::export::write_bundle;
use picograd::runtime::private_fs::private_temp_dir;
use picograd::runtime::target::{build_and_run, BuildOptions, Target, Values};
use picograd::{DType, Tensor};
use picograd_onnx::ops::math::{round, round_for_saturation};

#[path = "common/rng.rs"]
mod rng;

/// Values around the identity's edges for a format with `p` explicit significand bits, as f64
/// (each exact in the format): `k + 0.5` ties, `2^e` and its neighbours, the largest values
/// below 2^p with a half, and both signs of each.
fn edges(p: i32) -> Vec<f64> {
    let mut v = vec![0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.5, 3.5];
    v.extend((0..40).map(|k| f64::from(k) + 0.5));
    for e in [p - 2, p - 1, p, p + 1] {
        let b = 2f64.powi(e);
        let ulp_below = 2f64.powi(e - p - 1);
        for d in [-1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0] {
            // Only multiples of the spacing at that magnitude are representable.
            let spacing = if d < 0.0 { ulp_below } else { 2f64.powi(e - p) };
            v.push(b + d * spacing.max(ulp_below));
        }
    }
    let neg: Vec<f64> = v.iter().map(|x| -x).collect();
    v.extend(neg);
    v
}

/// The f32 inputs: edges, specials and pseudo-random bit patterns (every exponent).
fn inputs_f32() -> Vec<f32> {
    let mut v: Vec<f32> = edges(23).iter().map(|&x| x as f32).collect();
    v.extend([
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
        1e-45,
        -1e-45,
        0.49999997,
        -0.49999997,
        0.50000006,
        -0.50000006,
        f32::MAX,
        f32::MIN,
        1e30,
    ]);
    let mut r = rng::Rng(17);
    v.extend((0..2000).map(|_| f32::from_bits(r.range(0, i64::from(u32::MAX)) as u32)));
    v.extend(
        (0..2000).map(|_| r.range(-(1 << 20), 1 << 20) as f32 * 2f32.powi(r.range(-28, 32) as i32)),
    );
    v
}

/// The f64 inputs, as [`inputs_f32`] with f64's edges.
fn inputs_f64() -> Vec<f64> {
    let mut v = edges(52);
    v.extend([
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::MIN_POSITIVE,
        5e-324,
        -5e-324,
        0.49999999999999994,
        -0.49999999999999994,
        f64::MAX,
        f64::MIN,
    ]);
    let mut r = rng::Rng(18);
    // Two 32-bit halves: every bit pattern, so every exponent (a range up to `i64::MAX` would
    // overflow the generator's `hi - lo + 1`).
    let u32_max = i64::from(u32::MAX);
    v.extend(
        (0..2000).map(|_| {
            f64::from_bits((r.range(0, u32_max) as u64) << 32 | r.range(0, u32_max) as u64)
        }),
    );
    v
}

/// Equal bits, or both NaN (a NaN's payload is not part of the contract).
fn same(got: u64, want: u64, nan: impl Fn(u64) -> bool) -> bool {
    got == want || (nan(got) && nan(want))
}

/// Checks `got` (bit patterns) against `want` on `what`, naming the first differing input.
fn check(what: &str, xs: &[u64], got: &[u64], want: &[u64], nan: impl Fn(u64) -> bool + Copy) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for i in 0..want.len() {
        assert!(
            same(got[i], want[i], nan),
            "{what}: input bits {:#x} rounded to {:#x}, want {:#x}",
            xs[i],
            got[i],
            want[i]
        );
    }
}

/// Rounds `x` (on `dev`) and returns the bits of the result.
fn bits_on<T: picograd::tensor::Element>(
    x: &[T],
    dev: &Arc<dyn Device>,
    to: fn(T) -> u64,
) -> Vec<u64> {
    let t = Tensor::try_from_slice_on(x, &[x.len()], dev).unwrap();
    round(&t)
        .unwrap()
        .to_vec::<T>()
        .unwrap()
        .into_iter()
        .map(to)
        .collect()
}

/// Exports `round(x)` for Cortex-M4's options and runs it on the host and under QEMU.
fn exported(xs: &Values, dtype: DType) -> Vec<(String, Vec<u64>)> {
    let dev: Arc<dyn Device> = Arc::new(Interp::new());
    let n = xs.len();
    let x = match dtype {
        DType::F32 => {
            let v: Vec<f32> = xs.bits.iter().map(|&b| f32::from_bits(b as u32)).collect();
            Tensor::try_from_slice_on(&v, &[n], &dev).unwrap()
        }
        _ => {
            let v: Vec<f64> = xs.bits.iter().map(|&b| f64::from_bits(b)).collect();
            Tensor::try_from_slice_on(&v, &[n], &dev).unwrap()
        }
    };
    x.realize().unwrap();
    let y = round(&x).unwrap();
    let (cap, _) = Capture::record(&[&x], &[&y]).unwrap();
    let target = Target::by_name("cortex-m4").unwrap();
    let bundle = export(
        &cap,
        &ExportNames::new(&["x"], &["y"]),
        &target.export_options(),
    )
    .unwrap();
    let c = String::from_utf8(bundle.file("model.c").unwrap().to_vec()).unwrap();
    assert!(!c.contains("pg_fmod"), "no fmod loop left in the rounding");
    let tmp = private_temp_dir("picograd-round-").unwrap();
    let dir = tmp.path().join("bundle");
    write_bundle(&bundle, &dir).unwrap();
    ["host", "cortex-m4"]
        .iter()
        .map(|name| {
            let t = Target::by_name(name).unwrap();
            let r = build_and_run(&t, &dir, &[("x", xs.clone())], &BuildOptions::default())
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            (
                name.to_string(),
                r.output("y").expect("output y").bits.clone(),
            )
        })
        .collect()
}

#[test]
fn f32_round_is_half_to_even_on_every_device() {
    picograd::init();
    let xs = inputs_f32();
    let xb: Vec<u64> = xs.iter().map(|x| u64::from(x.to_bits())).collect();
    let want: Vec<u64> = xs
        .iter()
        .map(|x| u64::from(x.round_ties_even().to_bits()))
        .collect();
    let nan = |b: u64| f32::from_bits(b as u32).is_nan();
    let to = |v: f32| u64::from(v.to_bits());
    let interp: Arc<dyn Device> = Arc::new(Interp::new());
    check("interpreter", &xb, &bits_on(&xs, &interp, to), &want, nan);
    let clang = picograd::context::default_device();
    check("Clang device", &xb, &bits_on(&xs, &clang, to), &want, nan);
    for (name, got) in exported(&Values::f32(&xs), DType::F32) {
        check(&format!("exported C on {name}"), &xb, &got, &want, nan);
    }
}

#[test]
fn f64_round_is_half_to_even_on_every_device() {
    picograd::init();
    let xs = inputs_f64();
    let xb: Vec<u64> = xs.iter().map(|x| x.to_bits()).collect();
    let want: Vec<u64> = xs.iter().map(|x| x.round_ties_even().to_bits()).collect();
    let nan = |b: u64| f64::from_bits(b).is_nan();
    let to = |v: f64| v.to_bits();
    let interp: Arc<dyn Device> = Arc::new(Interp::new());
    check("interpreter", &xb, &bits_on(&xs, &interp, to), &want, nan);
    let clang = picograd::context::default_device();
    check("Clang device", &xb, &bits_on(&xs, &clang, to), &want, nan);
    let values = Values {
        dtype: DType::F64,
        bits: xb.clone(),
    };
    for (name, got) in exported(&values, DType::F64) {
        check(&format!("exported C on {name}"), &xb, &got, &want, nan);
    }
}

/// `round_for_saturation` on f32: every `|x| < 2^22` rounds to `round_ties_even(x)` (as a value:
/// a zero's sign is free), and every input — larger ones, ±inf, NaN — saturates onto i8, u8,
/// i16 and u16 (Rust's `as`: truncate, saturate, NaN → 0) exactly as `round_ties_even(x)` does.
#[test]
fn rounding_for_saturation_agrees_wherever_a_narrow_saturation_can_tell() {
    picograd::init();
    let mut xs = inputs_f32();
    for e in [21, 22, 23, 24] {
        let b = 2f32.powi(e);
        for d in [-3.0f32, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 3.0] {
            xs.extend([b + d, -b + d, b + d * 2.0, -b - d * 2.0]);
        }
    }
    let devices: [(&str, Arc<dyn Device>); 2] = [
        ("interpreter", Arc::new(Interp::new())),
        ("Clang device", picograd::context::default_device()),
    ];
    for (name, dev) in devices {
        let t = Tensor::try_from_slice_on(&xs, &[xs.len()], &dev).unwrap();
        let got = round_for_saturation(&t)
            .expect("f32 has the select-free form")
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        for (&x, &g) in xs.iter().zip(&got) {
            let want = x.round_ties_even();
            if x.abs() < 4_194_304.0 {
                assert_eq!(g, want, "{name}: {x:e} rounded to {g:e}, want {want:e}");
            }
            let sat = |v: f32| (v as i8, v as u8, v as i16, v as u16);
            assert_eq!(
                sat(g),
                sat(want),
                "{name}: {x:e} saturates as {g:e}, want {want:e}"
            );
        }
    }
}
