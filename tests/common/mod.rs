//! Helpers shared by the CLI integration tests.
#![allow(dead_code)] // each test binary uses its own subset

pub mod suite;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The hpcagent binary cargo built for these tests.
pub fn hpcagent() -> Command {
    Command::new(env!("CARGO_BIN_EXE_hpcagent"))
}

/// The binary a test's judge server runs: this build's, unless
/// `HPCAGENT_JUDGE_UNDER_TEST` names another. An older build there shows
/// an attack winning against the judge before its defence
/// (`scripts/defences-off.sh`); the clients stay this build's.
pub fn judge_binary() -> PathBuf {
    std::env::var_os("HPCAGENT_JUDGE_UNDER_TEST")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_hpcagent")))
}

/// The repository root (examples, sbatch templates).
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn example(name: &str) -> PathBuf {
    repo().join("examples").join(name)
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Checks the local Slurm answers; the test command (scripts/test.sh) starts it.
pub fn require_slurm() {
    let ok = Command::new("sinfo")
        .arg("-h")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "no Slurm answers (SLURM_CONF={:?}); run scripts/test.sh, or scripts/local-slurm/up.sh and \
         `. /tmp/hpcagent-slurm/env.sh`",
        std::env::var("SLURM_CONF").ok()
    );
}

/// One field of `scontrol show job -o <id>`.
pub fn job_field(job: &str, field: &str) -> Option<String> {
    let out = Command::new("scontrol")
        .args(["show", "job", "-o", job])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{field}=")).map(str::to_string))
}

/// Asks `done` every `POLL` until it gives a value, and returns it; the
/// test fails after `limit`, with `what` it waited for (and what `done`
/// last saw, when it says so through `what`).
pub fn wait_until<T>(limit: Duration, what: &str, mut done: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = done() {
            return value;
        }
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(POLL);
    }
}

/// [`wait_until`] for async tests: the runtime runs between the asks.
pub async fn wait_until_async<T, F>(limit: Duration, what: &str, mut done: impl FnMut() -> F) -> T
where
    F: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(value) = done().await {
            return value;
        }
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(POLL).await;
    }
}

/// How often [`wait_until`] asks.
const POLL: Duration = Duration::from_millis(200);

/// Waits until the job has ended; returns its final state.
pub fn wait_for_job(job: &str, limit: Duration) -> String {
    const ENDED: [&str; 6] = [
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
    ];
    wait_until(limit, &format!("job {job} to end"), || {
        let state = job_field(job, "JobState").unwrap_or_default();
        ENDED.contains(&state.as_str()).then_some(state)
    })
}

/// A `hpcagent judge serve` process for tests, stopped when the test process ends.
pub struct JudgeServer {
    pub url: String,
    pub cache: PathBuf,
    pid: u32,
}

/// Rank variables a judge must not inherit from the test's environment.
const RANK_VARIABLES: &[&str] = &[
    "OMPI_COMM_WORLD_RANK",
    "MV2_COMM_WORLD_RANK",
    "PMIX_RANK",
    "PMI_RANK",
    "SLURM_PROCID",
];

/// How a test judge is started, beyond its arguments.
#[derive(Default)]
pub struct JudgeOptions<'a> {
    /// Its cache (default: a new directory).
    pub cache: Option<&'a Path>,
    /// Run it as this unprivileged user (default: the test's, root).
    pub user: Option<&'a Unprivileged>,
    /// A file it inherits open as descriptor 200, without close-on-exec, as
    /// a judge started by a careless parent would.
    pub inherit: Option<&'a Path>,
    /// Start it where it cannot make namespaces, as on a kernel that allows
    /// unprivileged users none: under a seccomp filter that refuses
    /// `unshare` and `setns` (the agent CLIs').
    pub no_namespaces: bool,
}

impl JudgeServer {
    /// Starts a judge at preset S on a free port, with its own cache unless
    /// `cache` is given; `env` adds variables (e.g. a rank).
    pub fn start(extra: &[&str], env: &[(&str, &str)], cache: Option<&Path>) -> JudgeServer {
        JudgeServer::start_with(
            extra,
            env,
            JudgeOptions {
                cache,
                ..JudgeOptions::default()
            },
        )
    }

