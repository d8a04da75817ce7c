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
//! exported C on the host (portable branch) and under QEMU on Cortex-M4 (one QEMU run). The
//! target's stack budget for staged weights is set to 0 here: with it, the staged tile is
//! taken instead (`tests/staged_tile.rs`).

use picograd::codegen::opt::OptConfig;
use picograd::codegen::uops::UOpKind;

#[path = "common/int_bundle.rs"]
mod int_bundle;
#[path = "common/pointwise_chain.rs"]
mod pointwise_chain;
#[path = "common/rng.rs"]
mod rng;
use pointwise_chain::Chain;

/// The chain of 1×1 convs the test compiles.
const CHAIN: Chain = Chain {
    h: 1,
    w: 23,
    // Channels of the input, the interleaved intermediate and the output.
    c: &[8, 8, 6],
    zp: -3,
    weight_seed: 29,
    input_seed: 11,
};

#[test]
fn packed_pointwise_tile_with_a_looped_remainder_matches_the_reference() {
    let want = CHAIN.reference();
    let (dev, x, cap) = CHAIN.captured();
    // Without a stack budget for staged weights (`tests/staged_tile.rs` has the staged tile
    // the target's own budget picks for the same chain).
    let cfg = OptConfig {
        stack_scratch: 0,
        ..int_bundle::m4_dual_mac()
    };
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

    let got = pointwise_chain::replayed(&rel, &dev, &x);
    assert_eq!(got, want, "interpreter running the Cortex-M4 kernels");

    let (bundle, c) = int_bundle::export_for_cortex_m4_with(&cap, cfg);
    assert!(
        c.contains("pg_smlad4_b("),
        "the exported C has no packed sum"
    );
    int_bundle::check_bundle(&bundle, &CHAIN.feed(), &want);
}
