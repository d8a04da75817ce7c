//! Compiling generated C as every test holds it to account: C99 under `-Wall -Wextra -Werror
//! -pedantic`, so a warning fails the test. Included by `#[path]` in the tests that compile C.
//!
//! Invariant: a compiler that runs and fails or warns always fails the calling test (with the
//! compiler's messages); only a compiler that cannot be started is reported as absent.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// The flags generated C must compile under without a message.
pub const STRICT: [&str; 5] = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"];

/// Compiles `src` to `out` with `cc` under [`STRICT`] plus `extra`; `None` when `cc` cannot be
/// started. Panics, naming the compiler and quoting its messages, when it fails or warns.
pub fn compile_strict(cc: &str, src: &Path, out: &Path, extra: &[&str]) -> Option<Output> {
    let run = Command::new(cc)
        .args(STRICT)
        .arg(src)
        .arg("-o")
        .arg(out)
        .args(extra)
        .output()
        .ok()?;
    assert!(
        run.status.success(),
        "{cc} on {}: {}",
        src.display(),
        String::from_utf8_lossy(&run.stderr)
    );
    Some(run)
}
