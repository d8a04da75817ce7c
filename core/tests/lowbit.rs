//! The storage-only low-bit types against the ONNX reference (see
//! `common/lowbit_reference.rs`): every code of every type decodes to the reference value;
//! `try_to_lowbit` rounds every probe exactly as the reference `Cast` does, with and without
//! saturation (bit patterns, so ±0 count), and float8 e8m0 under every `round_mode`; decode ∘
//! round is the identity on representable values; packing is low bits first and round-trips,
//! odd lengths included.

#[path = "common/lowbit_reference.rs"]
mod lowbit_reference;

use lowbit_reference::{load, load_e8m0, same};
use picograd_core::lowbit::{pack, unpack, E8M0Round, LowBit};
use picograd_core::{DType, Tensor};

#[test]
fn every_code_decodes_to_the_onnx_value() {
    for r in load() {
        assert_eq!(r.decoded.len(), 1 << r.kind.bits(), "{:?}", r.kind);
        for (code, &want) in r.decoded.iter().enumerate() {
            let got = r.kind.decode(code as u8) as f32;
            assert!(
                same(got, want),
                "{:?} code {code}: {got}, ONNX {want}",
                r.kind
            );
        }
    }
}

fn round(kind: LowBit, x: &[f32], saturate: bool) -> Vec<f32> {
    let t = Tensor::from_slice(x, &[x.len()]);
    let y = t.try_to_lowbit(kind, saturate).unwrap();
    assert_eq!(y.dtype(), kind.carrier());
    y.cast(DType::F32).to_vec::<f32>().unwrap()
}

#[test]
fn rounding_matches_the_onnx_cast_on_every_probe() {
    for r in load() {
        for sat in [true, false] {
            let pairs = &r.casts[sat as usize];
            assert!(pairs.len() > 20, "{:?}: too few probes", r.kind);
            let x: Vec<f32> = pairs.iter().map(|p| p.0).collect();
            let got = round(r.kind, &x, sat);
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
fn representable_values_round_to_themselves() {
    for r in load() {
        let fin: Vec<f32> = r
            .decoded
            .iter()
            .copied()
            .filter(|v| v.is_finite())
            .collect();
        // e8m0's 2^-127 is an f32 subnormal, which ONNX rounds up to 2^-126 (checked above).
        let fin: Vec<f32> = match r.kind {
            LowBit::F8E8M0 => fin[1..].to_vec(),
            _ => fin,
        };
        let got = round(r.kind, &fin, false);
        for (a, g) in fin.iter().zip(&got) {
            // fnuz formats have no -0: the only change allowed is -0 → +0 there.
            assert!(*a == *g, "{:?}: {a} came back as {g}", r.kind);
        }
    }
}

#[test]
fn e8m0_rounds_like_onnx_in_every_round_mode() {
    let rows = load_e8m0();
    assert!(rows.len() > 1000);
    for mode in [E8M0Round::Up, E8M0Round::Nearest, E8M0Round::Down] {
        for sat in [true, false] {
            let pairs: Vec<(f32, f32)> = rows
                .iter()
                .filter(|r| r.0 == mode && r.1 == sat)
                .map(|r| (r.2, r.3))
                .collect();
            let x: Vec<f32> = pairs.iter().map(|p| p.0).collect();
            let t = Tensor::from_slice(&x, &[x.len()]);
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

#[test]
fn f64_and_integer_inputs_round_like_f32() {
    let x = [0.3f64, -1e6, 2.5, 1e-3, -7.0, 13.0];
    let xf: Vec<f32> = x.iter().map(|&v| v as f32).collect();
    for kind in [LowBit::F8E5M2, LowBit::I4, LowBit::F4E2M1] {
        let from64 = Tensor::from_slice(&x, &[6])
            .try_to_lowbit(kind, true)
            .unwrap();
        assert_eq!(
            from64.cast(DType::F32).to_vec::<f32>().unwrap(),
            round(kind, &xf, true)
        );
    }
    let ints = Tensor::from_slice(&[-9i32, -8, 7, 8, 100, -100], &[6]);
    let got = ints
        .try_to_lowbit(LowBit::I4, true)
        .unwrap()
        .to_vec::<i8>()
        .unwrap();
    assert_eq!(got, vec![7, -8, 7, -8, 4, -4]); // ml_dtypes.int4 wraps the same way
    let got = ints
        .try_to_lowbit(LowBit::U2, true)
        .unwrap()
        .to_vec::<u8>()
        .unwrap();
    assert_eq!(got, vec![3, 0, 3, 0, 0, 0]);
}

#[test]
fn packing_is_low_nibble_first_and_round_trips() {
    // ONNX packs int4 [1, -2, 3] as 0xE1, 0x03 (element 0 in the low nibble, odd length padded).
    let codes = [1u8, 0xE, 3];
    assert_eq!(pack(LowBit::I4, &codes), vec![0xE1, 0x03]);
    assert_eq!(unpack(LowBit::I4, &[0xE1, 0x03], 3).unwrap(), codes);
    let vals: Vec<f64> = codes.iter().map(|&c| LowBit::I4.decode(c)).collect();
    assert_eq!(vals, vec![1.0, -2.0, 3.0]);
    // 2-bit: four per byte, element 0 in bits 0-1.
    assert_eq!(pack(LowBit::U2, &[1, 2, 3, 0, 3]), vec![0b0011_1001, 0b11]);
    for kind in picograd_core::lowbit::ALL_LOWBITS {
        let n = (1usize << kind.bits()) + 1; // odd: a partial last byte
        let codes: Vec<u8> = (0..n).map(|i| (i % (1 << kind.bits())) as u8).collect();
        let packed = pack(kind, &codes);
        assert_eq!(packed.len(), kind.packed_len(n));
        assert_eq!(unpack(kind, &packed, n).unwrap(), codes, "{kind:?}");
        assert!(
            unpack(kind, &packed[1..], n).is_none(),
            "{kind:?}: short data accepted"
        );
    }
}
