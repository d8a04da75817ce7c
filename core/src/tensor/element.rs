//! [`Element`]: the Rust types a tensor's data can be read from and written to.

use alloc::vec::Vec;

use crate::dtype::DType;

/// A Rust scalar type with a picograd dtype.
pub trait Element: Copy + Send + Sync + 'static {
    /// The matching dtype.
    const DTYPE: DType;
    /// Appends the value's little-endian bytes.
    fn put(self, out: &mut Vec<u8>);
    /// Reads a value from exactly `DTYPE.itemsize()` little-endian bytes.
    fn get(b: &[u8]) -> Self;
}

fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[..N]);
    a
}

macro_rules! element {
    ($t:ty, $d:expr, $n:expr) => {
        impl Element for $t {
            const DTYPE: DType = $d;
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn get(b: &[u8]) -> Self {
                <$t>::from_le_bytes(arr::<$n>(b))
            }
        }
    };
}
// One impl per primitive type; a macro keeps the eleven identical bodies identical.
element!(f32, DType::F32, 4);
element!(f64, DType::F64, 8);
element!(i8, DType::I8, 1);
element!(u8, DType::U8, 1);
element!(i16, DType::I16, 2);
element!(u16, DType::U16, 2);
element!(i32, DType::I32, 4);
element!(u32, DType::U32, 4);
element!(i64, DType::I64, 8);
element!(u64, DType::U64, 8);
element!(half::f16, DType::F16, 2);
element!(half::bf16, DType::BF16, 2);

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn put(self, out: &mut Vec<u8>) {
        out.push(u8::from(self));
    }
    fn get(b: &[u8]) -> Self {
        b[0] != 0
    }
}

/// Converts raw bytes of `dtype` to f64 values (for printing and comparisons).
pub fn bytes_to_f64(bytes: &[u8], dtype: DType) -> Vec<f64> {
    let n = dtype.itemsize();
    bytes
        .chunks_exact(n)
        .map(|c| match dtype {
            DType::Bool => f64::from(c[0] != 0),
            DType::I8 => f64::from(i8::get(c)),
            DType::U8 => f64::from(c[0]),
            DType::I16 => f64::from(i16::get(c)),
            DType::U16 => f64::from(u16::get(c)),
            DType::I32 => f64::from(i32::get(c)),
            DType::U32 => f64::from(u32::get(c)),
            DType::I64 => i64::get(c) as f64,
            DType::U64 => u64::get(c) as f64,
            DType::F16 => f64::from(half::f16::get(c)),
            DType::BF16 => f64::from(half::bf16::get(c)),
            DType::F32 => f64::from(f32::get(c)),
            DType::F64 => f64::get(c),
        })
        .collect()
}
