//! The one hook through which a runtime configures the core: debug level, a log sink, a clock,
//! and the default device. The core reads no environment and keeps no thread-locals (no_std has
//! neither); without a runtime it logs nothing and defaults to the interpreter.
//!
//! A runtime linked into the program may also register an installer ([`set_auto_install`]) that
//! runs once, on the first read of the hooks, when nobody called [`set_context`] before: the std
//! runtime does, so forgetting `picograd::init()` does not silently run on the interpreter.
//!
//! Invariant: set at most once per process before use is the expected pattern, but setting again
//! simply replaces the hooks (tests do this).

use alloc::sync::Arc;
use core::sync::atomic::{AtomicBool, Ordering};

use spin::Mutex;

use crate::device::Device;

/// The runtime's hooks.
#[derive(Clone)]
pub struct Context {
    /// `PICOGRAD_DEBUG`: 1 kernels and times, 2 schedule, 3 UOps, 4 C source, 5 rewrites.
    pub debug: u8,
    /// Where debug lines go.
    pub log: fn(&str),
    /// A monotonic clock in nanoseconds (for kernel times), if the platform has one.
    pub clock_ns: Option<fn() -> u64>,
    /// Makes the default device.
    pub default_device: Option<fn() -> Arc<dyn Device>>,
    /// Are gradients recorded right now? (The std runtime's `no_grad` scope; always yes without
    /// it.)
    pub grad_enabled: Option<fn() -> bool>,
}

fn no_log(_: &str) {}

static CONTEXT: Mutex<Context> = Mutex::new(Context {
    debug: 0,
    log: no_log,
    clock_ns: None,
    default_device: None,
    grad_enabled: None,
});
static DEFAULT_DEVICE: Mutex<Option<Arc<dyn Device>>> = Mutex::new(None);
/// Has [`set_context`] been called?
static SET: AtomicBool = AtomicBool::new(false);
/// The installer a runtime registered, run at most once.
static AUTO_INSTALL: spin::Once<fn()> = spin::Once::new();
static AUTO_RAN: spin::Once<()> = spin::Once::new();

/// Installs the runtime's hooks (and forgets any default device made before).
pub fn set_context(ctx: Context) {
    SET.store(true, Ordering::Release);
    *CONTEXT.lock() = ctx;
    *DEFAULT_DEVICE.lock() = None;
}

/// Registers `install`, which must call [`set_context`], to run once on the first read of the
/// hooks if [`set_context`] has not been called by then. The first registration wins.
pub fn set_auto_install(install: fn()) {
    AUTO_INSTALL.call_once(|| install);
}

/// Runs the registered installer when the hooks are still unset.
fn ensure_installed() {
    if SET.load(Ordering::Acquire) {
        return;
    }
    if let Some(install) = AUTO_INSTALL.get() {
        AUTO_RAN.call_once(install);
    }
}

/// The current hooks.
pub fn context() -> Context {
    ensure_installed();
    CONTEXT.lock().clone()
}

/// The debug level.
pub fn debug() -> u8 {
    ensure_installed();
    CONTEXT.lock().debug
}

/// Are gradients being recorded?
pub fn grad_enabled() -> bool {
    ensure_installed();
    CONTEXT.lock().grad_enabled.is_none_or(|f| f())
}

/// Sends a line to the log sink when the debug level is at least `level`.
pub fn log(level: u8, line: &str) {
    let ctx = context();
    if ctx.debug >= level {
        (ctx.log)(line);
    }
}

/// Makes `device` the default for tensors created from now on (overrides the runtime's choice).
pub fn set_default_device(device: Arc<dyn Device>) {
    ensure_installed();
    *DEFAULT_DEVICE.lock() = Some(device);
}

/// The default device: the runtime's choice, else the interpreter. Made once and shared.
pub fn default_device() -> Arc<dyn Device> {
    ensure_installed();
    let mut slot = DEFAULT_DEVICE.lock();
    if let Some(d) = slot.as_ref() {
        return d.clone();
    }
    let make = CONTEXT.lock().default_device;
    let dev: Arc<dyn Device> = match make {
        Some(f) => f(),
        None => interp(),
    };
    *slot = Some(dev.clone());
    dev
}

static INTERP: spin::Once<Arc<dyn Device>> = spin::Once::new();

/// The process's shared interpreter device.
pub fn interp() -> Arc<dyn Device> {
    INTERP
        .call_once(|| Arc::new(crate::interp::Interp::new()))
        .clone()
}
