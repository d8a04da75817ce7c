//! State dicts: named tensors, saved to and loaded from a raw little-endian blob.
//!
//! Blob format (every integer little-endian):
//!
//! ```text
//! magic    8 bytes  b"PGSTATE1"
//! count    u32      number of tensors
//! per tensor, in order:
//!   name_len u32, name (name_len bytes of UTF-8)
//!   dtype    u8     index into `ALL_DTYPES` (bool=0 ... f64=12)
//!   rank     u32    (at most 16)
//!   dims     rank × u64
//!   byte_len u64    must equal product(dims) × itemsize
//!   data     byte_len bytes, row-major
//! ```
//!
//! Nothing may follow the last tensor. Loading checks every field and returns
//! [`Error::Format`] naming the byte offset of the first bad one; it never panics.

use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

use crate::device::Device;
use crate::dtype::{DType, ALL_DTYPES};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// The blob's first bytes.
pub const MAGIC: &[u8; 8] = b"PGSTATE1";
/// The largest rank a blob may hold.
pub const MAX_RANK: usize = 16;

/// A state dict: the named tensors, in order (clones share the tensors, so loading into the
/// returned entries loads into the model).
pub fn state_dict(named: &[(String, Tensor)]) -> Vec<(String, Tensor)> {
    named.to_vec()
}

/// A tensor of `dtype` and `shape` holding little-endian `bytes` (exactly its size), on `device`.
pub fn tensor_from_le_bytes(
    bytes: &[u8],
    shape: &[usize],
    dtype: DType,
    device: &Arc<dyn Device>,
) -> Result<Tensor> {
    let n = checked_numel(shape).and_then(|n| n.checked_mul(dtype.itemsize()));
    if n != Some(bytes.len()) {
        return Err(Error::shape(
            "from_le_bytes",
            format!("{} bytes do not fill {dtype} {shape:?}", bytes.len()),
        ));
    }
    Tensor::from_raw_bytes(bytes, shape, dtype, device)
}

fn checked_numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
}

/// The blob holding `named` (computes every tensor).
/// Two tensors under one name are an error naming it (a blob keeps each name once).
pub fn save_blob(named: &[(String, Tensor)]) -> Result<Vec<u8>> {
    if let Some(dup) = first_duplicate(named.iter().map(|(n, _)| n.as_str())) {
        return Err(Error::Unsupported(format!(
            "save_blob: two tensors are named {dup:?}"
        )));
    }
    let count = u32::try_from(named.len())
        .map_err(|_| Error::Unsupported(format!("save_blob: {} tensors", named.len())))?;
    let mut out = Vec::from(&MAGIC[..]);
    out.extend(count.to_le_bytes());
    for (name, t) in named {
        out.extend((name.len() as u32).to_le_bytes());
        out.extend(name.as_bytes());
        let code = ALL_DTYPES
            .iter()
            .position(|&d| d == t.dtype())
            .ok_or_else(|| Error::internal(format!("save_blob: {} has no code", t.dtype())))?;
        out.push(code as u8);
        let shape = t.shape();
        out.extend((shape.len() as u32).to_le_bytes());
        shape
            .iter()
            .for_each(|&d| out.extend((d as u64).to_le_bytes()));
        let data = t.to_bytes()?;
        out.extend((data.len() as u64).to_le_bytes());
        out.extend(data);
    }
    Ok(out)
}

/// A bounds-checked reader over a blob; every error names the offset.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn err(&self, at: usize, detail: String) -> Error {
        Error::Format {
            file: String::from("state blob"),
            offset: at as u64,
            detail,
        }
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let Some(end) = end else {
            let left = self.buf.len() - self.pos;
            return Err(self.err(self.pos, format!("{what}: needs {n} bytes, {left} left")));
        };
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
}

