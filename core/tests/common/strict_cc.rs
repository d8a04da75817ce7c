//! Compiling generated C as every test holds it to account: C99 under `-Wall -Wextra -Werror
//! -pedantic`, so a warning fails the test. Included by `#[path]` in the tests that compile C.
//!
//! Invariant: a compiler that runs and fails or warns always fails the calling test (with the
//! compiler's messages); only a compiler that cannot be started is reported as absent — and
//! under CI (`CI=true`), which has every compiler, even that fails the test.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// The flags generated C must compile under without a message.
pub const STRICT: [&str; 5] = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"];

/// Compiles `src` to `out` with `cc` under [`STRICT`] plus `extra`; `None` (saying so) when `cc`
/// cannot be started outside CI. Panics, naming the compiler and quoting its messages, when it
/// fails or warns, and under CI when it cannot be started.
pub fn compile_strict(cc: &str, src: &Path, out: &Path, extra: &[&str]) -> Option<Output> {
    let run = match Command::new(cc)
        .args(STRICT)
        .arg(src)
        .arg("-o")
        .arg(out)
        .args(extra)
        .output()
    {
        Ok(run) => run,
        Err(e) => {
            missing_tool(cc, &e.to_string());
            return None;
        }
    };
    assert!(
        run.status.success(),
        "{cc} on {}: {}",
        src.display(),
        String::from_utf8_lossy(&run.stderr)
    );
    Some(run)
}

/// A test cannot run because `tool` cannot be started (`why`): a failure under CI (`CI=true`:
/// CI has every tool, `scripts/install-deps.sh` installs them), a printed skip elsewhere.
pub fn missing_tool(tool: &str, why: &str) {
    let msg = format!("{tool} cannot be run ({why}); scripts/install-deps.sh installs it");
    if std::env::var_os("CI").is_some_and(|v| v == "true") {
        panic!("{msg}");
    }
    eprintln!("SKIPPED: {msg}");
}

/// Compiles `c` (a host kernel's source) to an object with clang under [`STRICT`], `-O2` and
/// the host's vector ISA (`-march=x86-64-v3` on x86-64, as the Clang device builds), in a new
/// directory only this process can use (made by this call under a random name starting with
/// `name`, mode 0700; an existing directory is never reused).
pub fn compile_host_kernel(c: &str, name: &str) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix(&format!("picograd-{name}-"))
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .unwrap_or_else(|e| panic!("a private temporary folder: {e}"))
        .keep();
    let file = dir.join(format!("{name}.c"));
    std::fs::write(&file, c).unwrap();
    let march = if cfg!(target_arch = "x86_64") {
        "-march=x86-64-v3"
    } else {
        "-march=native"
    };
    let out = dir.join(format!("{name}.o"));
    compile_strict("clang", &file, &out, &[march, "-O2", "-c"]);
    let _ = std::fs::remove_dir_all(&dir);
}
