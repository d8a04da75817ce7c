//! Taint traces: while a function is being captured, did it read its inputs' *values* outside
//! the capture? A function that copies an input-derived value to the host (`to_vec`, `item`, a
//! branch on a tensor, a shape computed from data) or realizes an input-derived tensor before the
//! capture starts bakes those values into the kernels it goes on to build, so replaying its
//! capture on new inputs would be wrong. A trace watches the input buffers of one capture in
//! progress; every host read ([`Buffer::to_bytes`]), every schedule's realized leaves and every
//! replay's inputs are checked against the active traces, and a trace that sees one of its
//! buffers is tainted.
//!
//! Invariant: a trace is never missed — any read of a watched buffer while the trace is active
//! taints it. It may be tainted spuriously (another thread reading the same buffers at the same
//! time): the caller then re-evaluates instead of replaying, which is always correct.
//! There are no thread-locals in the core, so traces are process-wide, watched by buffer.

use alloc::sync::Arc;
use alloc::vec::Vec;

use spin::Mutex;

use crate::device::{BufId, Buffer};

/// A buffer's identity: its id on its device and the device's address.
type BufKey = (BufId, usize);

struct Active {
    id: u64,
    watched: Vec<BufKey>,
    tainted: bool,
}

struct Traces {
    next: u64,
    active: Vec<Active>,
}

static TRACES: Mutex<Traces> = Mutex::new(Traces {
    next: 0,
    active: Vec::new(),
});

fn key(b: &Buffer) -> BufKey {
    (b.id(), Arc::as_ptr(b.device()) as *const u8 as usize)
}

/// An active trace; it stops watching when dropped.
pub(crate) struct Trace {
    id: u64,
}

impl Trace {
    /// Starts watching `bufs` (the realized inputs of a capture in progress).
    pub(crate) fn begin(bufs: &[Arc<Buffer>]) -> Trace {
        let mut t = TRACES.lock();
        let id = t.next;
        t.next += 1;
        let watched = bufs.iter().map(|b| key(b)).collect();
        t.active.push(Active {
            id,
            watched,
            tainted: false,
        });
        Trace { id }
    }

    /// Whether a watched buffer has been read since the trace began.
    pub(crate) fn tainted(&self) -> bool {
        let t = TRACES.lock();
        t.active.iter().any(|a| a.id == self.id && a.tainted)
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        TRACES.lock().active.retain(|a| a.id != self.id);
    }
}

/// Whether any trace is active (so callers skip collecting buffers when none is).
pub(crate) fn any_active() -> bool {
    !TRACES.lock().active.is_empty()
}

/// Notes that `bufs` are being read outside a capture (host copies, eager realizes, replays).
pub(crate) fn note_reads<'a>(bufs: impl IntoIterator<Item = &'a Buffer>) {
    let mut t = TRACES.lock();
    if t.active.is_empty() {
        return;
    }
    for b in bufs {
        let k = key(b);
        for a in t.active.iter_mut().filter(|a| a.watched.contains(&k)) {
            a.tainted = true;
        }
    }
}
