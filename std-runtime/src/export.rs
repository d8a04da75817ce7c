//! Writes an exported [`Bundle`] to a folder: each file goes to a fresh, uniquely named temporary
//! file in the same folder and is renamed into place, so a reader never sees a half-written file
//! and a link someone planted at a file's name is replaced, never written through.
//!
//! Invariant: files are written only into a folder the current user owns and no one else may
//! write to (see [`crate::private_fs::check_private_dir`]): `picograd compile` builds and runs
//! what is there, so another user must not be able to change it in between.

use std::path::{Component, Path};

use picograd_core::export::Bundle;
use picograd_core::{Error, Result};

use crate::private_fs;

fn io_err(path: &Path, e: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        detail: e.to_string(),
    }
}

/// Creates `dir` (and its parents; new folders get mode 0755 whatever the umask) and writes every
/// file of `bundle` into it atomically. An existing `dir` that another user owns, or that others
/// may write to, is refused with an error saying why and how to fix it.
pub fn write_bundle(bundle: &Bundle, dir: &Path) -> Result<()> {
    if std::fs::symlink_metadata(dir).is_err() {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o755);
        builder.create(dir).map_err(|e| io_err(dir, e))?;
    }
    private_fs::check_private_dir(dir).map_err(|why| Error::Io {
        path: dir.display().to_string(),
        detail: format!("not writing the bundle there: {why}"),
    })?;
    for (name, bytes) in &bundle.files {
        let plain = matches!(
            Path::new(name).components().collect::<Vec<_>>().as_slice(),
            [Component::Normal(_)]
        );
        if !plain {
            return Err(Error::Io {
                path: dir.display().to_string(),
                detail: format!("bundle file name `{name}` is not a plain file name"),
            });
        }
        let path = dir.join(name);
        private_fs::write_atomic(&path, bytes, 0o644).map_err(|e| io_err(&path, e))?;
    }
    Ok(())
}
