//! Offline placement of memory blocks with known lifetimes in one arena (dynamic storage
//! allocation on intervals), and the lower bound it is judged against.
//!
//! Invariant: two blocks whose lifetimes intersect never overlap in memory; every offset is a
//! multiple of [`ALIGN`]; `arena_bytes >= lower_bound_bytes`, where the bound is the largest sum
//! of (aligned) sizes of blocks live at one step. Several greedy strategies run and the smallest
//! arena wins; one of them (alternating ends within the bound) reaches the bound exactly when at
//! most two blocks are live at any step (chain-shaped models). Deterministic: same blocks, same
//! offsets.

use alloc::vec;
use alloc::vec::Vec;

/// Alignment of every block, in bytes.
pub const ALIGN: usize = 16;

/// A block to place: `bytes` long, live over steps `start..=end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// Size in bytes (rounded up to [`ALIGN`] when placed).
    pub bytes: usize,
    /// First step it is live at.
    pub start: usize,
    /// Last step it is live at (inclusive).
    pub end: usize,
}

/// Where the blocks went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Offset of each block, in input order.
    pub offsets: Vec<usize>,
    /// Size of the arena holding them.
    pub arena_bytes: usize,
    /// The largest total of simultaneously live (aligned) bytes.
    pub lower_bound_bytes: usize,
}

/// `n` rounded up to [`ALIGN`].
pub fn align_up(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

fn overlaps(a: &Block, b: &Block) -> bool {
    a.start <= b.end && b.start <= a.end
}

/// The largest sum of aligned sizes live at one step.
pub fn lower_bound(blocks: &[Block]) -> usize {
    let last = blocks.iter().map(|b| b.end).max().unwrap_or(0);
    let mut live = vec![0usize; last + 1];
    for b in blocks {
        for l in &mut live[b.start..=b.end] {
            *l += align_up(b.bytes);
        }
    }
    live.into_iter().max().unwrap_or(0)
}

/// Places every block, trying several strategies and keeping the smallest arena.
pub fn place(blocks: &[Block]) -> Placement {
    let bound = lower_bound(blocks);
    let by_size = order(blocks, |b| (usize::MAX - align_up(b.bytes), b.start));
    let by_start = order(blocks, |b| (b.start, usize::MAX - align_up(b.bytes)));
    let candidates = [
        fit_all(blocks, &by_size, None),
        fit_all(blocks, &by_start, None),
        fit_all(blocks, &by_start, Some(bound)),
    ];
    let offsets = candidates
        .into_iter()
        .min_by_key(|o| arena_of(blocks, o))
        .unwrap_or_default();
    Placement {
        arena_bytes: arena_of(blocks, &offsets),
        offsets,
        lower_bound_bytes: bound,
    }
}

fn order<K: Ord>(blocks: &[Block], key: impl Fn(&Block) -> K) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..blocks.len()).collect();
    idx.sort_by_key(|&i| (key(&blocks[i]), i));
    idx
}

fn arena_of(blocks: &[Block], offsets: &[usize]) -> usize {
    blocks
        .iter()
        .zip(offsets)
        .map(|(b, o)| o + align_up(b.bytes))
        .max()
        .unwrap_or(0)
}

/// Places blocks in `order`, each at the lowest free offset; with a `cap`, every other block
/// goes to the highest free offset below the cap instead (when one exists).
fn fit_all(blocks: &[Block], order: &[usize], cap: Option<usize>) -> Vec<usize> {
    let mut offsets = vec![usize::MAX; blocks.len()];
    for (n, &i) in order.iter().enumerate() {
        let busy = busy_ranges(blocks, &offsets, i);
        let size = align_up(blocks[i].bytes);
        let top = cap
            .filter(|_| n % 2 == 1)
            .and_then(|c| highest_fit(&busy, size, c));
        offsets[i] = top.unwrap_or_else(|| lowest_fit(&busy, size));
    }
    offsets
}

/// Memory ranges of placed blocks whose lifetimes meet block `i`'s, sorted by start.
fn busy_ranges(blocks: &[Block], offsets: &[usize], i: usize) -> Vec<(usize, usize)> {
    let mut busy: Vec<(usize, usize)> = blocks
        .iter()
        .zip(offsets)
        .filter(|(b, &o)| o != usize::MAX && overlaps(b, &blocks[i]))
        .map(|(b, &o)| (o, o + align_up(b.bytes)))
        .collect();
    busy.sort_unstable();
    busy
}

fn lowest_fit(busy: &[(usize, usize)], size: usize) -> usize {
    let mut at = 0;
    for &(s, e) in busy {
        if s >= at + size {
            return at;
        }
        at = at.max(e);
    }
    at
}

fn highest_fit(busy: &[(usize, usize)], size: usize, cap: usize) -> Option<usize> {
    let free = |o: usize| busy.iter().all(|&(s, e)| o + size <= s || o >= e);
    let candidates = busy
        .iter()
        .filter_map(|&(s, _)| s.checked_sub(size))
        .chain(cap.checked_sub(size));
    candidates.filter(|&o| o + size <= cap && free(o)).max()
}
