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
    /// Bytes of one core's L1 data cache; 0 when the target has no data cache.
    pub l1_bytes: usize,
    /// Bytes of one core's L2 cache; 0 when the target has none. The scheduler's layout
    /// transforms (`schedule/layout.rs`) size panels by it, and make no copies when it is 0 (a
    /// microcontroller's scarce resource is its static arena, which a copy would grow).
    pub l2_bytes: usize,
    /// Scalar float registers a register tile may fill on a core without float SIMD (32 on a
    /// Cortex-M4F or an RV32F core); 0 when the target has vector registers (its tiles are
    /// shaped by `vec_width`, so a SIMD description sets it to 0) or no float registers, and
    /// tiles are sized by `max_accs` alone. The small-core conv tile
    /// (`strategy/small_core.rs`) sizes accumulators plus the values feeding them by it.
    pub float_registers: usize,
    /// General-purpose registers a register tile of an integer sum (a quantized conv: i32
    /// accumulators, 8/16-bit operands) may fill: 14 on a Cortex-M (r0–r12 and lr); 0 for no
    /// integer tiles (desktop descriptions: their integer sums take the vector shapes). The
    /// small-core conv and depthwise tiles size integer sums by it instead of
    /// `float_registers`.
    pub int_registers: usize,
    /// The core has a dual 16-bit multiply-accumulate (Arm's `smlad`, DSP extension): the
    /// linearizer pairs the products of an integer sum into
    /// [`UOpKind::DualMac`](super::uops::UOpKind::DualMac)s. Off by default; a target says so
    /// (`opt.dual_mac = 1`). Integer sums wrap, so pairing changes no value. Where both int8
    /// factors are four consecutive bytes the pair is packed from one 32-bit load per factor
    /// (four products per two `smlad`s), and a capture relowered for such a target stores the
    /// int8 intermediates a packed sum reads strided channel-interleaved
    /// ([`crate::schedule::interleave`]).
    pub dual_mac: bool,
    /// The strategies may make an upcast's lanes vector UOps
    /// ([`Opt::Vectorize`](super::kernel::Opt::Vectorize)), which C prints on GCC/clang vector
    /// types: on for SIMD hosts ([`OptConfig::for_vec_width`]), off for small cores (their C
    /// compilers would lower the vector types to scalar code anyway). A target says so with
    /// `opt.vector_lanes = 1`.
    pub vector_lanes: bool,
    /// SIMD registers a vector register tile may fill, accumulators and the operands feeding
    /// them (16 on x86-64 up to AVX2, 32 with AVX-512); 0 when unknown or without SIMD, and
    /// tiles are sized by `max_accs` alone. The pixel-lane tile of a pointwise conv
    /// (`strategy/orientation.rs`) takes a second vector of pixels where they fit.
    pub vec_registers: usize,
    /// Bytes of stack one kernel may take for scratch: a packed int8 sum's weights staged as
    /// widened i16 pairs ([`Opt::StageWeights`](super::kernel::Opt::StageWeights)), sized by
    /// the small-core conv tile (`strategy/small_core.rs`). 0 (the default): no staging. A
    /// target sets it from the stack its parts can spare (`opt.stack_scratch`).
    pub stack_scratch: usize,
}

impl OptConfig {
    /// For 32-bit microcontrollers (16–32 registers, no float SIMD): output tiles of up to 8
    /// accumulators, and conv tiles sized by 32 float registers. The export default; `examples/device_bench.rs` measured it best of the
    /// settings tried on Cortex-M4 and RV32IMAFC.
    pub fn small_device() -> OptConfig {
        OptConfig {
            vec_width: 2,
            max_accs: 8,
            max_unrolled: 32,
            l1_bytes: 0,
            l2_bytes: 0,
            float_registers: OptConfig::SMALL_CORE_FLOAT_REGISTERS,
            int_registers: OptConfig::SMALL_CORE_INT_REGISTERS,
            dual_mac: false,
            vector_lanes: false,
            vec_registers: 0,
            stack_scratch: 0,
        }
    }

    /// Single-precision registers of the FPUs of the shipped small targets (Cortex-M4F's
    /// FPv4-SP: s0–s31; RISC-V F: f0–f31).
    pub const SMALL_CORE_FLOAT_REGISTERS: usize = 32;

    /// General-purpose registers free for values on the smallest shipped core (Armv7-M:
    /// r0–r12 and lr; the stack pointer and pc are not). RISC-V cores have more, so this is
    /// the conservative default for every small target.
    pub const SMALL_CORE_INT_REGISTERS: usize = 14;

    /// A configuration for a vector width, with register budgets that suit it and the caches of
    /// a typical desktop core ([`OptConfig::DEFAULT_L1_BYTES`], [`OptConfig::DEFAULT_L2_BYTES`];
    /// a device that knows better sets them with [`OptConfig::with_caches`]).
    pub fn for_vec_width(vec_width: usize) -> OptConfig {
        let vec_width = vec_width.clamp(1, 16);
        OptConfig {
            vec_width,
            max_accs: (vec_width * 8).max(16),
            max_unrolled: 512,
            l1_bytes: OptConfig::DEFAULT_L1_BYTES,
            l2_bytes: OptConfig::DEFAULT_L2_BYTES,
            float_registers: 0,
            int_registers: 0,
            dual_mac: false,
            vector_lanes: true,
            // x86-64 has 16 vector registers up to AVX2 and 32 with AVX-512 (16 lanes); a
            // 4-lane NEON core has 32, and 16 is the safe count for 4 lanes.
            vec_registers: if vec_width >= 16 { 32 } else { 16 },
            stack_scratch: 0,
        }
    }

    /// L1 data cache assumed when a desktop target does not say (32 KiB: x86-64 and most
    /// AArch64 cores of the last decade).
    pub const DEFAULT_L1_BYTES: usize = 32 * 1024;
    /// L2 cache assumed when a desktop target does not say (512 KiB: the smallest per-core L2 of
    /// current x86-64 server and desktop cores; a smaller guess only makes panels narrower).
    pub const DEFAULT_L2_BYTES: usize = 512 * 1024;

    /// The same configuration with the given cache sizes (bytes; 0 = no such cache).
    pub fn with_caches(self, l1_bytes: usize, l2_bytes: usize) -> OptConfig {
        OptConfig {
            l1_bytes,
            l2_bytes,
            ..self
        }
    }
}
