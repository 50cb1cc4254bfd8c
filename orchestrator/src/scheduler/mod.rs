//! The task scheduler: which task goes to which agent, judged by which judge,
//! served by which inference replica, and what happens when an attempt ends.
//!
//! Pure state, driven by the control plane with the current time, so every
//! decision is unit-tested without clocks or networks:
//!
//! - a lease gives one attempt of one task to one agent worker, with a
//!   deadline that heartbeats renew, but never past the end of the task's
//!   budget; an expired lease ends the attempt;
//! - an attempt that ends without a settling verdict requeues its task while
//!   attempts and the task's wall-clock budget (shared by its attempts) last,
//!   and fails it otherwise;
//! - a lease names a judge, and an inference replica when its agents need an
//!   LLM: from each [`Pool`], the usable endpoint with the fewest active
//!   leases. No lease is given before both are usable. An endpoint an agent
//!   reports as failing is set aside (until it registers again, or for
//!   [`SET_ASIDE`]) and the lease moved to a usable one when there is one, or
//!   when one becomes usable;
//! - a task settles once, by its current lease's Submit verdict, never twice.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use hpcagent_common::AttemptOutcome;

mod pool;

pub use pool::{Pool, SET_ASIDE};

/// The endpoints a lease is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Judge,
    Inference,
}

/// One task of the campaign.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSpec {
    pub id: String,
    pub kernel: String,
    /// Its kernel's track in the corpus (`benchmarks/<track>/…`, an
    /// HPCAgent-Bench manifest's taxonomy track).
    pub track: String,
    pub language: String,
    pub precision: String,
    /// The preset of the task's public case; `None`: the judges' own.
    pub preset: Option<String>,
    /// The task's time for its attempts where the corpus sets one (an
    /// HPCAgent-Bench level's); `None`: `TASK_BUDGET`.
    pub budget: Option<Duration>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TaskState {
    Pending,
    Leased(String),
    /// Settled by a Submit verdict, or skipped (an attempt that had nothing
    /// to do, [`AttemptOutcome::Skipped`], settles with its word): (status,
    /// speedup).
    Settled(String, Option<f64>),
    /// Out of attempts or budget: why.
    Failed(String),
}

impl TaskState {
    pub fn name(&self) -> &'static str {
        match self {
            TaskState::Pending => "pending",
            TaskState::Leased(_) => "leased",
            TaskState::Settled(..) => "settled",
            TaskState::Failed(_) => "failed",
        }
    }

    pub fn is_finished(&self) -> bool {
        matches!(self, TaskState::Settled(..) | TaskState::Failed(_))
    }
}

#[derive(Debug, Clone)]
pub struct Task {
    pub spec: TaskSpec,
    pub state: TaskState,
    pub attempts: u32,
    pub budget_used: Duration,
}

impl Task {
    /// The time its attempts may take in all: its own, else `TASK_BUDGET`.
    pub fn budget(&self, settings: &Settings) -> Duration {
        self.spec.budget.unwrap_or(settings.task_budget)
    }

    /// A task nothing has happened to yet.
    pub fn pending(spec: TaskSpec) -> Task {
        Task {
            spec,
            state: TaskState::Pending,
            attempts: 0,
            budget_used: Duration::ZERO,
        }
    }
}

/// An attempt in progress.
#[derive(Debug, Clone)]
pub struct Lease {
    pub id: String,
    pub task: usize,
    pub attempt: u32,
    pub agent: String,
    pub worker: u32,
    pub judge: String,
    /// The inference replica, when the campaign's agents need one.
    pub inference: Option<String>,
    pub started: Instant,
    pub deadline: Instant,
    /// The end of the task's budget: no renewal goes past it.
    pub budget_end: Instant,
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub max_attempts: u32,
    pub task_budget: Duration,
    pub lease_ttl: Duration,
    /// Whether leases need an inference replica (LLM agents).
    pub needs_inference: bool,
}

