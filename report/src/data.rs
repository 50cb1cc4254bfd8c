//! What the report shows, read once from the store.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hpcagent_orchestrator::store::{
    AttemptRow, CampaignRow, EventRow, FILE_NAME, Reader, TaskRow, VerdictRow,
};

use crate::ReportError;

/// A campaign's store as the report sees it: whatever it holds so far.
#[derive(Debug, Clone)]
pub struct RunData {
    pub run_dir: PathBuf,
    /// `None`: the store was created but the campaign row never written.
    pub campaign: Option<CampaignRow>,
    pub tasks: Vec<TaskRow>,
    pub attempts: Vec<AttemptRow>,
    pub verdicts: Vec<VerdictRow>,
    pub events: Vec<EventRow>,
    /// What the run was (`None` where the store has no campaign yet).
    pub identity: Option<crate::RunIdentity>,
}

/// The campaign at a glance.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// running | finished | drained | interrupted | failed, or "not started".
    pub state: String,
    pub tasks: usize,
    pub settled: usize,
    /// Settled by their agents' own Submits, and of those `ok`.
    pub by_agents: usize,
    pub ok: usize,
    pub failed: usize,
    /// Tasks whose agents failed them (could not start, crashed, ended
    /// without submitting, …), and how many of each end.
    pub agents_failed: usize,
    pub agent_ends: std::collections::BTreeMap<String, usize>,
    /// Of the agents' own positive speedups; `None` when there is none.
    pub geomean_speedup: Option<f64>,
}

impl RunData {
    pub fn load(run_dir: &Path) -> Result<RunData, ReportError> {
        if !run_dir.join(FILE_NAME).is_file() {
            return Err(ReportError::NoStore(run_dir.to_path_buf()));
        }
        let reader = Reader::open(run_dir)?;
        let campaign = reader.campaign()?;
        Ok(RunData {
            identity: Some(crate::RunIdentity::of(run_dir, campaign.as_ref())),
            run_dir: run_dir.to_path_buf(),
            campaign,
            tasks: reader.tasks()?,
            attempts: reader.attempts()?,
            verdicts: reader.verdicts()?,
            events: reader.events()?,
        })
    }

    pub fn summary(&self) -> Summary {
        let count = |state: &str| self.tasks.iter().filter(|t| t.state == state).count();
        Summary {
            state: self
                .campaign
                .as_ref()
                .map_or_else(|| "not started".to_string(), |c| c.state.clone()),
            tasks: self.tasks.len(),
            settled: count("settled"),
            by_agents: self.tasks.iter().filter(|t| t.by_agent()).count(),
            ok: self
                .tasks
                .iter()
                .filter(|t| t.by_agent() && outcome(t) == "ok")
                .count(),
            failed: count("failed"),
            agents_failed: self.tasks.iter().filter(|t| t.agent_failed()).count(),
            agent_ends: self.tasks.iter().filter(|t| t.agent_failed()).fold(
                Default::default(),
                |mut ends, t| {
                    *ends
                        .entry(t.outcome.clone().unwrap_or_default())
                        .or_default() += 1;
                    ends
                },
            ),
            geomean_speedup: geometric_mean(
                self.tasks
                    .iter()
                    .filter(|t| t.by_agent())
                    .filter_map(|t| t.speedup),
            ),
        }
    }

    /// What the run cost (its jobs' time, node- and GPU-hours, tokens).
    pub fn cost(&self) -> crate::Cost {
        crate::Cost::of(&self.run_dir, self.campaign.as_ref(), &self.attempts)
    }

    /// HPCAgent-Bench's Score and fast_p over the campaign's tasks.
    pub fn bench_score(&self) -> crate::BenchScore {
        let graded: Vec<crate::Graded> = self.tasks.iter().map(crate::Graded::of_row).collect();
        crate::bench_score(&graded)
    }

    /// The campaign's agent policy (`AGENT_POLICY`), from the configuration it
    /// ran with.
    pub fn policy(&self) -> Option<String> {
        let config = &self.campaign.as_ref()?.config;
        crate::identity::values(config).remove("AGENT_POLICY")
    }

