//! Element types: their sizes, C storage types, ranges, and the promotion lattice.
//!
//! Invariant: promotion is the least upper bound in tinygrad's lattice (bool < ints < floats). An
//! int meeting a float gives that float; two ints give the wider one; a signed/unsigned pair of one
//! width steps up to the next signed width, and i64 with u64 has no common int, so it gives f16,
//! as tinygrad does.

use core::fmt;

/// An element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DType {
    /// `bool`, stored as one byte (0 or 1).
    Bool,
    /// Signed 8-bit integer.
    I8,
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 16-bit integer.
    I16,
    /// Unsigned 16-bit integer.
    U16,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 32-bit integer.
    U32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 64-bit integer.
    U64,
    /// IEEE half precision; stored as `uint16_t` in C, computed in f32.
    F16,
    /// bfloat16; stored as `uint16_t` in C, computed in f32.
    BF16,
    /// IEEE single precision.
    F32,
    /// IEEE double precision.
    F64,
}

/// Every dtype, in lattice order.
pub const ALL_DTYPES: [DType; 13] = [
    DType::Bool,
    DType::I8,
    DType::U8,
    DType::I16,
    DType::U16,
    DType::I32,
    DType::U32,
    DType::I64,
    DType::U64,
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
];

impl DType {
    /// Bytes per element.
    pub const fn itemsize(self) -> usize {
        match self {
            DType::Bool | DType::I8 | DType::U8 => 1,
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 => 8,
        }
    }

