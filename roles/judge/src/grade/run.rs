//! One run of a plan's steps: the libraries placed out of each other's
//! reach, the runner's limits and environment (a slot's CPUs and GPU), and
//! the supervisor launched ([`hpcagent_runner::launch`]). It does not decide
//! the steps ([`super::plan`]) nor read their report ([`super::outcome`]).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hpcagent_sandbox::limits::Limits;

use crate::build::{Built, passthrough_env};
use crate::judge::Judge;
use crate::sandbox_dir;
use crate::slots::Slot;
use hpcagent_corpus::language::Language;
use hpcagent_runner::protocol::{CallBudget, Request};
use hpcagent_runner::{Launch, LaunchError, RunOutcome, Verifier, launch};

use super::{Planner, Prepared};

/// Why a run could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    #[error("sandbox: {0}")]
    Sandbox(std::io::Error),
    #[error("{dir}: {error}")]
    Dir { dir: String, error: std::io::Error },
    #[error("chown sandbox: {0}")]
    Chown(nix::Error),
    #[error("copy library: {0}")]
    Copy(std::io::Error),
    #[error("library permissions: {0}")]
    Permissions(std::io::Error),
    #[error(transparent)]
    Launch(#[from] LaunchError),
}

/// How long a call may take: the baseline's first calls 30 s; the
/// submission's 20 times the baseline's median so far, at least 0.5 s.
const CALL_BUDGET: CallBudget = CallBudget {
    first_ms: 30_000,
    factor: 20.0,
    floor_ms: 500,
};

/// What else a run needs besides the plan: what its checks' outputs are
/// held to, and a profiler around it.
#[derive(Default)]
pub(crate) struct Extras {
    pub expected: Option<Arc<dyn Verifier>>,
    pub wrapper: Vec<String>,
    pub papi_events: Vec<String>,
    /// A profiled run: where its profiler writes, which the run may write
    /// too; the profiler and the run share a loopback-only network.
    pub profile_output: Option<std::path::PathBuf>,
}

/// Starts one run of `planner`'s steps: the submission, and the
/// baseline beside it when given. Returns the run's directory too, for
/// callers that read what the run left there.
pub(crate) async fn run(
    judge: &Judge,
    prepared: &Prepared<'_>,
    baseline: Option<&Built>,
    planner: Planner<'_>,
    slot: &Slot,
    extras: Extras,
) -> Result<(RunOutcome, tempfile::TempDir), RunError> {
    let dir = sandbox_dir::create("run").map_err(RunError::Sandbox)?;
    let run_as = judge.isolation.run_as(slot.index);
    // The submission's directory, and the baseline's beside it, out of
    // the submission's reach (it must not rewrite the baseline's library).
    let sandbox = dir.path().join("candidate");
    let library = place(&prepared.built.library, &sandbox, "submission.so", run_as)?;
    let baseline = match baseline {
        Some(built) => Some(place(
            &built.library,
            &dir.path().join("baseline"),
            "baseline.so",
            None,
        )?),
        None => None,
    };
    let timed = baseline.is_some();
    let runner_cpus = slot.runner_cpus();
    let cpus = runner_cpus.len() as u64;
    let buffers: u64 = (0..planner.calls.len())
        .flat_map(|call| planner.array_bytes(call, false))
        .sum();
    let timeout = Duration::from_secs(600) + judge.config.time_cap * 3;
    let limits = Limits {
        // The buffers, plus thread stacks and slack.
        address_space: (!prepared.language.is_gpu())
            .then_some(2 * buffers + (4 << 30) + cpus * (96 << 20)),
        cpu_seconds: Some(timeout.as_secs() * cpus + 10),
        file_size: Some(64 << 20),
        processes: Some(
            if run_as.is_some() {
                0
            } else {
                hpcagent_sandbox::limits::user_process_count()
            } + 2 * cpus
                + 64,
        ),
        cpus: runner_cpus.clone(),
    };
    let output_bytes = planner.output_bytes();
    if let (Some(out), Some(uid)) = (&extras.profile_output, run_as) {
        nix::unistd::chown(out.as_path(), Some(uid.into()), Some(uid.into()))
            .map_err(RunError::Chown)?;
    }
    let loopback = extras.profile_output.is_some();
    let request = Request {
        candidate: library,
        baseline,
        symbol: prepared.kernel.symbol(prepared.precision),
        language: prepared.language,
        arrays: planner.arrays(),
        calls: planner.calls,
        steps: planner.steps,
        sandbox: sandbox.clone(),
        readable: judge.config.shared.iter().cloned().collect(),
        run_as,
        limits,
        namespaces: judge.isolation.namespaces.is_ok(),
        trace: judge.isolation.hold.is_ok(),
        timing_lock: judge.timing_lock.clone().filter(|_| timed),
        timing_device: slot.gpu.filter(|_| prepared.language.is_gpu()),
        budget: CALL_BUDGET,
        papi_events: extras.papi_events,
        profile_output: extras.profile_output,
    };
    let outcome = launch(Launch {
        exe: &judge.config.exe,
        wrapper: extras.wrapper,
        loopback,
        request,
        env: run_env(&sandbox, slot, prepared.language),
        timeout,
        output_bytes,
        cpus: vec![slot.supervisor],
        verifier: extras.expected,
    })
    .await?;
    Ok((outcome, dir))
}

