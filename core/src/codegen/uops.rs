//! UOps: the flat, linear IR a kernel is lowered to, and the [`LinearKernel`] that carries them to
//! a device (the interpreter runs them; the C renderer prints them).
//!
//! Invariants: a UOp's sources are earlier UOps (indices into the same list), so the list is in
//! dependency order; every `Loop` is closed by exactly one `EndLoop` after it, and loops nest
//! properly; `DefineGlobal`s and `DefineVar`s come first. Index arithmetic is i32 when its bounds
//! fit in i32 and i64 otherwise.

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

use crate::dtype::DType;
use crate::ops::{AluOp, Scalar};

/// What a UOp does.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum UOpKind {
    /// Buffer parameter number `idx` (a pointer to elements of the UOp's dtype); outputs are
    /// `writable`.
    DefineGlobal {
        /// The parameter's position in the kernel's buffer list.
        idx: usize,
        /// Does the kernel store to it?
        writable: bool,
    },
    /// A symbolic variable, passed to the kernel as an `int32_t` argument.
    DefineVar {
        /// The variable's name (a C identifier).
        name: Arc<str>,
        /// Its smallest value.
        min: i64,
        /// Its largest value.
        max: i64,
    },
    /// A scratch array of `size` elements of the UOp's dtype that the kernel owns (on the
    /// stack in C, aligned to 8 bytes; per run in the interpreter): loads and stores address
    /// it as they address a `DefineGlobal`. Its contents start undefined: the kernel stores
    /// every element it later loads (the linearizer's staged weights fill it before the loop
    /// that reads it). Declared after the `DefineGlobal`s and `DefineVar`s.
    DefineLocal {
        /// Its element count.
        size: usize,
    },
    /// A constant.
    Const(Scalar),
    /// A loop: the UOp's value runs over `[src0, src1)`.
    Loop,
    /// The end of the loop `src0`.
    EndLoop,
    /// An accumulator register, starting at the given value; updated by `Assign`.
    DefineAcc(Scalar),
    /// `src0[src1]`; with a bool `src2` (a gate), the load happens only where the gate holds and
    /// gives 0 elsewhere (padding), so the index need not be in bounds there.
    Load,
    /// `src0[src1] = src2`.
    Store,
    /// An elementwise operation on the sources.
    Alu(AluOp),
    /// `src0` converted to the UOp's dtype: floats to ints truncate and saturate, NaN gives 0;
    /// ints wrap; to f16/bf16 rounds to nearest-even.
    Cast,
    /// `src0`'s bits reinterpreted as the UOp's dtype (same item size).
    Bitcast,
    /// Accumulator update: `src0` (a `DefineAcc`) takes the value `src1`.
    Assign,
    /// The dual multiply-accumulate, a widening two-lane dot: `src0 + src1·src2 + src3·src4`
    /// in wrapping i32 arithmetic, `src0` an i32 accumulator's value and the four factors
    /// i8/u8/i16 (each fits a signed 16-bit lane). The linearizer pairs two products of an
    /// integer sum into one when the target's [`OptConfig`](super::opt::OptConfig) says it has
    /// the instruction (`dual_mac`: Arm's `smlad` on cores with the DSP extension).
    /// Packed form, three sources: `src0 + Σₖ src1[k]·src2[k]` over two `VecLoad`s of four i8
    /// lanes each (one 32-bit word per operand: two `smlad`s on `sxtb16`-widened halves), made
    /// where both factors are four consecutive elements of memory; or over two 4-lane i16
    /// values already widened (`PairWiden`s, or a `VecLoad` of four i16 lanes from a
    /// `DefineLocal` holding `PairWiden`s): two `smlad`s and no widening.
    DualMac,
    /// A vector accumulator of `lanes` elements of the UOp's dtype, every lane starting at the
    /// value; updated by `Assign` with a vector of as many lanes.
    VecAcc {
        /// Every lane's starting value.
        init: Scalar,
        /// Its lane count (≥ 2).
        lanes: u8,
    },
    /// `lanes` elements `stride` apart, lane `k` being `src0[src1 + k·stride]`, as one vector:
    /// consecutive elements at stride 1, every other one at stride 2 (a stride-2 conv's input
    /// row). Gated form: `lanes` more bool sources, one gate per lane; lane `k` loads only where
    /// `src(2 + k)` holds and is 0 elsewhere (padding; its element need not be in bounds), as a
    /// gated `Load` does. The padding-bounds pass drops the gates where all hold (a plain
    /// vector load in a padded conv's interior).
    VecLoad {
        /// How many elements.
        lanes: u8,
        /// Elements between lanes (1 or 2).
        stride: u8,
    },
    /// The vector `src2` stored to `src0[src1 + 0 .. src1 + lanes]`, lane `k` at `src1 + k`.
    VecStore {
        /// How many elements.
        lanes: u8,
    },
    /// An elementwise operation applied lane by lane to vector sources of `lanes` lanes: each
    /// lane computes exactly what the scalar `Alu(op)` computes on that lane's operands.
    VecAlu {
        /// The lane's operation.
        op: AluOp,
        /// The sources' and the result's lane count.
        lanes: u8,
    },
    /// The scalar sources, in lane order, as one vector (one source repeated: a broadcast).
    Vectorize,
    /// Lane `n` of the vector `src0`, as a scalar.
    Gep(u8),
    /// The four i8 lanes of the word `src0` (a `VecLoad` of four i8 lanes) sign-extended to
    /// four i16 lanes in the order `(0, 2, 1, 3)`: the halfword pairs Arm's `sxtb16` gives
    /// from a word and from the word rotated by 8 bits, one 32-bit register each. A dot
    /// product of two such values (a packed `DualMac` of 4-lane i16 operands) is the dot of
    /// the words, the lane order being the same on both sides.
    PairWiden,
}