    /// [`JudgeServer::start`] with more to say about how.
    pub fn start_with(extra: &[&str], env: &[(&str, &str)], options: JudgeOptions) -> JudgeServer {
        let cache = options.cache.map(Path::to_path_buf).unwrap_or_else(|| {
            let dir = tempfile::tempdir().unwrap().keep();
            if options.user.is_some() {
                std::os::unix::fs::chown(&dir, Some(Unprivileged::UID), Some(Unprivileged::UID))
                    .unwrap();
            }
            dir
        });
        let args: Vec<String> = [
            "judge",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--preset",
            "S",
            "--cache",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain(std::iter::once(cache.display().to_string()))
        .chain(extra.iter().map(|s| s.to_string()))
        .collect();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let inherit = options
            .inherit
            .map(|p| std::fs::File::open(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())));
        let inherited = inherit.as_ref().map(std::os::fd::AsRawFd::as_raw_fd);
        let mut cmd = match options.user {
            Some(user) => user.run(&judge_binary()),
            None => Command::new(judge_binary()),
        };
        if options.no_namespaces {
            without_namespaces(&mut cmd);
        }
        // The judge's parent is a thread that never ends, so PDEATHSIG fires only
        // when the whole test process goes.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::os::unix::process::CommandExt;
            cmd.args(&args)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null());
            for var in RANK_VARIABLES {
                cmd.env_remove(var);
            }
            cmd.envs(env);
            // SAFETY: prctl and dup2 only.
            unsafe {
                cmd.pre_exec(move || {
                    hpcagent_sandbox::reap::die_with_parent(libc::SIGKILL);
                    if let Some(fd) = inherited {
                        libc::dup2(fd, 200);
                    }
                    Ok(())
                });
            }
            let mut child = cmd.spawn().expect("start the judge");
            drop(inherit);
            let stdout = child.stdout.take().unwrap();
            tx.send((child.id(), stdout)).unwrap();
            let _ = child.wait();
            loop {
                std::thread::park();
            }
        });
        let (pid, stdout) = rx.recv().unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("the judge did not start: {line:?}"))
            .to_string();
        JudgeServer {
            url: format!("http://{addr}"),
            cache,
            pid,
        }
    }

    /// `hpcagent judge <verb> --judge URL <args>`.
    pub fn ask(&self, verb: &str, args: &[&str]) -> Output {
        hpcagent()
            .args(["judge", verb, "--judge", &self.url])
            .args(args)
            .output()
            .unwrap()
    }

    /// Grades `file` (under tests/submissions) and returns the verdict as JSON.
    pub fn grade(
        &self,
        verb: &str,
        task: &str,
        language: &str,
        file: &str,
        extra: &[&str],
    ) -> serde_json::Value {
        self.grade_path(
            verb,
            task,
            language,
            &repo().join("tests/submissions").join(file),
            extra,
        )
    }

    /// A C gemm source anywhere, graded by `verb`.
    pub fn grade_file(&self, verb: &str, path: &Path) -> serde_json::Value {
        self.grade_path(verb, "gemm", "c", path, &[])
    }

    /// A grade of the file at `path` as `task` in `language`.
    pub fn grade_file_as(
        &self,
        verb: &str,
        task: &str,
        language: &str,
        path: &Path,
    ) -> serde_json::Value {
        self.grade_path(verb, task, language, path, &[])
    }

    fn grade_path(
        &self,
        verb: &str,
        task: &str,
        language: &str,
        path: &Path,
        extra: &[&str],
    ) -> serde_json::Value {
        let file = path.display().to_string();
        let mut args = vec!["--task", task, "--language", language, "--json"];
        args.extend(extra);
        args.push(&file);
        let out = self.ask(verb, &args);
        assert!(out.status.success(), "{verb} {file}: {}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(&out)))
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The judge still answers.
    pub fn alive(&self) -> bool {
        self.ask("capabilities", &["--json"]).status.success()
    }
}

impl Drop for JudgeServer {
    fn drop(&mut self) {
        // SAFETY: kill(2) on the judge we started.
        unsafe { libc::kill(self.pid as i32, libc::SIGKILL) };
    }
}

/// Makes `command` start where no namespace can be made (see
/// [`JudgeOptions::no_namespaces`]).
pub fn without_namespaces(command: &mut Command) {
    use hpcagent_sandbox::seccomp::{Filters, Profile};
    use std::os::unix::process::CommandExt;
    let filters = Filters::new(Profile::Agent).unwrap();
    // SAFETY: the filter's installation makes raw system calls only.
    unsafe {
        command.pre_exec(move || filters.install());
    }
}

/// A run directory's `plan.json` (with the job's log when it is missing).
pub fn read_plan(run_dir: &Path) -> serde_json::Value {
    let path = run_dir.join("plan.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        let log = std::fs::read_to_string(run_dir.join("sbatch.out")).unwrap_or_default();
        panic!("{}: {e}\nsbatch.out:\n{log}", path.display())
    });
    serde_json::from_str(&text).unwrap()
}

/// The lines of a run's attempts' log (`attempts.jsonl`), in order.
pub fn attempt_log(run_dir: &Path) -> Vec<serde_json::Value> {
    let path = run_dir.join(hpcagent_orchestrator::store::attempt_log::FILE_NAME);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
        .collect()
}

/// Tasks of a campaign's store: (settled, total).
pub fn settled(run_dir: &Path) -> (usize, usize) {
    let Ok(reader) = hpcagent_orchestrator::store::Reader::open(run_dir) else {
        return (0, 0);
    };
    let tasks = reader.tasks().unwrap_or_default();
    (
        tasks.iter().filter(|t| t.state == "settled").count(),
        tasks.len(),
    )
}

