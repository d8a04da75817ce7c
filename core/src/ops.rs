//! The op set everything in picograd lowers to, and the scalar constants ops carry.
//!
//! Invariant: this is the whole vocabulary of computation. Movement ops are not here — they exist
//! only as ShapeTracker changes. Adding an op touches four places: [`AluOp`], the interpreter, the
//! C renderer, and the gradient rule.

use core::fmt;
use core::hash::{Hash, Hasher};

use crate::dtype::DType;

/// An elementwise operation: unary, binary or ternary. Shared by kernel ASTs and UOps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AluOp {
    /// 2^x (floats).
    Exp2,
    /// log2(x) (floats).
    Log2,
    /// sin(x) (floats).
    Sin,
    /// √x (floats).
    Sqrt,
    /// -x.
    Neg,
    /// 1/x (floats).
    Recip,
    /// a + b (ints wrap).
    Add,
    /// a - b (ints wrap).
    Sub,
    /// a * b (ints wrap).
    Mul,
    /// a / b: floats IEEE; ints truncate toward zero, and x/0 = 0.
    Div,
    /// max(a, b).
    Max,
    /// a % b: C's remainder (sign of the dividend); x%0 = 0; floats use fmod.
    Mod,
    /// a < b, giving bool.
    CmpLt,
    /// a == b, giving bool.
    CmpEq,
    /// Bitwise xor (ints and bools).
    Xor,
    /// Bitwise and (ints and bools).
    And,
    /// Bitwise or (ints and bools).
    Or,
    /// Floor division of ints (index arithmetic where the dividend may be negative).
    FloorDiv,
    /// Floor modulo of ints (index arithmetic where the dividend may be negative).
    FloorMod,
    /// cond ? a : b.
    Where,
    /// a * b + c, two roundings (no fused multiply-add).
    MulAcc,
    /// a * b + c rounded once: IEEE-754 fusedMultiplyAdd (floats only). The linearizer emits it
    /// for a reduce's multiply-accumulate only on devices that declare hardware FMA
    /// ([`Device::fused_mulacc`](crate::device::Device::fused_mulacc)); it is never a
    /// compiler's contraction, so the interpreter and C compute it identically.
    Fma,
    /// Widening multiply: `a * b` of two narrow integers (each i8, u8 or i16; the two may
    /// differ, e.g. a centered i16 activation times an i8 weight), giving the exact product as
    /// i32. The multiply of an integer kernel's multiply-accumulate: its
    /// sum accumulates in i32 and no value is ever a float.
    MulWide,
    /// Requantize an i32 accumulator: `round(a * m / 2^s + z)` of i32 operands `a`, `m` and
    /// `sz = s + 256 * z` (the shift in the low 8 bits, the zero point above them), rounded as
    /// onnxruntime's f32 `rint(float(a) * scale)` rounds: `a` and the product to 24 significant
    /// bits, then to an integer, each half to even (see [`requant`]); `s` is clamped to `[1, 62]` and
    /// the result wraps to i32. `m` and `s` are a fixed-point multiplier and shift (see
    /// [`fixed_point`] and [`pack_shift`]). The zero point takes part only in breaking ties
    /// (the even result wins), as onnxruntime's quantized pools round; with `z = 0` and the
    /// zero point added after, ties go to even before it, as its convolutions round.
    Requant,
    /// `min(max(x, lo), hi)` of three i32 operands `x`, `lo`, `hi` (so `hi` wins when
    /// `lo > hi`). Not built by the tensor frontend: the linearizer emits it for a clamp
    /// written as maxes and negations (a requantize's clamp to an int8 range), so the renderer
    /// prints one saturate (Arm's `ssat`) where a C compiler would keep compares.
    Clamp,
}

impl AluOp {
    /// How many operands the op takes.
    pub const fn arity(self) -> usize {
        use AluOp::*;
        match self {
            Exp2 | Log2 | Sin | Sqrt | Neg | Recip => 1,
            Add | Sub | Mul | Div | Max | Mod | CmpLt | CmpEq | Xor | And | Or | FloorDiv
            | FloorMod | MulWide => 2,
            Where | MulAcc | Fma | Requant | Clamp => 3,
        }
    }