impl UOpKind {
    /// Is this an accumulator (its value changes with each `Assign`, so nothing reading it may
    /// be shared or moved)?
    pub fn is_acc(&self) -> bool {
        matches!(self, UOpKind::DefineAcc(_) | UOpKind::VecAcc { .. })
    }
}

/// The lane count a vector kind carries (1 for every other kind; a `Vectorize` or an `Assign`
/// takes its lanes from its sources, see [`lanes`]).
pub fn lanes_of(kind: &UOpKind) -> usize {
    match kind {
        UOpKind::VecAcc { lanes, .. }
        | UOpKind::VecLoad { lanes, .. }
        | UOpKind::VecStore { lanes }
        | UOpKind::VecAlu { lanes, .. } => usize::from(*lanes),
        UOpKind::PairWiden => 4,
        UOpKind::DefineGlobal { .. }
        | UOpKind::DefineLocal { .. }
        | UOpKind::DefineVar { .. }
        | UOpKind::Const(_)
        | UOpKind::Loop
        | UOpKind::EndLoop
        | UOpKind::DefineAcc(_)
        | UOpKind::Load
        | UOpKind::Store
        | UOpKind::Alu(_)
        | UOpKind::Cast
        | UOpKind::Bitcast
        | UOpKind::Assign
        | UOpKind::DualMac
        | UOpKind::Vectorize
        | UOpKind::Gep(_) => 1,
    }
}

/// The lane count of UOp `i` of `uops`: 1 for a scalar, the vector width for a vector value
/// (vector kinds carry it; `Vectorize` has one source per lane; an `Assign` has its
/// accumulator's; a `VecStore` reports the lanes it stores).
pub fn lanes(uops: &[UOp], i: usize) -> usize {
    let u = &uops[i];
    match &u.kind {
        UOpKind::Vectorize => u.src.len(),
        // An accumulator's source is always a `DefineAcc` or `VecAcc` (verified).
        UOpKind::Assign => u
            .src
            .first()
            .map_or(1, |&a| lanes_of(&uops[a as usize].kind)),
        kind => lanes_of(kind),
    }
}