/// Waits until at least `n` tasks of the campaign are settled.
pub fn wait_for_settled(run_dir: &Path, n: usize, limit: Duration) {
    wait_until(limit, &format!("{n} tasks settled"), || {
        (settled(run_dir).0 >= n).then_some(())
    });
}

/// Every task of the campaign is settled, each by exactly one Submit verdict.
pub fn assert_settled_exactly_once(run_dir: &Path) {
    let reader = hpcagent_orchestrator::store::Reader::open(run_dir).unwrap();
    let tasks = reader.tasks().unwrap();
    assert!(!tasks.is_empty());
    let unsettled: Vec<_> = tasks
        .iter()
        .filter(|t| t.state != "settled")
        .map(|t| (&t.id, &t.state))
        .collect();
    assert!(unsettled.is_empty(), "not settled: {unsettled:?}");
    let counts = reader.settlements().unwrap();
    let wrong: Vec<_> = counts.iter().filter(|(_, n)| *n != 1).collect();
    assert!(wrong.is_empty(), "settled other than once: {wrong:?}");
}

/// [`assert_settled_exactly_once`], recorded first as the fault suite's row
/// for `case`.
pub fn assert_fault_survived(case: &str, run_dir: &Path) {
    let (done, total) = settled(run_dir);
    let twice = hpcagent_orchestrator::store::Reader::open(run_dir)
        .and_then(|r| r.settlements().map_err(|e| panic!("{e}")))
        .map(|counts| counts.iter().filter(|(_, n)| *n > 1).count())
        .unwrap_or(usize::MAX);
    suite::record(
        "fault",
        case,
        "0 lost, 0 settled twice",
        &format!("{} of {total} lost, {twice} settled twice", total - done),
        total > 0 && done == total && twice == 0,
    );
    assert_settled_exactly_once(run_dir);
}

/// `up` with examples/local.env and the `command` policy: `agent_command`
/// as the agent CLI of every task of `kernels`, one agent node and one
/// judge node, runs under `runs`. The scripted agents need no model; the
/// policy still gets an endpoint. `up` is the command to add these to
/// (`hpcagent()`, or an unprivileged user's).
pub fn command_campaign(
    mut up: Command,
    kernels: &str,
    agent_command: &str,
    runs: &Path,
) -> Command {
    up.args(["up", "--env", example("local.env").to_str().unwrap()])
        .args(["--set", "AGENT_POLICY=command", "--set"])
        .arg(format!("KERNELS={kernels}"))
        .args(["--set", "AGENT_NODES=1", "--set", "JUDGE_NODES=1"])
        .args(["--set", "INFERENCE_URL=http://127.0.0.1:9/v1"])
        .args(["--set", "LLM_MODEL=none", "--set"])
        .arg(format!("AGENT_COMMAND={agent_command}"))
        .arg("--set")
        .arg(format!("RUN_ROOT={}", runs.display()))
        .current_dir(repo());
    up
}

/// The only run directory under `root`.
pub fn only_run_dir(root: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// An unprivileged user (`nobody`) to run commands as, with a home and a
/// run root of its own, removed when dropped. The tests run as root; the
/// campaigns and judges operators run are not.
pub struct Unprivileged {
    dir: tempfile::TempDir,
}

impl Unprivileged {
    pub const UID: u32 = 65534;

    pub fn new() -> Unprivileged {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        for sub in ["home", "runs"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
            std::os::unix::fs::chown(dir.path().join(sub), Some(Self::UID), Some(Self::UID))
                .unwrap();
        }
        Unprivileged { dir }
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    pub fn runs(&self) -> PathBuf {
        self.dir.path().join("runs")
    }

    /// `hpcagent` as this user, in a clean environment: its home, the
    /// system's PATH, and Debian's Python with NumPy for the judge's oracle
    /// (root's own Python may lie where this user cannot reach).
    pub fn hpcagent(&self) -> Command {
        self.run(Path::new(env!("CARGO_BIN_EXE_hpcagent")))
    }

    /// `binary` as this user, as [`Unprivileged::hpcagent`] runs hpcagent.
    pub fn run(&self, binary: &Path) -> Command {
        let mut command = Command::new("setpriv");
        let id = Self::UID.to_string();
        command
            .args([
                &format!("--reuid={id}"),
                &format!("--regid={id}"),
                "--clear-groups",
                "--",
            ])
            .arg(binary)
            .env_clear()
            .env("HOME", self.home())
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HPCAGENT_PYTHON", "/usr/bin/python3");
        command
    }
}

/// The cases whose reference outputs a judge's cache holds: the names of
/// the directories under a `reference` directory that start with `prefix`
/// (a kernel's ident and `-` for a native task).
pub fn reference_dirs(cache: &Path, prefix: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![cache.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if !path.is_dir() {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            if dir.ends_with("reference") && name.starts_with(prefix) {
                found.push(name);
            } else {
                dirs.push(path);
            }
        }
    }
    found
}
