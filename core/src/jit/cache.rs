//! [`SignatureCache`]: schedule once per input signature. A function called through the cache
//! runs and is captured the first time it meets a signature (the inputs' shapes, dtypes and
//! device); later calls with that signature replay the capture — no graph building, scheduling,
//! lowering or compiling. What `onnx::Model::run` uses, and any user function can.
//!
//! Invariants:
//! - A call returns what calling the function directly would (bit for bit: the replay runs the
//!   very programs the first call ran).
//! - A function that reads its inputs' values on the host while it builds its graph (a branch on
//!   a tensor, a shape computed from data, `to_vec` of anything input-derived, an eager
//!   `realize` of input-derived work; see [`super::trace`]) is never replayed for that
//!   signature: it runs again on every call, as if uncached.
//! - A function that read a bound symbolic dimension's value as a number (see
//!   [`crate::symbolic::Watch`]) made a capture valid only at that value: a call binding
//!   another value captures again (the signature keeps up to [`DEFAULT_SIGNATURES`] such
//!   captures), never replays a stale constant.
//! - Outputs never alias a buffer a later call writes: each replay computes its outputs into
//!   new buffers (the capture's intermediates are reused, so replays of one signature take turns).
//! - At most `capacity` signatures are kept (least recently used go first); each keeps its
//!   capture: its intermediate buffers, the first call's input and output buffers and programs.

use alloc::sync::Arc;
use alloc::vec::Vec;

use spin::Mutex;

use super::trace::Trace;
use super::{realized_node, Capture};
use crate::device::Buffer;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::lazy::LazyBuffer;
use crate::lru::Lru;
use crate::shape::Sint;
use crate::symbolic::Watch;
use crate::tensor::Tensor;

/// How many signatures a cache keeps by default: a model is usually called with one or a few
/// shapes (a batch size or two), and each signature holds a capture's memory.
pub const DEFAULT_SIGNATURES: usize = 8;

/// What a cache has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Calls that ran the function and captured it (one per new signature).
    pub captures: u64,
    /// Calls that replayed a capture.
    pub replays: u64,
    /// Calls that ran the function without capturing, because for that signature it reads its
    /// inputs' values on the host.
    pub reruns: u64,
}

/// Each input's shape (symbolic dimensions unbound: one capture serves every value), dtype and
/// device address.
type Signature = Vec<(Vec<Sint>, DType, usize)>;

#[derive(Clone)]
enum Entry {
    /// Calls replay a capture whose specialization fits them, one at a time (its
    /// intermediates are shared); most recent last.
    Replay(Vec<Arc<Mutex<Capture>>>),
    /// The function reads its inputs' values: calls run it again.
    Rerun,
}

/// A per-signature cache of captures of one function (see the module docs).
///
/// ```
/// use picograd_core::{jit::SignatureCache, realize::counters, Tensor};
/// let cache = SignatureCache::new();
/// let f = |x: &[Tensor]| Ok(vec![x[0].try_mul(&x[0])?.try_add(&x[0])?]);
/// let a = cache.call(&[Tensor::from_slice(&[1.0f32, 2.0], &[2])], f).unwrap();
/// let b = cache.call(&[Tensor::from_slice(&[3.0f32, 4.0], &[2])], f).unwrap();
/// let c = cache.call(&[Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3])], f).unwrap();
/// // The first result keeps its values after the second call.
/// assert_eq!(a[0].to_vec::<f32>().unwrap(), vec![2.0, 6.0]);
/// assert_eq!(b[0].to_vec::<f32>().unwrap(), vec![12.0, 20.0]);
/// assert_eq!(c[0].to_vec::<f32>().unwrap(), vec![2.0, 6.0, 12.0]);
/// let s = cache.stats();
/// assert_eq!((s.captures, s.replays, s.reruns), (2, 1, 0));
/// ```
pub struct SignatureCache {
    entries: Mutex<Lru<Signature, Entry>>,
    stats: Mutex<CacheStats>,
}

impl Default for SignatureCache {
    fn default() -> Self {
        SignatureCache::new()
    }
}

impl SignatureCache {
    /// An empty cache keeping [`DEFAULT_SIGNATURES`] signatures.
    pub fn new() -> SignatureCache {
        SignatureCache::with_capacity(DEFAULT_SIGNATURES)
    }

    /// An empty cache keeping at most `capacity` signatures (at least 1).
    pub fn with_capacity(capacity: usize) -> SignatureCache {
        SignatureCache {
            entries: Mutex::new(Lru::new(capacity)),
            stats: Mutex::new(CacheStats::default()),
        }
    }

    /// Sets how many signatures are kept (at least 1), forgetting the least recently used.
    pub fn set_capacity(&self, capacity: usize) {
        self.entries.lock().set_capacity(capacity);
    }

