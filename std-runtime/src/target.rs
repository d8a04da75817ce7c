//! Device targets: reading a target description (`targets/<name>/target.txt`) and building an
//! exported model bundle for it, running it (natively or under QEMU) and reporting its outputs and
//! costs (executed instructions, flash, RAM, stack).
//!
//! A description is data: `key = value` lines, `#` comments, and `{key}` inside a value replaced
//! by that key's (already expanded) value; `{elf}` in `run` stands for the built program. The keys
//! are listed in [`REQUIRED_KEYS`]; others are kept and readable with [`Target::get`]. The
//! optional `fma = yes|no` (default `no`) says the FPU has a single-precision fused
//! multiply-add, which [`Target::export_options`] then lets exported kernels use. Optional
//! `opt.KEY = N` lines shape the exported kernels ([`Target::opt`]; the keys and their
//! defaults are [`OPT_KEYS`]; without them, [`OptConfig::small_device`]). Optional
//! `budget.NAME = FLASH RAM DESCRIPTION` lines name real parts' memory ([`Budget`]), `budget =
//! NAME` the default one ([`Target::budget`]). Optional `nm` names the symbol lister used for
//! per-function instruction counts and the library code a model pulls in (default: the `nm`
//! beside `size`, `arm-none-eabi-size` → `arm-none-eabi-nm`). Exact instruction counts
//! ([`BuildOptions::icount_runs`]) add picograd's QEMU plugin (`common/icount.c`, see
//! [`icount`]) to the `run` command.
//!
//! The descriptions are found in `$PICOGRAD_TARGETS` when set, else in the repository's
//! `targets/` folder next to this crate.

mod budget;
mod build;
mod bundle;
pub mod icount;
mod opt;
mod search;
mod size_expr;
pub mod symbols;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use picograd_core::codegen::opt::OptConfig;
use picograd_core::{Error, Result};

pub use budget::{Budget, Need, Overflow};
pub use build::{
    build_and_run, build_and_run_feeds, BuildOptions, BuildStage, CompilerKind, FeedRun, OptLevel,
    RunReport, StageHook,
};
pub use bundle::{Bundle, Param, SizeMacro, Values};
pub use opt::{OptKey, OPT_KEYS};
pub use search::{
    kernel_opts, DeviceSearch, DeviceSearchStats, KernelChoice, DEFAULT_CANDIDATES,
    SIZE_MARGIN_PER_MILLE,
};

/// Keys every target description must have.
pub const REQUIRED_KEYS: &[&str] = &[
    "name",
    "description",
    "arch",
    "cpu",
    "fpu",
    "float_abi",
    "vector_width",
    "flash_origin",
    "flash_size",
    "ram_origin",
    "ram_size",
    "cc",
    "size",
    "cflags",
    "ldflags",
    "clang_cflags",
    "clang_link",
    "counter",
    "stack_probe",
    "run",
];

/// Copies of a kernel body at most in size mode (`-Os`; speed mode: the target's
/// `opt.max_unrolled`, default 32): unrolling, register tiles (the small-core conv tile's `c·w`,
/// the depthwise row) and the borders padding by loop bounds peels all count. 2 keeps the digits
/// CNN's and the sine MLP's flash within issue 15's size-mode goals (1.05× onnx2c's; 4 made the
/// CNN's code 1,788 B against 1,405 B): at 2, padded convs keep their gates.
pub const SIZE_MAX_UNROLLED: usize = 2;

/// Accumulators a kernel keeps in registers at most in size mode (speed mode: the target's
/// `opt.max_accs`, default 8).
pub const SIZE_MAX_ACCS: usize = 2;

/// A memory region of a target: where it starts and how many bytes it has (0 on the host).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Memory {
    /// First address.
    pub origin: u64,
    /// Size in bytes.
    pub size: u64,
}

