//! Fuzz target: the safetensors reader (`picograd_runtime::safetensors::from_bytes`) on arbitrary
//! bytes; tensors it accepts are realized on the interpreter. Errors are fine; a panic or abort
//! is a finding.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use picograd_fuzz::{init, Capped};

#[global_allocator]
static ALLOC: Capped = Capped;

fuzz_target!(|data: &[u8]| {
    init();
    if let Ok(named) =
        picograd_runtime::safetensors::from_bytes(data, Path::new("fuzz.safetensors"))
    {
        for (_, t) in named {
            let _ = t.to_bytes();
        }
    }
});
