//! Loop-invariant code motion on UOps: every pure UOp moves to just before the outermost loop it
//! does not depend on, so index arithmetic and invariant loads run once per iteration of the loop
//! they really vary with; duplicates that end up in the same scope are merged.
//!
//! Invariants kept: sources still come before their users and loops still nest. Moved are only
//! constants, ALU ops, casts, bitcasts and loads — never accumulators, assignments, stores or
//! anything reading an accumulator. A load leaves a loop only when the loop stores nothing into
//! the buffer it reads (so it cannot see a different value: a kernel's buffers are distinct, the
//! `restrict` of the calling convention; export chooses its in-place updates later, by checks on
//! these final UOps; an `Assign`'s kernel reads its target only at the position it writes, which
//! varies with every loop that stores, so such a load never leaves a storing loop either) and
//! the loop surely runs at least once (so the load would have run anyway; a
//! hoisted load never reads memory the original program would not have read). ALU ops may run
//! speculatively: in both the C and the interpreter they have no side effects and cannot trap.
//! A `DefineLocal` is a buffer like the others here: a load of it stays inside every loop that
//! stores into it, and since the linearizer fills a local before the loop that reads it, a
//! load moved out of that loop still runs after the stores.

use alloc::vec;
use alloc::vec::Vec;

use hashbrown::HashMap;

use super::uops::{UOp, UOpKind};

/// What one open loop allows.
#[derive(Clone, Copy)]
struct OpenLoop<'a> {
    /// The `Loop` UOp.
    at: usize,
    /// Does it surely run at least once?
    runs: bool,
    /// The buffers (their `DefineGlobal` UOps) it stores into.
    stored: &'a [u32],
}

impl OpenLoop<'_> {
    /// May a load of `buf` move out of it?
    fn load_may_leave(&self, buf: u32) -> bool {
        self.runs && !self.stored.contains(&buf)
    }
}

/// Moves loop-invariant UOps out of loops (see the module doc).
pub fn hoist(uops: Vec<UOp>) -> Vec<UOp> {
    let anchor = anchors(&uops);
    emit(uops, &anchor)
}

fn pure(u: &UOp) -> bool {
    matches!(
        u.kind,
        UOpKind::Const(_)
            | UOpKind::Alu(_)
            | UOpKind::Cast
            | UOpKind::Bitcast
            | UOpKind::Load
            | UOpKind::VecLoad { .. }
            | UOpKind::VecAlu { .. }
            | UOpKind::Vectorize
            | UOpKind::Gep(_)
            | UOpKind::PairWiden
    )
}

/// For each UOp: the loop it moves in front of, if it moves.
fn anchors(uops: &[UOp]) -> Vec<Option<usize>> {
    let stores = loops_with_stores(uops);
    let mut level = vec![0usize; uops.len()];
    let mut anchor = vec![None; uops.len()];
    let mut open: Vec<OpenLoop> = Vec::new();
    for (i, u) in uops.iter().enumerate() {
        let depth = open.len();
        let reads_acc = u.src.iter().any(|&s| uops[s as usize].kind.is_acc());
        level[i] = match u.kind {
            UOpKind::DefineGlobal { .. }
            | UOpKind::DefineLocal { .. }
            | UOpKind::DefineVar { .. } => 0,
            _ if pure(u) && !reads_acc => {
                let need = u.src.iter().map(|&s| level[s as usize]).max().unwrap_or(0);
                if matches!(u.kind, UOpKind::Load | UOpKind::VecLoad { .. }) {
                    need.max(innermost_blocking(&open, u.src[0]))
                } else {
                    need
                }
            }
            UOpKind::Loop => depth + 1,
            _ => depth,
        };
        if level[i] < depth {
            anchor[i] = Some(open[level[i]].at);
        }
        match u.kind {
            UOpKind::Loop => open.push(OpenLoop {
                at: i,
                runs: runs_at_least_once(uops, u),
                stored: &stores[i],
            }),
            UOpKind::EndLoop => {
                open.pop();
            }
            _ => {}
        }
    }
    anchor
}

