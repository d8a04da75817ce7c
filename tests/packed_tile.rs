//! The packed pointwise register tile with a looped remainder: on Cortex-M4 (`dual_mac`, 14
//! integer registers, all of which a packed tile may fill) a packed int8 1×1 conv whose pixel
//! count the tile does not divide takes 2 output channels × 3 pixels (each widened word
//! reused across the other side: fewer loads per multiply-add than the 1 × w tiles its
//! divisors allow, and than 3 × 2) in a loop, then the 2 pixels left over as a 2 × 2 tile
//! (`Opt::LoopedUpcast`). Here the second conv reads 8 interleaved channels (two words) of
//! 1 × 23 = 23 pixels (7 steps of 3, tail 2) into 6 output channels; its two words are
//! unrolled after the tile's 4-byte unroll, so the linearizer must run the packed axis fastest
//! to keep them words. The divisors of 23 alone would give a 6 × 1 tile. Checked against a
//! naive i64 reference: the capture relowered for Cortex-M4 on the interpreter, and the
//! exported C on the host (portable branch) and under QEMU on Cortex-M4 (one QEMU run).

use std::sync::Arc;

use picograd::codegen::opt::OptConfig;
use picograd::codegen::uops::UOpKind;
use picograd::device::Device;
use picograd::export::{export, ExportNames, ExportOptions};
use picograd::interp::Interp;
use picograd::jit::Capture;
use picograd::runtime::target::{Target, Values};
use picograd::{DType, Tensor};

const H: usize = 1;
const W: usize = 23;
/// Channels of the input, the interleaved intermediate and the output.
const C: [usize; 3] = [8, 8, 6];
const ZP: i64 = -3;

#[path = "common/int_bundle.rs"]
mod int_bundle;
#[path = "common/pointwise_chain.rs"]
mod pointwise_chain;
#[path = "common/rng.rs"]
mod rng;
use pointwise_chain::Chain;

/// The chain of 1×1 convs the test compiles.
const CHAIN: Chain = Chain {
    h: H,
    w: W,
    c: &C,
    zp: ZP,
    weight_seed: 29,
    input_seed: 11,
};

/// Cortex-M4's kernel configuration with the dual MAC on.
fn m4() -> OptConfig {
    OptConfig {
        dual_mac: true,
        ..Target::by_name("cortex-m4").unwrap().opt
    }
}

#[test]
fn packed_pointwise_tile_with_a_looped_remainder_matches_the_reference() {
    picograd::init();
    let want = CHAIN.reference();
    let dev: Arc<dyn Device> = Arc::new(Interp::new());
    let x = Tensor::try_from_slice_on(&CHAIN.input(), &[1, C[0], H, W], &dev).unwrap();
    x.realize().unwrap();
    let y = CHAIN.model(&x, &dev);
    let (cap, _) = Capture::record(&[&x], &[&y]).unwrap();
    let cfg = m4();
    assert_eq!(
        cfg.int_registers, 14,
        "the tile below is sized for 14 registers"
    );

    // The packed kernel: inside each pixel loop a 2 × 3 tile (2 words of 4 channels: 12
    // packed DualMacs, 6 stores), after it the 2-pixel tail (2 × 2: 8 DualMacs, 4 stores); a
    // 1 × 23 tile would store 23 outputs per step, a 3 × 2 tile 6 with a 1-pixel tail.
    let rel = cap.relowered(Some(&cfg), false).unwrap();
    let kernels: Vec<_> = rel
        .steps()
        .iter()
        .filter_map(|s| s.kernel.as_ref())
        .filter(|k| {
            k.uops
                .iter()
                .any(|u| u.kind == UOpKind::DualMac && u.src.len() == 3)
        })
        .collect();
    assert_eq!(kernels.len(), 1, "one packed kernel");
    // (inside a loop, packed DualMacs, stores) per stretch between loop boundaries.
    let mut parts: Vec<(bool, usize, usize)> = vec![(false, 0, 0)];
    for u in &kernels[0].uops {
        match u.kind {
            UOpKind::Loop => parts.push((true, 0, 0)),
            UOpKind::EndLoop => parts.push((false, 0, 0)),
            UOpKind::DualMac if u.src.len() == 3 => parts.last_mut().unwrap().1 += 1,
            UOpKind::Store => parts.last_mut().unwrap().2 += 1,
            _ => {}
        }
    }
    parts.retain(|p| p.1 + p.2 > 0);
    let body = parts.iter().filter(|p| p.0).count();
    let tail = parts.len() - body;
    assert!(body > 0 && tail > 0, "no looped tile and tail: {parts:?}");
    for p in &parts {
        let want = if p.0 { (true, 12, 6) } else { (false, 8, 4) };
        assert_eq!(
            *p, want,
            "tile parts (in loop, DualMacs, stores): {parts:?}"
        );
    }

    let got = rel
        .recompiled(&dev)
        .unwrap()
        .replay(&[&x])
        .unwrap()
        .remove(0)
        .to_vec::<i32>()
        .unwrap();
    assert_eq!(got, want, "interpreter running the Cortex-M4 kernels");

    let target = Target::by_name("cortex-m4").unwrap();
    let opts = ExportOptions {
        opt: Some(cfg),
        ..target.export_options()
    };
    let bundle = export(&cap, &ExportNames::new(&["x"], &["y"]), &opts).unwrap();
    let c = String::from_utf8(bundle.file("model.c").unwrap().to_vec()).unwrap();
    assert!(
        c.contains("pg_smlad4_b("),
        "the exported C has no packed sum"
    );
    let xs = Values {
        dtype: DType::I8,
        bits: CHAIN.input().iter().map(|&v| u64::from(v as u8)).collect(),
    };
    let feed = [("x", xs)];
    int_bundle::check_bundle(&bundle, &feed, &want);
}
