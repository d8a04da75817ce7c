//! Fuzz target: the state-dict blob reader (`picograd_core::nn::state::load_blob`) on arbitrary
//! bytes; tensors it accepts are realized on the interpreter. Errors are fine; a panic or abort
//! is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use picograd_fuzz::{init, Capped};

#[global_allocator]
static ALLOC: Capped = Capped;

fuzz_target!(|data: &[u8]| {
    init();
    if let Ok(named) = picograd_core::nn::state::load_blob(data) {
        for (_, t) in named {
            let _ = t.to_bytes();
        }
    }
});
