//! Job chains: a campaign longer than the time limit continues in a job it
//! submits itself (`MAX_JOBS`).
//!
//! Each job of a run directory appends what became of it to `jobs.jsonl`
//! there: when it started (and its place in the chain), how it ended, and the
//! successor it submitted. `status` shows the chain from that file, and
//! `submit --resume` reads it to refuse a second job while one is queued or
//! running on the directory. The successor depends on its predecessor with
//! `afterany`, so it starts only once that job has ended, whatever its state;
//! the run directory's lock is the last guard.
//!
//! Only a drain at the time limit continues the chain: a person draining a job
//! early (`scancel --signal=USR1 --batch`) means to stop it. Which one it was is
//! read from the time the job had left when the drain ended.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::sbatch::{self, Campaign, SubmitError};
use hpcagent_common::config::Config;

/// The chain's record in a run directory.
pub const FILE_NAME: &str = "jobs.jsonl";

/// One line of [`FILE_NAME`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A job's `up` took the run directory; `link` is its place in the chain
    /// (1: submitted by a person).
    Started { job: String, link: u32, at: f64 },
    /// The job's campaign ended (`finished`, `drained`, …), with the job it
    /// submitted to continue, if any.
    Ended {
        job: String,
        outcome: String,
        successor: Option<String>,
        at: f64,
    },
}

/// A job of the chain as its record tells it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link {
    pub job: String,
    pub link: u32,
    /// How its campaign ended; `None` while it runs (or if it died unrecorded).
    pub outcome: Option<String>,
    pub successor: Option<String>,
    /// When its `up` took the run directory, and when its campaign ended.
    pub started_at: Option<f64>,
    pub ended_at: Option<f64>,
}

/// Appends `event` to the run directory's record.
pub fn record(run_dir: &Path, event: &Event) -> std::io::Result<()> {
    let mut line = serde_json::to_string(event).map_err(std::io::Error::other)?;
    line.push('\n');
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(run_dir.join(FILE_NAME))?
        .write_all(line.as_bytes())
}

/// The jobs that ran on `run_dir`, in order, and the successor the last one
/// submitted (which has not started yet) as a link without an outcome.
pub fn read(run_dir: &Path) -> Vec<Link> {
    let text = std::fs::read_to_string(run_dir.join(FILE_NAME)).unwrap_or_default();
    let mut links: Vec<Link> = Vec::new();
    for event in text.lines().filter_map(|l| serde_json::from_str(l).ok()) {
        match event {
            Event::Started { job, link, at } => {
                links.retain(|l| l.job != job);
                links.push(Link {
                    job,
                    link,
                    outcome: None,
                    successor: None,
                    started_at: Some(at),
                    ended_at: None,
                });
            }
            Event::Ended {
                job,
                outcome,
                successor,
                at,
            } => {
                if let Some(l) = links.iter_mut().find(|l| l.job == job) {
                    l.outcome = Some(outcome);
                    l.successor = successor;
                    l.ended_at = Some(at);
                }
            }
        }
    }
    if let Some(last) = links.last()
        && let Some(next) = last.successor.clone()
        && !links.iter().any(|l| l.job == next)
    {
        links.push(Link {
            job: next,
            link: last.link + 1,
            outcome: None,
            successor: None,
            started_at: None,
            ended_at: None,
        });
    }
    links
}

/// The first job of the directory's chain Slurm still has queued or running.
pub fn active_job(run_dir: &Path) -> Option<(String, String)> {
    read(run_dir)
        .into_iter()
        .filter(|l| l.outcome.is_none())
        .find_map(|l| {
            let state = job_state(&l.job)?;
            matches!(
                state.as_str(),
                "PENDING" | "RUNNING" | "CONFIGURING" | "COMPLETING" | "SUSPENDED" | "REQUEUED"
            )
            .then_some((l.job, state))
        })
}

/// Slurm's state of `job`, while it still knows the job.
pub fn job_state(job: &str) -> Option<String> {
    squeue_field(job, "%T")
}

/// The time `job` has left before its limit, as `squeue` reports it.
pub fn time_left(job: &str) -> Option<Duration> {
    parse_time_left(&squeue_field(job, "%L")?)
}

/// One field of `job` as `squeue -o FORMAT` prints it, while Slurm knows
/// the job. A heterogeneous job answers a line per component; its
/// components share state and time, so the first line is the job's.
fn squeue_field(job: &str, format: &str) -> Option<String> {
    let out = Command::new("squeue")
        .args(["-h", "-j", job, "-o", format])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let field = text.lines().next().unwrap_or("").trim().to_string();
    (out.status.success() && !field.is_empty()).then_some(field)
}

