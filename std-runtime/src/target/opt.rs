//! A target's [`OptConfig`]: how exported kernels are shaped for the device, read from the
//! description's optional `opt.KEY = N` lines — one row of [`OPT_KEYS`] per field, each with a
//! documented default. The defaults are [`OptConfig::small_device`]'s, so a description without
//! `opt.` lines exports exactly as before these keys existed.
//!
//! Invariant: every `opt.` key of a description is a known one with a whole number in its
//! range, or parsing fails naming the file, the line and the key.

use std::collections::BTreeMap;
use std::path::Path;

use picograd_core::codegen::opt::OptConfig;
use picograd_core::{Error, Result};

/// One `opt.` key: its name (after `opt.`), its range, what it sets, and what it means.
pub struct OptKey {
    /// The key after `opt.` (`opt.vec_width`).
    pub name: &'static str,
    /// The smallest and largest accepted values.
    pub range: (usize, usize),
    /// Sets the field.
    pub set: fn(&mut OptConfig, usize),
    /// What the field means (and its default), for documentation and errors.
    pub doc: &'static str,
}

/// The `opt.` keys of a target description. A new [`OptConfig`] field a target should be able
/// to describe is one more row.
pub const OPT_KEYS: &[OptKey] = &[
    OptKey {
        name: "vec_width",
        range: (1, 16),
        set: |c, v| c.vec_width = v,
        doc: "f32 lanes the register tiles are shaped for (default 2)",
    },
    OptKey {
        name: "max_accs",
        range: (1, 1024),
        set: |c, v| c.max_accs = v,
        doc: "accumulators a kernel keeps in registers (default 8)",
    },
    OptKey {
        name: "max_unrolled",
        range: (1, 4096),
        set: |c, v| c.max_unrolled = v,
        doc: "unrolled copies of a kernel body at most (default 32)",
    },
    OptKey {
        name: "float_registers",
        range: (0, 64),
        set: |c, v| c.float_registers = v,
        doc: "scalar float registers a conv tile may fill; 0 without an FPU (default 32)",
    },
    OptKey {
        name: "int_registers",
        range: (0, 64),
        set: |c, v| c.int_registers = v,
        doc: "general-purpose registers an integer (quantized) conv tile may fill; 0: none (default 14)",
    },
    OptKey {
        name: "dual_mac",
        range: (0, 1),
        set: |c, v| c.dual_mac = v == 1,
        doc: "1: the core has a dual 16-bit multiply-accumulate (smlad) for integer kernels (default 0)",
    },
    OptKey {
        name: "vector_lanes",
        range: (0, 1),
        set: |c, v| c.vector_lanes = v == 1,
        doc: "1: kernels may use f32 vector UOps of up to vec_width lanes, printed on GCC/clang vector types (default 0)",
    },
    OptKey {
        name: "vec_registers",
        range: (0, 64),
        set: |c, v| c.vec_registers = v,
        doc: "SIMD registers a vector register tile may fill; 0: unknown, tiles sized by max_accs (default 0)",
    },
    OptKey {
        name: "stack_scratch",
        range: (0, 1 << 20),
        set: |c, v| c.stack_scratch = v,
        doc: "bytes of stack a kernel may take for staged int8 weights (needs dual_mac); 0: none (default 0)",
    },
];

/// The description's [`OptConfig`]: [`OptConfig::small_device`], with each `opt.` key given
/// in `keys` applied. `text` (the file's contents) locates a bad line for the error.
pub fn parse_opt_config(
    keys: &BTreeMap<String, String>,
    text: &str,
    file: &Path,
) -> Result<OptConfig> {
    let mut cfg = OptConfig::small_device();
    for (key, value) in keys.iter().filter(|(k, _)| k.starts_with("opt.")) {
        let name = &key["opt.".len()..];
        let Some(row) = OPT_KEYS.iter().find(|r| r.name == name) else {
            let known: Vec<String> = OPT_KEYS.iter().map(|r| format!("opt.{}", r.name)).collect();
            let detail = format!("unknown key `{key}` (known: {})", known.join(", "));
            return Err(bad_line(text, file, key, detail));
        };
        let (lo, hi) = row.range;
        match value.parse::<usize>() {
            Ok(v) if (lo..=hi).contains(&v) => (row.set)(&mut cfg, v),
            _ => {
                let detail = format!(
                    "`{key}` is `{value}`, not a whole number from {lo} to {hi} ({})",
                    row.doc
                );
                return Err(bad_line(text, file, key, detail));
            }
        }
    }
    Ok(cfg)
}

/// A format error at the line defining `key` (its last definition: later lines win).
fn bad_line(text: &str, file: &Path, key: &str, detail: String) -> Error {
    let mut at = (0u64, 0usize);
    let mut offset = 0u64;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let defines = line
            .split_once('=')
            .is_some_and(|(k, _)| k.trim() == key && !line.trim_start().starts_with('#'));
        if defines {
            at = (offset, n + 1);
        }
        offset += line.len() as u64;
    }
    Error::Format {
        file: file.display().to_string(),
        offset: at.0,
        detail: format!("line {}: {detail}", at.1),
    }
}
