//! A small pool of worker threads for kernels split across cores: the calling thread runs part
//! 0 itself, workers run the others, and the call returns when every part has finished.
//!
//! Invariant: [`Pool::run`] does not return before every part has run to completion, so a part
//! may use memory the caller keeps alive for the duration of the call. Workers are started on
//! first need and live for the rest of the process.

use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

type Job = Box<dyn FnOnce() + Send>;

/// Worker threads, each fed through its own channel.
pub struct Pool {
    workers: Mutex<Vec<Sender<Job>>>,
}

/// Counts parts still running; the caller waits for zero.
struct Pending {
    left: Mutex<usize>,
    zero: Condvar,
}

impl Pending {
    fn finish_one(&self) {
        let mut left = self.left.lock().unwrap_or_else(|e| e.into_inner());
        *left -= 1;
        if *left == 0 {
            self.zero.notify_all();
        }
    }

    fn wait(&self) {
        let mut left = self.left.lock().unwrap_or_else(|e| e.into_inner());
        while *left > 0 {
            left = self.zero.wait(left).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Calls `finish_one` when dropped, so a part that panics still counts as finished.
struct FinishGuard(Arc<Pending>);

impl Drop for FinishGuard {
    fn drop(&mut self) {
        self.0.finish_one();
    }
}

impl Pool {
    /// The process's pool.
    pub fn global() -> &'static Pool {
        static POOL: OnceLock<Pool> = OnceLock::new();
        POOL.get_or_init(|| Pool {
            workers: Mutex::new(Vec::new()),
        })
    }

    /// Runs `part(0)`, ..., `part(n - 1)`: part 0 on this thread, the others on workers.
    pub fn run(&self, n: usize, part: Arc<dyn Fn(usize) + Send + Sync>) {
        if n <= 1 {
            part(0);
            return;
        }
        let pending = Arc::new(Pending {
            left: Mutex::new(n - 1),
            zero: Condvar::new(),
        });
        {
            let mut workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
            while workers.len() < n - 1 {
                workers.push(spawn_worker());
            }
            for (i, w) in workers.iter().take(n - 1).enumerate() {
                let (part, guard) = (part.clone(), FinishGuard(pending.clone()));
                let job: Job = Box::new(move || {
                    let _guard = guard;
                    part(i + 1);
                });
                if let Err(e) = w.send(job) {
                    // The worker is gone: run its part here (the guard counts it).
                    (e.0)();
                }
            }
        }
        part(0);
        pending.wait();
    }
}

fn spawn_worker() -> Sender<Job> {
    let (tx, rx) = channel::<Job>();
    let spawned = std::thread::Builder::new()
        .name(String::from("picograd-worker"))
        .spawn(move || {
            while let Ok(job) = rx.recv() {
                // A panicking part must not take the worker down with it.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
            }
        });
    if spawned.is_err() {
        // No thread: the receiver is dropped, so sends fail and parts run on the caller.
    }
    tx
}
