//! Progress on long work (compiling kernels, cross-building, running under QEMU): a spinner on
//! stderr while a stage runs, drawn only when stderr is a terminal (indicatif hides itself
//! otherwise), and, with `PICOGRAD_DEBUG` at 1 or more, one plain line when a stage starts and
//! one when it ends, so the stages show in logs too.
//!
//! Invariant: progress never goes to stdout (which carries results) and never changes what is
//! computed.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use picograd_runtime::target::{BuildStage, StageHook, Target};

/// One stage of work, shown while it runs.
pub struct Stage {
    what: String,
    bar: ProgressBar,
    start: Instant,
}

fn logging() -> bool {
    picograd_core::context::debug() >= 1
}

impl Stage {
    /// Starts showing `what`.
    pub fn start(what: &str) -> Stage {
        if logging() {
            eprintln!("picograd: {what} ...");
        }
        let bar = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} {elapsed}") {
            bar.set_style(style);
        }
        bar.set_message(what.to_string());
        bar.enable_steady_tick(Duration::from_millis(120));
        Stage {
            what: what.to_string(),
            bar,
            start: Instant::now(),
        }
    }

    /// Ends the stage (`ok`: it succeeded).
    pub fn finish(self, ok: bool) {
        self.bar.finish_and_clear();
        if logging() {
            let how = if ok { "done" } else { "failed" };
            eprintln!(
                "picograd: {}: {how} in {:.2?}",
                self.what,
                self.start.elapsed()
            );
        }
    }
}

/// A build hook that shows each [`BuildStage`] as a [`Stage`]; call [`BuildProgress::finish`]
/// when the build returns.
#[derive(Clone, Default)]
pub struct BuildProgress {
    current: Arc<Mutex<Option<Stage>>>,
}

impl BuildProgress {
    /// The hook for [`picograd_runtime::target::BuildOptions::on_stage`].
    pub fn hook(&self) -> StageHook {
        let current = self.current.clone();
        StageHook(Arc::new(move |stage: BuildStage, target: &Target| {
            let mut slot = current.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(prev) = slot.take() {
                prev.finish(true);
            }
            *slot = Some(Stage::start(&stage.describe(target)));
        }))
    }

    /// Ends the stage still showing (`ok`: the build succeeded).
    pub fn finish(&self, ok: bool) {
        let mut slot = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = slot.take() {
            s.finish(ok);
        }
    }
}
