//! Input sets made ahead of the grade that times on them.
//!
//! A grade against the NumPy reference times the submission on input sets
//! of its own (`TIMED_SETS` in `crate::grade`), each drawn by the judge's Python
//! and the reference timed on it once the grade's build is done, so that
//! nothing of the grade runs beside the reference's calls. Where the sets
//! are small that Python is most of a warm grade, and beside a busy
//! process it is what waits longest (NumPy's BLAS helper threads share
//! the busy CPU). So after such a grade, while the judge grades nothing,
//! the next grade's sets of the same task are made as a grade makes them:
//! from a secret of their own, under the node's timing lock. The next
//! grade of that task at that preset takes them instead of making its own,
//! once its build succeeded; they are used once, and removed with the
//! grade's own.
//!
//! Nothing of the judge's runs beside the reference's calls: a grade that
//! begins while a batch is drawn stops it, and one that begins while the
//! reference is timed waits for that to end (a fraction of a second: only
//! small batches are made ahead, [`AHEAD_BYTES`], [`AHEAD_REFERENCE`]).
//! No submission has seen a batch's inputs: they are drawn once the grade
//! before has ended, from a secret no one is told, and lie in the judge's
//! private cache until the grade that times on them.
//!
//! It owns when batches are made, kept and handed out; how a grade's sets
//! are planned is the grade's (`crate::grade`), and how they are made
//! [`super::hab`]'s.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use super::hab::{HabCase, Need};
use super::worker::Gate;
use super::{DataCache, DataError};
use hpcagent_corpus::Preset;
use hpcagent_corpus::hab::InputPlan;

/// The most bytes of inputs a batch made ahead holds.
pub const AHEAD_BYTES: u64 = 64 << 20;

/// The longest the reference's calls of a batch made ahead may take (as
/// its call on the public case took): a grade that begins meanwhile waits.
pub const AHEAD_REFERENCE: Duration = Duration::from_millis(250);

/// Batches kept at once, one a task: a judge several agents submit to
/// grades several tasks in turn.
const AHEAD_BATCHES: usize = 4;

/// What a batch is made for: a task (its path key) at a preset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    pub task: String,
    pub preset: Preset,
}

/// A batch of a grade's sets (never empty).
struct Batch {
    key: Key,
    sets: Vec<HabCase>,
}

/// The batches of one judge.
#[derive(Clone)]
pub struct Ahead {
    data: DataCache,
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    changed: Notify,
}

#[derive(Default)]
struct State {
    /// Grades begun and not yet over.
    grading: usize,
    /// The batch being made, if one is.
    making: Option<Phase>,
    /// Batches made, the newest last.
    ready: VecDeque<Batch>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the node's timing lock, or drawing the inputs.
    Drawing,
    /// Timing the reference on them.
    Timing,
    /// Stopped by a grade before the reference was called.
    Stopped,
}

/// A grade in progress; over when this goes.
pub struct Grading {
    shared: Arc<Shared>,
}

impl Drop for Grading {
    fn drop(&mut self) {
        self.shared.state().grading -= 1;
    }
}

impl Shared {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("sets ahead")
    }
}

impl Ahead {
    /// No batches yet; they are made in `data`.
    pub fn new(data: DataCache) -> Ahead {
        Ahead {
            data,
            shared: Arc::default(),
        }
    }

    /// Marks a grade begun, before its build: a batch being drawn is
    /// stopped, and one whose reference is being timed is waited for.
    pub async fn enter(&self) -> Grading {
        loop {
            let changed = self.shared.changed.notified();
            {
                let mut state = self.shared.state();
                if state.making != Some(Phase::Timing) {
                    if state.making == Some(Phase::Drawing) {
                        state.making = Some(Phase::Stopped);
                        self.shared.changed.notify_waiters();
                    }
                    state.grading += 1;
                    return Grading {
                        shared: self.shared.clone(),
                    };
                }
            }
            changed.await;
        }
    }

    /// Whether a batch for `key` is ready.
    pub fn has(&self, key: &Key) -> bool {
        self.shared.state().ready.iter().any(|b| &b.key == key)
    }

    /// The batch made for `key`, if one is ready; no other grade gets it.
    pub fn take(&self, key: &Key) -> Option<Vec<HabCase>> {
        let mut state = self.shared.state();
        let at = state.ready.iter().position(|b| &b.key == key)?;
        state.ready.remove(at).map(|batch| batch.sets)
    }

