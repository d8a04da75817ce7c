//! The symbols of a built program, read with the target's `nm`: the functions the model's own
//! objects define (their address ranges in the linked program, for per-kernel instruction
//! counts) and the library functions those objects call (flash the model pulls in).
//!
//! Invariant: only what `nm` printed is reported; a symbol the model defines that the linked
//! program does not hold (discarded, or inlined away) is left out, never invented.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use picograd_core::{Error, Result};

/// One sized symbol of a linked program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    /// The symbol's name.
    pub name: String,
    /// Its address (the Thumb bit cleared).
    pub addr: u64,
    /// Its size in bytes.
    pub size: u64,
}

/// Runs `nm` with `args` on `files`; its stdout.
fn nm(tool: &str, args: &[&str], files: &[PathBuf]) -> Result<String> {
    let out = Command::new(tool)
        .args(args)
        .args(files)
        .output()
        .map_err(|e| Error::Compile(format!("cannot run `{tool}` (symbols): {e}")))?;
    if !out.status.success() {
        return Err(Error::Compile(format!(
            "`{tool} {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Names the object files define: functions only (`T`/`t`) or every symbol.
pub fn defined(tool: &str, objects: &[PathBuf], functions_only: bool) -> Result<BTreeSet<String>> {
    let text = nm(tool, &["--defined-only"], objects)?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w[..] {
                [_, "T" | "t", name] => Some(name.to_owned()),
                [_, _, name] if !functions_only => Some(name.to_owned()),
                _ => None,
            }
        })
        .collect())
}

/// Names the object files use but do not define (library functions, and each other's symbols).
pub fn undefined(tool: &str, objects: &[PathBuf]) -> Result<BTreeSet<String>> {
    let text = nm(tool, &["-u"], objects)?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .filter(|w| !w.ends_with(':'))
        .map(str::to_owned)
        .collect())
}

/// The sized function symbols (`T`/`t`/`W`) of a linked program.
pub fn sized_functions(tool: &str, elf: &PathBuf) -> Result<Vec<Symbol>> {
    let text = nm(tool, &["-S"], std::slice::from_ref(elf))?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w[..] {
                [addr, size, "T" | "t" | "W" | "w", name] => Some(Symbol {
                    name: name.to_owned(),
                    addr: u64::from_str_radix(addr, 16).ok()? & !1,
                    size: u64::from_str_radix(size, 16).ok()?,
                }),
                _ => None,
            }
        })
        .collect())
}

/// The `nm` of a target whose `size` tool is `size`: the same prefix (`arm-none-eabi-size` →
/// `arm-none-eabi-nm`).
pub fn nm_beside(size: &str) -> String {
    match size.strip_suffix("size") {
        Some(prefix) => format!("{prefix}nm"),
        None => "nm".to_owned(),
    }
}