/// How the harness counts executed instructions on a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// No counter: [`RunReport::instructions`] is `None`.
    None,
    /// Cortex-M SysTick at 25 MHz under `-icount shift=0`: ticks × 40 ≈ instructions.
    Systick,
    /// RISC-V `minstret`: exact under `-icount shift=0`.
    Minstret,
}

/// How the harness finds the stack's high-water mark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StackProbe {
    /// Paint from the linker's end of `.bss` (picolibc's `__end`) up to the stack pointer.
    Linker,
    /// Pre-touch and paint a fixed window below the stack pointer (hosted programs).
    Window,
}

/// A parsed target description.
#[derive(Clone, Debug)]
pub struct Target {
    /// The target's name (its folder under `targets/`).
    pub name: String,
    /// The description file it was read from.
    pub file: PathBuf,
    /// The `targets/` folder holding it (and `common/harness.c`).
    pub root: PathBuf,
    /// SIMD width in f32 lanes the code generator may assume.
    pub vector_width: u32,
    /// Flash (code and constants).
    pub flash: Memory,
    /// RAM (data, bss, stack).
    pub ram: Memory,
    /// The FPU has a single-precision fused multiply-add (`fma = yes`): exported kernels may
    /// round a multiply-accumulate once (see [`Target::export_options`]).
    pub fused_mulacc: bool,
    /// How exported kernels are shaped for the device: the description's `opt.` keys over the
    /// defaults of [`OPT_KEYS`] ([`OptConfig::small_device`]).
    pub opt: OptConfig,
    /// The instruction counter the harness uses.
    pub counter: Counter,
    /// How the harness measures the stack.
    pub stack_probe: StackProbe,
    /// Real parts' memory budgets, sorted by name (none on the host).
    pub budgets: Vec<Budget>,
    /// The name of the budget used when none is chosen.
    pub default_budget: Option<String>,
    keys: BTreeMap<String, String>,
}

impl Target {
    /// The folder holding the target descriptions: `$PICOGRAD_TARGETS`, else the repository's
    /// `targets/`.
    pub fn root_dir() -> PathBuf {
        match std::env::var_os("PICOGRAD_TARGETS") {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join("targets"),
        }
    }

    /// The names of the targets that have a description, sorted: the folders of
    /// [`Target::root_dir`] holding a `target.txt` whose names are plain words (letters, digits,
    /// `-`, `_`, `.`, not starting with `.`).
    pub fn names() -> Result<Vec<String>> {
        let root = Self::root_dir();
        let entries = fs::read_dir(&root).map_err(|e| io_error(&root, e))?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_error(&root, e))?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let plain = !name.starts_with('.')
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if plain && entry.path().join("target.txt").is_file() {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    /// Reads the description of the target called `name`, one of [`Target::names`]. A name is
    /// looked up in that list, never joined onto a folder as a path: `../x` or `/etc` is no
    /// target (use [`Target::from_dir`] for a description elsewhere). An unknown name is
    /// [`Error::Unsupported`] listing the known ones.
    pub fn by_name(name: &str) -> Result<Target> {
        let root = Self::root_dir();
        let known = Self::names()?;
        if !known.iter().any(|k| k == name) {
            return Err(Error::Unsupported(format!(
                "no target named `{name}` (known targets in {}: {}; a description elsewhere is \
                 given by its folder, `--target-dir DIR`)",
                root.display(),
                known.join(", ")
            )));
        }
        Self::from_file(&root.join(name).join("target.txt"))
    }

    /// Reads the description in `dir/target.txt`: a target outside the known folder, named by
    /// the user as a path. Its commands are run as written, so use only descriptions you trust.
    pub fn from_dir(dir: &Path) -> Result<Target> {
        Self::from_file(&dir.join("target.txt"))
    }

    /// Reads a description file; its folder's parent is taken as the `targets/` root.
    pub fn from_file(file: &Path) -> Result<Target> {
        let text = fs::read_to_string(file).map_err(|e| io_error(file, e))?;
        let root = file
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new("."))
            .to_path_buf();
        Self::parse(&text, file, &root)
    }