/// Copies `library` into `dir` (made now, owned by `owner` when given) as
/// `name`, readable by a runner of any user; its new path.
fn place(
    library: &Path,
    dir: &Path,
    name: &str,
    owner: Option<u32>,
) -> Result<std::path::PathBuf, RunError> {
    std::fs::create_dir(dir).map_err(|error| RunError::Dir {
        dir: dir.display().to_string(),
        error,
    })?;
    if let Some(uid) = owner {
        nix::unistd::chown(dir, Some(uid.into()), Some(uid.into())).map_err(RunError::Chown)?;
    }
    let to = dir.join(name);
    std::fs::copy(library, &to).map_err(RunError::Copy)?;
    std::fs::set_permissions(&to, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .map_err(RunError::Permissions)?;
    Ok(to)
}

/// The runner's environment: nothing of the judge's but what runtimes need.
fn run_env(sandbox: &Path, slot: &Slot, language: Language) -> Vec<(String, String)> {
    let mut env = passthrough_env();
    let dir = sandbox.display().to_string();
    env.extend([
        ("HOME".to_string(), dir.clone()),
        ("TMPDIR".to_string(), dir.clone()),
        ("LC_ALL".to_string(), "C".to_string()),
        (
            "OMP_NUM_THREADS".to_string(),
            slot.runner_cpus().len().to_string(),
        ),
        // Threads are not bound to CPUs: a run may not set its own
        // (seccomp), since it could pick the supervisor's. They run on
        // the runner's CPUs, where the kernel places them.
        ("OMP_PROC_BIND".to_string(), "false".to_string()),
        // Idle OpenMP threads must not burn the slot's cores between calls.
        ("OMP_WAIT_POLICY".to_string(), "passive".to_string()),
        // glibc reserves 64 MiB of address space per thread arena otherwise.
        ("MALLOC_ARENA_MAX".to_string(), "2".to_string()),
        ("CUDA_CACHE_PATH".to_string(), format!("{dir}/.nv")),
    ]);
    if let Some(gpu) = slot.gpu {
        env.retain(|(k, _)| !GPU_FILTERS.contains(&k.as_str()));
        env.extend(gpu_env(gpu, language));
    }
    env
}

/// The variables that choose which GPUs a runtime sees.
const GPU_FILTERS: [&str; 3] = [
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
];

/// What makes the node's GPU `gpu` (as the judge numbers them) the only one
/// a run sees. ROCm filters twice, ROCr first (`ROCR_VISIBLE_DEVICES`,
/// the node's numbers), then HIP among what is left (`HIP_VISIBLE_DEVICES`,
/// and `CUDA_VISIBLE_DEVICES`, which HIP on AMD reads the same way): after
/// the first, the slot's GPU is HIP's device 0. CUDA reads only its own.
fn gpu_env(gpu: u32, language: Language) -> Vec<(String, String)> {
    let pair = |k: &str, v: String| (k.to_string(), v);
    match language {
        Language::Hip => vec![
            pair("ROCR_VISIBLE_DEVICES", gpu.to_string()),
            pair("HIP_VISIBLE_DEVICES", "0".into()),
        ],
        // Host code uses no GPU; on either vendor it sees at most its slot's.
        _ => vec![
            pair("CUDA_VISIBLE_DEVICES", gpu.to_string()),
            pair("ROCR_VISIBLE_DEVICES", gpu.to_string()),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(gpu: u32, language: Language) -> Vec<(String, String)> {
        let slot = Slot {
            index: 0,
            cpus: vec![0],
            supervisor: 0,
            gpu: Some(gpu),
        };
        run_env(Path::new("/sandbox"), &slot, language)
            .into_iter()
            .filter(|(k, _)| GPU_FILTERS.contains(&k.as_str()))
            .collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_hip_slot_sees_its_gpu_as_hip_device_0() {
        // Beverin: slot 3 of 4. ROCr keeps the node's GPU 3 alone; HIP's
        // own filter then counts from what ROCr left.
        assert_eq!(
            env_of(3, Language::Hip),
            pairs(&[("ROCR_VISIBLE_DEVICES", "3"), ("HIP_VISIBLE_DEVICES", "0")])
        );
    }

    #[test]
    fn a_cuda_slot_sees_its_gpu_by_the_node_s_number() {
        assert_eq!(
            env_of(2, Language::Cuda),
            pairs(&[("CUDA_VISIBLE_DEVICES", "2"), ("ROCR_VISIBLE_DEVICES", "2")])
        );
    }
}
