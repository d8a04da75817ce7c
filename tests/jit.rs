//! The JIT: replays give the right values, reuse the captured programs, and do no scheduling,
//! lowering or compiling; in-place assigns (what optimizers do) replay too. One test function
//! only, so no other test in this binary moves the global counters while it measures.

use std::sync::Mutex;

use picograd::jit::Jit;
use picograd::ops::{AluOp, ReduceOp};
use picograd::realize::counters;
use picograd::Tensor;

fn check_on(device: std::sync::Arc<dyn picograd::device::Device>) {
    let w = Tensor::try_from_slice_on(&[0.5f32, -1.0, 2.0], &[3], &device).unwrap();
    // y = sum(x * w) + x: a reduce and an elementwise kernel reading a captured weight.
    let f = Jit::new(|x: &[Tensor]| {
        let p = x[0]
            .try_alu(AluOp::Mul, &[&w])?
            .try_reduce(ReduceOp::Sum, None, false)?;
        Ok(vec![x[0].try_alu(AluOp::Add, &[&p])?])
    });
    let mut before = None;
    for i in 0..6 {
        let xs = [i as f32, 1.0 - i as f32, 0.25 * i as f32];
        let x = Tensor::try_from_slice_on(&xs, &[3], &device).unwrap();
        x.realize().unwrap();
        if i == 1 {
            before = Some(counters());
        }
        let y = f.call(&[x]).unwrap();
        let dot = xs[0] * 0.5 - xs[1] + xs[2] * 2.0;
        assert_eq!(
            y[0].to_vec::<f32>().unwrap(),
            xs.iter().map(|v| v + dot).collect::<Vec<_>>(),
            "call {i}"
        );
    }
    let after = counters();
    let before = before.unwrap();
    assert_eq!(f.replays(), 5);
    assert_eq!(after.scheduled, before.scheduled, "replays scheduled work");
    assert_eq!(after.lowered, before.lowered, "replays lowered kernels");
    assert_eq!(after.compiled, before.compiled, "replays compiled kernels");
    assert_eq!(
        f.capture().unwrap().weight_slots().len(),
        1,
        "w is the one weight"
    );

    // In-place updates replay: w <- w - 0.5 * g, applied three times.
    let param = Mutex::new(Tensor::try_from_slice_on(&[1.0f32, 2.0], &[2], &device).unwrap());
    let step = Jit::new(|g: &[Tensor]| {
        let p = param.lock().unwrap();
        let upd = p.try_alu(
            AluOp::Sub,
            &[&g[0].try_alu(AluOp::Mul, &[&g[0].const_like(0.5)])?],
        )?;
        p.try_assign(&upd)?;
        Ok(vec![p.clone()])
    });
    let mut want = [1.0f32, 2.0];
    for k in 0..3 {
        let g = [k as f32, 1.0];
        step.call(&[Tensor::try_from_slice_on(&g, &[2], &device).unwrap()])
            .unwrap();
        want = [want[0] - 0.5 * g[0], want[1] - 0.5 * g[1]];
        assert_eq!(
            param.lock().unwrap().to_vec::<f32>().unwrap(),
            want.to_vec(),
            "step {k}"
        );
    }
    assert_eq!(step.replays(), 2);

    // Recompiling for the device the buffers live on replays the same values; for another
    // device it is refused (its programs could not take these buffers).
    let cap = f.capture().unwrap();
    let x = Tensor::try_from_slice_on(&[1.0f32, 2.0, 3.0], &[3], &device).unwrap();
    x.realize().unwrap();
    let again = cap.recompiled(&device).unwrap().replay(&[&x]).unwrap();
    // x + sum(x * w) = x + (0.5 - 2 + 6).
    assert_eq!(again[0].to_vec::<f32>().unwrap(), vec![5.5f32, 6.5, 7.5]);
    let other = if device.name() == "CLANG" {
        picograd::context::interp()
    } else {
        picograd::runtime::clang().expect("no C compiler")
    };
    let e = cap.recompiled(&other).err().expect("another device");
    assert!(e.to_string().contains("live on"), "{e}");
}

#[test]
fn jit_replays_without_rescheduling_on_both_devices() {
    picograd::runtime::install();
    check_on(picograd::context::interp());
    check_on(picograd::runtime::clang().expect("no C compiler: the Clang JIT test cannot run"));
}
