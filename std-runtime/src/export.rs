//! Writes an exported [`Bundle`] to a directory: each file goes to a temporary name in the
//! same directory and is renamed into place, so a reader never sees a half-written file.

use std::fs;
use std::io::Write;
use std::path::Path;

use picograd_core::export::Bundle;
use picograd_core::{Error, Result};

fn io_err(path: &Path, e: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        detail: e.to_string(),
    }
}

/// Creates `dir` (and its parents) and writes every file of `bundle` into it atomically.
pub fn write_bundle(bundle: &Bundle, dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
    for (name, bytes) in &bundle.files {
        write_atomic(&dir.join(name), bytes)?;
    }
    Ok(())
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut f = fs::File::create(&tmp).map_err(|e| io_err(&tmp, e))?;
    f.write_all(bytes).map_err(|e| io_err(&tmp, e))?;
    f.sync_all().map_err(|e| io_err(&tmp, e))?;
    drop(f);
    fs::rename(&tmp, path).map_err(|e| io_err(path, e))
}
