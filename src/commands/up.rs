//! `hpcagent up`: run a campaign to its end, in this Slurm job or on this machine.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use hpcagent_orchestrator::campaign::{self, ExecutorKind, Outcome, Up};
use hpcagent_orchestrator::slurm::chain::{self, Next};
use hpcagent_orchestrator::store::{self, Reader};

use super::ConfigFlags;
use super::judge::runtime;
use super::results::print_table;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ExecutorChoice {
    /// Slurm steps inside a job, child processes otherwise.
    Auto,
    Local,
    Slurm,
}

#[derive(Debug, Args)]
pub struct UpArgs {
    #[command(flatten)]
    config: ConfigFlags,
    /// Continue the campaign of this run directory: settled tasks are not run again.
    #[arg(long, value_name = "RUN_DIR", conflicts_with = "env_file")]
    resume: Option<PathBuf>,
    /// The run directory (default: RUN_ROOT/<job id>, or RUN_ROOT/local-<time>).
    #[arg(long, value_name = "DIR", conflicts_with = "resume")]
    run_dir: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "auto")]
    executor: ExecutorChoice,
    /// This job's place in its chain (set by the job that submitted it).
    #[arg(long, default_value_t = 1, requires = "resume", hide = true)]
    link: u32,
}

/// The campaign ended with tasks that no attempt got a verdict for.
const EXIT_TASKS_FAILED: u8 = 3;
/// The campaign drained (USR1, the time limit) with tasks left to do.
const EXIT_DRAINED: u8 = 4;
/// The campaign finished, but its agents failed: all of them, or on more
/// than `AGENT_FAILURE_LIMIT` percent of the tasks.
const EXIT_AGENTS_FAILED: u8 = 5;

pub fn run(args: UpArgs) -> anyhow::Result<ExitCode> {
    super::init_logging_quiet();
    // The orchestrator holds every instance's token and the judges': no
    // other process of this user (an agent CLI) may read its memory.
    // SAFETY: prctl on this process only.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0) };
    let job = std::env::var("SLURM_JOB_ID").ok();
    let executor = match (args.executor, job) {
        (ExecutorChoice::Local, _) | (ExecutorChoice::Auto, None) => ExecutorKind::Local,
        (ExecutorChoice::Slurm | ExecutorChoice::Auto, Some(job_id)) => {
            ExecutorKind::Slurm { job_id }
        }
        (ExecutorChoice::Slurm, None) => {
            anyhow::bail!("--executor slurm needs to run inside a Slurm job")
        }
    };
    let (config, run_dir) = match &args.resume {
        Some(dir) => args.config.load_run_dir(dir)?,
        None => {
            let config = args.config.load(Vec::new())?;
            let dir = match (&args.run_dir, &executor) {
                (Some(dir), _) => std::path::absolute(dir)?,
                (None, ExecutorKind::Slurm { job_id }) => config.settings.run_root.0.join(job_id),
                (None, ExecutorKind::Local) => config.settings.run_root.0.join(local_name()),
            };
            (config, dir)
        }
    };
    preflight(&config)?;
    let limit = config.settings.agent_failure_limit.0;
    let corpus_root = super::corpus_root(&config)?;
    // Judges on this machine run their oracle here: without NumPy the
    // campaign stops now, before a task is leased, not after 42 harness
    // errors.
    let oracle_python = match executor {
        ExecutorKind::Local
            if config.settings.judge_nodes > 0 || config.settings.colocate_judges =>
        {
            Some(find_oracle()?)
        }
        _ => None,
    };
    // A job's campaign continues in a new job; a local one right here.
    let again = match executor {
        ExecutorKind::Slurm { .. } => "hpcagent submit --resume",
        ExecutorKind::Local => "hpcagent up --resume",
    };
    let up = Up {
        config,
        run_dir: run_dir.clone(),
        executor,
        exe: std::env::current_exe().context("cannot find the hpcagent executable")?,
        corpus_root: corpus_root.clone(),
        skills_root: std::path::absolute(hpcagent_agent::prompt::default_root())?,
        resume: args.resume.is_some(),
        link: args.link,
        oracle_python,
    };
    let chained = chained_job(&up);
    let outcome = runtime()?.block_on(campaign::up(up))?;
    let successor = chained.and_then(|c| c.end(&outcome));
    let code = match &outcome {
        Outcome::Finished => {
            let results = Reader::open(&run_dir)?.results()?;
            print_table(&results);
            let failed = results.iter().filter(|r| r.state == "failed").count();
            let agents_failed = results.iter().filter(|r| r.agent_failed()).count();
            if agents_failed_beyond(agents_failed, results.len(), limit) {
                eprintln!(
                    "the agents of {agents_failed} of {} tasks failed (AGENT_FAILURE_LIMIT={limit}%; \
                     how each ended: {})",
                    results.len(),
                    run_dir.join("attempts.jsonl").display()
                );
                ExitCode::from(EXIT_AGENTS_FAILED)
            } else if failed == 0 {
                ExitCode::SUCCESS
            } else {
                eprintln!(
                    "{failed} of {} tasks failed: no attempt got a verdict (how each ended: {})",
                    results.len(),
                    run_dir.join("attempts.jsonl").display()
                );
                ExitCode::from(EXIT_TASKS_FAILED)
            }
        }
        Outcome::Drained => {
            match successor {
                Some(job) => eprintln!("drained; the campaign continues in job {job}"),
                None => eprintln!("drained; continue with: {again} {}", run_dir.display()),
            }
            ExitCode::from(EXIT_DRAINED)
        }
        Outcome::Interrupted(signal) => {
            eprintln!(
                "stopped by {signal}; continue with: {again} {}",
                run_dir.display()
            );
            ExitCode::from(if *signal == "INT" { 130 } else { 143 })
        }
        Outcome::Failed(why) if !run_dir.join(store::FILE_NAME).exists() => {
            // Nothing to resume from: say so rather than offer a --resume.
            eprintln!(
                "the campaign failed: {why}\nits results store is gone, so it cannot be \
                 resumed; how each attempt ended is kept in {}",
                run_dir.join("attempts.jsonl").display()
            );
            ExitCode::from(1)
        }
        Outcome::Failed(why) => {
            eprintln!(
                "the campaign failed: {why}; after fixing it: {again} {}",
                run_dir.display()
            );
            ExitCode::from(1)
        }
    };
    Ok(code)
}

