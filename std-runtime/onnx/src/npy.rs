//! numpy `.npy` files in and out: a small, defensive reader (magic, version, header length,
//! the header dict's `descr`/`fortran_order`/`shape`, and a data length that must match — any
//! mismatch is an error naming the byte) and a writer for version 1.0, little-endian, C order.

use std::path::Path;

use picograd_core::{DType, Error, Result, Tensor};

use super::values::{checked_numel, tensor_from_le_bytes};

const MAGIC: &[u8] = b"\x93NUMPY";

fn malformed(file: &str, offset: u64, detail: impl Into<String>) -> Error {
    Error::Format {
        file: file.to_string(),
        offset,
        detail: detail.into(),
    }
}

/// The dtype of a numpy type string (`<f4`, `|b1`, ...); big-endian data is refused.
fn dtype_of_descr(d: &str) -> Option<DType> {
    // Split after the first character, not the first byte: a non-ASCII first character would
    // put a byte index inside it (and `split_at` panics there).
    let code = d.get(1..).unwrap_or("");
    let order = &d[..d.len() - code.len()];
    if order == ">" && !code.ends_with('1') {
        return None;
    }
    Some(match code {
        "b1" => DType::Bool,
        "i1" => DType::I8,
        "u1" => DType::U8,
        "i2" => DType::I16,
        "u2" => DType::U16,
        "i4" => DType::I32,
        "u4" => DType::U32,
        "i8" => DType::I64,
        "u8" => DType::U64,
        "f2" => DType::F16,
        "f4" => DType::F32,
        "f8" => DType::F64,
        _ => return None,
    })
}

fn descr_of(d: DType) -> &'static str {
    match d {
        DType::Bool => "|b1",
        DType::I8 => "|i1",
        DType::U8 => "|u1",
        DType::I16 => "<i2",
        DType::U16 => "<u2",
        DType::I32 => "<i4",
        DType::U32 => "<u4",
        DType::I64 => "<i8",
        DType::U64 => "<u8",
        DType::F16 => "<f2",
        DType::BF16 => "<V2",
        DType::F32 => "<f4",
        DType::F64 => "<f8",
    }
}

/// The value of `'key':` in a numpy header dict (up to the next `,` or `)`).
fn field<'h>(header: &'h str, key: &str) -> Option<&'h str> {
    let at = header.find(&format!("'{key}'"))? + key.len() + 2;
    let rest = header[at..].trim_start().strip_prefix(':')?.trim_start();
    if let Some(tuple) = rest.strip_prefix('(') {
        return Some(&tuple[..tuple.find(')')?]);
    }
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    Some(rest[..end].trim().trim_matches('\''))
}

/// Parses `.npy` bytes; `what` names the source in errors.
pub fn parse(bytes: &[u8], what: &str) -> Result<Tensor> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(malformed(what, 0, "not a .npy file (bad magic)"));
    }
    let (hlen, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10usize),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(malformed(what, 6, format!("unsupported .npy version {v}"))),
    };
    let end = start
        .checked_add(hlen)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| malformed(what, start as u64, "header runs past the end of the file"))?;
    let header = std::str::from_utf8(&bytes[start..end])
        .map_err(|_| malformed(what, start as u64, "header is not text"))?;
    let descr = field(header, "descr")
        .ok_or_else(|| malformed(what, start as u64, "header has no 'descr'"))?;
    let dtype = dtype_of_descr(descr)
        .ok_or_else(|| malformed(what, start as u64, format!("unsupported dtype '{descr}'")))?;
    if field(header, "fortran_order") == Some("True") {
        return Err(malformed(
            what,
            start as u64,
            "Fortran-order arrays are not supported",
        ));
    }
    let shape_text = field(header, "shape")
        .ok_or_else(|| malformed(what, start as u64, "header has no 'shape'"))?;
    let dims: Vec<i64> = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<i64>()
                .map_err(|_| malformed(what, start as u64, format!("bad shape ({shape_text})")))
        })
        .collect::<Result<_>>()?;
    let n = checked_numel(what, &dims)?;
    let data = &bytes[end..];
    if data.len() != n * dtype.itemsize() {
        return Err(malformed(
            what,
            end as u64,
            format!(
                "shape {dims:?} of {descr} needs {} data bytes, found {}",
                n * dtype.itemsize(),
                data.len()
            ),
        ));
    }
    let shape: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
    tensor_from_le_bytes(data, &shape, dtype)
}

/// Reads a `.npy` file.
pub fn read(path: &Path) -> Result<Tensor> {
    let what = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| Error::Io {
        path: what.clone(),
        detail: e.to_string(),
    })?;
    parse(&bytes, &what)
}

/// The `.npy` (version 1.0) bytes of a tensor (computing it).
pub fn to_bytes(t: &Tensor) -> Result<Vec<u8>> {
    let dims: Vec<String> = t.shape().iter().map(usize::to_string).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        descr_of(t.dtype())
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = MAGIC.to_vec();
    out.extend([1, 0]);
    out.extend((header.len() as u16).to_le_bytes());
    out.extend(header.as_bytes());
    out.extend(t.to_bytes()?);
    Ok(out)
}

/// Writes a tensor as a `.npy` file.
pub fn write(path: &Path, t: &Tensor) -> Result<()> {
    let bytes = to_bytes(t)?;
    std::fs::write(path, bytes).map_err(|e| Error::Io {
        path: path.display().to_string(),
        detail: e.to_string(),
    })
}
