//! Tensor data stored outside the model file (`data_location = EXTERNAL`), as torch ≥ 2.9's
//! exporter writes by default (`model.onnx` + `model.onnx.data`): each tensor names a file
//! (`location`, relative to the model's folder) and a byte range in it (`offset`, `length`).
//!
//! Invariants: a data file is read only inside the model's folder — absolute locations, `..`
//! components and symbolic links that lead outside it are refused before anything is opened;
//! the byte range is checked against the file's size and against the tensor's shape and type
//! before it is read; every error names the tensor, the file and the byte.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};

use picograd_core::{Error, Result, Tensor};

use super::proto::TensorProto;
use super::values::{checked_numel, element_dtype, lowbit_of, lowbit_tensor, tensor_from_le_bytes};

/// `TensorProto.DataLocation.EXTERNAL`.
pub const EXTERNAL: i32 = 1;

/// Is `t`'s data in an external file?
pub fn is_external(t: &TensorProto) -> bool {
    t.data_location == EXTERNAL
}

/// Where one tensor's bytes are: the file (inside the model's folder) and the range.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Range {
    file: PathBuf,
    offset: u64,
    length: Option<u64>,
}

/// Reads external tensor `t` (named `what` in errors) from the model folder `dir`.
pub fn read_tensor(t: &TensorProto, what: &str, dir: &Path) -> Result<Tensor> {
    let n = checked_numel(what, &t.dims)?;
    let shape: Vec<usize> = t.dims.iter().map(|&d| d as usize).collect();
    if let Some(kind) = lowbit_of(t.data_type) {
        let range = parse_keys(t, what, dir)?;
        let bytes = read_range(&range, kind.packed_len(n) as u64, what)?;
        return lowbit_tensor(&bytes, &shape, n, kind, what);
    }
    let dtype = element_dtype(t, what)?;
    let need = (n * dtype.itemsize()) as u64;
    let range = parse_keys(t, what, dir)?;
    let bytes = read_range(&range, need, what)?;
    tensor_from_le_bytes(&bytes, &shape, dtype)
}

fn format_err(file: &Path, offset: u64, detail: String) -> Error {
    Error::Format {
        file: file.display().to_string(),
        offset,
        detail,
    }
}

/// The `location`, `offset` and `length` keys; the location confined to `dir`.
fn parse_keys(t: &TensorProto, what: &str, dir: &Path) -> Result<Range> {
    let mut location = None;
    let (mut offset, mut length) = (0u64, None);
    for kv in &t.external_data {
        let number = || {
            kv.value.parse::<u64>().map_err(|_| {
                Error::shape(
                    "onnx",
                    format!(
                        "{what}: external data key '{}' = {:?} is not a byte count",
                        kv.key, kv.value
                    ),
                )
            })
        };
        match kv.key.as_str() {
            "location" => location = Some(kv.value.as_str()),
            "offset" => offset = number()?,
            "length" => length = Some(number()?),
            // `checksum` and keys from newer writers do not change where the bytes are.
            _ => {}
        }
    }
    let location = location.ok_or_else(|| {
        Error::shape(
            "onnx",
            format!("{what}: data stored externally but no 'location' key"),
        )
    })?;
    Ok(Range {
        file: confine(location, what, dir)?,
        offset,
        length,
    })
}

/// `dir/location`, refused unless it stays inside `dir`: relative, no `..`, and no symbolic
/// link that resolves outside the folder.
fn confine(location: &str, what: &str, dir: &Path) -> Result<PathBuf> {
    let escape = |why: &str| {
        Error::shape(
            "onnx",
            format!(
                "{what}: external data location {location:?} {why}; it must name a file in the \
                 model's folder {}",
                dir.display()
            ),
        )
    };
    let rel = Path::new(location);
    if location.is_empty() {
        return Err(escape("is empty"));
    }
    for c in rel.components() {
        match c {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => return Err(escape("goes up with '..'")),
            Component::RootDir | Component::Prefix(_) => return Err(escape("is absolute")),
        }
    }
    let path = dir.join(rel);
    let io = |e: std::io::Error| Error::Io {
        path: path.display().to_string(),
        detail: format!("{what}: external data file: {e}"),
    };
    let real_dir = dir.canonicalize().map_err(|e| Error::Io {
        path: dir.display().to_string(),
        detail: e.to_string(),
    })?;
    let real = path.canonicalize().map_err(io)?;
    if !real.starts_with(&real_dir) {
        return Err(escape(&format!(
            "leads outside the folder (to {})",
            real.display()
        )));
    }
    Ok(real)
}

/// The `need` bytes of `r`, after checking the range against the file's size.
fn read_range(r: &Range, need: u64, what: &str) -> Result<Vec<u8>> {
    let shown = &r.file;
    let io = |e: std::io::Error| Error::Io {
        path: shown.display().to_string(),
        detail: format!("{what}: {e}"),
    };
    let mut f = File::open(&r.file).map_err(io)?;
    let meta = f.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(format_err(shown, 0, format!("{what}: not a regular file")));
    }
    let size = meta.len();
    let length = r.length.unwrap_or(need);
    if length != need {
        return Err(format_err(
            shown,
            r.offset,
            format!(
                "{what}: external data length {length} bytes, but its shape and type need {need}"
            ),
        ));
    }
    let end = r.offset.checked_add(length).filter(|&e| e <= size);
    if end.is_none() {
        return Err(format_err(
            shown,
            r.offset,
            format!(
                "{what}: bytes {}..{} are past the end of the {size}-byte file",
                r.offset,
                r.offset.saturating_add(length)
            ),
        ));
    }
    f.seek(SeekFrom::Start(r.offset)).map_err(io)?;
    let mut bytes = vec![0u8; length as usize];
    f.read_exact(&mut bytes).map_err(io)?;
    Ok(bytes)
}
