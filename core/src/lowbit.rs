//! Storage-only element types for quantized models: the float8 formats (e4m3fn, e4m3fnuz, e5m2,
//! e5m2fnuz, and e8m0, a power-of-two scale format), float4 e2m1 and the 4- and 2-bit
//! integers, as ONNX defines them.
//!
//! They are not [`DType`]s: no kernel computes in them. A low-bit value lives in a tensor of its
//! *carrier* dtype (f32 for the float formats, i8 for the signed ints, u8 for the unsigned ones)
//! holding only values the low-bit type can represent; decoding a stored code gives that value
//! exactly, and [`Tensor::try_to_lowbit`](crate::Tensor::try_to_lowbit) rounds a tensor onto the
//! type (in the lazy graph, so it runs on every device and exports). Invariant: [`LowBit::decode`]
//! maps every code to the value ONNX gives it, and [`unpack`] reads codes packed as ONNX packs
//! them (sub-byte types low bits first: element 0 in the low nibble or crumb).

use alloc::vec::Vec;

use crate::dtype::DType;

/// A storage-only element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LowBit {
    /// float8 e4m3fn: 4 exponent bits (bias 7), 3 mantissa bits, no infinities, NaN = S.1111.111.
    F8E4M3FN,
    /// float8 e4m3fnuz: bias 8, no infinities, no negative zero, NaN = 0x80.
    F8E4M3FNUZ,
    /// float8 e5m2: bias 15, IEEE-like (infinities and NaNs in the top exponent).
    F8E5M2,
    /// float8 e5m2fnuz: bias 16, no infinities, no negative zero, NaN = 0x80.
    F8E5M2FNUZ,
    /// float8 e8m0: an unsigned power of two, 2^(code - 127); code 255 is NaN.
    F8E8M0,
    /// float4 e2m1: bias 1, one mantissa bit, no infinities or NaN (±6 at most).
    F4E2M1,
    /// Signed 4-bit integer, -8..=7.
    I4,
    /// Unsigned 4-bit integer, 0..=15.
    U4,
    /// Signed 2-bit integer, -2..=1.
    I2,
    /// Unsigned 2-bit integer, 0..=3.
    U2,
}

/// Every low-bit type.
pub const ALL_LOWBITS: [LowBit; 10] = [
    LowBit::F8E4M3FN,
    LowBit::F8E4M3FNUZ,
    LowBit::F8E5M2,
    LowBit::F8E5M2FNUZ,
    LowBit::F8E8M0,
    LowBit::F4E2M1,
    LowBit::I4,
    LowBit::U4,
    LowBit::I2,
    LowBit::U2,
];

/// How a value between two powers of two rounds onto float8 e8m0 (ONNX `Cast`'s `round_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum E8M0Round {
    /// Up to the next power of two unless exact (ONNX's default).
    Up,
    /// To the nearer power of two by the f32 guard bits, as ONNX's reference does (a
    /// normal f32 with mantissa ≥ 0.5 rounds up).
    Nearest,
    /// Down to the power of two below (the f32 exponent).
    Down,
}

/// What a float format does with a value beyond its largest finite one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overflow {
    /// Becomes ±infinity (e5m2).
    Infinity,
    /// Becomes NaN (the formats without infinities).
    NaN,
    /// Clamps to ±max (float4 e2m1, which has neither).
    Clamp,
}

/// The layout of a low-bit float format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FloatFormat {
    /// Exponent bits.
    pub exp_bits: u32,
    /// Mantissa (fraction) bits.
    pub mant_bits: u32,
    /// Exponent bias.
    pub bias: i32,
    /// Unsigned zero only; code 0x80 is the one NaN (the "fnuz" formats).
    pub fnuz: bool,
    /// What a finite value past the largest one becomes without saturation.
    pub overflow: Overflow,
}

impl FloatFormat {
    /// The exponent of the smallest normal value (`1 - bias`).
    pub fn min_exp(self) -> i32 {
        1 - self.bias
    }

    /// The largest finite value.
    pub fn max_value(self) -> f64 {
        let top_code = match (self.fnuz, self.overflow) {
            // e5m2: the top exponent holds infinities and NaNs.
            (false, Overflow::Infinity) => {
                (((1u32 << self.exp_bits) - 2) << self.mant_bits) | mask(self.mant_bits)
            }
            // e4m3fn: only all-ones is NaN, so the top exponent has 6 finite mantissas.
            (false, Overflow::NaN) => {
                (mask(self.exp_bits) << self.mant_bits) | (mask(self.mant_bits) - 1)
            }
            // fnuz and e2m1: every positive code is finite.
            _ => mask(self.exp_bits + self.mant_bits),
        };
        self.value(top_code)
    }

    /// The magnitude of positive code `c` (sign bit clear), ignoring NaN/infinity codes.
    fn value(self, c: u32) -> f64 {
        let e = (c >> self.mant_bits) & mask(self.exp_bits);
        let f = f64::from(c & mask(self.mant_bits));
        let scale = f64::from(1u32 << self.mant_bits);
        if e == 0 {
            f / scale * pow2(self.min_exp())
        } else {
            (1.0 + f / scale) * pow2(e as i32 - self.bias)
        }
    }
}

fn mask(bits: u32) -> u32 {
    (1u32 << bits) - 1
}

/// 2^e, exactly, for the small exponents these formats use.
pub(crate) fn pow2(e: i32) -> f64 {
    libm::ldexp(1.0, e)
}