/// What a pull gets.
#[derive(Debug, Clone, PartialEq)]
pub enum Pull {
    Lease(Box<Grant>),
    /// Nothing now (no judge ready yet, or every task is leased): ask again.
    Wait,
    /// Every task is finished, or the campaign is draining.
    Done,
}

/// A lease as the agent sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Grant {
    pub lease_id: String,
    pub task: TaskSpec,
    pub attempt: u32,
    pub judge: String,
    pub judge_url: String,
    pub inference_url: Option<String>,
    pub budget_left: Duration,
    pub deadline: Instant,
    /// The task's attempts and budget used so far (for the store).
    pub attempts: u32,
    pub budget_used: Duration,
}

/// What an agent's completion of a lease found.
#[derive(Debug, Clone, PartialEq)]
pub enum Completion {
    /// The attempt ended without settling its task (requeued or failed).
    Ended(AttemptEnd),
    /// Its task was settled by this lease's Submit verdict.
    Settled { task: String, attempt: u32 },
    /// The lease had ended already (expired): its record stands.
    Late,
}

/// Whose Submit settled a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submitter {
    /// The agent, through its tools.
    Agent,
    /// The agent's worker, for an agent that ended as `ended` without
    /// submitting: the starter unchanged, or the file as the agent left it.
    /// Graded, but never the agent's result.
    Worker {
        ended: AttemptOutcome,
        starter: bool,
    },
}

impl Submitter {
    /// Its word, as the store and the attempts' log keep it.
    pub fn as_str(self) -> &'static str {
        match self {
            Submitter::Agent => "agent",
            Submitter::Worker { starter: true, .. } => "starter",
            Submitter::Worker { starter: false, .. } => "left",
        }
    }

    /// The attempt's outcome: the agent's own end when it did not submit.
    fn outcome(self) -> AttemptOutcome {
        match self {
            Submitter::Agent => AttemptOutcome::Submitted,
            Submitter::Worker { ended, .. } => ended,
        }
    }
}

/// How an attempt ended, for the store and the log.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptEnd {
    pub task: String,
    pub attempt: u32,
    pub outcome: AttemptOutcome,
    /// Whose Submit settled the task, when one did.
    pub submitter: Option<Submitter>,
    /// The task's state after it.
    pub state: TaskState,
    pub attempts: u32,
    pub budget_used: Duration,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RecordError {
    #[error("no active lease {0} (expired, completed, or never granted)")]
    UnknownLease(String),
    #[error("task {0} is already settled")]
    AlreadySettled(String),
}

pub struct Scheduler {
    settings: Settings,
    tasks: Vec<Task>,
    queue: VecDeque<usize>,
    leases: HashMap<String, Lease>,
    /// Leases that ended, and whether they settled their task, so a late
    /// call can still be placed (and checked against its holder).
    ended: HashMap<String, (Lease, bool)>,
    /// Leases that settled their task whose agent has not reported the
    /// attempt yet (its transcript, tokens and outcome are still to come).
    unreported: HashSet<String>,
    judges: Pool,
    inference: Pool,
    draining: bool,
}

/// Counts for status lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub total: u32,
    pub pending: u32,
    pub running: u32,
    pub settled: u32,
    pub failed: u32,
}

impl Scheduler {
    /// A scheduler over `tasks` (already settled or failed ones stay so).
    pub fn new(settings: Settings, mut tasks: Vec<Task>) -> Scheduler {
        for t in tasks.iter_mut().filter(|t| !t.state.is_finished()) {
            // A lease from before a restart is gone with its agent; a task
            // whose attempts or budget ran out with it is over.
            t.state = if t.attempts >= settings.max_attempts {
                TaskState::Failed(format!(
                    "interrupted on attempt {} of {}",
                    t.attempts, settings.max_attempts
                ))
            } else if t.budget_used >= t.budget(&settings) {
                TaskState::Failed(format!(
                    "interrupted; the task's budget of {:?} is spent",
                    t.budget(&settings)
                ))
            } else {
                TaskState::Pending
            };
        }
        let queue = (0..tasks.len())
            .filter(|i| tasks[*i].state == TaskState::Pending)
            .collect();
        Scheduler {
            settings,
            tasks,
            queue,
            leases: HashMap::new(),
            ended: HashMap::new(),
            unreported: HashSet::new(),
            judges: Pool::default(),
            inference: Pool::default(),
            draining: false,
        }
    }