    /// Parses a description's text; `file` names it in errors, `root` is the `targets/` folder.
    pub fn parse(text: &str, file: &Path, root: &Path) -> Result<Target> {
        let raw = parse_lines(text, file)?;
        let fmt_err = |detail: String| Error::Format {
            file: file.display().to_string(),
            offset: 0,
            detail,
        };
        for key in REQUIRED_KEYS {
            if !raw.contains_key(*key) {
                return Err(fmt_err(format!("missing key `{key}`")));
            }
        }
        let mut keys = BTreeMap::new();
        for k in raw.keys() {
            keys.insert(k.clone(), expand(&raw, k, 0).map_err(fmt_err)?);
        }
        let num =
            |k: &str| parse_u64(&keys[k]).ok_or_else(|| fmt_err(format!("`{k}` is not a number")));
        let counter = match keys["counter"].as_str() {
            "none" => Counter::None,
            "systick" => Counter::Systick,
            "minstret" => Counter::Minstret,
            other => return Err(fmt_err(format!("unknown counter `{other}`"))),
        };
        let stack_probe = match keys["stack_probe"].as_str() {
            "linker" => StackProbe::Linker,
            "window" => StackProbe::Window,
            other => return Err(fmt_err(format!("unknown stack_probe `{other}`"))),
        };
        let fused_mulacc = match keys.get("fma").map(String::as_str) {
            None | Some("no") => false,
            Some("yes") => true,
            Some(other) => return Err(fmt_err(format!("`fma` is `{other}`, not `yes` or `no`"))),
        };
        let (budgets, default_budget) = budget::parse_budgets(&keys, fmt_err)?;
        let opt = opt::parse_opt_config(&keys, text, file)?;
        Ok(Target {
            name: keys["name"].clone(),
            file: file.to_path_buf(),
            root: root.to_path_buf(),
            vector_width: u32::try_from(num("vector_width")?)
                .map_err(|_| fmt_err("`vector_width` is too large".into()))?,
            flash: Memory {
                origin: num("flash_origin")?,
                size: num("flash_size")?,
            },
            ram: Memory {
                origin: num("ram_origin")?,
                size: num("ram_size")?,
            },
            fused_mulacc,
            opt,
            counter,
            stack_probe,
            budgets,
            default_budget,
            keys,
        })
    }

    /// The export options for this target: the defaults, with its kernels shaped by its own
    /// [`Target::opt`] and fused multiply-adds when its FPU has them.
    pub fn export_options(&self) -> picograd_core::export::ExportOptions {
        picograd_core::export::ExportOptions {
            opt: Some(self.opt),
            fused_mulacc: self.fused_mulacc,
            ..Default::default()
        }
    }

    /// The export options for this target built at `level`: [`Target::export_options`] for
    /// speed (`-O2`); for size (`-Os`) the same with a smaller unroll budget
    /// ([`Target::size_opt`]), so the kernels' code shrinks with the compiler's.
    pub fn export_options_for(&self, level: OptLevel) -> picograd_core::export::ExportOptions {
        let mut opts = self.export_options();
        match level {
            OptLevel::O2 => {}
            OptLevel::Os => opts.opt = Some(self.size_opt()),
        }
        opts
    }

    /// The target's [`OptConfig`] for size mode: at most [`SIZE_MAX_UNROLLED`] unrolled copies
    /// of a kernel body and [`SIZE_MAX_ACCS`] accumulators (never more than the description's own
    /// `opt.` values); the rest as described.
    pub fn size_opt(&self) -> OptConfig {
        OptConfig {
            max_unrolled: self.opt.max_unrolled.min(SIZE_MAX_UNROLLED),
            max_accs: self.opt.max_accs.min(SIZE_MAX_ACCS),
            ..self.opt
        }
    }