/// The number of outer loops a load of `buf` may not leave: one past the innermost loop that
/// blocks it.
fn innermost_blocking(open: &[OpenLoop], buf: u32) -> usize {
    open.iter()
        .rposition(|l| !l.load_may_leave(buf))
        .map_or(0, |p| p + 1)
}

/// Does the loop's end bound prove at least one iteration (start is always 0)?
fn runs_at_least_once(uops: &[UOp], lp: &UOp) -> bool {
    let end = &uops[lp.src[1] as usize];
    let start_zero = matches!(uops[lp.src[0] as usize].kind, UOpKind::Const(s) if s.as_i64() == 0);
    start_zero
        && match &end.kind {
            UOpKind::Const(s) => s.as_i64() > 0,
            UOpKind::DefineVar { min, .. } => *min > 0,
            _ => false,
        }
}

/// For each `Loop` UOp: the buffers stored into anywhere inside it (empty for other UOps).
fn loops_with_stores(uops: &[UOp]) -> Vec<Vec<u32>> {
    let mut has = vec![Vec::new(); uops.len()];
    let mut open = Vec::new();
    for (i, u) in uops.iter().enumerate() {
        match u.kind {
            UOpKind::Loop => open.push(i),
            UOpKind::EndLoop => {
                open.pop();
            }
            UOpKind::Store | UOpKind::VecStore { .. } => {
                for &l in &open {
                    let stored: &mut Vec<u32> = &mut has[l];
                    if !stored.contains(&u.src[0]) {
                        stored.push(u.src[0]);
                    }
                }
            }
            _ => {}
        }
    }
    has
}

/// Rebuilds the list: moved UOps are emitted right before their anchor loop (in their original
/// order), and pure duplicates within one scope are merged.
fn emit(uops: Vec<UOp>, anchor: &[Option<usize>]) -> Vec<UOp> {
    let mut before: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, a) in anchor.iter().enumerate() {
        if let Some(l) = a {
            before.entry(*l).or_default().push(i);
        }
    }
    let mut e = Emitter {
        new_idx: vec![u32::MAX; uops.len()],
        out: Vec::with_capacity(uops.len()),
        cse: HashMap::new(),
        scopes: vec![Vec::new()],
    };
    for (i, a) in anchor.iter().enumerate() {
        if a.is_some() {
            continue;
        }
        if let Some(moved) = before.get(&i) {
            moved.iter().for_each(|&m| e.put(&uops, m));
        }
        e.put(&uops, i);
    }
    e.out
}

struct Emitter {
    new_idx: Vec<u32>,
    out: Vec<UOp>,
    cse: HashMap<UOp, u32>,
    /// The CSE entries made in each open scope (index 0: outside every loop).
    scopes: Vec<Vec<UOp>>,
}

impl Emitter {
    fn put(&mut self, uops: &[UOp], i: usize) {
        let old = &uops[i];
        let u = UOp {
            kind: old.kind.clone(),
            dtype: old.dtype,
            src: old.src.iter().map(|&s| self.new_idx[s as usize]).collect(),
        };
        let shareable = pure(old) && !old.src.iter().any(|&s| uops[s as usize].kind.is_acc());
        if shareable {
            if let Some(&j) = self.cse.get(&u) {
                self.new_idx[i] = j;
                return;
            }
        }
        let j = self.out.len() as u32;
        self.new_idx[i] = j;
        self.out.push(u.clone());
        match old.kind {
            UOpKind::Loop => self.scopes.push(Vec::new()),
            UOpKind::EndLoop => {
                for dead in self.scopes.pop().unwrap_or_default() {
                    self.cse.remove(&dead);
                }
            }
            _ if shareable => {
                self.cse.insert(u.clone(), j);
                if let Some(s) = self.scopes.last_mut() {
                    s.push(u);
                }
            }
            _ => {}
        }
    }
}
