//! [`OptConfig`]: what the kernel optimizer knows about the machine it shapes kernels for
//! (vector width, register budgets). Devices and target descriptions provide it; the
//! strategies ([`super::strategy`]) read it and nothing here reads them, so this module sits
//! below them (no import cycle).
//!
//! Invariant: a configuration only changes which order-preserving opts are picked, never what
//! a kernel computes.

/// How the optimizer shapes kernels for a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OptConfig {
    /// f32 lanes in one SIMD register (4 for SSE/NEON, 8 for AVX2, 16 for AVX-512).
    pub vec_width: usize,
    /// At most this many accumulators (output values kept in registers per iteration).
    pub max_accs: usize,
    /// At most this many unrolled copies of the kernel body (upcasts times unrolls).
    pub max_unrolled: usize,
}

impl OptConfig {
    /// For 32-bit microcontrollers (16–32 registers, no float SIMD): output tiles of up to 8
    /// accumulators. The export default; `examples/device_bench.rs` measured it best of the
    /// settings tried on Cortex-M4 and RV32IMAFC.
    pub fn small_device() -> OptConfig {
        OptConfig {
            vec_width: 2,
            max_accs: 8,
            max_unrolled: 32,
        }
    }

    /// A configuration for a vector width, with register budgets that suit it.
    pub fn for_vec_width(vec_width: usize) -> OptConfig {
        let vec_width = vec_width.clamp(1, 16);
        OptConfig {
            vec_width,
            max_accs: (vec_width * 8).max(16),
            max_unrolled: 512,
        }
    }
}
