//! Float → integer casts on every device: truncate toward zero, saturate to the target type's
//! range, NaN → 0 (DESIGN.md's numeric semantics — Rust's own `as` casts, the reference here).
//! f32 values at and around every bound of i8, u8, i16, u16, i32 and u32, the specials and a
//! sweep, cast to each type on the interpreter, the exported C on the host (the portable
//! compare form) and under QEMU on Cortex-M4, where each cast is `vcvt` plus one
//! `ssat`/`usat` (`core/src/codegen/c/helpers.rs`, `arm_vcvt`; one QEMU run).

use std::sync::Arc;

use picograd::device::Device;
use picograd::interp::Interp;
use picograd::runtime::target::Values;
use picograd::{DType, Tensor};

#[path = "common/int_bundle.rs"]
mod int_bundle;

/// The inputs: specials, the values around each type's bounds, and a sweep.
fn inputs() -> Vec<f32> {
    let mut v = vec![
        f32::NAN,
        -f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        f32::MIN_POSITIVE,
        -1e-45,
        f32::MAX,
        f32::MIN,
        2_147_483_520.0, // the largest f32 below 2^31
        2_147_483_648.0,
        -2_147_483_648.0,
        -2_147_483_904.0,
        4_294_967_040.0, // the largest f32 below 2^32
        4_294_967_296.0,
        1e10,
        -1e10,
    ];
    for bound in [128.0f32, 256.0, 32_768.0, 65_536.0] {
        for d in [-1.5f32, -1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0] {
            v.extend([bound + d, -bound + d, bound - 1.0 + d, -bound - 1.0 + d]);
        }
    }
    v.extend((-300..300).map(|i| i as f32 * 0.75));
    v.extend((-40..40).map(|i| i as f32 * 1_777.3));
    v
}

/// The casts of one value, in the order the model stacks them, each widened to i32 (u32 as
/// its bits).
fn reference(x: f32) -> [i32; 6] {
    [
        i32::from(x as i8),
        i32::from(x as u8),
        i32::from(x as i16),
        i32::from(x as u16),
        x as i32,
        x as u32 as i32,
    ]
}

/// The same casts of `x`, stacked `[6, n]` as i32.
fn model(x: &Tensor) -> Tensor {
    let casts: Vec<Tensor> = [
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::I32,
        DType::U32,
    ]
    .iter()
    .map(|&t| x.cast(t).cast(DType::I32))
    .collect();
    let refs: Vec<&Tensor> = casts.iter().collect();
    Tensor::stack(&refs, 0)
}

#[test]
fn float_to_int_casts_truncate_and_saturate_on_every_device() {
    picograd::init();
    let xs = inputs();
    let n = xs.len();
    let refs: Vec<[i32; 6]> = xs.iter().map(|&x| reference(x)).collect();
    let want: Vec<i32> = (0..6)
        .flat_map(|k| refs.iter().map(move |r| r[k]))
        .collect();
    let dev: Arc<dyn Device> = Arc::new(Interp::new());
    let x = Tensor::try_from_slice_on(&xs, &[n], &dev).unwrap();
    x.realize().unwrap();
    let y = model(&x);
    let bundle = int_bundle::export_for_cortex_m4(&x, &y, &want);
    let c = String::from_utf8(bundle.file("model.c").unwrap().to_vec()).unwrap();
    for narrow in ["ssat %0, #8", "usat %0, #8", "ssat %0, #16", "usat %0, #16"] {
        assert!(c.contains(narrow), "no `{narrow}` in the Cortex-M4 casts");
    }
    assert!(c.contains("vcvt.u32.f32"), "the u32 cast converts unsigned");
    let feed = Values {
        dtype: DType::F32,
        bits: xs.iter().map(|v| u64::from(v.to_bits())).collect(),
    };
    int_bundle::check_bundle(&bundle, &[("x", feed)], &want);
}
