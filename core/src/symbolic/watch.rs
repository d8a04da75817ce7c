//! Watches on concretization: while a JIT or `SignatureCache` capture runs its function, every
//! bound variable whose *value* is read as a number ([`Node::resolved`], hence
//! `Tensor::shape`, `numel`, a reshape to `&[isize]`, ...) is noted. A capture whose function
//! read `n = 3` baked 3 into whatever it computed from it (a divisor, a concrete shape, an
//! `arange` length), so it is valid only where `n` is 3: the JIT replays it only at those
//! values and captures again at others.
//!
//! Invariant: a watch is never missed — any concretization of a bound variable while a watch is
//! active is noted in it. It may note spuriously (another thread concretizing at the same time;
//! watches are process-wide because the core has no thread-locals): the capture is then
//! specialized to more values than needed, which costs a capture, never a wrong result.

use alloc::vec::Vec;
use core::sync::atomic::{AtomicUsize, Ordering};

use spin::Mutex;

use super::{merge_val, Node, VarVals};

struct Active {
    id: u64,
    read: VarVals,
    /// One name read at two values: no single specialization describes the capture.
    conflict: bool,
}

struct Watches {
    next: u64,
    active: Vec<Active>,
}

static WATCHES: Mutex<Watches> = Mutex::new(Watches {
    next: 0,
    active: Vec::new(),
});

/// How many watches are active: the fast path of [`note`] reads only this.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// The values a capture is specialized to: the bound variables its function read as numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Specialization {
    /// The values read, by name.
    pub vals: VarVals,
    /// A name was read at two values: the capture fits no replay.
    pub conflict: bool,
}

impl Specialization {
    /// Whether a replay binding `vals` may run a capture with this specialization: every
    /// variable read agrees where `vals` binds it (a variable `vals` does not bind keeps its
    /// recorded value on a replay, so it agrees).
    pub fn fits(&self, vals: &VarVals) -> bool {
        !self.conflict
            && self
                .vals
                .iter()
                .all(|(k, v)| vals.iter().all(|(n, w)| n != k || w == v))
    }
}

/// An active watch; it stops when dropped.
pub struct Watch {
    id: u64,
}

impl Watch {
    /// Starts noting concretized bound variables.
    pub fn begin() -> Watch {
        let mut w = WATCHES.lock();
        let id = w.next;
        w.next += 1;
        w.active.push(Active {
            id,
            read: VarVals::new(),
            conflict: false,
        });
        ACTIVE.fetch_add(1, Ordering::SeqCst);
        Watch { id }
    }

    /// What has been read since the watch began.
    pub fn specialization(&self) -> Specialization {
        let w = WATCHES.lock();
        w.active
            .iter()
            .find(|a| a.id == self.id)
            .map(|a| Specialization {
                vals: a.read.clone(),
                conflict: a.conflict,
            })
            .unwrap_or_default()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        WATCHES.lock().active.retain(|a| a.id != self.id);
        ACTIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Notes that `n`'s bound variables are being read as numbers.
pub(super) fn note(n: &Node) {
    if ACTIVE.load(Ordering::SeqCst) == 0 || n.is_const() {
        return;
    }
    let Ok(vals) = n.var_vals() else { return };
    if vals.is_empty() {
        return;
    }
    let mut w = WATCHES.lock();
    for a in w.active.iter_mut() {
        for (k, v) in &vals {
            if merge_val(&mut a.read, k, *v).is_err() {
                a.conflict = true;
            }
        }
    }
}