    pub fn tasks(&self) -> &[Task] {
        &self.tasks
    }

    pub fn lease(&self, id: &str) -> Option<&Lease> {
        self.leases.get(id)
    }

    /// A lease, active or ended.
    pub fn any_lease(&self, id: &str) -> Option<&Lease> {
        self.leases
            .get(id)
            .or_else(|| self.ended.get(id).map(|(lease, _)| lease))
    }

    /// The task and attempt of a lease, active or ended.
    pub fn attempt_of(&self, lease_id: &str) -> Option<(&Task, u32)> {
        self.any_lease(lease_id)
            .map(|l| (&self.tasks[l.task], l.attempt))
    }

    pub fn counts(&self) -> Counts {
        let mut c = Counts {
            total: self.tasks.len() as u32,
            ..Counts::default()
        };
        for t in &self.tasks {
            match t.state {
                TaskState::Pending => c.pending += 1,
                TaskState::Leased(_) => c.running += 1,
                TaskState::Settled(..) => c.settled += 1,
                TaskState::Failed(_) => c.failed += 1,
            }
        }
        c
    }

    /// Every task settled or failed. A pending task is always queued and a
    /// leased one always has its lease, so this needs no walk over the
    /// tasks (it is asked on every pull).
    pub fn finished(&self) -> bool {
        self.queue.is_empty() && self.leases.is_empty()
    }

    pub fn drain(&mut self) {
        self.draining = true;
    }

    pub fn draining(&self) -> bool {
        self.draining
    }

    pub fn active_leases(&self) -> usize {
        self.leases.len()
    }

    /// Settled attempts whose agents have not reported them yet.
    pub fn unreported(&self) -> usize {
        self.unreported.len()
    }

    pub fn pool(&self, service: Service) -> &Pool {
        match service {
            Service::Judge => &self.judges,
            Service::Inference => &self.inference,
        }
    }

    pub fn pool_mut(&mut self, service: Service) -> &mut Pool {
        match service {
            Service::Judge => &mut self.judges,
            Service::Inference => &mut self.inference,
        }
    }

    pub fn pull(&mut self, agent: &str, worker: u32, now: Instant) -> Pull {
        if self.draining || self.finished() {
            return Pull::Done;
        }
        let Some(judge) = self.judges.pick(now) else {
            return Pull::Wait;
        };
        let inference = if self.settings.needs_inference {
            match self.inference.pick(now) {
                Some(replica) => Some(replica),
                None => return Pull::Wait,
            }
        } else {
            None
        };
        let Some(index) = self.queue.pop_front() else {
            return Pull::Wait;
        };
        let lease_id = new_lease_id();
        let task = &mut self.tasks[index];
        task.attempts += 1;
        task.state = TaskState::Leased(lease_id.clone());
        let budget_left = task.budget(&self.settings).saturating_sub(task.budget_used);
        let lease = Lease {
            id: lease_id.clone(),
            task: index,
            attempt: task.attempts,
            agent: agent.to_string(),
            worker,
            judge: judge.clone(),
            inference: inference.clone(),
            started: now,
            deadline: (now + self.settings.lease_ttl).min(now + budget_left),
            budget_end: now + budget_left,
        };
        let grant = Grant {
            lease_id: lease_id.clone(),
            task: task.spec.clone(),
            attempt: task.attempts,
            judge: judge.clone(),
            judge_url: self.judges.acquire(&judge),
            inference_url: inference.as_ref().map(|r| self.inference.acquire(r)),
            budget_left,
            deadline: lease.deadline,
            attempts: task.attempts,
            budget_used: task.budget_used,
        };
        self.leases.insert(lease_id, lease);
        Pull::Lease(Box::new(grant))
    }

