//! Memory budgets: the flash and RAM of real parts built around a target's core, named in its
//! description (`budget.NAME = FLASH RAM DESCRIPTION`, `budget = NAME` for the default), so a
//! model can be checked against the part it is meant for before anything is built.
//!
//! Invariant: a check names every region that does not fit, with the bytes needed, the bytes
//! available and the difference; a region that fits is never reported as a failure.

use std::collections::BTreeMap;
use std::fmt;

use picograd_core::{Error, Result};

/// One part's memory: what a model's flash and RAM must fit in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Budget {
    /// The part's name, as `--budget` takes it (`nrf52840`).
    pub name: String,
    /// Flash bytes (code and constant weights).
    pub flash: u64,
    /// RAM bytes (arena, stack, data).
    pub ram: u64,
    /// What the part is, for people.
    pub description: String,
}

/// What a model needs, as far as it is known: before a build, the weights (flash) and the arena
/// (RAM) are lower bounds; after it, the measured figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Need {
    /// Flash bytes needed.
    pub flash: u64,
    /// RAM bytes needed.
    pub ram: u64,
}

/// A region that does not fit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overflow {
    /// `"flash"` or `"RAM"`.
    pub region: &'static str,
    /// Bytes needed.
    pub needed: u64,
    /// Bytes the part has.
    pub available: u64,
}

impl fmt::Display for Overflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} needs {} but the part has {} ({} over)",
            self.region,
            bytes(self.needed),
            bytes(self.available),
            bytes(self.needed - self.available)
        )
    }
}

impl Budget {
    /// The regions `need` overflows (empty when it fits).
    pub fn overflows(&self, need: Need) -> Vec<Overflow> {
        [
            ("flash", need.flash, self.flash),
            ("RAM", need.ram, self.ram),
        ]
        .into_iter()
        .filter(|&(_, n, a)| n > a)
        .map(|(region, needed, available)| Overflow {
            region,
            needed,
            available,
        })
        .collect()
    }

    /// `Ok` when `need` fits; else an error that names the part, what was measured (`what`), and
    /// each region that does not fit, by how much.
    pub fn check(&self, need: Need, what: &str) -> Result<()> {
        let over = self.overflows(need);
        if over.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = over.iter().map(Overflow::to_string).collect();
        Err(Error::Device(format!(
            "the model does not fit {} ({}): {what}: {}",
            self.name,
            self.description,
            list.join("; ")
        )))
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} flash, {} RAM ({})",
            self.name,
            bytes(self.flash),
            bytes(self.ram),
            self.description
        )
    }
}

/// `n` bytes, with KiB/MiB when exact enough to help.
pub fn bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{n} B ({} MiB)", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{n} B ({} KiB)", n >> 10),
        n => format!("{n} B"),
    }
}

/// The budgets of a description's (expanded) keys, sorted by name, and the default's name.
/// `fmt_err` makes an error about the description.
pub(super) fn parse_budgets(
    keys: &BTreeMap<String, String>,
    fmt_err: impl Fn(String) -> Error,
) -> Result<(Vec<Budget>, Option<String>)> {
    let mut budgets = Vec::new();
    for (key, value) in keys {
        let Some(name) = key.strip_prefix("budget.") else {
            continue;
        };
        let mut words = value.splitn(3, char::is_whitespace);
        let (flash, ram, description) = (words.next(), words.next(), words.next());
        let num = |w: Option<&str>| w.and_then(super::parse_u64);
        match (num(flash), num(ram), description) {
            (Some(flash), Some(ram), Some(d)) if !name.is_empty() => budgets.push(Budget {
                name: name.to_string(),
                flash,
                ram,
                description: d.trim().to_string(),
            }),
            _ => {
                return Err(fmt_err(format!(
                    "`{key} = {value}`: expected `budget.NAME = FLASH RAM DESCRIPTION`"
                )))
            }
        }
    }
    let default = keys.get("budget").cloned();
    if let Some(d) = &default {
        if !budgets.iter().any(|b| &b.name == d) {
            return Err(fmt_err(format!(
                "`budget = {d}` names no `budget.{d}` line"
            )));
        }
    }
    if default.is_none() && !budgets.is_empty() {
        return Err(fmt_err(
            "budgets given but no default `budget = NAME`".into(),
        ));
    }
    Ok((budgets, default))
}
