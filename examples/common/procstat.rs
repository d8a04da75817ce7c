//! What a soak run samples about its own process and the kernel cache: resident memory (from
//! `/proc/self/statm`), the picograd kernel libraries mapped into the process (from
//! `/proc/self/maps`), and the bytes in the kernel cache folder. Linux only: elsewhere every
//! reading is an error that names the file, never a made-up zero.

use std::collections::HashSet;
use std::path::Path;

/// Resident set size in bytes: `/proc/self/statm`'s second field, in pages.
pub fn rss_bytes() -> Result<u64, String> {
    let path = "/proc/self/statm";
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let pages: u64 = text
        .split_whitespace()
        .nth(1)
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| format!("{path}: no resident page count in {text:?}"))?;
    // SAFETY: sysconf only reads a configuration value.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page = u64::try_from(page).map_err(|_| format!("sysconf(_SC_PAGESIZE) failed: {page}"))?;
    Ok(pages * page)
}

/// Whether a mapped file is one of picograd's kernel libraries: its cache entries (and the
/// uncached builds) are named by a 128-bit key, `<32 hex digits>.so`.
fn is_kernel_library(path: &str) -> bool {
    let path = path.trim_end_matches(" (deleted)");
    let name = path.rsplit('/').next().unwrap_or(path);
    match name.strip_suffix(".so") {
        Some(stem) => stem.len() == 32 && stem.bytes().all(|b| b.is_ascii_hexdigit()),
        None => false,
    }
}

/// How many distinct kernel libraries are mapped into this process now.
pub fn mapped_kernel_libraries() -> Result<usize, String> {
    let path = "/proc/self/maps";
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    // The sixth field onwards is the mapped file's path (it may hold spaces).
    let libs: HashSet<&str> = text
        .lines()
        .filter_map(|l| l.splitn(6, char::is_whitespace).nth(5))
        .map(str::trim)
        .filter(|p| is_kernel_library(p))
        .collect();
    Ok(libs.len())
}

/// Bytes in the regular files directly inside `dir` (0 when it does not exist yet).
pub fn folder_bytes(dir: &Path) -> Result<u64, String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    let mut total = 0;
    for e in entries {
        let e = e.map_err(|e| format!("{}: {e}", dir.display()))?;
        // A file removed by the cache trimmer between listing and stat counts as gone.
        if let Ok(m) = e.metadata() {
            if m.is_file() {
                total += m.len();
            }
        }
    }
    Ok(total)
}
