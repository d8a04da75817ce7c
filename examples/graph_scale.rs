//! Graph scale: how long building, scheduling and running graphs of 1,000, 10,000 and 100,000
//! nodes takes, on three shapes of graph — a chain of adds, a chain of `abs` (each reads its
//! input twice, so the unfolded tree would double at every step), and chained steps that also
//! reduce (`h -> h/2 + sum(h)/8`, what a JIT of a long loop records). Prints the times and the
//! scheduler's work (nodes visited); the tests in `core/tests/graph_scale.rs` bound that work.
//!
//! Run: `cargo run --release --example graph_scale` (the default device, Clang when a C compiler
//! is found; `PICOGRAD_DEVICE=INTERP` for the interpreter).

use std::time::Instant;

use picograd::schedule::schedule_with_visits;
use picograd::Tensor;

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// Builds `make(x)` (about `nodes` graph nodes), then schedules it and runs it, printing each
/// time and the scheduler's visits.
fn measure(name: &str, nodes: usize, make: impl Fn(&Tensor) -> Tensor) -> picograd::Result<()> {
    let x = Tensor::from_slice(&[1.0f32, -2.0, 3.0, 0.25], &[4]);
    x.realize()?;
    let t = Instant::now();
    let y = make(&x);
    let build = ms(t);
    let t = Instant::now();
    let (items, visits) = schedule_with_visits(&[y.lazy().contiguous()])?;
    let sched = ms(t);
    let kernels = items.len();
    drop(items);
    let t = Instant::now();
    let v = y.to_vec::<f32>()?;
    let run = ms(t);
    let t = Instant::now();
    drop(y);
    let dropped = ms(t);
    println!(
        "{name:<10} {nodes:>7} nodes: build {build:8.1} ms  schedule {sched:8.1} ms \
         ({visits:>7} visits, {kernels:>4} kernels)  run {run:8.1} ms  drop {dropped:6.1} ms  \
         y[0] = {}",
        v[0]
    );
    Ok(())
}

fn main() -> picograd::Result<()> {
    picograd::init();
    // The deep graphs are built, scheduled and dropped on a small stack: nothing recurses as
    // deep as the graph.
    let worker = std::thread::Builder::new().stack_size(256 * 1024);
    let handle = worker
        .spawn(|| -> picograd::Result<()> {
            for nodes in [1_000usize, 10_000, 100_000] {
                // One ADD node per add (plus the shared constant).
                measure("add chain", nodes, |x| {
                    (0..nodes).fold(x.clone(), |h, _| h.add(1.0))
                })?;
                // Three ops per step: SUB, NEG, MAX.
                measure("abs chain", nodes, |x| {
                    (0..nodes / 3).fold(x.clone(), |h, _| h.sub(0.75).abs())
                })?;
                // About seven nodes per step (mul, sum, mul, add, their views and constants).
                measure("step chain", nodes, |x| {
                    (0..nodes / 7).fold(x.clone(), |h, _| {
                        h.mul(0.5).add(h.sum(&[0], true).mul(0.125))
                    })
                })?;
            }
            Ok(())
        })
        .map_err(|e| picograd::Error::Device(format!("spawn: {e}")))?;
    handle
        .join()
        .map_err(|_| picograd::Error::Device("the worker panicked".into()))?
}