    /// The agent instance whose attempt settled each task.
    pub fn settled_by(&self) -> BTreeMap<&str, &str> {
        let agents: BTreeMap<(&str, u32), &str> = self
            .attempts
            .iter()
            .map(|a| ((a.task.as_str(), a.attempt), a.agent.as_str()))
            .collect();
        self.verdicts
            .iter()
            .filter(|v| v.settled)
            .filter_map(|v| Some((v.task.as_str(), *agents.get(&(v.task.as_str(), v.attempt))?)))
            .collect()
    }

    /// The words of the verdict that settled each task (else its last
    /// verdict's): "correct on the public case …", "compilation failed …".
    pub fn verdict_messages(&self) -> BTreeMap<&str, String> {
        let message = |v: &VerdictRow| {
            serde_json::from_str::<serde_json::Value>(&v.detail)
                .ok()
                .and_then(|d| d["message"].as_str().map(str::to_string))
        };
        // In the order graded: a later verdict replaces an earlier one,
        // and none replaces the one that settled.
        let mut messages: BTreeMap<&str, (bool, String)> = BTreeMap::new();
        for v in &self.verdicts {
            let Some(text) = message(v) else { continue };
            let kept = messages
                .get(v.task.as_str())
                .is_some_and(|(settled, _)| *settled);
            if !kept {
                messages.insert(v.task.as_str(), (v.settled, text));
            }
        }
        messages
            .into_iter()
            .map(|(task, (_, text))| (task, text))
            .collect()
    }

    /// A task's last attempt's directory, `tasks/<task>/attempt-<k>`, if
    /// it is there.
    pub fn attempt_dir(&self, task: &TaskRow) -> Option<PathBuf> {
        let dir = self
            .run_dir
            .join("tasks")
            .join(&task.id)
            .join(format!("attempt-{}", task.attempts));
        dir.is_dir().then_some(dir)
    }

    /// Why tasks did not end well, grouped: how their agents failed, and
    /// the statuses other than ok their tasks ended with; each with its
    /// count, most first.
    pub fn failure_reasons(&self) -> Vec<(String, usize)> {
        let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
        for t in &self.tasks {
            if t.agent_failed() {
                let ended = t.outcome.as_deref().unwrap_or("failed");
                *reasons.entry(format!("agent {ended}")).or_default() += 1;
            }
            let status = outcome(t);
            if !matches!(status, "ok" | "pending" | "leased") {
                let why = match (status, &t.status) {
                    ("failed", Some(why)) => format!("task failed: {why}"),
                    (status, _) => format!("graded {status}"),
                };
                *reasons.entry(why).or_default() += 1;
            }
        }
        let mut reasons: Vec<(String, usize)> = reasons.into_iter().collect();
        reasons.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        reasons
    }

    /// How each of a task's attempts ended, in order ("crashed",
    /// "submitted", …): its agent column when it had more than one.
    pub fn attempt_ends(&self) -> BTreeMap<&str, Vec<&str>> {
        let mut ends: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for a in &self.attempts {
            let end = if a.outcome.is_empty() {
                "running"
            } else {
                a.outcome.as_str()
            };
            ends.entry(a.task.as_str()).or_default().push(end);
        }
        ends
    }

    /// Tokens spent on each task, over all its attempts.
    pub fn tokens(&self) -> BTreeMap<&str, u64> {
        let mut tokens = BTreeMap::new();
        for a in &self.attempts {
            *tokens.entry(a.task.as_str()).or_default() += a.tokens;
        }
        tokens
    }

    /// The campaign's time zero: its start, or its first record.
    pub fn start(&self) -> f64 {
        self.campaign.as_ref().map_or_else(
            || self.times().fold(f64::INFINITY, f64::min),
            |c| c.started_at,
        )
    }

    /// The campaign's last moment: its end, or its last record.
    pub fn end(&self) -> f64 {
        let last = self.times().fold(self.start(), f64::max);
        self.campaign
            .as_ref()
            .and_then(|c| c.ended_at)
            .map_or(last, |end| end.max(last))
    }

    fn times(&self) -> impl Iterator<Item = f64> + '_ {
        let events = self.events.iter().map(|e| e.at);
        events.chain(self.verdicts.iter().map(|v| v.at))
    }
}

