//! The interpreter's view of element types: how a value sits in a register, how it converts, what
//! arithmetic means for it, and how it is stored in a buffer.
//!
//! Invariant (the register encoding, shared by every instruction): a register is a `u64` holding
//! the value canonically — signed ints sign-extended, unsigned ints zero-extended, bools 0 or 1,
//! f32 (and f16/bf16, which compute in f32) as the f32 bits in the low half, f64 as its bits. So an
//! integer register read `as i64` is its value (u64 above `i64::MAX` aside), and `0` is zero in
//! every dtype. Storage is little-endian; f16/bf16 are stored as 16-bit patterns.

use half::{bf16, f16};

/// A Rust type the interpreter computes in; registers hold its canonical encoding.
pub(crate) trait Reg: Copy + Send + Sync + 'static {
    /// Decodes a register.
    fn from_reg(r: u64) -> Self;
    /// Encodes into a register.
    fn to_reg(self) -> u64;
}

/// Conversions between computed types with cast semantics: ints wrap, floats to ints truncate and
/// saturate (NaN → 0), to bool is `!= 0`, from bool is 0/1 — exactly Rust's `as`.
pub(crate) trait Conv: Reg {
    fn from_i64(v: i64) -> Self;
    fn from_u64(v: u64) -> Self;
    fn from_f32(v: f32) -> Self;
    fn from_f64(v: f64) -> Self;
    fn from_bool(v: bool) -> Self;
    /// `self` cast to `D`.
    fn conv<D: Conv>(self) -> D;
}

/// Arithmetic every computed type has (ints wrap; x/0 and x%0 give 0).
pub(crate) trait Arith: Conv {
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    fn rem(self, o: Self) -> Self;
    fn max(self, o: Self) -> Self;
    fn neg(self) -> Self;
    fn lt(self, o: Self) -> bool;
    fn eq(self, o: Self) -> bool;
}

/// Ops of ints and bools: bitwise logic and floor division.
pub(crate) trait Bits: Arith {
    fn xor(self, o: Self) -> Self;
    fn and(self, o: Self) -> Self;
    fn or(self, o: Self) -> Self;
    fn floordiv(self, o: Self) -> Self;
    fn floormod(self, o: Self) -> Self;
}

/// Transcendental ops of floats (libm, so results match the C build's libm-free paths).
pub(crate) trait Float: Arith {
    fn exp2(self) -> Self;
    fn log2(self) -> Self;
    fn sin(self) -> Self;
    fn sqrt(self) -> Self;
    fn recip(self) -> Self;
    /// `self * b + c` rounded once (libm's correctly rounded fma, as C's `__builtin_fma`).
    fn fma(self, b: Self, c: Self) -> Self;
}

/// A buffer element type: its stored size and its conversion to and from registers.
pub(crate) trait Storage: Send + Sync + 'static {
    /// Bytes per element.
    const SIZE: usize;
    /// Decodes `SIZE` little-endian bytes into a register.
    fn read(b: &[u8]) -> u64;
    /// Encodes a register into `SIZE` little-endian bytes (f16/bf16 round to nearest-even).
    fn write(b: &mut [u8], r: u64);
    /// The stored bit pattern of a register value (for bitcasts).
    fn to_raw(r: u64) -> u64;
    /// A register value from a stored bit pattern (for bitcasts).
    fn from_raw(raw: u64) -> u64;
}

fn bytes<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[..N]);
    a
}