/// squeue's `%L`: `[D-][H:]M:SS`; `UNLIMITED`, `NOT_SET` and the like are none.
fn parse_time_left(text: &str) -> Option<Duration> {
    let (days, clock) = match text.split_once('-') {
        Some((d, rest)) => (d.parse::<u64>().ok()?, rest),
        None => (0, text),
    };
    let mut seconds = 0;
    for part in clock.split(':') {
        seconds = seconds * 60 + part.parse::<u64>().ok()?;
    }
    (clock.contains(':') || days > 0).then(|| Duration::from_secs(days * 86400 + seconds))
}

/// Whether a drain that ended with `left` of the job's time was the time
/// limit's: Slurm sends the signal `DRAIN_SECONDS` before the end, and up to
/// a minute earlier; a drain with more time left than that was a person's.
pub fn drained_by_time_limit(left: Duration, drain_seconds: u32) -> bool {
    left <= Duration::from_secs(u64::from(drain_seconds) + 90)
}

/// What a drained job does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// No chain was asked for (`MAX_JOBS=1`).
    NoChain,
    /// It submitted this job to continue.
    Submitted(String),
    /// The chain has run `MAX_JOBS` jobs.
    ChainEnded { jobs: u32 },
    /// A person drained it before its time limit: it stops here.
    DrainedByHand,
}

/// After a drain of job `job` (link `link` of its chain): submits its
/// successor when the time limit drained it and the chain may grow.
pub fn continue_after_drain(
    config: &Config,
    exe: &Path,
    run_dir: &Path,
    job: &str,
    link: u32,
) -> Result<Next, SubmitError> {
    let max = config.settings.max_jobs;
    if max <= 1 {
        return Ok(Next::NoChain);
    }
    if link >= max {
        return Ok(Next::ChainEnded { jobs: link });
    }
    let by_limit = time_left(job)
        .is_some_and(|left| drained_by_time_limit(left, config.settings.drain_seconds));
    if !by_limit {
        return Ok(Next::DrainedByHand);
    }
    let campaign = Campaign::Continue {
        run_dir: run_dir.to_path_buf(),
        after: job.to_string(),
        link: link + 1,
    };
    let extra = sbatch::extra_args(run_dir);
    let batch = sbatch::prepare(config, exe, campaign, &extra)?;
    Ok(Next::Submitted(sbatch::submit(&batch)?.job_id))
}

/// Seconds since the epoch, for the record.
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squeue_time_left_in_its_forms() {
        let secs = |t| parse_time_left(t).map(|d| d.as_secs());
        assert_eq!(secs("0:45"), Some(45));
        assert_eq!(secs("2:05"), Some(125));
        assert_eq!(secs("1:00:00"), Some(3600));
        assert_eq!(secs("1-02:00:00"), Some(93600));
        assert_eq!(secs("UNLIMITED"), None);
        assert_eq!(secs("NOT_SET"), None);
        assert_eq!(secs(""), None);
    }

    #[test]
    fn only_a_drain_near_the_limit_continues() {
        assert!(drained_by_time_limit(Duration::from_secs(20), 60));
        assert!(drained_by_time_limit(Duration::from_secs(140), 60));
        assert!(!drained_by_time_limit(Duration::from_secs(600), 60));
    }

    #[test]
    fn the_record_reads_back_as_a_chain_with_its_queued_successor() {
        let dir = tempfile::tempdir().unwrap();
        let events = [
            Event::Started {
                job: "7".into(),
                link: 1,
                at: 1.0,
            },
            Event::Ended {
                job: "7".into(),
                outcome: "drained".into(),
                successor: Some("8".into()),
                at: 2.0,
            },
        ];
        for e in &events {
            record(dir.path(), e).unwrap();
        }
        let links = read(dir.path());
        assert_eq!(
            links,
            [
                Link {
                    job: "7".into(),
                    link: 1,
                    outcome: Some("drained".into()),
                    successor: Some("8".into()),
                    started_at: Some(1.0),
                    ended_at: Some(2.0),
                },
                Link {
                    job: "8".into(),
                    link: 2,
                    outcome: None,
                    successor: None,
                    started_at: None,
                    ended_at: None,
                },
            ]
        );
        record(
            dir.path(),
            &Event::Started {
                job: "8".into(),
                link: 2,
                at: 3.0,
            },
        )
        .unwrap();
        assert_eq!(read(dir.path()).len(), 2, "the successor is listed once");
    }
}
