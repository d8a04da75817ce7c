//! A small pool of worker threads for kernels split across cores: the calling thread and the
//! workers claim parts until none are left (so a late worker costs nothing: the caller has run
//! its share), and the call returns when every part has finished.
//!
//! Invariant: [`Pool::run`] does not return before every part has run to completion, and no
//! part runs after it returns, so a part may use memory the caller keeps alive for the
//! duration of the call. Workers are started on first need and live for the rest of the
//! process.
//!
//! Waking a sleeping thread costs tens of microseconds on a virtual machine — as long as a
//! batch-128 MLP layer's share of work — so a worker polls for its next part for a short while
//! after finishing one, and the caller polls for the workers' completion before sleeping: a JIT
//! replaying split kernels back to back then hands parts over without a wake-up.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
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

/// One call's parts: the next part to claim, and how many claimed parts are still running.
/// Every thread taking part — the caller and the workers sent a job — claims parts until none
/// are left, so a worker that is slow to wake (asleep, or its core busy with another process)
/// finds every part already run by the caller: a split kernel then costs about what the
/// unsplit one does, never a wake-up.
struct Parts {
    n: usize,
    next: AtomicUsize,
    running: AtomicUsize,
    lock: Mutex<()>,
    zero: Condvar,
    /// The caller stopped polling and sleeps on `zero` until the count reaches zero.
    asleep: AtomicBool,
    /// The first panic of a part, re-raised on the caller once every part has finished.
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
}