    /// Extends a lease, never past its task's budget; `None` if it is gone.
    pub fn renew(&mut self, lease_id: &str, now: Instant) -> Option<Instant> {
        let ttl = self.settings.lease_ttl;
        let lease = self.leases.get_mut(lease_id)?;
        lease.deadline = (now + ttl).min(lease.budget_end);
        Some(lease.deadline)
    }

    /// Renews an agent's leases; returns the ones it no longer holds.
    pub fn renew_agent(&mut self, agent: &str, leases: &[String], now: Instant) -> Vec<String> {
        leases
            .iter()
            .filter(|id| match self.leases.get(*id) {
                Some(l) if l.agent == agent => {
                    self.renew(id, now);
                    false
                }
                _ => true,
            })
            .cloned()
            .collect()
    }

    /// The lease's `service` endpoint failed its agent at `failed_url`: set
    /// it aside if that is still its URL (a repeated report of the same
    /// failure does not extend that), then as [`Self::endpoint_for`].
    pub fn endpoint_failed(
        &mut self,
        service: Service,
        lease_id: &str,
        failed_url: &str,
        now: Instant,
    ) -> Option<Option<String>> {
        if let Some(failed) = self.endpoint_of(service, lease_id)? {
            let pool = self.pool_mut(service);
            if failed_url.is_empty() || pool.url(&failed) == Some(failed_url) {
                pool.set_aside(&failed, now);
            }
        }
        self.endpoint_for(service, lease_id, now)
    }

    /// A usable `service` endpoint's URL for the lease, moving the lease off
    /// one that is not usable. `None`: no such lease; `Some(None)`: no usable
    /// endpoint now (or the lease needs none).
    pub fn endpoint_for(
        &mut self,
        service: Service,
        lease_id: &str,
        now: Instant,
    ) -> Option<Option<String>> {
        let Some(current) = self.endpoint_of(service, lease_id)? else {
            return Some(None);
        };
        let pool = self.pool_mut(service);
        if pool.usable(&current, now) {
            return Some(pool.url(&current).map(str::to_string));
        }
        let Some(next) = pool.pick(now) else {
            return Some(None);
        };
        pool.release(&current);
        let url = pool.acquire(&next);
        let lease = self.leases.get_mut(lease_id).expect("checked");
        match service {
            Service::Judge => lease.judge = next,
            Service::Inference => lease.inference = Some(next),
        }
        Some(Some(url))
    }

    /// The lease's endpoint of `service`; `None` if there is no such lease.
    fn endpoint_of(&self, service: Service, lease_id: &str) -> Option<Option<String>> {
        let lease = self.leases.get(lease_id)?;
        Some(match service {
            Service::Judge => Some(lease.judge.clone()),
            Service::Inference => lease.inference.clone(),
        })
    }

    fn release(&mut self, lease: &Lease) {
        self.judges.release(&lease.judge);
        if let Some(replica) = &lease.inference {
            self.inference.release(replica);
        }
    }

