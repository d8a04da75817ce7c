//! The packed dual multiply-accumulate and the channel-interleaved layout that feeds it: for a
//! target with `dual_mac` (Cortex-M4), an int8 pointwise conv reading an intermediate int8
//! activation stores that activation channel-interleaved (the scheduling layer's
//! `interleave` rule, no copy), and its sum reads one 32-bit word per four products of each
//! factor (a 3-source `DualMac` over two 4-lane `VecLoad`s, printed `pg_smlad4_b`). Checked
//! against a naive i64 reference: the capture relowered for Cortex-M4 and run on the
//! interpreter, and the exported C on the host (portable branch) and under QEMU on Cortex-M4
//! (the `__smlad`/`__sxtb16` branch; one QEMU run). The first conv has 12 input channels
//! (three words); the second reads 12 channels of 15 pixels, so the interleaved buffer is
//! `[12, 15]` stored `[15, 12]`; a third, with 6 input channels (not a whole number of words),
//! keeps its NCHW input and pairs its products from single loads (the remainder path).

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
    h: 3,
    w: 5,
    // Channels of the input, the interleaved intermediate, the odd intermediate and the output.
    c: &[12, 12, 6, 4],
    zp: -3,
    weight_seed: 17,
    input_seed: 5,
};

#[test]
fn packed_dual_mac_on_interleaved_activations_matches_the_reference() {
    let want = CHAIN.reference();
    let (dev, x, cap) = CHAIN.captured();
    let cfg = int_bundle::m4_dual_mac();

    // The target's kernels: packed sums in the convs over 12 channels (the input is a model
    // input and keeps its layout, but the weights and the interleaved intermediate are
    // consecutive along the channels only for the second conv) and pairs in the 6-channel one.
    let rel = cap.relowered(Some(&cfg), false).unwrap();
    let packed: Vec<usize> = rel
        .steps()
        .iter()
        .filter_map(|s| s.kernel.as_ref())
        .map(|k| {
            k.uops
                .iter()
                .filter(|u| u.kind == UOpKind::DualMac && u.src.len() == 3)
                .count()
        })
        .collect();
    // Only the second conv packs: its input is the interleaved intermediate (the first conv
    // reads the model input, whose layout is the caller's, with its channels strided).
    assert_eq!(
        packed.iter().filter(|&&n| n > 0).count(),
        1,
        "packed DualMacs per kernel: {packed:?}"
    );
    let pairs = rel
        .steps()
        .iter()
        .filter_map(|s| s.kernel.as_ref())
        .flat_map(|k| k.uops.iter())
        .filter(|u| u.kind == UOpKind::DualMac && u.src.len() == 5)
        .count();
    assert!(pairs > 0, "the 6-channel conv should pair single loads");
    let plain = cap
        .relowered(
            Some(&OptConfig {
                dual_mac: false,
                ..cfg
            }),
            false,
        )
        .unwrap();
    let any_dual = plain
        .steps()
        .iter()
        .filter_map(|s| s.kernel.as_ref())
        .flat_map(|k| k.uops.iter())
        .any(|u| u.kind == UOpKind::DualMac);
    assert!(!any_dual, "a DualMac without the target's say-so");

    // The relowered kernels (interleaved layout, packed sums) on the interpreter.
    let got = pointwise_chain::replayed(&rel, &dev, &x);
    assert_eq!(got, want, "interpreter running the Cortex-M4 kernels");

    // The exported C: the portable branch on the host, the intrinsics under QEMU.
    let (bundle, c) = int_bundle::export_for_cortex_m4_with(&cap, cfg);
    for call in ["pg_smlad4_b(", "pg_ld_i8x4(", "pg_smlad_b("] {
        assert!(c.contains(call), "the exported C has no {call}");
    }
    int_bundle::check_bundle(&bundle, &CHAIN.feed(), &want);
}
