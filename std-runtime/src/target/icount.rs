//! Exact instruction counts under QEMU: building picograd's counting plugin
//! (`targets/common/icount.c`) with the host's C compiler, and reading what it wrote. A run of a
//! program under the plugin gives every guest instruction executed, and those executed inside
//! given address ranges (kernel symbols); per inference is then
//! `(count with K calls - count with 0 calls) / K` (see [`per_inference`]).
//!
//! Invariant: counts come only from the plugin's own lines; a log without an `insns=` line, or
//! without one line per range asked for, is an error quoting the log.

use std::path::{Path, PathBuf};
use std::process::Command;

use picograd_core::{Error, Result};

/// The plugin's source, in the `targets/` folder `root`.
pub fn plugin_source(root: &Path) -> PathBuf {
    root.join("common").join("icount.c")
}

/// Builds the plugin from `root`'s `common/icount.c` into `dir` with `cc` (the host's C
/// compiler: the plugin is loaded by the host's QEMU); its path.
pub fn build_plugin(cc: &str, root: &Path, dir: &Path) -> Result<PathBuf> {
    let src = plugin_source(root);
    let lib = dir.join("libicount.so");
    let args = [
        "-O2",
        "-shared",
        "-fPIC",
        "-fvisibility=hidden",
        "-Wall",
        "-Wextra",
        "-Werror",
    ];
    let out = Command::new(cc)
        .args(args)
        .arg(&src)
        .arg("-o")
        .arg(&lib)
        .output()
        .map_err(|e| {
            Error::Compile(format!(
                "cannot build the instruction-counting plugin {}: `{cc}` did not start: {e}",
                src.display()
            ))
        })?;
    if !out.status.success() {
        return Err(Error::Compile(format!(
            "building the instruction-counting plugin {} with `{cc}` failed ({}):\n{}",
            src.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(lib)
}

/// QEMU arguments that load `plugin` counting `ranges` and write its lines to `log`.
pub fn qemu_args(plugin: &Path, ranges: &[(u64, u64)], log: &Path) -> Vec<String> {
    let mut spec = plugin.display().to_string();
    for (lo, hi) in ranges {
        spec.push_str(&format!(",range={lo:#x}:{hi:#x}"));
    }
    vec![
        "-plugin".into(),
        spec,
        "-d".into(),
        "plugin".into(),
        "-D".into(),
        log.display().to_string(),
    ]
}

/// What one counted run gave: all instructions, and those in each range asked for, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counts {
    /// Every guest instruction executed.
    pub total: u64,
    /// Instructions executed inside each range, in the order the ranges were given.
    pub ranges: Vec<u64>,
}

/// Parses the plugin's log (`log` names it in errors); `ranges` is how many range lines to expect.
pub fn parse_log(text: &str, ranges: usize, log: &Path) -> Result<Counts> {
    let bad = |detail: &str| Error::Device(format!("{}: {detail}:\n{text}", log.display()));
    let total = text
        .lines()
        .find_map(|l| l.strip_prefix("insns="))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| bad("the counting plugin wrote no `insns=N` line"))?;
    let counts: Vec<u64> = text
        .lines()
        .filter_map(|l| l.strip_prefix("range "))
        .filter_map(|rest| rest.split_whitespace().nth(2)?.parse().ok())
        .collect();
    if counts.len() != ranges {
        return Err(bad(&format!(
            "{} range line(s), {ranges} asked for",
            counts.len()
        )));
    }
    Ok(Counts {
        total,
        ranges: counts,
    })
}

/// Instructions per call from a run with `k` calls (`with`) and one with none (`without`):
/// their difference over `k`, rounded to the nearest (exact when every call runs the same path).
pub fn per_inference(with: u64, without: u64, k: u32) -> u64 {
    let k = u64::from(k.max(1));
    (with.saturating_sub(without) + k / 2) / k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_plugins_lines() {
        let log = "insns=1234\nrange 0x10 0x20 7\nrange 0x20 0x40 0\n";
        let c = parse_log(log, 2, Path::new("l")).unwrap();
        assert_eq!(
            c,
            Counts {
                total: 1234,
                ranges: vec![7, 0]
            }
        );
        assert!(parse_log("range 0x1 0x2 3\n", 1, Path::new("l")).is_err());
        assert!(parse_log("insns=5\n", 1, Path::new("l")).is_err());
    }

    #[test]
    fn per_inference_is_the_difference_over_k() {
        assert_eq!(per_inference(1300, 100, 3), 400);
        assert_eq!(per_inference(100, 100, 2), 0);
    }
}
