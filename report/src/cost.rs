//! What a run cost: the time its jobs held their allocations, node-hours
//! and GPU-hours of those allocations, and the tokens its agents spent;
//! per task, its attempts' time and tokens.
//!
//! A chain's jobs count from the moment each one's `up` took the run
//! directory to its campaign's end (the queue between them is free); a run
//! without a chain (on this machine) counts its campaign's span. Tokens
//! are what the agents reported: an external CLI that reports none counts
//! 0, which the report says.

use std::collections::BTreeMap;
use std::path::Path;

use hpcagent_orchestrator::slurm::chain;
use hpcagent_orchestrator::store::{AttemptRow, CampaignRow};
use serde::Serialize;

/// A run's cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Cost {
    /// Seconds its jobs (or, without a chain, its campaign) ran.
    pub wall_s: f64,
    /// Nodes of its allocation (the plan's), and GPUs per node.
    pub nodes: usize,
    pub gpus_per_node: u32,
    pub node_hours: f64,
    pub gpu_hours: f64,
    pub tokens: u64,
}

/// A task's cost over its attempts.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TaskCost {
    pub attempts_s: f64,
    pub tokens: u64,
}

impl Cost {
    /// The cost of the run in `run_dir` whose campaign and attempts are given.
    pub fn of(run_dir: &Path, campaign: Option<&CampaignRow>, attempts: &[AttemptRow]) -> Cost {
        let (nodes, gpus_per_node) = crate::identity::read_plan(run_dir)
            .map_or((0, 0), |p| (p.nodes.len(), p.gpus_per_node));
        let spans: Vec<(f64, Option<f64>)> = chain::read(run_dir)
            .into_iter()
            .filter_map(|l| Some((l.started_at?, l.ended_at)))
            .collect();
        let wall_s = wall(&spans, campaign);
        let node_hours = wall_s * nodes as f64 / 3600.0;
        Cost {
            wall_s,
            nodes,
            gpus_per_node,
            node_hours,
            gpu_hours: node_hours * f64::from(gpus_per_node),
            tokens: attempts.iter().map(|a| a.tokens).sum(),
        }
    }
}

/// Seconds the jobs ran: each from its start to its end (one still
/// running, or that died unrecorded, to the campaign's last moment); with
/// no job, the campaign's own span.
fn wall(spans: &[(f64, Option<f64>)], campaign: Option<&CampaignRow>) -> f64 {
    let last = campaign.and_then(|c| c.ended_at);
    if spans.is_empty() {
        return campaign
            .map(|c| last.unwrap_or_else(chain::now) - c.started_at)
            .unwrap_or(0.0)
            .max(0.0);
    }
    spans
        .iter()
        .map(|&(start, end)| {
            let end = end.or(last).unwrap_or_else(chain::now);
            (end - start).max(0.0)
        })
        .sum()
}

/// Each task's attempts' time and tokens.
pub fn per_task(attempts: &[AttemptRow]) -> BTreeMap<&str, TaskCost> {
    let mut costs: BTreeMap<&str, TaskCost> = BTreeMap::new();
    for a in attempts {
        let cost = costs.entry(a.task.as_str()).or_default();
        cost.tokens += a.tokens;
        if let (Some(start), Some(end)) = (a.started_at, a.ended_at) {
            cost.attempts_s += (end - start).max(0.0);
        }
    }
    costs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn campaign(started: f64, ended: Option<f64>) -> CampaignRow {
        CampaignRow {
            id: "c".into(),
            state: "finished".into(),
            started_at: started,
            ended_at: ended,
            config: String::new(),
            hpcagent_version: String::new(),
            corpus_version: String::new(),
        }
    }

    #[test]
    fn a_chain_counts_its_jobs_and_not_the_queue_between() {
        let c = campaign(100.0, Some(1000.0));
        // Two jobs of 200 s with 500 s in the queue between them.
        assert_eq!(
            wall(&[(100.0, Some(300.0)), (800.0, Some(1000.0))], Some(&c)),
            400.0
        );
        // A job that died unrecorded counts to the campaign's end.
        assert_eq!(wall(&[(900.0, None)], Some(&c)), 100.0);
        // No chain: the campaign's span.
        assert_eq!(wall(&[], Some(&c)), 900.0);
    }

    #[test]
    fn a_task_costs_its_attempts() {
        let attempt = |task: &str, tokens, span: Option<(f64, f64)>| AttemptRow {
            task: task.into(),
            attempt: 1,
            agent: "agent-0".into(),
            judge: String::new(),
            outcome: "submitted".into(),
            tokens,
            transcript: String::new(),
            message: String::new(),
            started_at: span.map(|s| s.0),
            ended_at: span.map(|s| s.1),
        };
        let attempts = [
            attempt("gemm", 100, Some((0.0, 30.0))),
            attempt("gemm", 50, Some((40.0, 50.0))),
            attempt("atax", 7, None),
        ];
        let costs = per_task(&attempts);
        assert_eq!(
            costs["gemm"],
            TaskCost {
                attempts_s: 40.0,
                tokens: 150
            }
        );
        assert_eq!(costs["atax"].attempts_s, 0.0);
    }
}