    /// The judge's Submit verdict for a lease, made by `submitter`: settles
    /// the task unless the judge itself failed (harness_error), which ends
    /// the attempt instead.
    pub fn record(
        &mut self,
        lease_id: &str,
        (status, speedup): (&str, Option<f64>),
        submitter: Submitter,
        now: Instant,
    ) -> Result<Option<AttemptEnd>, RecordError> {
        let lease = self
            .leases
            .get(lease_id)
            .ok_or_else(|| RecordError::UnknownLease(lease_id.to_string()))?;
        let task = &self.tasks[lease.task];
        if let TaskState::Settled(..) = task.state {
            return Err(RecordError::AlreadySettled(task.spec.id.clone()));
        }
        if status == "harness_error" {
            return Ok(None);
        }
        let lease = self.leases.remove(lease_id).expect("checked");
        let mut end = self.end(
            lease,
            submitter.outcome(),
            TaskState::Settled(status.to_string(), speedup),
            now,
        );
        end.submitter = Some(submitter);
        if let Some(e) = self.ended.get_mut(lease_id) {
            e.1 = true;
        }
        self.unreported.insert(lease_id.to_string());
        Ok(Some(end))
    }

    /// The agent is done with a lease: if its verdict did not settle the
    /// task, the attempt failed.
    pub fn complete(
        &mut self,
        lease_id: &str,
        outcome: AttemptOutcome,
        now: Instant,
    ) -> Option<Completion> {
        if let Some(lease) = self.leases.remove(lease_id) {
            if outcome == AttemptOutcome::Skipped {
                // Nothing to attempt (the baseline policy on a task with no
                // baseline): settled as such, neither failed nor retried.
                let state = TaskState::Settled(outcome.to_string(), None);
                return Some(Completion::Ended(self.end(lease, outcome, state, now)));
            }
            return Some(Completion::Ended(self.fail_attempt(lease, outcome, now)));
        }
        self.unreported.remove(lease_id);
        let (lease, settled) = self.ended.get(lease_id)?;
        Some(if *settled {
            Completion::Settled {
                task: self.tasks[lease.task].spec.id.clone(),
                attempt: lease.attempt,
            }
        } else {
            Completion::Late
        })
    }

    /// Ends every lease past its deadline.
    pub fn expire(&mut self, now: Instant) -> Vec<AttemptEnd> {
        let expired: Vec<String> = self
            .leases
            .values()
            .filter(|l| l.deadline <= now)
            .map(|l| l.id.clone())
            .collect();
        expired
            .into_iter()
            .map(|id| {
                let lease = self.leases.remove(&id).expect("listed");
                let outcome = if now >= lease.budget_end {
                    AttemptOutcome::OverBudget
                } else {
                    AttemptOutcome::Expired
                };
                self.fail_attempt(lease, outcome, now)
            })
            .collect()
    }

    /// Ends an attempt that did not settle its task: requeue while attempts
    /// and budget last.
    fn fail_attempt(&mut self, lease: Lease, outcome: AttemptOutcome, now: Instant) -> AttemptEnd {
        let task = &self.tasks[lease.task];
        let used = task.budget_used + now.saturating_duration_since(lease.started);
        let state = if task.attempts >= self.settings.max_attempts {
            TaskState::Failed(format!(
                "{outcome} on attempt {} of {}",
                task.attempts, self.settings.max_attempts
            ))
        } else if used >= task.budget(&self.settings) {
            TaskState::Failed(format!(
                "{outcome}; the task's budget of {:?} is spent",
                task.budget(&self.settings)
            ))
        } else {
            TaskState::Pending
        };
        if state == TaskState::Pending {
            self.queue.push_back(lease.task);
        }
        self.end(lease, outcome, state, now)
    }

    fn end(
        &mut self,
        lease: Lease,
        outcome: AttemptOutcome,
        state: TaskState,
        now: Instant,
    ) -> AttemptEnd {
        self.release(&lease);
        let task = &mut self.tasks[lease.task];
        task.budget_used += now.saturating_duration_since(lease.started);
        task.state = state.clone();
        let end = AttemptEnd {
            task: task.spec.id.clone(),
            attempt: lease.attempt,
            outcome,
            submitter: None,
            state,
            attempts: task.attempts,
            budget_used: task.budget_used,
        };
        self.ended.insert(lease.id.clone(), (lease, false));
        end
    }
}

fn new_lease_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}

#[cfg(test)]
mod tests;
