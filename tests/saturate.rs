//! The requantize clamp as one `Clamp` UOp, printed as a saturate: `Tensor::try_requantize`'s
//! clamp `-max(-max(r, lo), -hi)` of an i32 value is lowered by the linearizer to
//! `Clamp(r, lo, hi)`, which the C renderer prints as `pg_clamp` — on a core with Arm's
//! saturating instructions one `__ssat`/`__usat` for the int8, int16 and uint8 ranges, the
//! compare form for other bounds (a fused ReLU's floor). Checked against a naive clamp of the
//! requantized values for accumulators at and beyond both ends of each range (i32 extremes
//! included): the kernel on the interpreter, and the exported C on the host (the compare form)
//! and under QEMU on Cortex-M4 (the saturate; one QEMU run).

use std::sync::Arc;

use picograd::codegen::lower::{buf_params, lower_ast};
use picograd::codegen::uops::UOpKind;
use picograd::device::Device;
use picograd::interp::Interp;
use picograd::ops::{requant, AluOp};
use picograd::runtime::target::Values;
use picograd::schedule::schedule;
use picograd::tensor::quantized::Ties;
use picograd::{DType, Tensor};

#[path = "common/int_bundle.rs"]
mod int_bundle;
#[path = "common/live_uops.rs"]
mod live_uops;

/// Multiplier and shift of the requantize: scale 3/4.
const M: i32 = 3 << 29;
const S: i32 = 31;

/// The accumulators: i32 extremes and values around every bound below (scaled by 3/4).
fn accumulators() -> Vec<i32> {
    let mut acc = vec![i32::MIN, i32::MIN + 1, i32::MAX, i32::MAX - 1, 0];
    acc.extend((-50_000..50_000).step_by(997));
    acc.extend((-400..400).step_by(3));
    acc
}

/// The three requantized outputs of one accumulator, packed into one i32: int8 with zero
/// point 3, int8 with a ReLU floor of -5 (compare form) and uint8 with zero point 7, each a
/// naive clamp of the reference requantize.
fn reference(a: i32) -> i32 {
    let r = requant(a, M, S);
    let i8v = (r + 3).clamp(-128, 127);
    let relu = (r + 3).clamp(-5, 127);
    let u8v = (r + 7).clamp(0, 255);
    i8v + 256 * relu + 65_536 * u8v
}

/// The same through `Tensor::try_requantize` on `x`.
fn model(x: &Tensor, dev: &Arc<dyn Device>) -> Tensor {
    let t = |v: i32| Tensor::try_from_slice_on(&[v], &[1], dev).unwrap();
    let (m, s) = (t(M), t(S));
    let z8 = Tensor::try_from_slice_on(&[3i8], &[1], dev).unwrap();
    let zu = Tensor::try_from_slice_on(&[7u8], &[1], dev).unwrap();
    let q = |zp: &Tensor, floor: Option<i64>, out: DType| {
        x.try_requantize(&m, &s, zp, floor, out, Ties::BeforeZeroPoint)
            .unwrap()
            .cast(DType::I32)
    };
    let i8v = q(&z8, None, DType::I8);
    let relu = q(&z8, Some(-5), DType::I8);
    let u8v = q(&zu, None, DType::U8);
    &(&i8v + &(&relu * 256.0)) + &(&u8v * 65_536.0)
}

#[test]
fn requantize_clamp_is_one_saturate_and_agrees_with_a_naive_clamp() {
    picograd::init();
    let acc = accumulators();
    let want: Vec<i32> = acc.iter().map(|&a| reference(a)).collect();
    let dev: Arc<dyn Device> = Arc::new(Interp::new());
    let n = acc.len();
    let x = Tensor::try_from_slice_on(&acc, &[n], &dev).unwrap();
    x.realize().unwrap();
    let y = model(&x, &dev);

    // The kernel: three `Clamp`s and no negation left for the stores to read.
    let items = schedule(&[y.lazy().contiguous()]).unwrap();
    let mut clamps = 0;
    for item in items.iter().filter(|i| !i.is_copy) {
        let lk = lower_ast(&item.ast, buf_params(item), None, false).unwrap();
        let live = live_uops::live_uops(&lk.uops);
        let count = |k: UOpKind| {
            (0..live.len())
                .filter(|&i| live[i] && lk.uops[i].kind == k)
                .count()
        };
        assert_eq!(
            count(UOpKind::Alu(AluOp::Neg)),
            0,
            "a Neg read in {}",
            lk.name
        );
        clamps += count(UOpKind::Alu(AluOp::Clamp));
    }
    assert_eq!(clamps, 3, "one Clamp per requantize");

    let bundle = int_bundle::export_for_cortex_m4(&x, &y, &want);
    let c = String::from_utf8(bundle.file("model.c").unwrap().to_vec()).unwrap();
    assert_eq!(
        c.matches("pg_clamp(").count(),
        4,
        "pg_clamp defined once, called thrice"
    );
    assert!(c.contains("__ssat(x, 8)") && c.contains("__usat(x, 8)"));
    let xs = Values {
        dtype: DType::I32,
        bits: acc.iter().map(|&v| u64::from(v as u32)).collect(),
    };
    int_bundle::check_bundle(&bundle, &[("x", xs)], &want);
}