/// One micro-op.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UOp {
    /// What it does.
    pub kind: UOpKind,
    /// The dtype of its value (for `DefineGlobal`, the element dtype of the buffer; for `Store`,
    /// `EndLoop`: the stored dtype / the loop's dtype).
    pub dtype: DType,
    /// Its operands, as indices of earlier UOps.
    pub src: Vec<u32>,
}

/// A buffer parameter of a kernel.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BufParam {
    /// Element dtype.
    pub dtype: DType,
    /// How many elements the kernel may touch (for the largest variable values).
    pub size: usize,
    /// Written by the kernel (outputs come first).
    pub writable: bool,
}

/// Work estimates of a kernel, for `PICOGRAD_DEBUG=1` and for the tests that count work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct KernelCost {
    /// Arithmetic operations executed (ALU ops inside loops, times the trip counts).
    pub flops: u64,
    /// Bytes loaded and stored.
    pub bytes: u64,
    /// Reduce accumulations executed.
    pub reduce_ops: u64,
}

/// A kernel lowered to UOps, ready for a device.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LinearKernel {
    /// The function name (a C identifier, unique within a program).
    pub name: String,
    /// The micro-ops, in dependency order.
    pub uops: Vec<UOp>,
    /// Buffer parameters, outputs first, then inputs in first-use order.
    pub bufs: Vec<BufParam>,
    /// Symbolic variables passed as arguments, sorted by name: (name, min, max).
    pub vars: Vec<(Arc<str>, i64, i64)>,
    /// Estimated work.
    pub cost: KernelCost,
}

impl fmt::Display for UOpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UOpKind::DefineGlobal { idx, writable } => {
                write!(
                    f,
                    "DEFINE_GLOBAL {idx}{}",
                    if *writable { " (out)" } else { "" }
                )
            }
            UOpKind::DefineVar { name, min, max } => write!(f, "DEFINE_VAR {name} [{min}, {max}]"),
            UOpKind::DefineLocal { size } => write!(f, "DEFINE_LOCAL {size}"),
            UOpKind::Const(v) => write!(f, "CONST {v}"),
            UOpKind::Loop => f.write_str("LOOP"),
            UOpKind::EndLoop => f.write_str("ENDLOOP"),
            UOpKind::DefineAcc(v) => write!(f, "DEFINE_ACC {v}"),
            UOpKind::Load => f.write_str("LOAD"),
            UOpKind::Store => f.write_str("STORE"),
            UOpKind::Alu(op) => write!(f, "ALU {op}"),
            UOpKind::Cast => f.write_str("CAST"),
            UOpKind::Bitcast => f.write_str("BITCAST"),
            UOpKind::Assign => f.write_str("ASSIGN"),
            UOpKind::DualMac => f.write_str("DUAL_MAC"),
            UOpKind::VecAcc { init, .. } => write!(f, "DEFINE_ACC {init}"),
            UOpKind::VecLoad { stride: 1, .. } => f.write_str("LOAD"),
            UOpKind::VecLoad { stride, .. } => write!(f, "LOAD stride {stride}"),
            UOpKind::VecStore { .. } => f.write_str("STORE"),
            UOpKind::VecAlu { op, .. } => write!(f, "ALU {op}"),
            UOpKind::Vectorize => f.write_str("VECTORIZE"),
            UOpKind::Gep(n) => write!(f, "GEP {n}"),
            UOpKind::PairWiden => f.write_str("PAIR_WIDEN"),
        }
    }
}

impl fmt::Display for LinearKernel {
    /// One line per UOp: `  index dtype KIND srcs`, e.g. `   5 f32 ALU add [3, 4]`; a vector
    /// UOp's dtype carries its lanes (`f32x8`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "kernel {} ({} uops)", self.name, self.uops.len())?;
        for (i, u) in self.uops.iter().enumerate() {
            let dt = match lanes(&self.uops, i) {
                1 => String::from(u.dtype.name()),
                n => alloc::format!("{}x{n}", u.dtype.name()),
            };
            write!(f, "{i:4} {dt:<4} {}", u.kind)?;
            if !u.src.is_empty() {
                write!(f, " {:?}", u.src)?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}
