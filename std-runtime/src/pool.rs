//! A small pool of worker threads for kernels split across cores: the calling thread runs part
//! 0 itself, workers run the others, and the call returns when every part has finished.
//!
//! Invariant: [`Pool::run`] does not return before every part has run to completion, so a part
//! may use memory the caller keeps alive for the duration of the call. Workers are started on
//! first need and live for the rest of the process.
//!
//! Waking a sleeping thread costs tens of microseconds on a virtual machine — as long as a
//! batch-128 MLP layer's share of work — so a worker polls for its next part for a short while
//! after finishing one, and the caller polls for the workers' completion before sleeping: a JIT
//! replaying split kernels back to back then hands parts over without a wake-up.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender, TryRecvError};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

type Job = Box<dyn FnOnce() + Send>;

/// Worker threads, each fed through its own channel.
pub struct Pool {
    workers: Mutex<Vec<Sender<Job>>>,
}

/// How long a thread polls before it sleeps: a worker for its next part, the caller for the
/// workers to finish.
const SPIN: Duration = Duration::from_micros(200);

/// Polls until `poll` gives a value or [`SPIN`] has passed.
fn spin<T>(mut poll: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = poll() {
            return Some(v);
        }
        if start.elapsed() > SPIN {
            return None;
        }
        for _ in 0..64 {
            std::hint::spin_loop();
        }
    }
}

/// Counts parts still running; the caller waits for zero.
struct Pending {
    left: AtomicUsize,
    lock: Mutex<()>,
    zero: Condvar,
}

impl Pending {
    fn finish_one(&self) {
        if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Under the lock, so a caller between its check and its sleep cannot miss it.
            let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.zero.notify_all();
        }
    }

    fn wait(&self) {
        if spin(|| (self.left.load(Ordering::Acquire) == 0).then_some(())).is_some() {
            return;
        }
        let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        while self.left.load(Ordering::Acquire) > 0 {
            g = self.zero.wait(g).unwrap_or_else(|e| e.into_inner());
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
            left: AtomicUsize::new(n - 1),
            lock: Mutex::new(()),
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
        .spawn(move || loop {
            // Poll a while (a JIT's next kernel is usually microseconds away), then sleep.
            let polled = spin(|| match rx.try_recv() {
                Ok(job) => Some(Some(job)),
                Err(TryRecvError::Empty) => None,
                Err(TryRecvError::Disconnected) => Some(None),
            });
            let job = match polled {
                Some(Some(job)) => job,
                Some(None) => return,
                None => match rx.recv() {
                    Ok(job) => job,
                    Err(_) => return,
                },
            };
            // A panicking part must not take the worker down with it.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        });
    if spawned.is_err() {
        // No thread: the receiver is dropped, so sends fail and parts run on the caller.
    }
    tx
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every part runs exactly once before `run` returns: back to back (workers still polling)
    /// and after a pause longer than the polling (workers asleep), with a panicking part too.
    #[test]
    fn every_part_runs_once_before_run_returns() {
        let pool = Pool {
            workers: Mutex::new(Vec::new()),
        };
        for round in 0..200usize {
            let n = 1 + round % 4;
            let hits: Arc<Vec<AtomicUsize>> =
                Arc::new((0..n).map(|_| AtomicUsize::new(0)).collect());
            let h = hits.clone();
            pool.run(
                n,
                Arc::new(move |i| {
                    h[i].fetch_add(1, Ordering::SeqCst);
                    if i == 1 && round % 7 == 0 {
                        panic!("a failing part");
                    }
                }),
            );
            let counts: Vec<usize> = hits.iter().map(|c| c.load(Ordering::SeqCst)).collect();
            assert_eq!(counts, vec![1; n], "round {round}");
            if round % 50 == 0 {
                std::thread::sleep(SPIN * 5);
            }
        }
    }
}
