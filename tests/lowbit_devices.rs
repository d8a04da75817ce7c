//! Rounding onto the low-bit storage types compiled to C: on the Clang device (fused
//! multiply-add on, the case where contraction could change a result) every probe of the ONNX reference (`core/tests/data/lowbit_reference.txt`)
//! rounds to the reference's bit pattern, as it does on the interpreter (`core/tests/lowbit.rs`).

#[path = "../core/tests/common/lowbit_reference.rs"]
mod lowbit_reference;

use std::sync::Arc;

use lowbit_reference::{load, load_e8m0, same};
use picograd::device::Device;
use picograd::lowbit::E8M0Round;
use picograd::{DType, Tensor};

fn clang(fused: bool) -> Arc<dyn Device> {
    picograd::init();
    let c = picograd::runtime::Clang::new().expect("no C compiler: the low-bit tests cannot run");
    Arc::new(c.with_fused_mulacc(fused))
}

#[test]
fn compiled_rounding_matches_the_onnx_reference() {
    let dev = clang(true);
    for r in load() {
        for sat in [true, false] {
            let pairs = &r.casts[sat as usize];
            let x: Vec<f32> = pairs.iter().map(|p| p.0).collect();
            let t = Tensor::try_from_slice_on(&x, &[x.len()], &dev).unwrap();
            let y = t.try_to_lowbit(r.kind, sat).unwrap();
            let got = y.cast(DType::F32).to_vec::<f32>().unwrap();
            for ((a, want), g) in pairs.iter().zip(&got) {
                assert!(
                    same(*g, *want),
                    "{:?} saturate={sat}: {a:e} gave {g:e}, ONNX {want:e}",
                    r.kind
                );
            }
        }
    }
}

#[test]
fn compiled_e8m0_rounding_matches_the_onnx_reference() {
    let dev = clang(true);
    let rows = load_e8m0();
    for mode in [E8M0Round::Up, E8M0Round::Nearest, E8M0Round::Down] {
        for sat in [true, false] {
            let pairs: Vec<(f32, f32)> = rows
                .iter()
                .filter(|r| r.0 == mode && r.1 == sat)
                .map(|r| (r.2, r.3))
                .collect();
            let x: Vec<f32> = pairs.iter().map(|p| p.0).collect();
            let t = Tensor::try_from_slice_on(&x, &[x.len()], &dev).unwrap();
            let got = t.try_to_e8m0(sat, mode).unwrap().to_vec::<f32>().unwrap();
            for ((a, want), g) in pairs.iter().zip(&got) {
                assert!(
                    same(*g, *want),
                    "e8m0 {mode:?} saturate={sat}: {a:e} gave {g:e}, ONNX {want:e}"
                );
            }
        }
    }
}
