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
        Ok(RunData {
            run_dir: run_dir.to_path_buf(),
            campaign: reader.campaign()?,
            tasks: reader.tasks()?,
            attempts: reader.attempts()?,
            verdicts: reader.verdicts()?,
            events: reader.events()?,
            identity: Some(crate::RunIdentity::load(run_dir)?),
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

    /// HPCAgent-Bench's Score and fast_p over the campaign's tasks.
    pub fn bench_score(&self) -> crate::BenchScore {
        let graded: Vec<crate::Graded> = self
            .tasks
            .iter()
            .map(|t| crate::Graded {
                solved: t.by_agent() && t.status.as_deref() == Some("ok"),
                speedup: t.speedup,
                low: t.speedup_low,
            })
            .collect();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_geometric_mean_ignores_what_is_not_a_speedup() {
        let mean = geometric_mean([2.0, 8.0, 0.0, -1.0].into_iter()).unwrap();
        assert!((mean - 4.0).abs() < 1e-12, "{mean}");
        assert_eq!(geometric_mean(std::iter::empty()), None);
    }
}