    /// Is the op defined on operands of `dt` (the dtype its value operands share; for `Where`,
    /// any)? Transcendentals and `Recip` need floats; bitwise ops and floor division need
    /// integers or bools; `Fma` is a float rounding. Every backend (the interpreter and the C
    /// renderer) implements exactly these pairs, so the graph checks them where ops are made.
    pub fn defined_on(self, dt: crate::dtype::DType) -> bool {
        use AluOp::*;
        let float = dt.is_float();
        match self {
            Exp2 | Log2 | Sin | Sqrt | Recip | Fma => float,
            Xor | And | Or | FloorDiv | FloorMod => !float,
            Neg | Add | Sub | Mul | Div | Max | Mod | CmpLt | CmpEq | Where | MulAcc => true,
            MulWide => matches!(
                dt,
                crate::dtype::DType::I8 | crate::dtype::DType::U8 | crate::dtype::DType::I16
            ),
            Requant | Clamp => dt == crate::dtype::DType::I32,
        }
    }

    /// Does the op give a bool whatever its operands' dtype?
    pub const fn is_comparison(self) -> bool {
        matches!(self, AluOp::CmpLt | AluOp::CmpEq)
    }

    /// The dtype the op gives from operands of `dt` (for `Where`, its value operands'):
    /// bool for comparisons, i32 for the widening multiply, else `dt`.
    pub const fn result_dtype(self, dt: DType) -> DType {
        use AluOp::*;
        match self {
            CmpLt | CmpEq => DType::Bool,
            MulWide => DType::I32,
            Exp2 | Log2 | Sin | Sqrt | Neg | Recip | Add | Sub | Mul | Div | Max | Mod | Xor
            | And | Or | FloorDiv | FloorMod | Where | MulAcc | Fma | Requant | Clamp => dt,
        }
    }

    /// The lowercase name used when printing IR.
    pub const fn name(self) -> &'static str {
        use AluOp::*;
        match self {
            Exp2 => "exp2",
            Log2 => "log2",
            Sin => "sin",
            Sqrt => "sqrt",
            Neg => "neg",
            Recip => "recip",
            Add => "add",
            Sub => "sub",
            Mul => "mul",
            Div => "div",
            Max => "max",
            Mod => "mod",
            CmpLt => "cmplt",
            CmpEq => "cmpeq",
            Xor => "xor",
            And => "and",
            Or => "or",
            FloorDiv => "floordiv",
            FloorMod => "floormod",
            Where => "where",
            MulAcc => "mulacc",
            Fma => "fma",
            MulWide => "mulwide",
            Requant => "requant",
            Clamp => "clamp",
        }
    }
}

impl fmt::Display for AluOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A reduction over axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReduceOp {
    /// Sum; identity 0.
    Sum,
    /// Maximum; identity the dtype's lowest value (-inf for floats).
    Max,
}

impl ReduceOp {
    /// The elementwise op that folds one more value into the accumulator.
    pub const fn alu(self) -> AluOp {
        match self {
            ReduceOp::Sum => AluOp::Add,
            ReduceOp::Max => AluOp::Max,
        }
    }

    /// The accumulator's starting value.
    pub fn identity(self, dtype: DType) -> Scalar {
        match self {
            ReduceOp::Sum => Scalar::zero(dtype),
            ReduceOp::Max => Scalar::lowest(dtype),
        }
    }

    /// The lowercase name used when printing IR.
    pub const fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Max => "max",
        }
    }
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A constant of a given dtype.
///
/// Invariant: `bits` is canonical for the dtype — floats hold the f64 bits of a value already
/// rounded to the dtype; ints hold the value wrapped to the dtype, sign-extended into 64 bits;
/// bools hold 0 or 1. So equal constants hash equal.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Scalar {
    dtype: DType,
    bits: u64,
}

impl Hash for Scalar {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.dtype.hash(state);
        self.bits.hash(state);
    }
}

impl Scalar {
    /// `v` converted to `dtype` (floats round, ints truncate and saturate as casts do, NaN → 0).
    pub fn from_f64(v: f64, dtype: DType) -> Scalar {
        if dtype.is_float() {
            return Scalar {
                dtype,
                bits: round_float(v, dtype).to_bits(),
            };
        }
        if dtype == DType::Bool {
            return Scalar {
                dtype,
                bits: u64::from(v != 0.0),
            };
        }
        let i: i128 = if v.is_nan() { 0 } else { v as i128 };
        let clamped = i.clamp(dtype.int_min(), dtype.int_max());
        Scalar::from_i128(clamped, dtype)
    }

    /// `v` converted to `dtype` (ints wrap, as integer casts do).
    pub fn from_i64(v: i64, dtype: DType) -> Scalar {
        if dtype.is_float() {
            return Scalar::from_f64(v as f64, dtype);
        }
        Scalar::from_i128(i128::from(v), dtype)
    }