    /// The budget called `name`, or the default one when `name` is `None`; `Ok(None)` for a
    /// target without budgets (the host). An unknown name is an error listing the known ones.
    pub fn budget(&self, name: Option<&str>) -> Result<Option<&Budget>> {
        let Some(name) = name.or(self.default_budget.as_deref()) else {
            if self.budgets.is_empty() {
                return Ok(None);
            }
            return Err(Error::Format {
                file: self.file.display().to_string(),
                offset: 0,
                detail: "budgets but no default".into(),
            });
        };
        self.budgets
            .iter()
            .find(|b| b.name == name)
            .map(Some)
            .ok_or_else(|| {
                let known: Vec<&str> = self.budgets.iter().map(|b| b.name.as_str()).collect();
                Error::Unsupported(format!(
                    "target `{}` has no budget named `{name}` (known: {})",
                    self.name,
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ))
            })
    }

    /// A key's expanded value (any key of the file, including ones picograd does not interpret).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.keys.get(key).map(String::as_str)
    }

    /// A key's expanded value split into command-line words.
    pub fn words(&self, key: &str) -> Vec<String> {
        self.get(key)
            .unwrap_or("")
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    }

    /// True when programs for this target run natively (no emulator).
    pub fn is_host(&self) -> bool {
        self.words("run").first().map(String::as_str) == Some("{elf}")
    }

    /// The shared harness source every build compiles.
    pub fn harness_source(&self) -> PathBuf {
        self.root.join("common").join("harness.c")
    }
}

fn io_error(path: &Path, e: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        detail: e.to_string(),
    }
}

/// `key = value` lines into a map; reports the byte offset of a malformed line.
fn parse_lines(text: &str, file: &Path) -> Result<BTreeMap<String, String>> {
    let mut map = BTreeMap::new();
    let mut offset = 0u64;
    for line in text.split_inclusive('\n') {
        let body = line.trim();
        if !body.is_empty() && !body.starts_with('#') {
            let Some((k, v)) = body.split_once('=') else {
                return Err(Error::Format {
                    file: file.display().to_string(),
                    offset,
                    detail: format!("expected `key = value`, found `{body}`"),
                });
            };
            map.insert(k.trim().to_owned(), v.trim().to_owned());
        }
        offset += line.len() as u64;
    }
    Ok(map)
}

