//! Independent jobs of one test run side by side: each job here is a build and a run of C
//! programs (compilers, QEMU), separate processes that leave the test's own thread waiting, so a
//! test with many of them runs them on a few threads instead of one after another.
//!
//! Invariant: the results come back in the jobs' order, and a job's panic is the test's panic
//! (its message unchanged), as if the jobs had run in a loop.

#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// At most this many jobs at once: enough to keep two cores busy while a job waits on a process,
/// few enough not to crowd the other tests running beside this one.
const WORKERS: usize = 4;

/// `jobs.iter().map(f).collect()`, the jobs spread over up to [`WORKERS`] threads.
pub fn par_map<T: Sync, R: Send>(jobs: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    let worker = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(job) = jobs.get(i) else { break };
        let r = f(job);
        results.lock().unwrap()[i] = Some(r);
    };
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..WORKERS.min(jobs.len()))
            .map(|_| s.spawn(worker))
            .collect();
        for h in handles {
            if let Err(panic) = h.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
    results
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}
