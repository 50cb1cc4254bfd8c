//! `hpcagent submit`: one Slurm job for the whole campaign.
//!
//! `#SBATCH` lines are read before any env file could be, which is why the
//! seed's bash made users add node counts up by hand. Here the flags are
//! computed from the configuration and passed on `sbatch`'s command line (which
//! overrides `#SBATCH`), and the site's batch script template is rendered and
//! given on stdin.
//!
//! A new campaign's run directory is `<RUN_ROOT>/<job id>`, and the job's own
//! output goes into it. The id is only known once `sbatch` answers, so the job
//! is submitted held, the directory made and filled, and then the job
//! released; a failure in between cancels the job rather than leave it held
//! forever. A resumed campaign keeps its run directory: the new job runs
//! `hpcagent up --resume` on it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::hetjob;
use hpcagent_common::config::{Config, Site};

/// The batch script templates, one per site, compiled in so the binary works
/// without a checkout.
const TEMPLATES: &[(Site, &str)] = &[
    (Site::Local, include_str!("../../../sbatch/local.sbatch")),
    (Site::Alps, include_str!("../../../sbatch/alps.sbatch")),
    (
        Site::Beverin,
        include_str!("../../../sbatch/beverin.sbatch"),
    ),
];

/// Which campaign a job runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Campaign {
    /// A new one, in `<RUN_ROOT>/<job id>`.
    New,
    /// The campaign of this run directory, continued.
    Resume(PathBuf),
    /// The campaign of this run directory, continued by link `link` of its
    /// job chain once job `after` has ended.
    Continue {
        run_dir: PathBuf,
        after: String,
        link: u32,
    },
}

/// The `sbatch` arguments a person gave `submit` beyond the configuration's,
/// kept in the run directory for the jobs of its chain.
const EXTRA_ARGS_FILE: &str = "sbatch-args.json";
/// The batch script's output, in the run directory.
pub const BATCH_LOG: &str = "sbatch.out";