/// Reads one tensor's header and data.
fn read_entry(r: &mut Reader, device: &Arc<dyn Device>) -> Result<(String, Tensor)> {
    let at = r.pos;
    let len = r.u32("name length")? as usize;
    let raw = r.take(len, "name")?;
    let name =
        core::str::from_utf8(raw).map_err(|_| r.err(at + 4, String::from("name is not UTF-8")))?;
    let at = r.pos;
    let code = r.take(1, "dtype")?[0] as usize;
    let dtype = *ALL_DTYPES
        .get(code)
        .ok_or_else(|| r.err(at, format!("unknown dtype code {code}")))?;
    let at = r.pos;
    let rank = r.u32("rank")? as usize;
    if rank > MAX_RANK {
        return Err(r.err(at, format!("rank {rank} exceeds {MAX_RANK}")));
    }
    let mut shape = Vec::with_capacity(rank);
    for _ in 0..rank {
        let at = r.pos;
        let d = r.u64("dimension")?;
        shape.push(usize::try_from(d).map_err(|_| r.err(at, format!("dimension {d} too large")))?);
    }
    let at = r.pos;
    let bytes = r.u64("byte length")?;
    let want = checked_numel(&shape).and_then(|n| n.checked_mul(dtype.itemsize()));
    if want.map(|w| w as u64) != Some(bytes) {
        let detail = format!("byte length {bytes} does not match {dtype} {shape:?}");
        return Err(r.err(at, detail));
    }
    let data = r.take(bytes as usize, "tensor data")?;
    let t = Tensor::from_raw_bytes(data, &shape, dtype, device)?;
    Ok((String::from(name), t))
}

/// The first name that occurs twice.
fn first_duplicate<'a>(names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let mut seen = alloc::collections::BTreeSet::new();
    names.into_iter().find(|n| !seen.insert(*n))
}

/// Parses a blob made by [`save_blob`] into named tensors on the default device.
pub fn load_blob(blob: &[u8]) -> Result<Vec<(String, Tensor)>> {
    load_blob_on(blob, &crate::context::default_device())
}

/// [`load_blob`] onto `device`.
pub fn load_blob_on(blob: &[u8], device: &Arc<dyn Device>) -> Result<Vec<(String, Tensor)>> {
    let mut r = Reader { buf: blob, pos: 0 };
    if r.take(8, "magic")? != MAGIC {
        return Err(r.err(0, String::from("not a picograd state blob (bad magic)")));
    }
    let count = r.u32("tensor count")?;
    let mut out: Vec<(String, Tensor)> = Vec::new();
    for _ in 0..count {
        let at = r.pos;
        let entry = read_entry(&mut r, device)?;
        if out.iter().any(|(n, _)| *n == entry.0) {
            return Err(r.err(at, format!("a second tensor named {:?}", entry.0)));
        }
        out.push(entry);
    }
    if r.pos != blob.len() {
        let extra = blob.len() - r.pos;
        return Err(r.err(r.pos, format!("{extra} bytes after the last tensor")));
    }
    Ok(out)
}

/// Copies `loaded` values into the matching (by name) tensors of `into`, in place. Every name of
/// `into` must be present with the same shape and dtype; extra loaded names are an error too.
pub fn load_state_dict(into: &[(String, Tensor)], loaded: &[(String, Tensor)]) -> Result<()> {
    if let Some(dup) = first_duplicate(loaded.iter().map(|(n, _)| n.as_str())) {
        return Err(Error::Unsupported(format!(
            "load_state_dict: two loaded tensors are named {dup:?}"
        )));
    }
    let missing = |n: &str| Error::Unsupported(format!("load_state_dict: no tensor named {n:?}"));
    for (name, _) in loaded {
        if !into.iter().any(|(n, _)| n == name) {
            return Err(Error::Unsupported(format!(
                "load_state_dict: unexpected tensor {name:?}"
            )));
        }
    }
    let mut targets = Vec::new();
    for (name, t) in into {
        let (_, v) = loaded
            .iter()
            .find(|(n, _)| n == name)
            .ok_or_else(|| missing(name))?;
        let v = v.to_device(&t.device());
        t.try_assign(&v).map_err(|e| match e {
            Error::Shape { detail, .. } => {
                Error::shape("load_state_dict", format!("{name}: {detail}"))
            }
            other => other,
        })?;
        targets.push(t);
    }
    Tensor::realize_all(&targets)
}