/// A task's outcome in one word: its verdict's status once settled, "failed"
/// (the store keeps why in the status), or where it stands.
pub fn outcome(task: &TaskRow) -> &str {
    match (task.state.as_str(), task.status.as_deref()) {
        ("failed", _) => "failed",
        ("settled", Some(status)) => status,
        (state, _) => state,
    }
}

/// The geometric mean of the positive values; `None` when there is none.
pub fn geometric_mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let logs: Vec<f64> = values.filter(|v| *v > 0.0).map(f64::ln).collect();
    (!logs.is_empty()).then(|| (logs.iter().sum::<f64>() / logs.len() as f64).exp())
}

/// An ok Submit's verdict of `task` as the store keeps it, its stored
/// JSON `detail`: for the report's tests.
#[cfg(test)]
pub(crate) fn verdict_row(task: &str, settled: bool, detail: &str) -> VerdictRow {
    VerdictRow {
        task: task.into(),
        attempt: 1,
        kind: "submit".into(),
        judge: "judge-0".into(),
        status: "ok".into(),
        speedup: None,
        speedup_low: None,
        speedup_high: None,
        settled,
        at: 0.0,
        detail: detail.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: &str, state: &str, status: &str, outcome: &str, by: &str) -> TaskRow {
        let text = |t: &str| (!t.is_empty()).then(|| t.to_string());
        TaskRow {
            id: id.into(),
            kernel: id.into(),
            track: String::new(),
            language: "c".into(),
            precision: "fp64".into(),
            repeat: 0,
            state: state.into(),
            attempts: 1,
            budget_used_s: 0.0,
            status: text(status),
            speedup: None,
            speedup_low: None,
            speedup_high: None,
            outcome: text(outcome),
            submitted_by: text(by),
        }
    }

    fn verdict(task: &str, settled: bool, message: &str) -> VerdictRow {
        verdict_row(
            task,
            settled,
            &serde_json::json!({ "message": message }).to_string(),
        )
    }

    #[test]
    fn failures_are_grouped_by_why_and_verdicts_keep_their_words() {
        let data = RunData {
            run_dir: PathBuf::from("/runs/1"),
            campaign: None,
            tasks: vec![
                task("a", "settled", "ok", "crashed", "starter"),
                task("b", "settled", "ok", "crashed", "starter"),
                task("c", "failed", "out of attempts", "", ""),
                task("d", "settled", "incorrect", "submitted", "agent"),
                task("e", "settled", "ok", "submitted", "agent"),
            ],
            attempts: Vec::new(),
            verdicts: vec![
                verdict("d", false, "a score"),
                verdict("d", true, "output y[3]: expected 1, got 2"),
                verdict("d", false, "a later score"),
                verdict("c", false, "compilation failed (see the build log)"),
            ],
            events: Vec::new(),
            identity: None,
        };
        assert_eq!(
            data.failure_reasons(),
            [
                ("agent crashed".to_string(), 2),
                ("graded incorrect".to_string(), 1),
                ("task failed: out of attempts".to_string(), 1),
            ]
        );
        let messages = data.verdict_messages();
        assert_eq!(messages["d"], "output y[3]: expected 1, got 2");
        let attempt = |task: &str, n, outcome: &str| AttemptRow {
            task: task.into(),
            attempt: n,
            agent: "agent-0".into(),
            judge: String::new(),
            outcome: outcome.into(),
            tokens: 0,
            transcript: String::new(),
            message: String::new(),
            started_at: None,
            ended_at: None,
        };
        let data = RunData {
            attempts: vec![
                attempt("a", 1, "crashed"),
                attempt("a", 2, ""),
                attempt("b", 1, "submitted"),
            ],
            ..data.clone()
        };
        let ends = data.attempt_ends();
        assert_eq!(ends["a"], ["crashed", "running"]);
        assert_eq!(ends["b"], ["submitted"]);
        assert_eq!(messages["c"], "compilation failed (see the build log)");
        assert!(!messages.contains_key("e"));
    }

    #[test]
    fn the_geometric_mean_ignores_what_is_not_a_speedup() {
        let mean = geometric_mean([2.0, 8.0, 0.0, -1.0].into_iter()).unwrap();
        assert!((mean - 4.0).abs() < 1e-12, "{mean}");
        assert_eq!(geometric_mean(std::iter::empty()), None);
    }
}