/// The extra `sbatch` arguments the campaign of `run_dir` was submitted with.
pub fn extra_args(run_dir: &Path) -> Vec<String> {
    std::fs::read_to_string(run_dir.join(EXTRA_ARGS_FILE))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

/// A job ready to submit: `sbatch` flags and the rendered script.
#[derive(Debug, Clone)]
pub struct BatchJob {
    pub flags: Vec<String>,
    pub script: String,
    pub campaign: Campaign,
    pub run_root: PathBuf,
    /// The configuration as resolved now, written into a new run directory
    /// for the job to read (so it sees exactly these values).
    pub env_resolved: String,
    /// The arguments beyond the configuration's, kept for the chain's jobs.
    pub extra_args: Vec<String>,
}

impl BatchJob {
    /// The command line a user could run by hand (the script goes on stdin).
    pub fn command_line(&self) -> String {
        let mut argv = vec!["sbatch".to_string()];
        argv.extend(self.flags.iter().cloned());
        hpcagent_common::words::join(&argv)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    #[error("cannot run {command}: {source} (is Slurm installed and SLURM_CONF set?)")]
    Spawn {
        command: &'static str,
        source: std::io::Error,
    },
    #[error("{command} failed ({status}): {stderr}")]
    Failed {
        command: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error("sbatch answered {0:?}, not a job id")]
    NoJobId(String),
    #[error("cannot prepare {path}: {source} (job {job} was cancelled)")]
    RunDir {
        path: PathBuf,
        job: String,
        source: std::io::Error,
    },
    #[error("batch script template has an unknown placeholder {0}")]
    Template(String),
}

/// Computes the `sbatch` flags and renders the site's script.
pub fn prepare(
    config: &Config,
    exe: &Path,
    campaign: Campaign,
    extra_args: &[String],
) -> Result<BatchJob, SubmitError> {
    let s = &config.settings;
    let run_root = s.run_root.0.clone();
    // The values go into the script as shell words: paths quoted, the job
    // id left for the batch shell to expand.
    let (run_dir, up_args, output) = match &campaign {
        Campaign::New => (
            format!("{}/\"$SLURM_JOB_ID\"", quote(&run_root)),
            r#"--env "$RUN_DIR/env.resolved" --run-dir "$RUN_DIR""#.to_string(),
            run_root.join("%j").join(BATCH_LOG),
        ),
        Campaign::Resume(dir) => (
            quote(dir),
            r#"--resume "$RUN_DIR""#.to_string(),
            dir.join("sbatch-%j.out"),
        ),
        Campaign::Continue { run_dir, link, .. } => (
            quote(run_dir),
            format!(r#"--resume "$RUN_DIR" --link {link}"#),
            run_dir.join("sbatch-%j.out"),
        ),
    };
    // The job's own flags, then each component's: in a heterogeneous job
    // the first component holds the batch script, and Slurm carries the
    // job-wide flags (account, name, dependency) on to the other components.
    let mut flags = Vec::new();
    if let Some(account) = &s.account {
        flags.push(format!("--account={account}"));
    }
    flags.push(format!("--job-name={}", s.job_name));
    flags.push(format!("--output={}", output.display()));
    flags.push(format!("--signal=B:USR1@{}", s.drain_seconds));
    if let Campaign::Continue { after, .. } = &campaign {
        flags.push(format!("--dependency=afterany:{after}"));
    }
    let components = hetjob::components(config);
    if components.len() > 1 {
        for (i, c) in components.iter().enumerate() {
            if i > 0 {
                flags.push(":".to_string());
            }
            let partition = c.partition.as_deref();
            flags.extend(component_flags(config, c.nodes, partition, c.wants_gpus()));
            if i == 0 {
                // A person's own flags last, where they override ours.
                flags.extend(extra_args.iter().cloned());
            }
        }
    } else {
        let partition = s.partition.as_deref();
        flags.extend(component_flags(
            config,
            config.node_total(),
            partition,
            true,
        ));
        flags.extend(extra_args.iter().cloned());
    }
    let script = render(
        template(s.site),
        &[
            ("HPCAGENT", &quote(exe)),
            ("RUN_DIR", &run_dir),
            ("UP_ARGS", &up_args),
        ],
    )?;
    Ok(BatchJob {
        flags,
        script,
        campaign,
        run_root,
        env_resolved: config.to_env_file(),
        extra_args: extra_args.to_vec(),
    })
}

/// One component's flags: its nodes, whole; its GPUs; its time and partition.
fn component_flags(
    config: &Config,
    nodes: u32,
    partition: Option<&str>,
    gpus: bool,
) -> Vec<String> {
    let s = &config.settings;
    let mut flags = vec![
        format!("--nodes={nodes}"),
        // Roles are placed on whole nodes: without --exclusive a job gets one
        // CPU per node and every step but the first waits.
        "--exclusive".to_string(),
    ];
    if let Some(memory) = hpcagent_common::config::site::job_memory(s.site) {
        flags.push(format!("--mem={memory}"));
    }
    if gpus && s.gpus_per_node > 0 {
        flags.push(format!("--gpus-per-node={}", s.gpus_per_node));
    }
    flags.push(format!("--time={}", s.time_limit.text));
    if let Some(partition) = partition {
        flags.push(format!("--partition={partition}"));
    }
    flags
}

fn template(site: Site) -> &'static str {
    TEMPLATES
        .iter()
        .find(|(s, _)| *s == site)
        .map(|(_, t)| *t)
        .expect("a template per site")
}

fn quote(path: &Path) -> String {
    shell_words::quote(&path.display().to_string()).into_owned()
}

/// Replaces `{{NAME}}` placeholders with shell words.
fn render(template: &str, values: &[(&str, &str)]) -> Result<String, SubmitError> {
    let mut out = template.to_string();
    for (name, words) in values {
        out = out.replace(&format!("{{{{{name}}}}}"), words);
    }
    if let Some(start) = out.find("{{") {
        let end = out[start..].find("}}").map_or(out.len(), |e| start + e + 2);
        return Err(SubmitError::Template(out[start..end].to_string()));
    }
    Ok(out)
}

/// A submitted job.
#[derive(Debug, Clone)]
pub struct Submitted {
    pub job_id: String,
    pub run_dir: PathBuf,
}

/// Submits the job: a new campaign's held until its run directory is
/// prepared; a resumed one's at once (its directory is there).
pub fn submit(job: &BatchJob) -> Result<Submitted, SubmitError> {
    if let Campaign::Resume(run_dir) | Campaign::Continue { run_dir, .. } = &job.campaign {
        if let Campaign::Resume(_) = &job.campaign {
            write_extra_args(run_dir, &job.extra_args).map_err(|source| SubmitError::RunDir {
                path: run_dir.join(EXTRA_ARGS_FILE),
                job: "(none submitted)".into(),
                source,
            })?;
        }
        let mut sbatch = Command::new("sbatch");
        sbatch.arg("--parsable").args(&job.flags);
        if let Campaign::Continue { .. } = &job.campaign {
            // Submitted from inside a job: its SLURM_* variables would be
            // exported into the successor, where srun takes them as options.
            for (name, _) in std::env::vars_os() {
                let name = name.to_string_lossy();
                if name.starts_with("SLURM_") && name != "SLURM_CONF" {
                    sbatch.env_remove(name.as_ref());
                }
            }
        }
        let job_id = job_id(&run(sbatch, "sbatch", Some(&job.script))?)?;
        return Ok(Submitted {
            job_id,
            run_dir: run_dir.clone(),
        });
    }
    std::fs::create_dir_all(&job.run_root).map_err(|source| SubmitError::RunDir {
        path: job.run_root.clone(),
        job: "(none submitted)".into(),
        source,
    })?;
    let mut sbatch = Command::new("sbatch");
    sbatch.arg("--parsable").arg("--hold").args(&job.flags);
    let job_id = job_id(&run(sbatch, "sbatch", Some(&job.script))?)?;
    let run_dir = job.run_root.join(&job_id);
    let prepared = std::fs::create_dir_all(&run_dir)
        .and_then(|()| std::fs::write(run_dir.join("env.resolved"), &job.env_resolved))
        .and_then(|()| std::fs::write(run_dir.join("job.sbatch"), &job.script))
        .and_then(|()| write_extra_args(&run_dir, &job.extra_args));
    if let Err(source) = prepared {
        cancel(&job_id);
        return Err(SubmitError::RunDir {
            path: run_dir,
            job: job_id,
            source,
        });
    }
    let mut release = Command::new("scontrol");
    release.args(["release", &job_id]);
    if let Err(e) = run(release, "scontrol", None) {
        cancel(&job_id);
        return Err(e);
    }
    Ok(Submitted { job_id, run_dir })
}

fn write_extra_args(run_dir: &Path, args: &[String]) -> std::io::Result<()> {
    let text = serde_json::to_string(args).map_err(std::io::Error::other)?;
    std::fs::write(run_dir.join(EXTRA_ARGS_FILE), text + "\n")
}

/// The job id in `sbatch --parsable`'s answer: "<id>" or "<id>;<cluster>".
fn job_id(answer: &str) -> Result<String, SubmitError> {
    let id = answer.trim().split(';').next().unwrap_or("");
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(SubmitError::NoJobId(answer.to_string()));
    }
    Ok(id.to_string())
}

fn cancel(job_id: &str) {
    let _ = Command::new("scancel").arg(job_id).status();
}

/// Runs a Slurm command, feeding `stdin` if given; returns its stdout.
fn run(
    mut command: Command,
    name: &'static str,
    stdin: Option<&str>,
) -> Result<String, SubmitError> {
    let shown = format!("{command:?}");
    command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().map_err(|source| SubmitError::Spawn {
        command: name,
        source,
    })?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes())
            .map_err(|source| SubmitError::Spawn {
                command: name,
                source,
            })?;
    }
    let output = child
        .wait_with_output()
        .map_err(|source| SubmitError::Spawn {
            command: name,
            source,
        })?;
    if !output.status.success() {
        return Err(SubmitError::Failed {
            command: shown,
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_renders_completely() {
        for (site, template) in TEMPLATES {
            let script = render(
                template,
                &[
                    ("HPCAGENT", &quote(Path::new("/opt/hpc agent"))),
                    ("RUN_DIR", "/r"),
                    ("UP_ARGS", "--resume /r"),
                ],
            )
            .unwrap_or_else(|e| panic!("{site}: {e}"));
            assert!(script.starts_with("#!/bin/bash"), "{site}");
            assert!(
                script.contains("'/opt/hpc agent'"),
                "{site}: the binary path is quoted"
            );
        }
    }

    #[test]
    fn unknown_placeholders_are_refused() {
        let err = render("#!/bin/bash\n{{NOPE}}\n", &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "batch script template has an unknown placeholder {{NOPE}}"
        );
    }
}