    fn from_i128(v: i128, dtype: DType) -> Scalar {
        let bits = match dtype {
            DType::Bool => u64::from(v != 0),
            DType::I8 => v as i8 as i64 as u64,
            DType::U8 => v as u8 as u64,
            DType::I16 => v as i16 as i64 as u64,
            DType::U16 => v as u16 as u64,
            DType::I32 => v as i32 as i64 as u64,
            DType::U32 => v as u32 as u64,
            DType::I64 => v as i64 as u64,
            DType::U64 => v as u64,
            _ => (v as f64).to_bits(),
        };
        Scalar { dtype, bits }
    }

    /// A bool constant.
    pub fn from_bool(v: bool) -> Scalar {
        Scalar {
            dtype: DType::Bool,
            bits: u64::from(v),
        }
    }

    /// Zero of `dtype`.
    pub fn zero(dtype: DType) -> Scalar {
        Scalar::from_i64(0, dtype)
    }

    /// One of `dtype`.
    pub fn one(dtype: DType) -> Scalar {
        Scalar::from_i64(1, dtype)
    }

    /// The lowest value of `dtype` (-inf for floats): the identity of max.
    pub fn lowest(dtype: DType) -> Scalar {
        if dtype.is_float() {
            Scalar::from_f64(f64::NEG_INFINITY, dtype)
        } else {
            Scalar::from_i128(dtype.int_min(), dtype)
        }
    }

    /// The dtype.
    pub fn dtype(self) -> DType {
        self.dtype
    }

    /// The value as f64 (exact for floats and for ints up to 2^53).
    pub fn as_f64(self) -> f64 {
        match self.dtype {
            d if d.is_float() => f64::from_bits(self.bits),
            DType::U64 => self.bits as f64,
            _ => self.bits as i64 as f64,
        }
    }

    /// The value as i64 (floats truncate; u64 wraps).
    pub fn as_i64(self) -> i64 {
        if self.dtype.is_float() {
            f64::from_bits(self.bits) as i64
        } else {
            self.bits as i64
        }
    }

    /// The canonical 64-bit pattern (see the type's invariant).
    pub fn bits(self) -> u64 {
        self.bits
    }

    /// The same value converted to another dtype, as a cast would.
    pub fn cast(self, dtype: DType) -> Scalar {
        if self.dtype.is_float() {
            Scalar::from_f64(self.as_f64(), dtype)
        } else if self.dtype == DType::U64 {
            Scalar::from_i128(i128::from(self.bits), dtype)
        } else {
            Scalar::from_i64(self.as_i64(), dtype)
        }
    }
}

/// Rounds an f64 to the nearest value of a float dtype (nearest-even), returned as f64.
pub fn round_float(v: f64, dtype: DType) -> f64 {
    match dtype {
        // Through f32 first, as the C and the interpreter convert (two roundings).
        DType::F16 => f64::from(half::f16::from_f32(v as f32)),
        DType::BF16 => f64::from(half::bf16::from_f32(v as f32)),
        DType::F32 => f64::from(v as f32),
        _ => v,
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Scalar {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "{}:{}", self.as_f64(), self.dtype)
    }
}

impl fmt::Debug for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}:{}", self.dtype)
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.dtype {
            DType::Bool => write!(f, "{}", self.bits != 0),
            DType::U64 => write!(f, "{}", self.bits),
            d if d.is_float() => {
                let v = f64::from_bits(self.bits);
                if v.is_finite() && v == libm::trunc(v) && v.abs() < 1e15 {
                    write!(f, "{v:.1}")
                } else {
                    write!(f, "{v}")
                }
            }
            _ => write!(f, "{}", self.bits as i64),
        }
    }
}

/// Evaluates an elementwise op on constants, for constant folding. Covers the exact ops (no
/// transcendentals, whose last bits depend on the math library); `None` means "don't fold".
pub fn eval_alu(op: AluOp, v: &[Scalar], dtype: DType) -> Option<Scalar> {
    if op == AluOp::Where {
        return Some(if v[0].bits() != 0 { v[1] } else { v[2] }.cast(dtype));
    }
    let src = v[0].dtype();
    if src.is_float() {
        let x: alloc::vec::Vec<f64> = v.iter().map(|s| s.as_f64()).collect();
        // One f64 operation rounded once to the dtype is exactly the dtype's own operation for
        // + - * / (f64 carries more than twice the bits of f32).
        let r = match op {
            AluOp::Add => x[0] + x[1],
            AluOp::Sub => x[0] - x[1],
            AluOp::Mul => x[0] * x[1],
            AluOp::Neg => -x[0],
            AluOp::CmpLt => return Some(Scalar::from_bool(x[0] < x[1])),
            AluOp::CmpEq => return Some(Scalar::from_bool(x[0] == x[1])),
            _ => return None,
        };
        return Some(Scalar::from_f64(r, dtype));
    }
    let x: alloc::vec::Vec<i64> = v.iter().map(|s| s.as_i64()).collect();
    let r = match op {
        AluOp::Add => x[0].wrapping_add(x[1]),
        AluOp::Sub => x[0].wrapping_sub(x[1]),
        AluOp::Mul => x[0].wrapping_mul(x[1]),
        AluOp::Neg => x[0].wrapping_neg(),
        AluOp::Xor => x[0] ^ x[1],
        AluOp::And => x[0] & x[1],
        AluOp::Or => x[0] | x[1],
        AluOp::MulWide => x[0] * x[1],
        AluOp::Requant => requant(x[0] as i32, x[1] as i32, x[2] as i32) as i64,
        AluOp::Clamp => x[0].max(x[1]).min(x[2]),
        AluOp::CmpEq => return Some(Scalar::from_bool(x[0] == x[1])),
        AluOp::CmpLt if !src.is_unsigned() => return Some(Scalar::from_bool(x[0] < x[1])),
        AluOp::CmpLt => return Some(Scalar::from_bool((x[0] as u64) < (x[1] as u64))),
        _ => return None,
    };
    Some(Scalar::from_i64(r, dtype))
}

