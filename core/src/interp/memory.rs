//! The interpreter's memory: a table of zeroed byte buffers behind ids, and the locking a run
//! uses to hold several of them at once.
//!
//! Invariant: each buffer sits behind its own `spin::RwLock`; the table's `spin::Mutex` is held
//! only to look ids up, never while a buffer is locked. A run locks its distinct buffers in
//! ascending id order (writable ones for writing, the rest for reading), so concurrent runs never
//! deadlock and an id passed in two slots is locked once. Bytes are little-endian elements;
//! elements are read byte-wise, so no alignment is needed.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::sync::Arc;
use alloc::vec::Vec;

use spin::{Mutex, RwLock};

use super::instr::{Mem, View};
use crate::device::{Allocator, BufId};
use crate::error::{Error, Result};

/// One buffer's bytes.
pub(crate) type Bytes = Arc<RwLock<Vec<u8>>>;

#[derive(Default)]
struct Table {
    next: u64,
    bufs: BTreeMap<u64, Bytes>,
}

/// The [`Allocator`] of [`Interp`](super::Interp): buffers in host memory.
#[derive(Default)]
pub struct InterpAllocator {
    table: Mutex<Table>,
}

impl InterpAllocator {
    /// The buffer behind `b`.
    pub(crate) fn get(&self, b: BufId) -> Result<Bytes> {
        self.table
            .lock()
            .bufs
            .get(&b.0)
            .cloned()
            .ok_or_else(|| Error::Device(format!("interp: unknown buffer id {}", b.0)))
    }

    /// The size of buffer `b` in bytes.
    pub fn size(&self, b: BufId) -> Result<usize> {
        Ok(self.get(b)?.read().len())
    }
}

impl Allocator for InterpAllocator {
    fn alloc(&self, bytes: usize) -> Result<BufId> {
        let mut v = Vec::new();
        v.try_reserve_exact(bytes)
            .map_err(|_| Error::Device(format!("interp: cannot allocate {bytes} bytes")))?;
        v.resize(bytes, 0);
        let mut t = self.table.lock();
        let id = t.next;
        t.next += 1;
        t.bufs.insert(id, Arc::new(RwLock::new(v)));
        Ok(BufId(id))
    }

    fn copy_in(&self, b: BufId, src: &[u8]) -> Result<()> {
        let buf = self.get(b)?;
        let mut g = buf.write();
        let size = g.len();
        let dst = g.get_mut(..src.len()).ok_or_else(|| {
            Error::Device(format!(
                "interp: copy_in of {} bytes into buffer {} of {size} bytes",
                src.len(),
                b.0,
            ))
        })?;
        dst.copy_from_slice(src);
        Ok(())
    }

    fn copy_out(&self, b: BufId, dst: &mut [u8]) -> Result<()> {
        let buf = self.get(b)?;
        let g = buf.read();
        let src = g.get(..dst.len()).ok_or_else(|| {
            Error::Device(format!(
                "interp: copy_out of {} bytes from buffer {} of {} bytes",
                dst.len(),
                b.0,
                g.len()
            ))
        })?;
        dst.copy_from_slice(src);
        Ok(())
    }

    fn free(&self, b: BufId) {
        self.table.lock().bufs.remove(&b.0);
    }
}

/// The buffers of one run: distinct ids in ascending order, each with whether it is written, and
/// for every parameter slot the position of its buffer.
pub(crate) struct Held {
    bufs: Vec<(Bytes, bool)>,
    slots: Vec<usize>,
}

impl Held {
    /// Looks up `ids` (one per parameter slot; `written[slot]` if the kernel stores there).
    pub fn new(mem: &InterpAllocator, ids: &[BufId], written: &[bool]) -> Result<Held> {
        let mut distinct: Vec<(BufId, bool)> = Vec::with_capacity(ids.len());
        for (&id, &w) in ids.iter().zip(written) {
            match distinct.binary_search_by_key(&id, |e| e.0) {
                Ok(p) => distinct[p].1 |= w,
                Err(p) => distinct.insert(p, (id, w)),
            }
        }
        let slots = ids
            .iter()
            .map(|id| distinct.binary_search_by_key(id, |e| e.0).unwrap_or(0))
            .collect();
        let bufs = distinct
            .iter()
            .map(|&(id, w)| Ok((mem.get(id)?, w)))
            .collect::<Result<_>>()?;
        Ok(Held { bufs, slots })
    }

    /// Locks every buffer, in ascending id order.
    pub fn lock(&self) -> Mem<'_> {
        let views = self
            .bufs
            .iter()
            .map(|(b, w)| {
                if *w {
                    View::Write(b.write())
                } else {
                    View::Read(b.read())
                }
            })
            .collect();
        Mem {
            views,
            slots: self.slots.clone(),
            scratch: Vec::new(),
        }
    }
}
