//! Installs the std runtime into the core's context hook: `PICOGRAD_DEBUG`, a stderr log, a
//! monotonic clock, and the default device (`PICOGRAD_DEVICE`, else Clang when a C compiler is
//! found, else the interpreter with a one-line notice), or the one chosen with
//! [`set_default_device`].
//!
//! A program that never calls [`install`] still gets the runtime: loading this crate registers
//! [`install`] with the core ([`picograd_core::context::set_auto_install`], from a
//! program-start constructor that only stores a function pointer), and the core runs it on its
//! first read of the hooks — the first tensor made. On platforms without such constructors
//! (other than Linux, the BSDs, macOS, Windows) call [`install`] yourself.
//!
//! Invariant: the environment is read once per process; an invalid value is warned about once,
//! on stderr, naming the variable, the value and the valid values.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use picograd_core::context::interp;
use picograd_core::context::{set_context, Context};
use picograd_core::device::Device;
use picograd_core::{Error, Result};

use crate::clang::Clang;

static START: OnceLock<Instant> = OnceLock::new();
static CLANG: OnceLock<Option<Arc<Clang>>> = OnceLock::new();
static INSTALLED: OnceLock<()> = OnceLock::new();
static ENV_DEVICE: OnceLock<Option<DeviceKind>> = OnceLock::new();

/// Registers [`install`] with the core when the program starts (see the module doc): a plain
/// function pointer stored in an atomic slot, nothing else runs before `main`.
#[used]
#[cfg_attr(
    any(
        target_os = "linux",
        target_os = "android",
        target_os = "freebsd",
        target_os = "netbsd",
        target_os = "openbsd"
    ),
    link_section = ".init_array"
)]
#[cfg_attr(target_vendor = "apple", link_section = "__DATA,__mod_init_func")]
#[cfg_attr(windows, link_section = ".CRT$XCU")]
static REGISTER_AUTO_INSTALL: extern "C" fn() = register_auto_install;

extern "C" fn register_auto_install() {
    picograd_core::context::set_auto_install(install);
}

thread_local! {
    static GRAD_ENABLED: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

fn grad_enabled() -> bool {
    GRAD_ENABLED.with(|g| g.get())
}

/// Runs `f` without recording gradients on this thread (inference, optimizer updates).
/// Nested scopes restore the outer setting, also when `f` panics.
pub fn no_grad<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            GRAD_ENABLED.with(|g| g.set(self.0));
        }
    }
    let _restore = Restore(GRAD_ENABLED.with(|g| g.replace(false)));
    f()
}

fn clock_ns() -> u64 {
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

fn log_stderr(line: &str) {
    eprintln!("{line}");
}

/// The process's Clang device, or `None` (with the reason printed once) when no C compiler works.
pub fn clang() -> Option<Arc<Clang>> {
    CLANG
        .get_or_init(|| match Clang::new() {
            Ok(c) => Some(Arc::new(c)),
            Err(e) => {
                eprintln!("picograd: no C compiler ({e}); using the interpreter");
                None
            }
        })
        .clone()
}

/// The devices the std runtime can make the default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    /// Kernels compiled to C with clang (or cc) and run in-process.
    Clang,
    /// Kernels run by the core's interpreter (slow, needs nothing).
    Interp,
}

impl DeviceKind {
    /// The device itself; `Clang` errors when no C compiler works.
    pub fn device(self) -> Result<Arc<dyn Device>> {
        match self {
            DeviceKind::Interp => Ok(interp()),
            DeviceKind::Clang => match clang() {
                Some(c) => Ok(c),
                None => Err(Error::Device(
                    "the Clang device needs a working C compiler (clang or cc; PICOGRAD_CC)".into(),
                )),
            },
        }
    }
}

/// Makes `kind` the default device for tensors created from now on, beside (and over)
/// `PICOGRAD_DEVICE`. Installs the runtime first if it is not yet.
pub fn set_default_device(kind: DeviceKind) -> Result<()> {
    install();
    picograd_core::context::set_default_device(kind.device()?);
    Ok(())
}

/// Reads a `PICOGRAD_DEVICE` value: unset or empty is `None` (the automatic choice); `CLANG`
/// or `INTERP` in any case; anything else is an error naming the value and the valid ones.
pub fn parse_device(value: Option<&str>) -> std::result::Result<Option<DeviceKind>, String> {
    match value.map(|v| v.trim().to_ascii_uppercase()).as_deref() {
        None | Some("") => Ok(None),
        Some("CLANG") => Ok(Some(DeviceKind::Clang)),
        Some("INTERP") => Ok(Some(DeviceKind::Interp)),
        Some(_) => Err(format!(
            "PICOGRAD_DEVICE={:?} is not a device; valid values: CLANG, INTERP (or unset: Clang \
             when a C compiler works); using the automatic choice",
            value.unwrap_or_default()
        )),
    }
}

/// Reads a `PICOGRAD_DEBUG` value: unset or empty is 0; a whole number 0-255 is the level (5 and
/// up show everything); anything else is an error naming the value and the valid ones.
pub fn parse_debug(value: Option<&str>) -> std::result::Result<u8, String> {
    match value.map(str::trim) {
        None | Some("") => Ok(0),
        Some(v) => v.parse::<u8>().map_err(|_| {
            format!(
                "PICOGRAD_DEBUG={v:?} is not a debug level; valid values: 0 (quiet), 1 (kernels \
                 and times, and the CLI's stages), 2 (schedule), 3 (UOps), 4 (C source), 5 \
                 (scheduler decisions); using 0"
            )
        }),
    }
}

/// `f(value of name)`, or its fallback with a warning on stderr when the value is invalid.
fn read_env<T>(
    name: &str,
    parse: fn(Option<&str>) -> std::result::Result<T, String>,
    fallback: T,
) -> T {
    let value = std::env::var(name).ok();
    parse(value.as_deref()).unwrap_or_else(|e| {
        eprintln!("picograd: warning: {e}");
        fallback
    })
}

fn make_default() -> Arc<dyn Device> {
    let chosen = ENV_DEVICE.get().copied().flatten();
    match chosen {
        Some(DeviceKind::Interp) => interp(),
        Some(DeviceKind::Clang) | None => match clang() {
            Some(c) => c,
            None => interp(),
        },
    }
}

/// Installs the runtime's hooks into the core (idempotent).
pub fn install() {
    INSTALLED.get_or_init(|| {
        let debug = read_env("PICOGRAD_DEBUG", parse_debug, 0);
        ENV_DEVICE.get_or_init(|| read_env("PICOGRAD_DEVICE", parse_device, None));
        START.get_or_init(Instant::now);
        set_context(Context {
            debug,
            log: log_stderr,
            clock_ns: Some(clock_ns),
            default_device: Some(make_default),
            grad_enabled: Some(grad_enabled),
        });
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_values() {
        assert_eq!(parse_device(None), Ok(None));
        assert_eq!(parse_device(Some("clang")), Ok(Some(DeviceKind::Clang)));
        assert_eq!(parse_device(Some("INTERP")), Ok(Some(DeviceKind::Interp)));
        let e = parse_device(Some("GPU")).unwrap_err();
        assert!(
            e.contains("PICOGRAD_DEVICE=\"GPU\"") && e.contains("CLANG, INTERP"),
            "{e}"
        );
        assert_eq!(parse_debug(None), Ok(0));
        assert_eq!(parse_debug(Some("3")), Ok(3));
        let e = parse_debug(Some("verbose")).unwrap_err();
        assert!(
            e.contains("PICOGRAD_DEBUG=\"verbose\"") && e.contains("0 (quiet)"),
            "{e}"
        );
    }
}
