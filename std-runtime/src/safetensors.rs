//! Saving and loading named tensors as `.safetensors` files (via the `safetensors` crate).
//!
//! Files are written to a temporary name and renamed, so a crash never leaves a half-written
//! file under the real name. Loading validates the file through the crate and maps its errors to
//! [`Error::Format`] (never panics on a malformed file); dtypes picograd lacks are an error
//! naming the tensor.

use std::path::Path;

use ::safetensors::tensor::{Dtype, SafeTensors, TensorView};
use picograd_core::dtype::DType;
use picograd_core::nn::state::tensor_from_le_bytes;
use picograd_core::{Error, Result, Tensor};

fn to_st(d: DType) -> Dtype {
    match d {
        DType::Bool => Dtype::BOOL,
        DType::I8 => Dtype::I8,
        DType::U8 => Dtype::U8,
        DType::I16 => Dtype::I16,
        DType::U16 => Dtype::U16,
        DType::I32 => Dtype::I32,
        DType::U32 => Dtype::U32,
        DType::I64 => Dtype::I64,
        DType::U64 => Dtype::U64,
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::BF16,
        DType::F32 => Dtype::F32,
        DType::F64 => Dtype::F64,
    }
}

fn from_st(d: Dtype) -> Option<DType> {
    Some(match d {
        Dtype::BOOL => DType::Bool,
        Dtype::I8 => DType::I8,
        Dtype::U8 => DType::U8,
        Dtype::I16 => DType::I16,
        Dtype::U16 => DType::U16,
        Dtype::I32 => DType::I32,
        Dtype::U32 => DType::U32,
        Dtype::I64 => DType::I64,
        Dtype::U64 => DType::U64,
        Dtype::F16 => DType::F16,
        Dtype::BF16 => DType::BF16,
        Dtype::F32 => DType::F32,
        Dtype::F64 => DType::F64,
        _ => return None,
    })
}

fn format_err(path: &Path, detail: String) -> Error {
    Error::Format {
        file: path.display().to_string(),
        offset: 0,
        detail,
    }
}

fn io_err(path: &Path, e: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        detail: e.to_string(),
    }
}

/// The `.safetensors` bytes of `named` (computes every tensor).
pub fn to_bytes(named: &[(String, Tensor)]) -> Result<Vec<u8>> {
    let mut datas = Vec::with_capacity(named.len());
    for (_, t) in named {
        datas.push(t.to_bytes()?);
    }
    let mut views = Vec::with_capacity(named.len());
    for ((name, t), data) in named.iter().zip(&datas) {
        let v = TensorView::new(to_st(t.dtype()), t.shape(), data)
            .map_err(|e| Error::Device(format!("safetensors: {name}: {e}")))?;
        views.push((name.as_str(), v));
    }
    ::safetensors::serialize(views, None).map_err(|e| Error::Device(format!("safetensors: {e}")))
}

/// Writes `named` to `path` atomically: a fresh, uniquely named temporary file in the same folder,
/// renamed into place (concurrent writers never tear the file; a link at `path` is replaced, not
/// written through).
pub fn save(path: impl AsRef<Path>, named: &[(String, Tensor)]) -> Result<()> {
    let path = path.as_ref();
    let bytes = to_bytes(named)?;
    crate::private_fs::write_atomic(path, &bytes, 0o644).map_err(|e| io_err(path, e))
}

/// Parses `.safetensors` bytes into named tensors (sorted by name) on the default device;
/// `source` names them in errors.
pub fn from_bytes(bytes: &[u8], source: &Path) -> Result<Vec<(String, Tensor)>> {
    let st = SafeTensors::deserialize(bytes).map_err(|e| format_err(source, e.to_string()))?;
    let dev = picograd_core::context::default_device();
    let mut out = Vec::new();
    for (name, view) in st.tensors() {
        let dtype = from_st(view.dtype()).ok_or_else(|| {
            format_err(
                source,
                format!("{name}: dtype {:?} is not supported", view.dtype()),
            )
        })?;
        let t = tensor_from_le_bytes(view.data(), view.shape(), dtype, &dev)
            .map_err(|e| format_err(source, format!("{name}: {e}")))?;
        out.push((name, t));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Reads the named tensors of the file at `path` (sorted by name).
pub fn load(path: impl AsRef<Path>) -> Result<Vec<(String, Tensor)>> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| io_err(path, e))?;
    from_bytes(&bytes, path)
}
