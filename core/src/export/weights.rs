//! Weight contents as exact C initializers, and the `weights.bin` blob.
//!
//! Invariants: every literal reads back to exactly the stored bits (floats as hex-float
//! literals; NaN keeps only its NaN-ness); the blob is `PGW1` magic, element count, payload
//! length and an FNV-1a checksum (all u32 little-endian), then each weight's little-endian bytes
//! at a 16-aligned payload offset.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::place::align_up;
use crate::dtype::DType;

/// Size of the blob header in bytes.
pub(crate) const BLOB_HEADER: usize = 16;

/// One C literal per element of `bytes` (little-endian elements of `dtype`).
pub(crate) fn c_values(dtype: DType, bytes: &[u8]) -> Vec<String> {
    bytes
        .chunks_exact(dtype.itemsize())
        .map(|c| {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            literal(dtype, u64::from_le_bytes(b))
        })
        .collect()
}

/// The initializer body: literals, eight to a line.
pub(crate) fn initializer(dtype: DType, bytes: &[u8]) -> String {
    let vals = c_values(dtype, bytes);
    let lines: Vec<String> = vals
        .chunks(8)
        .map(|c| format!("  {}", c.join(", ")))
        .collect();
    lines.join(",\n")
}

fn literal(dtype: DType, bits: u64) -> String {
    let signed = |width: u32| ((bits << (64 - width)) as i64) >> (64 - width);
    match dtype {
        DType::F32 => hex_float(bits, 23, 8, "f"),
        DType::F64 => hex_float(bits, 52, 11, ""),
        DType::I8 | DType::I16 => format!("{}", signed(dtype.itemsize() as u32 * 8)),
        DType::I32 if bits as u32 == 0x8000_0000 => String::from("(-2147483647 - 1)"),
        DType::I32 => format!("{}", signed(32)),
        DType::U32 => format!("{}u", bits as u32),
        DType::I64 if bits == 1 << 63 => String::from("(-INT64_C(9223372036854775807) - 1)"),
        DType::I64 => format!("INT64_C({})", bits as i64),
        DType::U64 => format!("UINT64_C({bits})"),
        _ => format!("{bits}"),
    }
}

/// An exact C hex-float literal for an IEEE value with `man` mantissa and `exp` exponent bits.
fn hex_float(bits: u64, man: u32, exp: u32, suffix: &str) -> String {
    let sign = if bits >> (man + exp) & 1 == 1 {
        "-"
    } else {
        ""
    };
    let e = (bits >> man) & ((1 << exp) - 1);
    let m = bits & ((1 << man) - 1);
    let bias = (1i64 << (exp - 1)) - 1;
    if e == (1 << exp) - 1 {
        let body = if m == 0 {
            format!("__builtin_inf{suffix}()")
        } else {
            format!("__builtin_nan{suffix}(\"\")")
        };
        return format!("{sign}{body}");
    }
    // Hex digits of the mantissa, left-aligned to a multiple of 4 bits, trailing zeros trimmed.
    let digits = man.div_ceil(4) as usize;
    let shifted = m << (digits as u32 * 4 - man);
    let hex = format!("{shifted:0digits$x}");
    let frac = hex.trim_end_matches('0');
    let dot = if frac.is_empty() { "" } else { "." };
    let (lead, e2) = if e == 0 {
        (0, 1 - bias)
    } else {
        (1, e as i64 - bias)
    };
    format!("{sign}0x{lead}{dot}{frac}p{e2:+}{suffix}")
}

/// 32-bit FNV-1a of `bytes`.
pub(crate) fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// The blob of `weights` (raw little-endian bytes each) and each one's payload offset.
pub(crate) fn blob(weights: &[Vec<u8>]) -> (Vec<u8>, Vec<usize>) {
    let mut payload = Vec::new();
    let mut offsets = Vec::with_capacity(weights.len());
    for w in weights {
        payload.resize(align_up(payload.len()), 0);
        offsets.push(payload.len());
        payload.extend_from_slice(w);
    }
    let mut out = Vec::with_capacity(BLOB_HEADER + payload.len());
    out.extend_from_slice(b"PGW1");
    out.extend_from_slice(&(weights.len() as u32).to_le_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&fnv1a(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    (out, offsets)
}