    /// Signatures held now.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// Whether no signature is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every signature (and frees the captures' buffers no result holds).
    pub fn clear(&self) {
        let mut e = self.entries.lock();
        let cap = e.capacity();
        *e = Lru::new(cap);
    }

    /// What the cache has done so far.
    pub fn stats(&self) -> CacheStats {
        *self.stats.lock()
    }

    /// Calls `f` on `inputs` through the cache: the first call with a signature runs `f` and
    /// captures what it computes (the results come back realized), later ones replay it. `f`
    /// must compute its outputs from `inputs` and from tensors that do not change between calls
    /// (weights): it is not run again on a replay, and work that depends on the weights alone
    /// (the scheduler's re-laid copies of them) runs on the first call only. Errors from `f` or from running are returned
    /// and nothing is cached for that call. Results carry no gradient graph.
    pub fn call<F>(&self, inputs: &[Tensor], f: F) -> Result<Vec<Tensor>>
    where
        F: FnOnce(&[Tensor]) -> Result<Vec<Tensor>>,
    {
        let nodes = inputs
            .iter()
            .map(realized_node)
            .collect::<Result<Vec<_>>>()?;
        let bufs = nodes
            .iter()
            .map(|n| {
                n.realized()
                    .ok_or_else(|| Error::internal("jit cache: input not realized"))
            })
            .collect::<Result<Vec<_>>>()?;
        let sig: Signature = nodes
            .iter()
            .zip(&bufs)
            .map(|(n, b)| (super::unbound(n.shape()), n.dtype(), device_addr(b)))
            .collect();
        let entry = self.entries.lock().get(&sig);
        let ins: Vec<Tensor> = nodes.iter().cloned().map(Tensor::from_lazy).collect();
        let refs: Vec<&Tensor> = ins.iter().collect();
        let vals = super::shape_vals(&refs)?;
        match entry {
            Some(Entry::Replay(caps)) => {
                match caps
                    .iter()
                    .rev()
                    .find(|c| c.lock().specialization().fits(&vals))
                {
                    Some(cap) => {
                        self.stats.lock().replays += 1;
                        let mut cap = cap.lock();
                        if let Some(settled) = cap.settle()? {
                            *cap = settled;
                        }
                        cap.replay_detached(&refs)
                    }
                    None => self.capture(sig, caps, &nodes, &bufs, f),
                }
            }
            Some(Entry::Rerun) => {
                self.stats.lock().reruns += 1;
                f(inputs)
            }
            None => self.capture(sig, Vec::new(), &nodes, &bufs, f),
        }
    }

    /// A miss: runs `f` on fresh nodes over the input buffers while a trace watches them, then
    /// captures its outputs beside the signature's earlier captures `held` — or, when `f` read
    /// an input's values, remembers to rerun it.
    fn capture<F>(
        &self,
        sig: Signature,
        mut held: Vec<Arc<Mutex<Capture>>>,
        nodes: &[LazyBuffer],
        bufs: &[Arc<Buffer>],
        f: F,
    ) -> Result<Vec<Tensor>>
    where
        F: FnOnce(&[Tensor]) -> Result<Vec<Tensor>>,
    {
        // New nodes, never hash-consed: the graph `f` builds cannot share an already realized
        // node with an earlier call's graph (which the capture would then read as a weight).
        let fresh: Vec<Tensor> = nodes
            .iter()
            .zip(bufs)
            .map(|(n, b)| Tensor::from_lazy(LazyBuffer::from_shared_buffer(b.clone(), n.shape())))
            .collect();
        let trace = Trace::begin(bufs);
        let watch = Watch::begin();
        let outs = f(&fresh)?;
        let spec = watch.specialization();
        drop(watch);
        let tainted = trace.tainted();
        drop(trace);
        if tainted {
            self.entries.lock().insert(sig, Entry::Rerun);
            self.stats.lock().reruns += 1;
            return Ok(outs);
        }
        let in_refs: Vec<&Tensor> = fresh.iter().collect();
        let out_refs: Vec<&Tensor> = outs.iter().collect();
        let (mut cap, results) = Capture::record(&in_refs, &out_refs)?;
        cap.spec = spec;
        // Weights keep their values between calls (the contract of `call`): work over weights
        // alone, such as the scheduler's layout copies of them, runs on this first call only.
        cap.freeze_constants();
        if held.len() >= DEFAULT_SIGNATURES {
            held.remove(0);
        }
        held.push(Arc::new(Mutex::new(cap)));
        self.entries.lock().insert(sig, Entry::Replay(held));
        self.stats.lock().captures += 1;
        Ok(results)
    }
}

fn device_addr(b: &Buffer) -> usize {
    Arc::as_ptr(b.device()) as *const u8 as usize
}