/// [`AluOp::Requant`]: `round(a * m / 2^s + z)` with `sz = s + 256 * z`, rounded as
/// onnxruntime's f32 requantize rounds (`rint(float(a) * scale)`, scale `m · 2^-s` an f32):
/// `|a|` to 24 significant bits (the f32 conversion), the exact product `|a| · |m|` to 24
/// significant bits (the f32 multiply), both half to even, then that product, signed, to an
/// integer, half to even (ties to the even value after `z` is added), `s` clamped to `[1, 62]`,
/// the result wrapped to i32. For `|a| < 2^24` and an `m` from [`fixed_point`] this is exactly
/// the f32 computation; the first two roundings only move values within half an f32 ulp, so
/// the result differs from the exact product's rounding only next to a tie. The interpreter,
/// constant folding and (in C, `pg_requant`) every compiled kernel compute exactly this.
pub fn requant(a: i32, m: i32, sz: i32) -> i32 {
    let s = (sz & 0xff).clamp(1, 62) as u32;
    let z = (sz - (sz & 0xff)) / 256;
    let ua = round_significand(u64::from(a.unsigned_abs()));
    // ua, |m| <= 2^31: the product is exact in u64, and <= 2^62 after rounding.
    let mag = round_significand(ua * u64::from(m.unsigned_abs())) as i64;
    let p = if (a < 0) != (m < 0) { -mag } else { mag };
    let q = p >> s; // floor
    let r = p - (q << s); // in [0, 2^s)
    let half = 1i64 << (s - 1);
    let up = r > half || (r == half && (q + i64::from(z)) & 1 == 1);
    (q + i64::from(up) + i64::from(z)) as i32
}

/// `v` rounded to 24 significant bits (an f32 significand), half to even.
fn round_significand(v: u64) -> u64 {
    let bits = 64 - v.leading_zeros();
    if bits <= 24 {
        return v;
    }
    let k = bits - 24;
    let (q, r, half) = (v >> k, v & ((1 << k) - 1), 1u64 << (k - 1));
    (q + u64::from(r > half || (r == half && q & 1 == 1))) << k
}

/// The third operand of [`AluOp::Requant`]: shift `s` (in `[1, 62]`) and zero point `z`
/// (in `[-2^23, 2^23)`) packed as `s + 256 * z`.
pub const fn pack_shift(s: i32, z: i32) -> i32 {
    (s & 0xff) + z * 256
}

/// The fixed-point form `(m, s)` of a positive finite f32 `scale` for [`AluOp::Requant`]:
/// `scale = m * 2^-s` exactly, `m` in `[2^30, 2^31)` (the f32 mantissa shifted left by 7).
/// `None` when the scale is not positive and finite or needs a shift outside `[1, 62]` (scales
/// outside about `[2^-32, 2^30)`).
pub fn fixed_point(scale: f32) -> Option<(i32, i32)> {
    if !(scale.is_finite() && scale > 0.0) {
        return None;
    }
    let bits = scale.to_bits();
    let exp = ((bits >> 23) & 0xff) as i32;
    let (mant, e) = if exp == 0 {
        // Subnormal: normalize the mantissa.
        let m = bits & 0x7f_ffff;
        let lz = m.leading_zeros() as i32 - 8;
        (m << lz, -126 - 23 - lz)
    } else {
        ((bits & 0x7f_ffff) | 0x80_0000, exp - 127 - 23)
    };
    // scale = mant * 2^e = (mant << 7) * 2^(e - 7)
    let s = 7 - e;
    (1..=62).contains(&s).then_some(((mant << 7) as i32, s))
}