macro_rules! int_type {
    ($t:ty, $conv:ident, $wide:ty, $floor:ident) => {
        impl Reg for $t {
            fn from_reg(r: u64) -> Self {
                r as $t
            }
            fn to_reg(self) -> u64 {
                self as $wide as u64
            }
        }
        impl Conv for $t {
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            fn from_u64(v: u64) -> Self {
                v as $t
            }
            fn from_f32(v: f32) -> Self {
                v as $t
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn from_bool(v: bool) -> Self {
                v as $t
            }
            fn conv<D: Conv>(self) -> D {
                D::$conv(self as $wide)
            }
        }
        impl Arith for $t {
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn sub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn div(self, o: Self) -> Self {
                if o == 0 {
                    0
                } else {
                    self.wrapping_div(o)
                }
            }
            fn rem(self, o: Self) -> Self {
                if o == 0 {
                    0
                } else {
                    self.wrapping_rem(o)
                }
            }
            fn max(self, o: Self) -> Self {
                Ord::max(self, o)
            }
            fn neg(self) -> Self {
                self.wrapping_neg()
            }
            fn lt(self, o: Self) -> bool {
                self < o
            }
            fn eq(self, o: Self) -> bool {
                self == o
            }
        }
        impl Bits for $t {
            fn xor(self, o: Self) -> Self {
                self ^ o
            }
            fn and(self, o: Self) -> Self {
                self & o
            }
            fn or(self, o: Self) -> Self {
                self | o
            }
            $floor!();
        }
        impl Storage for $t {
            const SIZE: usize = core::mem::size_of::<$t>();
            fn read(b: &[u8]) -> u64 {
                <$t>::from_le_bytes(bytes(b)).to_reg()
            }
            fn write(b: &mut [u8], r: u64) {
                b.copy_from_slice(&<$t>::from_reg(r).to_le_bytes());
            }
            fn to_raw(r: u64) -> u64 {
                <$t>::from_reg(r) as $wide as u64 & (u64::MAX >> (64 - 8 * Self::SIZE))
            }
            fn from_raw(raw: u64) -> u64 {
                (raw as $t).to_reg()
            }
        }
    };
}

/// Floor division of signed ints: the truncated quotient minus one where the exact quotient is
/// negative and inexact; the remainder then takes the divisor's sign. Divisor 0 gives 0.
macro_rules! floor_signed {
    () => {
        fn floordiv(self, o: Self) -> Self {
            let q = Arith::div(self, o);
            if Arith::rem(self, o) != 0 && ((self < 0) != (o < 0)) {
                q.wrapping_sub(1)
            } else {
                q
            }
        }
        fn floormod(self, o: Self) -> Self {
            let r = Arith::rem(self, o);
            if r != 0 && ((r < 0) != (o < 0)) {
                r.wrapping_add(o)
            } else {
                r
            }
        }
    };
}

/// Floor division of unsigned ints is truncating division.
macro_rules! floor_unsigned {
    () => {
        fn floordiv(self, o: Self) -> Self {
            Arith::div(self, o)
        }
        fn floormod(self, o: Self) -> Self {
            Arith::rem(self, o)
        }
    };
}

int_type!(i8, from_i64, i64, floor_signed);
int_type!(i16, from_i64, i64, floor_signed);
int_type!(i32, from_i64, i64, floor_signed);
int_type!(i64, from_i64, i64, floor_signed);
int_type!(u8, from_u64, u64, floor_unsigned);
int_type!(u16, from_u64, u64, floor_unsigned);
int_type!(u32, from_u64, u64, floor_unsigned);
int_type!(u64, from_u64, u64, floor_unsigned);

impl Reg for bool {
    fn from_reg(r: u64) -> Self {
        r != 0
    }
    fn to_reg(self) -> u64 {
        u64::from(self)
    }
}

impl Conv for bool {
    fn from_i64(v: i64) -> Self {
        v != 0
    }
    fn from_u64(v: u64) -> Self {
        v != 0
    }
    fn from_f32(v: f32) -> Self {
        v != 0.0
    }
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    fn from_bool(v: bool) -> Self {
        v
    }
    fn conv<D: Conv>(self) -> D {
        D::from_bool(self)
    }
}

/// Bools compute as C does on 0/1 values converted back to bool: `+` and max are or, `*` and `/`
/// are and, `-` is xor, `%` is 0, and negation is logical not (as the C renderer and tinygrad).
impl Arith for bool {
    fn add(self, o: Self) -> Self {
        self | o
    }
    fn sub(self, o: Self) -> Self {
        self ^ o
    }
    fn mul(self, o: Self) -> Self {
        self & o
    }
    fn div(self, o: Self) -> Self {
        self & o
    }
    fn rem(self, _o: Self) -> Self {
        false
    }
    fn max(self, o: Self) -> Self {
        self | o
    }
    fn neg(self) -> Self {
        !self
    }
    fn lt(self, o: Self) -> bool {
        !self & o
    }
    fn eq(self, o: Self) -> bool {
        self == o
    }
}

impl Bits for bool {
    fn xor(self, o: Self) -> Self {
        self ^ o
    }
    fn and(self, o: Self) -> Self {
        self & o
    }
    fn or(self, o: Self) -> Self {
        self | o
    }
    fn floordiv(self, o: Self) -> Self {
        self & o
    }
    fn floormod(self, _o: Self) -> Self {
        false
    }
}

impl Storage for bool {
    const SIZE: usize = 1;
    fn read(b: &[u8]) -> u64 {
        u64::from(b[0] != 0)
    }
    fn write(b: &mut [u8], r: u64) {
        b[0] = u8::from(r != 0);
    }
    fn to_raw(r: u64) -> u64 {
        u64::from(r != 0)
    }
    fn from_raw(raw: u64) -> u64 {
        u64::from(raw as u8 != 0)
    }
}

macro_rules! float_type {
    ($t:ty, $bits:ty, $conv:ident, $fmod:path, $exp2:path, $log2:path, $sin:path, $sqrt:path,
     $fma:path) => {
        impl Reg for $t {
            fn from_reg(r: u64) -> Self {
                <$t>::from_bits(r as $bits)
            }
            fn to_reg(self) -> u64 {
                u64::from(self.to_bits())
            }
        }
        impl Conv for $t {
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            fn from_u64(v: u64) -> Self {
                v as $t
            }
            fn from_f32(v: f32) -> Self {
                v as $t
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn from_bool(v: bool) -> Self {
                u8::from(v) as $t
            }
            fn conv<D: Conv>(self) -> D {
                D::$conv(self)
            }
        }
        impl Arith for $t {
            fn add(self, o: Self) -> Self {
                self + o
            }
            fn sub(self, o: Self) -> Self {
                self - o
            }
            fn mul(self, o: Self) -> Self {
                self * o
            }
            fn div(self, o: Self) -> Self {
                self / o
            }
            fn rem(self, o: Self) -> Self {
                $fmod(self, o)
            }
            /// The C renderer's `a < b ? b : a` (the contract's NaN rule, `codegen/c.rs`): the
            /// larger; `self` when either is NaN or they are equal (±0).
            fn max(self, o: Self) -> Self {
                if self < o {
                    o
                } else {
                    self
                }
            }
            fn neg(self) -> Self {
                -self
            }
            fn lt(self, o: Self) -> bool {
                self < o
            }
            fn eq(self, o: Self) -> bool {
                self == o
            }
        }
        impl Float for $t {
            fn exp2(self) -> Self {
                $exp2(self)
            }
            fn log2(self) -> Self {
                $log2(self)
            }
            fn sin(self) -> Self {
                $sin(self)
            }
            fn sqrt(self) -> Self {
                $sqrt(self)
            }
            fn recip(self) -> Self {
                1.0 / self
            }
            fn fma(self, b: Self, c: Self) -> Self {
                $fma(self, b, c)
            }
        }
        impl Storage for $t {
            const SIZE: usize = core::mem::size_of::<$t>();
            fn read(b: &[u8]) -> u64 {
                <$t>::from_le_bytes(bytes(b)).to_reg()
            }
            fn write(b: &mut [u8], r: u64) {
                b.copy_from_slice(&<$t>::from_reg(r).to_le_bytes());
            }
            fn to_raw(r: u64) -> u64 {
                r
            }
            fn from_raw(raw: u64) -> u64 {
                raw
            }
        }
    };
}

float_type!(
    f32,
    u32,
    from_f32,
    libm::fmodf,
    libm::exp2f,
    libm::log2f,
    libm::sinf,
    libm::sqrtf,
    libm::fmaf
);
float_type!(
    f64,
    u64,
    from_f64,
    libm::fmod,
    libm::exp2,
    libm::log2,
    libm::sin,
    libm::sqrt,
    libm::fma
);

/// Rounds an f32 register value to f16 and back (the value a `Cast` to f16 gives).
pub(crate) fn round_f16(v: f32) -> f32 {
    f16::from_f32(v).to_f32()
}

/// Rounds an f32 register value to bf16 and back (the value a `Cast` to bf16 gives).
pub(crate) fn round_bf16(v: f32) -> f32 {
    bf16::from_f32(v).to_f32()
}

macro_rules! half_storage {
    ($t:ty) => {
        /// Stored as 16 bits; registers hold the f32 value.
        impl Storage for $t {
            const SIZE: usize = 2;
            fn read(b: &[u8]) -> u64 {
                <$t>::from_bits(u16::from_le_bytes(bytes(b)))
                    .to_f32()
                    .to_reg()
            }
            fn write(b: &mut [u8], r: u64) {
                b.copy_from_slice(&Self::to_raw(r).to_le_bytes()[..2]);
            }
            fn to_raw(r: u64) -> u64 {
                u64::from(<$t>::from_f32(f32::from_reg(r)).to_bits())
            }
            fn from_raw(raw: u64) -> u64 {
                <$t>::from_bits(raw as u16).to_f32().to_reg()
            }
        }
    };
}

half_storage!(f16);
half_storage!(bf16);
