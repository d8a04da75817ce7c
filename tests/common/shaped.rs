//! A device that lowers its kernels for a given [`OptConfig`] (a target's: dual MAC, small-core
//! tiles) and runs them on another device (the interpreter or the host's Clang), so a test can
//! check a target's kernels on the host.
//!
//! Invariant: everything but the optimizer's configuration is the inner device's.

#![allow(dead_code)]

use std::sync::Arc;

use picograd::codegen::opt::OptConfig;
use picograd::codegen::uops::LinearKernel;
use picograd::device::{Allocator, Device, Program};
use picograd::Result;

/// A device that lowers its kernels for `cfg` and runs them on `inner`.
pub struct Shaped {
    pub inner: Arc<dyn Device>,
    pub cfg: OptConfig,
}

impl Device for Shaped {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn allocator(&self) -> &dyn Allocator {
        self.inner.allocator()
    }
    fn compile(&self, k: &LinearKernel) -> Result<Arc<dyn Program>> {
        self.inner.compile(k)
    }
    fn opt_config(&self) -> Option<OptConfig> {
        Some(self.cfg)
    }
}
