//! The optimization strategies, as one table ([`STRATEGIES`]) that both the hand-coded
//! heuristic ([`hand_coded`]) and the measured search
//! ([`search_space`](super::search_space), `PICOGRAD_SEARCH`) draw from.
//!
//! Each entry belongs to a stage — `Tile` (which output values a kernel keeps in registers and
//! computes together), `Unroll` (which reduce axes become straight-line code) or `Block` (which
//! reduce loop runs in cache-sized blocks from outside the output loops) — and has two
//! faces: `choose`, the heuristic's pick for the target's [`OptConfig`], and `space`, the
//! alternatives the search may measure. The heuristic walks the table top to bottom: within a
//! stage, the first entry for the kernel's kind (reduce or elementwise) whose `choose` takes the
//! kernel decides that stage. The search combines every `Tile` entry's space with every
//! `Unroll` entry's space, and each such pair with the `Block` entries' space for it.
//!
//! Layouts (panelled and blocked operands, unpadded inputs) are the scheduler's stage, since a
//! layout adds copy kernels: `schedule/layout.rs` holds its heuristic pick and
//! `schedule/layout/options.rs` its space, which the search measures by re-scheduling the
//! kernel for each option (`std-runtime/src/search/layout.rs`).
//!
//! Invariant: every entry applies only order-preserving opts (upcasts of output axes; unrolls
//! that keep the reduce's digit order; blocks of the outermost reduce loop), so any combination the heuristic or the search picks
//! computes bit-identical results to the unoptimized kernel.

mod block;
pub(crate) mod conv;
mod depthwise;
mod facts;
mod orientation;
mod small_core;
mod tile;
mod unroll;
mod vectorize;

use alloc::format;
use alloc::vec::Vec;

use super::kernel::{Kernel, Opt};
use super::opt::OptConfig;
use crate::context::{debug, log};

/// What part of a kernel's shape a strategy decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The output tile: which output axes are upcast (kept in registers together).
    Tile,
    /// Which reduce axes are unrolled.
    Unroll,
    /// Whether the outermost reduce loop runs in blocks (after the tile and the unrolls, whose
    /// loads it sizes its blocks by).
    Block,
}

/// The kernels whose heuristic pick a strategy makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernels {
    /// Kernels with a reduce (matmul, conv, sums).
    Reduce,
    /// Kernels without one.
    Elementwise,
}

/// One alternative a strategy offers the search: opts to apply in order, and the original
/// output axis it upcasts last (the fastest-varying accumulators), if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// The opts, applied in order to the unoptimized kernel (or after the tile's opts, for an
    /// unroll).
    pub opts: Vec<Opt>,
    /// The original output axis upcast last.
    pub fastest: Option<usize>,
}

impl Choice {
    fn new(opts: Vec<Opt>, fastest: Option<usize>) -> Choice {
        Choice { opts, fastest }
    }

    fn none() -> Choice {
        Choice::new(Vec::new(), None)
    }
}

/// The heuristic's pick: applies opts to the kernel, records them, and says whether it took the
/// kernel (false: it does not fit, changing nothing, and the stage's next entry is asked).
pub type Choose = fn(&mut Kernel, &OptConfig, &mut Vec<Opt>) -> bool;
/// The alternatives offered to the search (empty when the strategy does not fit the kernel).
pub type Space = fn(&Kernel, &OptConfig) -> Vec<Choice>;

/// One strategy: a row of [`STRATEGIES`].
pub struct Strategy {
    /// Its name (in `PICOGRAD_DEBUG=5` output).
    pub name: &'static str,
    /// The stage it decides.
    pub stage: Stage,
    /// The kernels the heuristic asks it about.
    pub kernels: Kernels,
    /// The heuristic's pick.
    pub choose: Choose,
    /// The search's alternatives.
    pub space: Space,
}

/// Every strategy, in the order the heuristic asks them (stages in order; within a stage, the
/// more specific first).
pub const STRATEGIES: &[Strategy] = &[
    Strategy {
        name: "small-core conv tile",
        stage: Stage::Tile,
        kernels: Kernels::Reduce,
        choose: small_core::choose,
        space: small_core::space,
    },
    Strategy {
        name: "depthwise row tile",
        stage: Stage::Tile,
        kernels: Kernels::Reduce,
        choose: depthwise::choose,
        space: depthwise::space,
    },
    Strategy {
        name: "conv tile",
        stage: Stage::Tile,
        kernels: Kernels::Reduce,
        choose: conv::choose,
        space: conv::space,
    },
    Strategy {
        name: "register tile",
        stage: Stage::Tile,
        kernels: Kernels::Reduce,
        choose: tile::choose,
        space: tile::space,
    },
    Strategy {
        name: "vectorize elementwise",
        stage: Stage::Tile,
        kernels: Kernels::Elementwise,
        choose: vectorize::choose,
        space: vectorize::space,
    },
    Strategy {
        name: "unroll small reduces",
        stage: Stage::Unroll,
        kernels: Kernels::Reduce,
        choose: unroll::choose,
        space: unroll::space,
    },
    Strategy {
        name: "reduce blocks for the L1",
        stage: Stage::Block,
        kernels: Kernels::Reduce,
        choose: block::choose,
        space: block::space,
    },
];

/// The hand-coded heuristic: walks [`STRATEGIES`] (see the module doc), applies the opts it
/// picks, and returns them in order.
pub fn hand_coded(k: &mut Kernel, cfg: &OptConfig) -> Vec<Opt> {
    let kind = if k.has_reduce() {
        Kernels::Reduce
    } else {
        Kernels::Elementwise
    };
    let mut applied = Vec::new();
    let mut decided: Vec<Stage> = Vec::new();
    for s in STRATEGIES {
        if s.kernels != kind || decided.contains(&s.stage) {
            continue;
        }
        let before = applied.len();
        if (s.choose)(k, cfg, &mut applied) {
            decided.push(s.stage);
            if debug() >= 5 {
                log(5, &format!("opt: {} took {:?}", s.name, &applied[before..]));
            }
        }
    }
    applied
}

/// Every alternative the `stage`'s strategies offer for `k`, in table order.
pub fn space(k: &Kernel, cfg: &OptConfig, stage: Stage) -> Vec<Choice> {
    STRATEGIES
        .iter()
        .filter(|s| s.stage == stage)
        .flat_map(|s| (s.space)(k, cfg))
        .collect()
}
