//! Installs the std runtime into the core's context hook: `PICOGRAD_DEBUG`, a stderr log, a
//! monotonic clock, and the default device (`PICOGRAD_DEVICE`, else Clang when a C compiler is
//! found, else the interpreter with a one-line notice).

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use picograd_core::context::interp;
use picograd_core::context::{set_context, Context};
use picograd_core::device::Device;

use crate::clang::Clang;

static START: OnceLock<Instant> = OnceLock::new();
static CLANG: OnceLock<Option<Arc<Clang>>> = OnceLock::new();
static INSTALLED: OnceLock<()> = OnceLock::new();

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

fn make_default() -> Arc<dyn Device> {
    let want = std::env::var("PICOGRAD_DEVICE")
        .unwrap_or_default()
        .to_ascii_uppercase();
    match want.as_str() {
        "INTERP" => interp(),
        _ => match clang() {
            Some(c) => c,
            None => interp(),
        },
    }
}

/// Installs the runtime's hooks into the core (idempotent).
pub fn install() {
    INSTALLED.get_or_init(|| {
        let debug = std::env::var("PICOGRAD_DEBUG")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
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