impl LowBit {
    /// Bits per element (8, 4 or 2).
    pub fn bits(self) -> u32 {
        match self {
            LowBit::F8E4M3FN
            | LowBit::F8E4M3FNUZ
            | LowBit::F8E5M2
            | LowBit::F8E5M2FNUZ
            | LowBit::F8E8M0 => 8,
            LowBit::F4E2M1 | LowBit::I4 | LowBit::U4 => 4,
            LowBit::I2 | LowBit::U2 => 2,
        }
    }

    /// The dtype a tensor of this type is held in: f32, i8 or u8.
    pub fn carrier(self) -> DType {
        match self {
            LowBit::F8E4M3FN
            | LowBit::F8E4M3FNUZ
            | LowBit::F8E5M2
            | LowBit::F8E5M2FNUZ
            | LowBit::F8E8M0
            | LowBit::F4E2M1 => DType::F32,
            LowBit::I4 | LowBit::I2 => DType::I8,
            LowBit::U4 | LowBit::U2 => DType::U8,
        }
    }

    /// The float layout, for the float formats with a sign and a mantissa (not e8m0).
    pub fn float_format(self) -> Option<FloatFormat> {
        let f = |exp_bits, mant_bits, bias, fnuz, overflow| FloatFormat {
            exp_bits,
            mant_bits,
            bias,
            fnuz,
            overflow,
        };
        Some(match self {
            LowBit::F8E4M3FN => f(4, 3, 7, false, Overflow::NaN),
            LowBit::F8E4M3FNUZ => f(4, 3, 8, true, Overflow::NaN),
            LowBit::F8E5M2 => f(5, 2, 15, false, Overflow::Infinity),
            LowBit::F8E5M2FNUZ => f(5, 2, 16, true, Overflow::NaN),
            LowBit::F4E2M1 => f(2, 1, 1, false, Overflow::Clamp),
            LowBit::F8E8M0 | LowBit::I4 | LowBit::U4 | LowBit::I2 | LowBit::U2 => return None,
        })
    }

    /// The value range `(min, max)`, for the integer types.
    pub fn int_range(self) -> Option<(i32, i32)> {
        match self {
            LowBit::I4 => Some((-8, 7)),
            LowBit::U4 => Some((0, 15)),
            LowBit::I2 => Some((-2, 1)),
            LowBit::U2 => Some((0, 3)),
            LowBit::F8E4M3FN
            | LowBit::F8E4M3FNUZ
            | LowBit::F8E5M2
            | LowBit::F8E5M2FNUZ
            | LowBit::F8E8M0
            | LowBit::F4E2M1 => None,
        }
    }

    /// The smallest and largest finite values.
    pub fn range(self) -> (f64, f64) {
        match (self.float_format(), self.int_range()) {
            (Some(f), _) => (-f.max_value(), f.max_value()),
            (None, Some((lo, hi))) => (f64::from(lo), f64::from(hi)),
            (None, None) => (pow2(-127), pow2(127)),
        }
    }

    /// The value of code `code` (its low [`LowBit::bits`] bits), exactly; NaN for NaN codes.
    pub fn decode(self, code: u8) -> f64 {
        let bits = self.bits();
        let c = u32::from(code) & mask(bits);
        if self == LowBit::F8E8M0 {
            return if c == 255 {
                f64::NAN
            } else {
                pow2(c as i32 - 127)
            };
        }
        let Some(f) = self.float_format() else {
            let sign_bit = 1u32 << (bits - 1);
            let signed = matches!(self, LowBit::I4 | LowBit::I2) && c & sign_bit != 0;
            return if signed {
                f64::from(c as i32 - (1i32 << bits))
            } else {
                f64::from(c)
            };
        };
        let sign = c >> (bits - 1) != 0;
        let mag = c & mask(bits - 1);
        if f.fnuz && sign && mag == 0 {
            return f64::NAN;
        }
        let top_exp = mag >> f.mant_bits == mask(f.exp_bits);
        let frac = mag & mask(f.mant_bits);
        let v = match (f.fnuz, f.overflow) {
            (false, Overflow::Infinity) if top_exp && frac == 0 => f64::INFINITY,
            (false, Overflow::Infinity) if top_exp => f64::NAN,
            (false, Overflow::NaN) if top_exp && frac == mask(f.mant_bits) => f64::NAN,
            _ => f.value(mag),
        };
        if sign {
            -v
        } else {
            v
        }
    }

    /// Bytes that hold `n` elements of this type, packed.
    pub fn packed_len(self, n: usize) -> usize {
        let per = (8 / self.bits()) as usize;
        n.div_ceil(per)
    }
}

/// The `n` codes packed in `bytes` (sub-byte types low bits first, as ONNX packs them), or
/// `None` when `bytes` is not exactly [`LowBit::packed_len`]`(n)` long.
pub fn unpack(kind: LowBit, bytes: &[u8], n: usize) -> Option<Vec<u8>> {
    if bytes.len() != kind.packed_len(n) {
        return None;
    }
    let bits = kind.bits() as usize;
    let per = 8 / bits;
    let m = mask(kind.bits()) as u8;
    Some(
        (0..n)
            .map(|i| (bytes[i / per] >> (bits * (i % per))) & m)
            .collect(),
    )
}

/// Codes packed as [`unpack`] reads them (a partial last byte is zero-padded).
pub fn pack(kind: LowBit, codes: &[u8]) -> Vec<u8> {
    let bits = kind.bits() as usize;
    let per = 8 / bits;
    let m = mask(kind.bits()) as u8;
    let mut out = alloc::vec![0u8; kind.packed_len(codes.len())];
    for (i, &c) in codes.iter().enumerate() {
        out[i / per] |= (c & m) << (bits * (i % per));
    }
    out
}
