//! Tensor values crossing the ONNX boundary: `TensorProto` → [`Tensor`] (checked: dims, element
//! count and data length must agree, with a hard cap on elements so a hostile file cannot ask
//! for a huge allocation), the ONNX ↔ picograd dtype map, and reading small tensors (shapes,
//! axes, pads) back to host integers.
//!
//! ONNX's low-bit element types (float8, float4, int4/uint4, int2/uint2) are picograd
//! [`LowBit`] storage types: a tensor of one is decoded on load into its carrier dtype (f32,
//! i8 or u8), holding exactly the values the codes stand for.

use std::borrow::Cow;

use picograd_core::lowbit::{unpack, LowBit};
use picograd_core::{DType, Error, Result, Tensor};

use super::proto::TensorProto;

/// The most elements one tensor may have (1 Gi): larger shapes are refused before allocating.
pub const MAX_ELEMENTS: u64 = 1 << 30;

/// The picograd dtype of ONNX `TensorProto.DataType` code `code`, if picograd has one.
pub fn dtype_of(code: i32) -> Option<DType> {
    Some(match code {
        1 => DType::F32,
        2 => DType::U8,
        3 => DType::I8,
        4 => DType::U16,
        5 => DType::I16,
        6 => DType::I32,
        7 => DType::I64,
        9 => DType::Bool,
        10 => DType::F16,
        11 => DType::F64,
        12 => DType::U32,
        13 => DType::U64,
        16 => DType::BF16,
        _ => return None,
    })
}

/// The low-bit storage type of ONNX `DataType` code `code`, if it is one picograd reads.
pub fn lowbit_of(code: i32) -> Option<LowBit> {
    Some(match code {
        17 => LowBit::F8E4M3FN,
        18 => LowBit::F8E4M3FNUZ,
        19 => LowBit::F8E5M2,
        20 => LowBit::F8E5M2FNUZ,
        21 => LowBit::U4,
        22 => LowBit::I4,
        23 => LowBit::F4E2M1,
        24 => LowBit::F8E8M0,
        25 => LowBit::U2,
        26 => LowBit::I2,
        _ => return None,
    })
}

/// The dtype a value of ONNX type `code` is held in: its own, or a low-bit type's carrier.
pub fn held_in(code: i32) -> Option<DType> {
    dtype_of(code).or_else(|| lowbit_of(code).map(LowBit::carrier))
}

/// The ONNX name of a `DataType` code, for messages.
pub fn onnx_type_name(code: i32) -> &'static str {
    const NAMES: [&str; 27] = [
        "UNDEFINED",
        "FLOAT",
        "UINT8",
        "INT8",
        "UINT16",
        "INT16",
        "INT32",
        "INT64",
        "STRING",
        "BOOL",
        "FLOAT16",
        "DOUBLE",
        "UINT32",
        "UINT64",
        "COMPLEX64",
        "COMPLEX128",
        "BFLOAT16",
        "FLOAT8E4M3FN",
        "FLOAT8E4M3FNUZ",
        "FLOAT8E5M2",
        "FLOAT8E5M2FNUZ",
        "UINT4",
        "INT4",
        "FLOAT4E2M1",
        "FLOAT8E8M0",
        "UINT2",
        "INT2",
    ];
    usize::try_from(code)
        .ok()
        .and_then(|i| NAMES.get(i).copied())
        .unwrap_or("unknown")
}

/// The ONNX `DataType` code of a picograd dtype.
pub fn onnx_code(d: DType) -> i32 {
    (1..=16).find(|&c| dtype_of(c) == Some(d)).unwrap_or(0)
}

/// The element count of `dims`, checked: no negative dims, no overflow, at most [`MAX_ELEMENTS`].
pub fn checked_numel(what: &str, dims: &[i64]) -> Result<usize> {
    let mut n: u64 = 1;
    for &d in dims {
        let d = u64::try_from(d)
            .map_err(|_| Error::shape("onnx", format!("{what}: negative dimension in {dims:?}")))?;
        n = n
            .checked_mul(d)
            .filter(|&n| n <= MAX_ELEMENTS)
            .ok_or_else(|| {
                Error::overflow(format!(
                    "{what}: shape {dims:?} has more than {MAX_ELEMENTS} elements"
                ))
            })?;
    }
    Ok(n as usize)
}

/// Converts a `TensorProto` (raw or typed data) to a tensor; `what` names it in errors.
pub fn tensor_from_proto(t: &TensorProto, what: &str) -> Result<Tensor> {
    if super::external::is_external(t) {
        return Err(Error::Unsupported(format!(
            "{what}: tensor data stored in an external file is read only for initializers of a \
             model loaded from its file (Model::load), which says where the data file is"
        )));
    }
    let n = checked_numel(what, &t.dims)?;
    let shape: Vec<usize> = t.dims.iter().map(|&d| d as usize).collect();
    if let Some(kind) = lowbit_of(t.data_type) {
        // Packed codes travel in raw_data, or one byte per int32_data entry.
        let bytes: Cow<[u8]> = if t.raw_data.is_empty() {
            t.int32_data.iter().map(|&v| v as u8).collect()
        } else {
            Cow::Borrowed(&t.raw_data)
        };
        return lowbit_tensor(&bytes, &shape, n, kind, what);
    }
    let dtype = element_dtype(t, what)?;
    let bytes: Cow<[u8]> = if t.raw_data.is_empty() && n > 0 {
        Cow::Owned(typed_bytes(t, dtype, n, what)?)
    } else {
        Cow::Borrowed(&t.raw_data)
    };
    if bytes.len() != n * dtype.itemsize() {
        return Err(Error::Format {
            file: what.to_string(),
            offset: 0,
            detail: format!(
                "shape {:?} of {dtype} needs {} bytes of data, found {}",
                t.dims,
                n * dtype.itemsize(),
                bytes.len()
            ),
        });
    }
    tensor_from_le_bytes(&bytes, &shape, dtype)
}

