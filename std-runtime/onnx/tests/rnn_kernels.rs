//! An unrolled RNN needs one kernel per distinct step shape, not one per step: a 2-layer LSTM
//! (the onnx helper API's `lstm2_forward_<steps>` case) at 12 and at 24 steps schedules twice
//! as many kernels at 24 steps but lowers the same number of distinct ones, and its outputs
//! equal onnxruntime's — through the uncached graph and through `Model::run`'s capture and
//! replay, which pass each step's offsets again.

mod pymodels;

use std::collections::HashSet;

use picograd_core::realize::describe;
use picograd_core::schedule::schedule;
use picograd_core::Tensor;
use picograd_onnx::Model;

/// (kernels scheduled, distinct kernels lowered) for `m` on `inputs`, and the outputs.
fn kernels(m: &Model, inputs: &[Tensor]) -> (usize, usize, Vec<Tensor>) {
    let outs = m.graph(inputs).unwrap();
    let lazies: Vec<_> = outs.iter().map(|t| t.lazy().contiguous()).collect();
    let items = schedule(&lazies).unwrap();
    let text = describe(&items).unwrap();
    let distinct: HashSet<&String> = text.iter().collect();
    (items.len(), distinct.len(), outs)
}

#[test]
fn lstm_kernels_do_not_grow_with_steps() {
    let mut counts = Vec::new();
    for steps in [12, 24] {
        let case = format!("lstm2_forward_{steps}");
        let Some(dir) = pymodels::make(&case) else {
            return;
        };
        let m = Model::load(&dir.join("model.onnx")).unwrap();
        let inputs = pymodels::inputs(&dir);
        let want = pymodels::expected(&dir);
        let (scheduled, distinct, outs) = kernels(&m, &inputs);
        eprintln!("{case}: {scheduled} kernels scheduled, {distinct} distinct");
        counts.push((scheduled, distinct));
        let got = outs[0].to_f64_vec().unwrap();
        pymodels::assert_close(&format!("{case} graph"), &got, &want[0], 1e-4);
        // Capture, then replay (the replay passes the recorded offsets).
        for call in ["capture", "replay"] {
            let y = m.run(&inputs).unwrap();
            let got = y[0].to_f64_vec().unwrap();
            pymodels::assert_close(&format!("{case} {call}"), &got, &want[0], 1e-4);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    let [(s12, d12), (s24, d24)] = counts[..] else {
        panic!("two cases ran: {counts:?}");
    };
    assert!(
        s24 > s12 + 12,
        "the 24-step graph must schedule more kernels"
    );
    assert_eq!(d12, d24, "distinct kernels grew with the steps");
}