    /// The C type a buffer of this dtype is stored as.
    pub const fn c_storage(self) -> &'static str {
        match self {
            DType::Bool => "uint8_t",
            DType::I8 => "int8_t",
            DType::U8 => "uint8_t",
            DType::I16 => "int16_t",
            DType::U16 | DType::F16 | DType::BF16 => "uint16_t",
            DType::I32 => "int32_t",
            DType::U32 => "uint32_t",
            DType::I64 => "int64_t",
            DType::U64 => "uint64_t",
            DType::F32 => "float",
            DType::F64 => "double",
        }
    }

    /// The C type values of this dtype are computed in (f16/bf16 compute in f32).
    pub const fn c_compute(self) -> &'static str {
        match self {
            DType::F16 | DType::BF16 => "float",
            _ => self.c_storage(),
        }
    }

    /// The short name (`f32`, `i64`, `bool`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I16 => "i16",
            DType::U16 => "u16",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::I64 => "i64",
            DType::U64 => "u64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }

    /// Is this a floating-point type?
    pub const fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// Is this an integer type (bool is not)?
    pub const fn is_int(self) -> bool {
        !self.is_float() && !matches!(self, DType::Bool)
    }

    /// Is this an unsigned integer type?
    pub const fn is_unsigned(self) -> bool {
        matches!(self, DType::U8 | DType::U16 | DType::U32 | DType::U64)
    }

    /// The smallest value, as f64 (floats: negative infinity).
    pub fn min_value(self) -> f64 {
        match self {
            DType::Bool | DType::U8 | DType::U16 | DType::U32 | DType::U64 => 0.0,
            DType::I8 => i8::MIN as f64,
            DType::I16 => i16::MIN as f64,
            DType::I32 => i32::MIN as f64,
            DType::I64 => i64::MIN as f64,
            _ => f64::NEG_INFINITY,
        }
    }

    /// The largest value, as f64 (floats: infinity).
    pub fn max_value(self) -> f64 {
        match self {
            DType::Bool => 1.0,
            DType::I8 => i8::MAX as f64,
            DType::U8 => u8::MAX as f64,
            DType::I16 => i16::MAX as f64,
            DType::U16 => u16::MAX as f64,
            DType::I32 => i32::MAX as f64,
            DType::U32 => u32::MAX as f64,
            DType::I64 => i64::MAX as f64,
            DType::U64 => u64::MAX as f64,
            _ => f64::INFINITY,
        }
    }

    /// The smallest value of an integer or bool dtype, exactly.
    pub const fn int_min(self) -> i128 {
        match self {
            DType::I8 => i8::MIN as i128,
            DType::I16 => i16::MIN as i128,
            DType::I32 => i32::MIN as i128,
            DType::I64 => i64::MIN as i128,
            _ => 0,
        }
    }

    /// The largest value of an integer or bool dtype, exactly (0 for floats).
    pub const fn int_max(self) -> i128 {
        match self {
            DType::Bool => 1,
            DType::I8 => i8::MAX as i128,
            DType::U8 => u8::MAX as i128,
            DType::I16 => i16::MAX as i128,
            DType::U16 => u16::MAX as i128,
            DType::I32 => i32::MAX as i128,
            DType::U32 => u32::MAX as i128,
            DType::I64 => i64::MAX as i128,
            DType::U64 => u64::MAX as i128,
            _ => 0,
        }
    }

    /// The types directly above this one in tinygrad's promotion lattice.
    const fn parents(self) -> &'static [DType] {
        match self {
            DType::Bool => &[DType::I8, DType::U8],
            DType::I8 => &[DType::I16],
            DType::U8 => &[DType::I16, DType::U16],
            DType::I16 => &[DType::I32],
            DType::U16 => &[DType::I32, DType::U32],
            DType::I32 => &[DType::I64],
            DType::U32 => &[DType::I64, DType::U64],
            DType::I64 => &[DType::F16, DType::BF16],
            DType::U64 => &[DType::F16, DType::BF16],
            DType::F16 => &[DType::F32],
            DType::BF16 => &[DType::F32],
            DType::F32 => &[DType::F64],
            DType::F64 => &[],
        }
    }

    /// Every type reachable upward from this one, itself included, as a bit set over `ALL_DTYPES`.
    fn upper_set(self) -> u16 {
        let mut set = 1u16 << (self as u16);
        for p in self.parents() {
            set |= p.upper_set();
        }
        set
    }

    /// The least upper bound of two dtypes in the promotion lattice.
    ///
    /// ```
    /// use picograd_core::DType;
    /// assert_eq!(DType::I32.promote(DType::F32), DType::F32);
    /// assert_eq!(DType::I32.promote(DType::F16), DType::F16);
    /// assert_eq!(DType::U8.promote(DType::I8), DType::I16);
    /// assert_eq!(DType::Bool.promote(DType::U32), DType::U32);
    /// assert_eq!(DType::F16.promote(DType::BF16), DType::F32);
    /// ```
    pub fn promote(self, other: DType) -> DType {
        let common = self.upper_set() & other.upper_set();
        // As tinygrad does: the first common upper type in priority order. That is the lattice join
        // wherever one exists; for i64 with u64 (no int joins them) it picks f16.
        ALL_DTYPES
            .iter()
            .copied()
            .find(|d| common & (1 << (*d as u16)) != 0)
            .unwrap_or(DType::F64)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promotion_table() {
        use DType::*;
        let cases = [
            (I32, F32, F32),
            (I32, F16, F16),
            (I64, F16, F16),
            (U8, I8, I16),
            (U16, I16, I32),
            (U32, I32, I64),
            (U64, I64, F16),
            (Bool, I8, I8),
            (Bool, Bool, Bool),
            (F16, BF16, F32),
            (F32, F64, F64),
            (U8, U32, U32),
            (I8, U64, F16),
        ];
        for (a, b, want) in cases {
            assert_eq!(a.promote(b), want, "{a} ⊔ {b}");
            assert_eq!(b.promote(a), want, "{b} ⊔ {a}");
        }
    }

    #[test]
    fn promotion_is_an_upper_bound_and_idempotent() {
        for a in ALL_DTYPES {
            assert_eq!(a.promote(a), a);
            for b in ALL_DTYPES {
                let c = a.promote(b);
                assert!(a.upper_set() & (1 << c as u16) != 0);
                assert!(b.upper_set() & (1 << c as u16) != 0);
            }
        }
    }

    #[test]
    fn sizes_and_kinds() {
        assert_eq!(DType::BF16.itemsize(), 2);
        assert_eq!(DType::BF16.c_storage(), "uint16_t");
        assert_eq!(DType::F16.c_compute(), "float");
        assert!(DType::U16.is_unsigned() && DType::U16.is_int());
        assert!(!DType::Bool.is_int() && !DType::Bool.is_float());
        assert_eq!(DType::I8.min_value(), -128.0);
    }
}
