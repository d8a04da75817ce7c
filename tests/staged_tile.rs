//! The staged int8 tile the generator builds (`Opt::StageWeights`, `strategy/small_core.rs`,
//! `linearizer/stage.rs`): on Cortex-M4 (`dual_mac`, 14 integer registers, a 640-byte stack
//! budget for scratch) a packed int8 1×1 conv takes `c` output channels × 1 pixel, the
//! group's weights widened once into a stack local of i16 pairs (`DefineLocal`, `PairWiden`)
//! and each packed step widening one input word and reading every channel's pairs from the
//! local (a `DualMac` of 4-lane i16 operands; `pg_ld_pairs`, one `ldrd`, in C). Here the
//! second conv reads 8 interleaved channels (two words) of 1 × 23 pixels into 11 output
//! channels: `c` = 7 would fit the registers (7 + 7 ≤ 14) but leaves no loop of two groups,
//! so `c` = 5, two groups in a loop then a remainder group of 1 (`Opt::LoopedUpcast` on the
//! channel axis), both parts staging into one local of 5 × 8 i16. Checked against a naive
//! i64 reference: the capture relowered for Cortex-M4 on the interpreter, and the exported C
//! on the host (portable branch) and under QEMU on Cortex-M4 (the `sxtb16`/`ldrd`/`smlad`
//! branch, one QEMU run).

use picograd::codegen::uops::{LinearKernel, UOpKind};
use picograd::DType;

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
    c: &[8, 8, 11],
    zp: -3,
    weight_seed: 31,
    input_seed: 13,
};

/// Staged `DualMac`s (two 4-lane i16 operands) of `k`.
fn staged_macs(k: &LinearKernel) -> usize {
    k.uops
        .iter()
        .filter(|u| {
            u.kind == UOpKind::DualMac
                && u.src.len() == 3
                && k.uops[u.src[1] as usize].dtype == DType::I16
        })
        .count()
}

#[test]
fn staged_pointwise_tile_with_a_remainder_group_matches_the_reference() {
    let want = CHAIN.reference();
    let (dev, x, cap) = CHAIN.captured();
    let cfg = int_bundle::m4_dual_mac();
    assert_eq!(
        (cfg.int_registers, cfg.stack_scratch),
        (14, 640),
        "the tile below is sized for 14 registers and 640 bytes of stack"
    );

    let rel = cap.relowered(Some(&cfg), false).unwrap();
    let staged: Vec<&LinearKernel> = rel
        .steps()
        .iter()
        .filter_map(|s| s.kernel.as_ref())
        .filter(|k| staged_macs(k) > 0)
        .collect();
    assert_eq!(staged.len(), 1, "one staged kernel");
    let k = staged[0];
    // One local for both parts: 5 channels × 8 reduce positions of i16.
    let locals: Vec<&UOpKind> = k
        .uops
        .iter()
        .map(|u| &u.kind)
        .filter(|u| matches!(u, UOpKind::DefineLocal { .. }))
        .collect();
    assert_eq!(locals, [&UOpKind::DefineLocal { size: 40 }], "{k}");
    // Per part: its staging stores (one per channel and word) and its DualMacs (one per
    // channel and word) — 5 channels in the looped part, 1 in the remainder; 2 words each.
    let stores = k
        .uops
        .iter()
        .filter(|u| u.kind == UOpKind::VecStore { lanes: 4 } && u.dtype == DType::I16)
        .count();
    assert_eq!((stores, staged_macs(k)), (5 * 2 + 2, 5 * 2 + 2), "{k}");
    // No packed step reads its weights as words any more (every DualMac is staged).
    let words = k
        .uops
        .iter()
        .filter(|u| u.kind == UOpKind::DualMac && u.src.len() == 3)
        .count();
    assert_eq!(words, staged_macs(k), "{k}");

    let got = pointwise_chain::replayed(&rel, &dev, &x);
    assert_eq!(got, want, "interpreter running the Cortex-M4 kernels");

    let (bundle, c) = int_bundle::export_for_cortex_m4_with(&cap, cfg);
    for call in ["pg_ld_pairs(", "pg_widen_lo(", "pg_st_pairs(", "pg_smlad2("] {
        assert!(c.contains(call), "the exported C has no {call}");
    }
    int_bundle::check_bundle(&bundle, &CHAIN.feed(), &want);
}
