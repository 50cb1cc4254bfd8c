//! The task scheduler: which task goes to which agent, judged by which judge,
//! and what happens when an attempt ends.
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
//! - the judge of a lease is the ready judge with the fewest active leases; a
//!   judge an agent reports as failing is set aside (until it registers again,
//!   or for [`SET_ASIDE`]) and the lease moved to a usable one when there is
//!   one, or when one becomes usable;
//! - a task settles once, by its current lease's Submit verdict, never twice.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

/// How long a judge reported as failing gets no leases (unless it registers
/// again: a restarted judge is a new process).
pub const SET_ASIDE: Duration = Duration::from_secs(30);

/// One task of the campaign.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskSpec {
    pub id: String,
    pub kernel: String,
    pub language: String,
    pub precision: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TaskState {
    Pending,
    Leased(String),
    /// Settled by a Submit verdict: (status, speedup).
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

/// An attempt in progress.
#[derive(Debug, Clone)]
pub struct Lease {
    pub id: String,
    pub task: usize,
    pub attempt: u32,
    pub agent: String,
    pub worker: u32,
    pub judge: String,
    pub started: Instant,
    pub deadline: Instant,
    /// The end of the task's budget: no renewal goes past it.
    pub budget_end: Instant,
}

#[derive(Debug, Clone, Default)]
struct Judge {
    url: String,
    ready: bool,
    load: u32,
    set_aside_until: Option<Instant>,
}

impl Judge {
    fn usable(&self, now: Instant) -> bool {
        self.ready && self.set_aside_until.is_none_or(|t| now >= t)
    }
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub max_attempts: u32,
    pub task_budget: Duration,
    pub lease_ttl: Duration,
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
    pub budget_left: Duration,
    pub deadline: Instant,
    /// The task's attempts and budget used so far (for the store).
    pub attempts: u32,
    pub budget_used: Duration,
}

/// What a CompleteTask found.
#[derive(Debug, Clone, PartialEq)]
pub enum Completion {
    /// The attempt ended without settling its task (requeued or failed).
    Ended(AttemptEnd),
    /// Its task was settled by this lease's Submit verdict.
    Settled { task: String, attempt: u32 },
    /// The lease had ended already (expired): its record stands.
    Late,
}

/// How an attempt ended, for the store and the log.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptEnd {
    pub task: String,
    pub attempt: u32,
    pub outcome: String,
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
    judges: BTreeMap<String, Judge>,
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
            } else if t.budget_used >= settings.task_budget {
                TaskState::Failed(format!(
                    "interrupted; the task's budget of {:?} is spent",
                    settings.task_budget
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
            judges: BTreeMap::new(),
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

    /// Every task settled or failed.
    pub fn finished(&self) -> bool {
        self.tasks.iter().all(|t| t.state.is_finished())
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

    /// A judge (re)registered: a new process, trusted afresh.
    pub fn judge_registered(&mut self, instance: &str, url: &str) {
        let judge = self.judges.entry(instance.to_string()).or_default();
        judge.url = url.to_string();
        judge.ready = false;
        judge.set_aside_until = None;
    }

    /// A judge reported whether it is ready.
    pub fn judge_ready(&mut self, instance: &str, ready: bool) {
        if let Some(judge) = self.judges.get_mut(instance) {
            judge.ready = ready;
        }
    }

    /// A judge is gone (its step died or stopped heartbeating).
    pub fn judge_down(&mut self, instance: &str) {
        if let Some(j) = self.judges.get_mut(instance) {
            j.ready = false;
        }
    }

    /// The least loaded usable judge.
    fn pick_judge(&self, now: Instant) -> Option<String> {
        self.judges
            .iter()
            .filter(|(_, j)| j.usable(now))
            .min_by_key(|(name, j)| (j.load, (*name).clone()))
            .map(|(name, _)| name.clone())
    }

    pub fn pull(&mut self, agent: &str, worker: u32, now: Instant) -> Pull {
        if self.draining || self.finished() {
            return Pull::Done;
        }
        let Some(judge) = self.pick_judge(now) else {
            return Pull::Wait;
        };
        let Some(index) = self.queue.pop_front() else {
            return Pull::Wait;
        };
        let lease_id = new_lease_id();
        let task = &mut self.tasks[index];
        task.attempts += 1;
        task.state = TaskState::Leased(lease_id.clone());
        let budget_left = self.settings.task_budget.saturating_sub(task.budget_used);
        let lease = Lease {
            id: lease_id.clone(),
            task: index,
            attempt: task.attempts,
            agent: agent.to_string(),
            worker,
            judge: judge.clone(),
            started: now,
            deadline: (now + self.settings.lease_ttl).min(now + budget_left),
            budget_end: now + budget_left,
        };
        let grant = Grant {
            lease_id: lease_id.clone(),
            task: task.spec.clone(),
            attempt: task.attempts,
            judge: judge.clone(),
            judge_url: self.judges[&judge].url.clone(),
            budget_left,
            deadline: lease.deadline,
            attempts: task.attempts,
            budget_used: task.budget_used,
        };
        self.judges.get_mut(&judge).expect("picked").load += 1;
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

    /// Takes back a lease that never reached its agent: the attempt does not count.
    pub fn revoke(&mut self, lease_id: &str) {
        let Some(lease) = self.leases.remove(lease_id) else {
            return;
        };
        if let Some(j) = self.judges.get_mut(&lease.judge) {
            j.load = j.load.saturating_sub(1);
        }
        let task = &mut self.tasks[lease.task];
        task.attempts = task.attempts.saturating_sub(1);
        task.state = TaskState::Pending;
        self.queue.push_front(lease.task);
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

    /// The lease's judge failed its agent: set it aside (a repeated report of
    /// the same failure does not extend that), then as [`Self::judge_for`].
    pub fn judge_failed(&mut self, lease_id: &str, now: Instant) -> Option<Option<String>> {
        let failed = self.leases.get(lease_id)?.judge.clone();
        if let Some(j) = self.judges.get_mut(&failed)
            && j.usable(now)
        {
            j.set_aside_until = Some(now + SET_ASIDE);
        }
        self.judge_for(lease_id, now)
    }

    /// A usable judge's URL for the lease, moving the lease off a judge that
    /// is not usable. `None`: no such lease; `Some(None)`: no usable judge now.
    pub fn judge_for(&mut self, lease_id: &str, now: Instant) -> Option<Option<String>> {
        let current = self.leases.get(lease_id)?.judge.clone();
        if let Some(j) = self.judges.get(&current)
            && j.usable(now)
        {
            return Some(Some(j.url.clone()));
        }
        let Some(next) = self.pick_judge(now) else {
            return Some(None);
        };
        if let Some(j) = self.judges.get_mut(&current) {
            j.load = j.load.saturating_sub(1);
        }
        self.judges.get_mut(&next).expect("picked").load += 1;
        self.leases.get_mut(lease_id).expect("checked").judge = next.clone();
        Some(Some(self.judges[&next].url.clone()))
    }

    /// The judge's Submit verdict for a lease: settles the task unless the
    /// judge itself failed (harness_error), which ends the attempt instead.
    pub fn record(
        &mut self,
        lease_id: &str,
        status: &str,
        speedup: Option<f64>,
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
        let end = self.end(
            lease,
            "submitted",
            TaskState::Settled(status.to_string(), speedup),
            now,
        );
        if let Some(e) = self.ended.get_mut(lease_id) {
            e.1 = true;
        }
        Ok(Some(end))
    }

    /// The agent is done with a lease: if its verdict did not settle the
    /// task, the attempt failed.
    pub fn complete(&mut self, lease_id: &str, outcome: &str, now: Instant) -> Option<Completion> {
        if let Some(lease) = self.leases.remove(lease_id) {
            return Some(Completion::Ended(self.fail_attempt(lease, outcome, now)));
        }
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
                    "over budget"
                } else {
                    "expired"
                };
                self.fail_attempt(lease, outcome, now)
            })
            .collect()
    }

    /// Ends an attempt that did not settle its task: requeue while attempts
    /// and budget last.
    fn fail_attempt(&mut self, lease: Lease, outcome: &str, now: Instant) -> AttemptEnd {
        let task = &self.tasks[lease.task];
        let used = task.budget_used + now.saturating_duration_since(lease.started);
        let state = if task.attempts >= self.settings.max_attempts {
            TaskState::Failed(format!(
                "{outcome} on attempt {} of {}",
                task.attempts, self.settings.max_attempts
            ))
        } else if used >= self.settings.task_budget {
            TaskState::Failed(format!(
                "{outcome}; the task's budget of {:?} is spent",
                self.settings.task_budget
            ))
        } else {
            TaskState::Pending
        };
        if state == TaskState::Pending {
            self.queue.push_back(lease.task);
        }
        self.end(lease, outcome, state, now)
    }

    fn end(&mut self, lease: Lease, outcome: &str, state: TaskState, now: Instant) -> AttemptEnd {
        if let Some(j) = self.judges.get_mut(&lease.judge) {
            j.load = j.load.saturating_sub(1);
        }
        let task = &mut self.tasks[lease.task];
        task.budget_used += now.saturating_duration_since(lease.started);
        task.state = state.clone();
        let end = AttemptEnd {
            task: task.spec.id.clone(),
            attempt: lease.attempt,
            outcome: outcome.to_string(),
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
mod tests {
    use super::*;

    fn tasks(n: usize) -> Vec<Task> {
        (0..n)
            .map(|i| Task {
                spec: TaskSpec {
                    id: format!("k{i}.c.fp64"),
                    kernel: format!("k{i}"),
                    language: "c".into(),
                    precision: "fp64".into(),
                },
                state: TaskState::Pending,
                attempts: 0,
                budget_used: Duration::ZERO,
            })
            .collect()
    }

    fn scheduler(n: usize, max_attempts: u32) -> Scheduler {
        Scheduler::new(
            Settings {
                max_attempts,
                task_budget: Duration::from_secs(600),
                lease_ttl: Duration::from_secs(30),
            },
            tasks(n),
        )
    }

    fn ready(s: &mut Scheduler, name: &str, url: &str) {
        s.judge_registered(name, url);
        s.judge_ready(name, true);
    }

    fn grant(p: Pull) -> Grant {
        match p {
            Pull::Lease(g) => *g,
            other => panic!("expected a lease, got {other:?}"),
        }
    }

    #[test]
    fn no_lease_before_a_judge_is_ready() {
        let mut s = scheduler(2, 3);
        let t = Instant::now();
        assert_eq!(s.pull("agent-0", 0, t), Pull::Wait);
        s.judge_registered("judge-0", "http://j0");
        assert_eq!(s.pull("agent-0", 0, t), Pull::Wait);
        s.judge_ready("judge-0", true);
        assert_eq!(grant(s.pull("agent-0", 0, t)).judge_url, "http://j0");
    }

    #[test]
    fn judges_are_assigned_by_least_load() {
        let mut s = scheduler(4, 3);
        let t = Instant::now();
        ready(&mut s, "judge-0", "j0");
        ready(&mut s, "judge-1", "j1");
        let judges: Vec<String> = (0..4).map(|w| grant(s.pull("a", w, t)).judge).collect();
        assert_eq!(judges, ["judge-0", "judge-1", "judge-0", "judge-1"]);
    }

    #[test]
    fn a_task_settles_once() {
        let mut s = scheduler(1, 3);
        let t = Instant::now();
        ready(&mut s, "judge-0", "j0");
        let g = grant(s.pull("a", 0, t));
        let end = s.record(&g.lease_id, "ok", Some(1.1), t).unwrap().unwrap();
        assert_eq!(end.state, TaskState::Settled("ok".into(), Some(1.1)));
        assert!(
            s.record(&g.lease_id, "ok", Some(1.1), t).is_err(),
            "a second verdict is refused"
        );
        assert_eq!(
            s.complete(&g.lease_id, "submitted", t),
            Some(Completion::Settled {
                task: "k0.c.fp64".into(),
                attempt: 1
            }),
            "completing after the settle is bookkeeping"
        );
        assert!(s.finished());
        assert_eq!(s.pull("a", 0, t), Pull::Done);
    }

    #[test]
    fn expired_leases_requeue_until_attempts_run_out() {
        let mut s = scheduler(1, 2);
        let t0 = Instant::now();
        ready(&mut s, "judge-0", "j0");
        let first = grant(s.pull("a", 0, t0));
        let late = t0 + Duration::from_secs(31);
        let ended = s.expire(late);
        assert_eq!(ended[0].state, TaskState::Pending);
        let second = grant(s.pull("b", 0, late));
        assert_eq!(second.attempt, 2);
        assert!(
            s.record(&first.lease_id, "ok", None, late).is_err(),
            "a verdict for the expired lease is stale"
        );
        let ended = s.expire(late + Duration::from_secs(31));
        assert!(
            matches!(ended[0].state, TaskState::Failed(ref why) if why.contains("expired on attempt 2 of 2"))
        );
        assert!(s.finished());
    }

    #[test]
    fn heartbeats_renew_leases_and_report_lost_ones() {
        let mut s = scheduler(1, 3);
        let t0 = Instant::now();
        ready(&mut s, "judge-0", "j0");
        let g = grant(s.pull("a", 0, t0));
        let lost = s.renew_agent(
            "a",
            &[g.lease_id.clone(), "nope".into()],
            t0 + Duration::from_secs(20),
        );
        assert_eq!(lost, ["nope"]);
        assert!(
            s.expire(t0 + Duration::from_secs(40)).is_empty(),
            "renewed at 20 s, alive until 50 s"
        );
        let lost = s.renew_agent("someone-else", std::slice::from_ref(&g.lease_id), t0);
        assert_eq!(lost, std::slice::from_ref(&g.lease_id));
    }

    #[test]
    fn a_failing_judge_is_set_aside_and_the_lease_moves() {
        let mut s = scheduler(2, 3);
        let t = Instant::now();
        ready(&mut s, "judge-0", "j0");
        ready(&mut s, "judge-1", "j1");
        let g = grant(s.pull("a", 0, t));
        assert_eq!(g.judge, "judge-0");
        assert_eq!(s.judge_failed(&g.lease_id, t), Some(Some("j1".to_string())));
        assert_eq!(s.lease(&g.lease_id).unwrap().judge, "judge-1");
        assert_eq!(
            grant(s.pull("a", 1, t)).judge,
            "judge-1",
            "judge-0 gets nothing while set aside"
        );
    }

    #[test]
    fn a_lone_failing_judge_is_waited_for_and_taken_back_once_restarted() {
        let mut s = scheduler(1, 3);
        let t = Instant::now();
        ready(&mut s, "judge-0", "old");
        let g = grant(s.pull("a", 0, t));
        assert_eq!(s.judge_failed(&g.lease_id, t), Some(None), "no other judge");
        let later = t + Duration::from_secs(5);
        assert_eq!(
            s.judge_failed(&g.lease_id, later),
            Some(None),
            "a repeated report changes nothing"
        );
        s.judge_registered("judge-0", "new");
        assert_eq!(s.judge_for(&g.lease_id, later), Some(None), "not ready yet");
        s.judge_ready("judge-0", true);
        assert_eq!(
            s.judge_for(&g.lease_id, later),
            Some(Some("new".to_string())),
            "registering again clears the set-aside"
        );
    }

    #[test]
    fn a_set_aside_judge_is_usable_again_after_a_while() {
        let mut s = scheduler(2, 3);
        let t = Instant::now();
        ready(&mut s, "judge-0", "j0");
        let g = grant(s.pull("a", 0, t));
        s.judge_failed(&g.lease_id, t);
        assert_eq!(s.pull("a", 1, t + Duration::from_secs(1)), Pull::Wait);
        assert_eq!(grant(s.pull("a", 1, t + SET_ASIDE)).judge, "judge-0");
    }

    #[test]
    fn renewals_never_pass_the_task_budget() {
        let mut s = Scheduler::new(
            Settings {
                max_attempts: 3,
                task_budget: Duration::from_secs(40),
                lease_ttl: Duration::from_secs(30),
            },
            tasks(1),
        );
        let t = Instant::now();
        ready(&mut s, "judge-0", "j0");
        let g = grant(s.pull("a", 0, t));
        let deadline = s.renew(&g.lease_id, t + Duration::from_secs(25)).unwrap();
        assert_eq!(deadline, t + Duration::from_secs(40));
        let ended = s.expire(t + Duration::from_secs(40));
        assert_eq!(ended[0].outcome, "over budget");
        assert!(matches!(ended[0].state, TaskState::Failed(ref why) if why.contains("budget")));
    }

    #[test]
    fn a_revoked_lease_does_not_count_as_an_attempt() {
        let mut s = scheduler(1, 3);
        let t = Instant::now();
        ready(&mut s, "judge-0", "j0");
        let g = grant(s.pull("a", 0, t));
        s.revoke(&g.lease_id);
        assert_eq!(grant(s.pull("a", 0, t)).attempt, 1);
    }

    #[test]
    fn harness_errors_do_not_settle_and_gave_up_requeues() {
        let mut s = scheduler(1, 3);
        let t = Instant::now();
        ready(&mut s, "judge-0", "j0");
        let g = grant(s.pull("a", 0, t));
        assert_eq!(s.record(&g.lease_id, "harness_error", None, t), Ok(None));
        let Some(Completion::Ended(end)) = s.complete(&g.lease_id, "gave_up", t) else {
            panic!("the attempt ends")
        };
        assert_eq!(end.state, TaskState::Pending);
        assert_eq!(grant(s.pull("a", 0, t)).attempt, 2);
    }

    #[test]
    fn the_budget_is_shared_across_attempts() {
        let mut s = Scheduler::new(
            Settings {
                max_attempts: 10,
                task_budget: Duration::from_secs(50),
                lease_ttl: Duration::from_secs(30),
            },
            tasks(1),
        );
        let t0 = Instant::now();
        ready(&mut s, "judge-0", "j0");
        let g = grant(s.pull("a", 0, t0));
        s.complete(&g.lease_id, "error", t0 + Duration::from_secs(30));
        let g = grant(s.pull("a", 0, t0 + Duration::from_secs(30)));
        assert_eq!(g.budget_left, Duration::from_secs(20));
        let Some(Completion::Ended(end)) =
            s.complete(&g.lease_id, "error", t0 + Duration::from_secs(51))
        else {
            panic!("the attempt ends")
        };
        assert!(matches!(end.state, TaskState::Failed(ref why) if why.contains("budget")));
    }

    #[test]
    fn resumed_tasks_keep_their_outcome_and_lose_their_leases() {
        let mut all = tasks(4);
        all[0].state = TaskState::Settled("ok".into(), Some(1.0));
        all[1].state = TaskState::Leased("old".into());
        all[1].attempts = 1;
        all[3].state = TaskState::Leased("old".into());
        all[3].attempts = 3;
        let mut s = Scheduler::new(
            Settings {
                max_attempts: 3,
                task_budget: Duration::from_secs(60),
                lease_ttl: Duration::from_secs(30),
            },
            all,
        );
        assert_eq!(
            s.counts(),
            Counts {
                total: 4,
                pending: 2,
                running: 0,
                settled: 1,
                failed: 1
            },
            "a task interrupted on its last attempt is failed"
        );
        ready(&mut s, "judge-0", "j0");
        let g = grant(s.pull("a", 0, Instant::now()));
        assert_eq!((g.task.id.as_str(), g.attempt), ("k1.c.fp64", 2));
    }
}