/// A Slurm job's part in its run directory's chain.
struct ChainedJob {
    config: hpcagent_common::config::Config,
    exe: PathBuf,
    run_dir: PathBuf,
    job: String,
    link: u32,
}

fn chained_job(up: &Up) -> Option<ChainedJob> {
    let ExecutorKind::Slurm { job_id } = &up.executor else {
        return None;
    };
    Some(ChainedJob {
        config: up.config.clone(),
        exe: up.exe.clone(),
        run_dir: up.run_dir.clone(),
        job: job_id.clone(),
        link: up.link,
    })
}

impl ChainedJob {
    /// Records how the job ended; after a drain at the time limit, submits
    /// the successor the chain allows and returns its id.
    fn end(self, outcome: &Outcome) -> Option<String> {
        let successor = match outcome {
            Outcome::Drained => {
                match chain::continue_after_drain(
                    &self.config,
                    &self.exe,
                    &self.run_dir,
                    &self.job,
                    self.link,
                ) {
                    Ok(Next::Submitted(job)) => Some(job),
                    Ok(Next::ChainEnded { jobs }) => {
                        eprintln!("the chain has run its {jobs} jobs (MAX_JOBS)");
                        None
                    }
                    Ok(Next::DrainedByHand) => {
                        eprintln!("drained before the time limit: a stop, the chain ends here");
                        None
                    }
                    Ok(Next::NoChain) => None,
                    Err(e) => {
                        eprintln!("cannot submit the chain's next job: {e}");
                        None
                    }
                }
            }
            _ => None,
        };
        let ended = chain::Event::Ended {
            job: self.job,
            outcome: outcome.state().to_string(),
            successor: successor.clone(),
            at: chain::now(),
        };
        if let Err(e) = chain::record(&self.run_dir, &ended) {
            eprintln!("cannot record the job's end in {}: {e}", chain::FILE_NAME);
        }
        successor
    }
}

/// What LLM agents need that only they check: refused here, before any
/// step starts, rather than by every agent after the model has loaded.
fn preflight(config: &hpcagent_common::config::Config) -> anyhow::Result<()> {
    use hpcagent_common::config::Policy;
    if config.settings.agent_policy == Policy::Baseline {
        return Ok(());
    }
    let skills = hpcagent_agent::prompt::default_root();
    hpcagent_agent::prompt::load(&skills)
        .map_err(|e| anyhow::anyhow!("the agents' skills pages: {e}"))?;
    hpcagent_agent::search::Search::from_settings(&config.settings).map_err(anyhow::Error::msg)?;
    Ok(())
}

/// The Python the local judges' oracle runs in, installing NumPy for it
/// once when no Python has it.
fn find_oracle() -> anyhow::Result<String> {
    let cache = hpcagent_judge::build::default_cache_base();
    let oracle = hpcagent_judge::oracle::find(&cache, |progress| eprintln!("{progress}"))?;
    Ok(oracle.python)
}

/// `local-<YYYYmmdd-HHMMSS>` in UTC.
fn local_name() -> String {
    chrono::Utc::now().format("local-%Y%m%d-%H%M%S").to_string()
}

/// Whether the agents of `failed` of `tasks` tasks failed beyond what the
/// campaign allows: all of them, or more than `limit` percent.
fn agents_failed_beyond(failed: usize, tasks: usize, limit: f64) -> bool {
    failed > 0 && (failed == tasks || failed as f64 > limit / 100.0 * tasks as f64)
}

#[cfg(test)]
mod tests {
    use super::agents_failed_beyond;

    #[test]
    fn agents_fail_a_campaign_when_all_fail_or_more_than_the_limit() {
        // The default, 100%: only when every agent failed.
        assert!(agents_failed_beyond(42, 42, 100.0));
        assert!(!agents_failed_beyond(41, 42, 100.0));
        // A limit of 10%: 5 of 42 is over it, 4 is not; none never is.
        assert!(agents_failed_beyond(5, 42, 10.0));
        assert!(!agents_failed_beyond(4, 42, 10.0));
        assert!(!agents_failed_beyond(0, 42, 0.0));
        assert!(agents_failed_beyond(1, 42, 0.0));
        // All of them, whatever the limit.
        assert!(agents_failed_beyond(3, 3, 100.0));
    }
}
