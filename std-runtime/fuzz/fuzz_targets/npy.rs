//! Fuzz target: the `.npy` reader (`picograd_onnx::npy::parse`) on arbitrary bytes; a tensor it
//! accepts is realized on the interpreter. Errors are fine; a panic or abort is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use picograd_fuzz::{init, Capped};

#[global_allocator]
static ALLOC: Capped = Capped;

fuzz_target!(|data: &[u8]| {
    init();
    if let Ok(t) = picograd_onnx::npy::parse(data, "fuzz.npy") {
        let _ = t.to_bytes();
    }
});