/// Replaces `{key}` in `key`'s value by the (expanded) values of other keys; unknown names (such
/// as `{elf}`) are left for later.
fn expand(
    raw: &BTreeMap<String, String>,
    key: &str,
    depth: u32,
) -> std::result::Result<String, String> {
    if depth > 8 {
        return Err(format!("`{key}`: placeholders nest too deep (a cycle?)"));
    }
    let value = &raw[key];
    let mut out = String::with_capacity(value.len());
    let mut rest = value.as_str();
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let Some(len) = rest[start..].find('}') else {
            return Err(format!("`{key}`: unclosed `{{`"));
        };
        let name = &rest[start + 1..start + len];
        if raw.contains_key(name) && name != key {
            out.push_str(&expand(raw, name, depth + 1)?);
        } else {
            out.push_str(&rest[start..=start + len]);
        }
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A decimal or `0x` hexadecimal number.
fn parse_u64(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_description_parses() {
        let names = Target::names().unwrap();
        for want in [
            "cortex-m3",
            "cortex-m4",
            "host",
            "riscv32imac",
            "riscv32imafc",
        ] {
            assert!(
                names.iter().any(|n| n == want),
                "{want} missing from {names:?}"
            );
        }
        for n in &names {
            let t = Target::by_name(n).unwrap();
            assert_eq!(&t.name, n);
            assert!(!t.get("run").unwrap().contains("{cpu}"));
        }
        let m4 = Target::by_name("cortex-m4").unwrap();
        assert_eq!(m4.ram.origin, 0x2000_0000);
        assert_eq!(m4.counter, Counter::Systick);
        assert!(m4.get("cflags").unwrap().contains("-mfpu=fpv4-sp-d16"));
        assert!(Target::by_name("host").unwrap().is_host());
        // Only the targets with a hardware single-precision FMA fuse; soft-float ones (and the
        // host, whose plain `cc` build has no `-mfma`) would call a software `fmaf`.
        for (n, fused) in [
            ("cortex-m4", true),
            ("riscv32imafc", true),
            ("cortex-m3", false),
            ("riscv32imac", false),
            ("host", false),
        ] {
            let t = Target::by_name(n).unwrap();
            assert_eq!(t.fused_mulacc, fused, "{n}");
            assert_eq!(t.export_options().fused_mulacc, fused, "{n}");
        }
    }

    #[test]
    fn budgets_name_real_parts_and_say_what_does_not_fit() {
        let m4 = Target::by_name("cortex-m4").unwrap();
        let b = m4.budget(None).unwrap().unwrap();
        assert_eq!(
            (b.name.as_str(), b.flash, b.ram),
            ("nrf52840", 1 << 20, 256 << 10)
        );
        let emulated = m4.budget(Some("mps2-an386")).unwrap().unwrap();
        assert_eq!((emulated.flash, emulated.ram), (m4.flash.size, m4.ram.size));
        assert!(Target::by_name("host")
            .unwrap()
            .budget(None)
            .unwrap()
            .is_none());
        for n in ["cortex-m3", "riscv32imac", "riscv32imafc"] {
            assert!(
                Target::by_name(n).unwrap().budget(None).unwrap().is_some(),
                "{n}"
            );
        }
        let e = m4.budget(Some("esp32")).unwrap_err().to_string();
        assert!(e.contains("esp32") && e.contains("stm32f411re"), "{e}");
        let fits = Need {
            flash: 1 << 20,
            ram: 1000,
        };
        assert!(b.overflows(fits).is_empty() && b.check(fits, "x").is_ok());
        let over = b.overflows(Need {
            flash: (1 << 20) + 5,
            ram: 300_000,
        });
        assert_eq!(over.len(), 2);
        assert_eq!(
            (over[0].region, over[0].needed - over[0].available),
            ("flash", 5)
        );
        assert_eq!(
            (over[1].region, over[1].needed - over[1].available),
            ("RAM", 300_000 - 262_144)
        );
        let e = b
            .check(
                Need {
                    flash: 0,
                    ram: 300_000,
                },
                "the arena",
            )
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("nrf52840")
                && e.contains("RAM needs 300000 B")
                && !e.contains("flash needs"),
            "{e}"
        );
        let p = Path::new("t.txt");
        let text = fs::read_to_string(&m4.file).unwrap() + "budget.bad = 12\n";
        let e = Target::parse(&text, p, p).unwrap_err();
        assert!(
            e.to_string()
                .contains("budget.NAME = FLASH RAM DESCRIPTION"),
            "{e}"
        );
    }

    #[test]
    fn malformed_descriptions_are_errors() {
        let p = Path::new("t.txt");
        let e = Target::parse("name = x\nnot a pair\n", p, p).unwrap_err();
        assert!(matches!(e, Error::Format { offset: 9, .. }), "{e}");
        let e = Target::parse("name = x\n", p, p).unwrap_err();
        assert!(e.to_string().contains("missing key"), "{e}");
        assert!(Target::by_name("no-such-target").is_err());
        // A name is looked up among the known targets, never resolved as a path.
        for bad in ["../targets/host", "/etc", "host/../host", "", ".", ".."] {
            let e = Target::by_name(bad).unwrap_err();
            assert!(
                matches!(e, Error::Unsupported(_)) && e.to_string().contains("known targets"),
                "{bad:?}: {e}"
            );
        }
        let host = Target::from_dir(&Target::root_dir().join("host")).unwrap();
        assert_eq!(host.name, "host");
        let m4 = Target::by_name("cortex-m4").unwrap();
        let text = fs::read_to_string(&m4.file).unwrap() + "fma = maybe\n";
        let e = Target::parse(&text, p, p).unwrap_err();
        assert!(e.to_string().contains("`fma` is `maybe`"), "{e}");
    }
}