impl Parts {
    /// Claims and runs parts until none are left.
    fn work(&self, part: &(dyn Fn(usize) + Send + Sync)) {
        loop {
            // Counted as running before it is claimed, so the caller never sees zero while a
            // claimed part has yet to start.
            self.running.fetch_add(1, Ordering::AcqRel);
            let _guard = FinishGuard(self);
            let i = self.next.fetch_add(1, Ordering::AcqRel);
            if i >= self.n {
                return;
            }
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| part(i)));
            if let Err(p) = ran {
                let mut first = self.panic.lock().unwrap_or_else(|e| e.into_inner());
                first.get_or_insert(p);
            }
        }
    }

    /// Only a caller that went to sleep is woken: the count reaches zero once or twice per
    /// call (every thread's last, empty claim counts too), and a wake-up is a system call on
    /// the critical path of every split kernel (150 per mobilenet_v2 inference at 2 threads,
    /// almost all for a caller that was still polling, 2026-11-28). `SeqCst` on the count and on
    /// `asleep`, both sides: whichever of the caller's "asleep, then count" and this "count,
    /// then asleep?" comes second sees the other's write, so a sleeping caller is always woken.
    fn finish_one(&self) {
        if self.running.fetch_sub(1, Ordering::SeqCst) == 1 && self.asleep.load(Ordering::SeqCst) {
            // Under the lock, so a caller between its check and its sleep cannot miss it.
            let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.zero.notify_all();
        }
    }

    /// Waits until every claimed part has finished (the caller has claimed the rest).
    fn wait(&self) {
        if spin(|| (self.running.load(Ordering::Acquire) == 0).then_some(())).is_some() {
            return;
        }
        let mut g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.asleep.store(true, Ordering::SeqCst);
        while self.running.load(Ordering::SeqCst) > 0 {
            g = self.zero.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Calls `finish_one` when dropped, so a part that panics still counts as finished.
struct FinishGuard<'a>(&'a Parts);

impl Drop for FinishGuard<'_> {
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

    /// Runs `part(0)`, ..., `part(n - 1)`, each exactly once, on this thread and up to `n - 1`
    /// workers (whichever claims a part first runs it), and returns when all have finished. A
    /// part that panics does not stop the others; the first panic is raised here once they
    /// have all finished.
    pub fn run(&self, n: usize, part: Arc<dyn Fn(usize) + Send + Sync>) {
        if n <= 1 {
            part(0);
            return;
        }
        let parts = Arc::new(Parts {
            n,
            next: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            lock: Mutex::new(()),
            zero: Condvar::new(),
            asleep: AtomicBool::new(false),
            panic: Mutex::new(None),
        });
        {
            let mut workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
            while workers.len() < n - 1 {
                workers.push(spawn_worker());
            }
            for w in workers.iter().take(n - 1) {
                let (part, parts) = (part.clone(), parts.clone());
                let job: Job = Box::new(move || parts.work(&*part));
                // A worker that is gone leaves its share to the others (the caller at least).
                let _ = w.send(job);
            }
        }
        parts.work(&*part);
        parts.wait();
        let panicked = parts.panic.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(p) = panicked {
            std::panic::resume_unwind(p);
        }
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
    /// and after a pause longer than the polling (workers asleep), with a panicking part too
    /// (whose panic `run` raises after the others have run).
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
            let fails = n > 1 && round % 7 == 0;
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                pool.run(
                    n,
                    Arc::new(move |i| {
                        h[i].fetch_add(1, Ordering::SeqCst);
                        if i == 1 && fails {
                            panic!("a failing part");
                        }
                    }),
                )
            }));
            assert_eq!(
                ran.is_err(),
                fails,
                "round {round}: the part's panic is raised"
            );
            let counts: Vec<usize> = hits.iter().map(|c| c.load(Ordering::SeqCst)).collect();
            assert_eq!(counts, vec![1; n], "round {round}");
            if round % 50 == 0 {
                std::thread::sleep(SPIN * 5);
            }
        }
    }

    /// A caller that outwaits its polling and sleeps is woken by the last part to finish: parts
    /// that run longer than the polling, many times over (a missed wake-up would hang the call,
    /// which the timeout turns into a failure).
    #[test]
    fn a_sleeping_caller_is_woken_when_the_last_part_finishes() {
        let (done_tx, done) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            let pool = Pool {
                workers: Mutex::new(Vec::new()),
            };
            for round in 0..20 {
                let hits = Arc::new(AtomicUsize::new(0));
                let h = hits.clone();
                let started = Arc::new(AtomicBool::new(false));
                pool.run(
                    2,
                    Arc::new(move |i| {
                        if i == 0 {
                            // Part 0 (the caller's, usually) holds on until part 1 has started
                            // elsewhere, so the caller cannot take part 1 itself...
                            let t = Instant::now();
                            while !started.load(Ordering::SeqCst)
                                && t.elapsed() < Duration::from_secs(1)
                            {
                                std::hint::spin_loop();
                            }
                        } else {
                            // ...which outlasts the caller's polling.
                            started.store(true, Ordering::SeqCst);
                            std::thread::sleep(SPIN * 3);
                        }
                        h.fetch_add(1, Ordering::SeqCst);
                    }),
                );
                assert_eq!(hits.load(Ordering::SeqCst), 2, "round {round}");
            }
            done_tx.send(()).unwrap();
        });
        done.recv_timeout(Duration::from_secs(30))
            .expect("every call returns: the sleeping caller was woken");
    }

    /// A caller whose worker is busy runs every part itself and returns without waiting for
    /// the worker (the claim, not the worker, decides who runs a part).
    #[test]
    fn the_caller_runs_the_parts_a_busy_worker_has_not_claimed() {
        let pool = Pool {
            workers: Mutex::new(vec![spawn_worker()]),
        };
        // Occupy the one worker with a job that blocks until released.
        let (release, blocked) = std::sync::mpsc::channel::<()>();
        let (started_tx, started) = std::sync::mpsc::channel::<()>();
        let job: Job = Box::new(move || {
            started_tx.send(()).unwrap();
            let _ = blocked.recv();
        });
        pool.workers.lock().unwrap()[0].send(job).unwrap();
        started.recv().unwrap();
        let hits: Arc<Vec<AtomicUsize>> = Arc::new((0..2).map(|_| AtomicUsize::new(0)).collect());
        let h = hits.clone();
        let caller = std::thread::current().id();
        let on_caller = Arc::new(AtomicUsize::new(0));
        let c = on_caller.clone();
        pool.run(
            2,
            Arc::new(move |i| {
                h[i].fetch_add(1, Ordering::SeqCst);
                if std::thread::current().id() == caller {
                    c.fetch_add(1, Ordering::SeqCst);
                }
            }),
        );
        let counts: Vec<usize> = hits.iter().map(|c| c.load(Ordering::SeqCst)).collect();
        assert_eq!(counts, vec![1, 1]);
        assert_eq!(
            on_caller.load(Ordering::SeqCst),
            2,
            "both parts ran on the caller"
        );
        release.send(()).unwrap();
    }
}