    /// Makes a batch for `key` in the background, the cases `plans` name
    /// of `kernel`, while it holds what `quiet` gives (the node's timing
    /// lock; none where it could not be taken); unless a grade is in
    /// progress, a batch is being made, or one for `key` is ready.
    pub fn make<L: Send + 'static>(
        &self,
        key: Key,
        kernel: hpcagent_corpus::Kernel,
        plans: Vec<InputPlan>,
        quiet: impl Future<Output = Option<L>> + Send + 'static,
    ) {
        {
            let mut state = self.shared.state();
            let ready = state.ready.iter().any(|b| b.key == key);
            if state.grading > 0 || state.making.is_some() || ready {
                return;
            }
            state.making = Some(Phase::Drawing);
        }
        let ahead = self.clone();
        tokio::spawn(async move {
            let made = ahead.made(&kernel, &plans, quiet).await;
            ahead.keep(key, made);
        });
    }

    async fn made<L>(
        &self,
        kernel: &hpcagent_corpus::Kernel,
        plans: &[InputPlan],
        quiet: impl Future<Output = Option<L>>,
    ) -> Option<Vec<HabCase>> {
        let quiet = tokio::select! {
            quiet = quiet => quiet?,
            () = self.stopped() => return None,
        };
        let ahead = self.clone();
        let gate = Gate::on(Box::pin(async move { ahead.timing() }));
        let made = self
            .data
            .hab_cases_gated(kernel, plans, Need::TimedReference, Some(gate))
            .await;
        drop(quiet);
        match made {
            Ok(sets) => (!sets.is_empty()).then_some(sets),
            Err(DataError::Cancelled) => None,
            Err(e) => {
                tracing::warn!("making a grade's input sets ahead: {e}");
                None
            }
        }
    }

    /// The word to time the reference: no, where a grade stopped the batch.
    fn timing(&self) -> bool {
        let mut state = self.shared.state();
        if state.making == Some(Phase::Stopped) {
            return false;
        }
        state.making = Some(Phase::Timing);
        true
    }

    /// Returns once a grade stopped the batch being made.
    async fn stopped(&self) {
        loop {
            let changed = self.shared.changed.notified();
            if self.shared.state().making == Some(Phase::Stopped) {
                return;
            }
            changed.await;
        }
    }

    /// Ends the making of a batch for `key`, keeping what was `made`: the
    /// oldest batch goes beyond [`AHEAD_BATCHES`].
    fn keep(&self, key: Key, made: Option<Vec<HabCase>>) {
        let mut gone = Vec::new();
        {
            let mut state = self.shared.state();
            state.making = None;
            if let Some(sets) = made {
                state.ready.push_back(Batch { key, sets });
                while state.ready.len() > AHEAD_BATCHES {
                    gone.extend(state.ready.pop_front());
                }
            }
            self.shared.changed.notify_waiters();
        }
        for batch in gone {
            batch.sets.iter().for_each(|set| self.data.discard(set));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Key {
        Key {
            task: "formula".into(),
            preset: Preset::S,
        }
    }

    #[tokio::test]
    async fn a_grade_stops_a_batch_being_drawn_and_waits_for_one_being_timed() {
        let cache = tempfile::tempdir().unwrap();
        let ahead = Ahead::new(DataCache::new(cache.path().into(), "python3".into()));

        ahead.shared.state().making = Some(Phase::Drawing);
        let grading = ahead.enter().await;
        assert!(
            !ahead.timing(),
            "a batch stopped by a grade timed its reference"
        );
        ahead.keep(key(), None);
        drop(grading);
        assert_eq!(ahead.shared.state().grading, 0);

        ahead.shared.state().making = Some(Phase::Drawing);
        assert!(ahead.timing());
        let entering = tokio::spawn({
            let ahead = ahead.clone();
            async move { drop(ahead.enter().await) }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            !entering.is_finished(),
            "a grade began beside the reference's timed calls"
        );
        ahead.keep(key(), None);
        tokio::time::timeout(Duration::from_secs(5), entering)
            .await
            .expect("the grade waited on after the batch was made")
            .unwrap();
        assert!(!ahead.has(&key()), "a batch that was not made is ready");
    }
}
