//! Fuzz target: an ONNX model from arbitrary bytes — decoded and validated (`Model::from_proto`,
//! as `Model::from_bytes` does) for every input, then, when its literals and declared inputs are
//! small ([`picograd_fuzz::small_enough`]), run on the interpreter with zero inputs and every
//! output realized. Errors are fine; a panic, abort or hang is a finding.
#![no_main]

use libfuzzer_sys::fuzz_target;
use picograd_fuzz::{init, small_enough, zero_inputs, Capped};
use picograd_onnx::proto::ModelProto;
use picograd_onnx::Model;
use prost::Message;

#[global_allocator]
static ALLOC: Capped = Capped;

fuzz_target!(|data: &[u8]| {
    init();
    let Ok(proto) = ModelProto::decode(data) else {
        return;
    };
    let Ok(model) = Model::from_proto(proto.clone(), "fuzz.onnx") else {
        return;
    };
    let _ = model.unsupported();
    if !small_enough(&proto, model.inputs()) {
        return;
    }
    let Some(inputs) = zero_inputs(model.inputs()) else {
        return;
    };
    if let Ok(outputs) = model.run(&inputs) {
        for t in outputs {
            let _ = t.to_bytes();
        }
    }
});