/// The carrier tensor of `n` packed low-bit codes of `kind` (named `what` in errors).
pub fn lowbit_tensor(
    bytes: &[u8],
    shape: &[usize],
    n: usize,
    kind: LowBit,
    what: &str,
) -> Result<Tensor> {
    let codes = unpack(kind, bytes, n).ok_or_else(|| Error::Format {
        file: what.to_string(),
        offset: 0,
        detail: format!(
            "shape {shape:?} of {kind:?} needs {} bytes of packed data, found {}",
            kind.packed_len(n),
            bytes.len()
        ),
    })?;
    let vals = codes.iter().map(|&c| kind.decode(c));
    match kind.carrier() {
        DType::I8 => Tensor::try_from_slice(&vals.map(|v| v as i8).collect::<Vec<_>>(), shape),
        DType::U8 => Tensor::try_from_slice(&vals.map(|v| v as u8).collect::<Vec<_>>(), shape),
        _ => Tensor::try_from_slice(&vals.map(|v| v as f32).collect::<Vec<_>>(), shape),
    }
}

/// The little-endian bytes of a tensor stored in the typed fields (`float_data`, ...).
fn typed_bytes(t: &TensorProto, dtype: DType, n: usize, what: &str) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(n.min(1 << 20) * dtype.itemsize());
    let count = match dtype {
        DType::F32 => put_all(&mut out, &t.float_data, |v, o| o.extend(v.to_le_bytes())),
        DType::F64 => put_all(&mut out, &t.double_data, |v, o| o.extend(v.to_le_bytes())),
        DType::I64 => put_all(&mut out, &t.int64_data, |v, o| o.extend(v.to_le_bytes())),
        DType::U32 | DType::U64 => put_all(&mut out, &t.uint64_data, |v, o| {
            o.extend(&v.to_le_bytes()[..dtype.itemsize()])
        }),
        // Small ints, bools, f16 and bf16 travel in int32_data (the 16-bit floats as raw bits).
        _ => put_all(&mut out, &t.int32_data, |v, o| {
            o.extend(&v.to_le_bytes()[..dtype.itemsize()])
        }),
    };
    if count != n {
        return Err(Error::Format {
            file: what.to_string(),
            offset: 0,
            detail: format!("shape {:?} needs {n} values, found {count}", t.dims),
        });
    }
    Ok(out)
}

fn put_all<T: Copy>(out: &mut Vec<u8>, vals: &[T], put: impl Fn(T, &mut Vec<u8>)) -> usize {
    vals.iter().for_each(|&v| put(v, out));
    vals.len()
}

/// A tensor of `dtype` and `shape` from little-endian bytes.
pub fn tensor_from_le_bytes(bytes: &[u8], shape: &[usize], dtype: DType) -> Result<Tensor> {
    match dtype {
        // ONNX allows any non-zero byte for true; picograd stores 0 or 1.
        DType::Bool => {
            let v: Vec<bool> = bytes.iter().map(|&b| b != 0).collect();
            Tensor::try_from_slice(&v, shape)
        }
        // Stored as their little-endian bytes: one copy into the buffer.
        DType::I8
        | DType::U8
        | DType::I16
        | DType::U16
        | DType::I32
        | DType::U32
        | DType::I64
        | DType::U64
        | DType::F16
        | DType::BF16
        | DType::F32
        | DType::F64 => Tensor::try_from_le_bytes(bytes, shape, dtype),
    }
}

/// The values of a (small) tensor as i64 (floats truncate), computing it if needed.
pub fn to_i64s(t: &Tensor) -> Result<Vec<i64>> {
    let bytes = t.to_bytes()?;
    let d = t.dtype();
    let n = d.itemsize();
    Ok(bytes
        .chunks_exact(n)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(c);
            match d {
                DType::I8 => c[0] as i8 as i64,
                DType::I16 => i16::from_le_bytes([c[0], c[1]]) as i64,
                DType::I32 => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64,
                DType::I64 | DType::U64 => i64::from_le_bytes(b),
                DType::Bool | DType::U8 | DType::U16 | DType::U32 => u64::from_le_bytes(b) as i64,
                _ => picograd_core::tensor::bytes_to_f64(c, d)[0] as i64,
            }
        })
        .collect())
}

/// The values of a (small) tensor as f64, computing it if needed.
pub fn to_f64s(t: &Tensor) -> Result<Vec<f64>> {
    t.to_f64_vec()
}

/// The picograd dtype of tensor `t`'s elements (named `what` in the error when there is none).
pub(crate) fn element_dtype(t: &TensorProto, what: &str) -> Result<DType> {
    dtype_of(t.data_type).ok_or_else(|| {
        Error::Unsupported(format!(
            "{what}: element type {} ({})",
            onnx_type_name(t.data_type),
            t.data_type
        ))
    })
}
