//! The judge's one long-lived Python for HPCAgent-Bench's tasks
//! (`hab_inputs.py --serve`): it makes their cases, checks the modules
//! their references need and runs HPCAgent-Bench's translator, a request
//! at a time, so that a grade pays for neither a Python start nor NumPy's
//! import (nor the translator's package's, seconds) per case.
//!
//! The protocol is JSON lines: a request `{"id", "op", ...}` a line on its
//! stdin, an answer `{"id", "ok", ...}` (or `"ok": false` with `"error"`,
//! the traceback's last lines) a line on its stdout; what the code it runs
//! prints goes to its stderr, whose last lines are kept for when it dies.
//! An answer of another id (a request whose grade went away) is passed
//! over. A gated request (a grade's timed sets) has two more lines: the
//! worker's `{"id", "drawn": true}` once the inputs are drawn, and the
//! judge's `{"id", "go": bool}` before the reference is called, which may
//! come first ([`Worker::call_gated`]). A worker that died, or outlived a
//! request's time limit, is gone: the request fails saying why, and the
//! next one starts another worker.
//! A request whose caller went away before its answer came kills the
//! worker too (its answer would still be on the way).
//!
//! It runs as the judge, outside every submission's sandbox, so nothing
//! of a submission ever reaches it: its requests are plans the judge makes
//! from manifests, its output directories the judge's private ones, and it
//! answers the judge alone. Its script lies in a directory of its own in
//! the judge's cache (the directory Python puts first on the import path),
//! its temporary files in another, and HPCAgent-Bench's modules it imports
//! are compiled once into the cache ([`super::DataCache::python_env`]).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// Lines of the worker's stderr kept for when it dies.
const STDERR_LINES: usize = 40;

/// Why a request got no answer, or a failed one.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WorkerError {
    #[error("cannot start {python} for the judge's worker: {why}")]
    Start { python: String, why: String },
    #[error("the judge's Python worker died ({status}){stderr}")]
    Died { status: String, stderr: String },
    #[error("the judge's Python worker gave no answer within {0:?}, and was stopped")]
    TimedOut(Duration),
    #[error("the judge's Python worker answered what is not JSON: {0}")]
    Garbled(String),
    /// The request failed in Python: the traceback's last lines.
    #[error("{0}")]
    Failed(String),
}

/// The worker, started on the first request.
pub struct Worker {
    python: String,
    script: PathBuf,
    /// The script's directory in the judge's cache (its temporary files
    /// below it).
    home: PathBuf,
    env: Vec<(&'static str, PathBuf)>,
    running: tokio::sync::Mutex<Option<Running>>,
    next_id: AtomicU64,
    /// Workers started, the first included.
    starts: AtomicU64,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("python", &self.python)
            .field("script", &self.script)
            .finish_non_exhaustive()
    }
}

struct Running {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

/// The worker slot while a request is in flight: unless the request got
/// its answer, the worker is stopped when this goes (its caller went away,
/// it died, it timed out).
struct Busy<'a> {
    slot: tokio::sync::MutexGuard<'a, Option<Running>>,
    answered: bool,
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        if !self.answered
            && let Some(mut running) = self.slot.take()
        {
            let _ = running.child.start_kill();
        }
    }
}

impl Worker {
    /// A worker running `script` (its text) with `python`, from `home`, a
    /// directory of the judge's own; `env` added to the judge's.
    pub fn new(
        python: &str,
        home: &Path,
        script: &str,
        env: Vec<(&'static str, PathBuf)>,
    ) -> std::io::Result<Worker> {
        let file = home.join("hab_inputs.py");
        if std::fs::read_to_string(&file).ok().as_deref() != Some(script) {
            super::write_private(&file, script.as_bytes())?;
        }
        Ok(Worker {
            python: python.to_string(),
            script: file,
            home: home.to_path_buf(),
            env,
            running: tokio::sync::Mutex::new(None),
            next_id: AtomicU64::new(1),
            starts: AtomicU64::new(0),
        })
    }

    /// How many workers were started.
    pub fn starts(&self) -> u64 {
        self.starts.load(Ordering::Relaxed)
    }

    fn start(&self) -> Result<Running, WorkerError> {
        let failed = |why: String| WorkerError::Start {
            python: self.python.clone(),
            why,
        };
        let tmp = self.home.join("tmp");
        super::create_private_dir(&tmp).map_err(|e| failed(e.to_string()))?;
        let mut child = Command::new(&self.python)
            .arg(&self.script)
            .arg("--serve")
            .current_dir(&self.home)
            .envs(self.env.iter().map(|(k, v)| (*k, v)))
            .env("TMPDIR", &tmp)
            // The prefix is where its modules compile to.
            .env_remove("PYTHONDONTWRITEBYTECODE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| failed(e.to_string()))?;
        self.starts.fetch_add(1, Ordering::Relaxed);
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(pipe) = child.stderr.take() {
            let kept = stderr.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(pipe).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::debug!(target: "hab_worker", "{line}");
                    let mut kept = kept.lock().expect("stderr lines");
                    if kept.len() == STDERR_LINES {
                        kept.pop_front();
                    }
                    kept.push_back(line);
                }
            });
        }
        Ok(Running {
            stdin: child.stdin.take().expect("piped"),
            stdout: BufReader::new(child.stdout.take().expect("piped")),
            child,
            stderr,
        })
    }

    /// Sends `request` (an object; its `id` is set here) and returns the
    /// answer, within `limit`.
    pub async fn call(&self, request: Value, limit: Duration) -> Result<Value, WorkerError> {
        let (mut busy, id) = self.send(request).await?;
        let running = busy.slot.as_mut().expect("started");
        let answer = answer_within(running, id, limit).await?;
        busy.answered = true;
        succeeded(answer)
    }

    /// Sends `request` gated (`hab_inputs.py`'s `Gate`): the worker draws
    /// the inputs, then waits for the gate's word before it calls the
    /// reference; a word of false, whenever it comes, cancels the rest
    /// (the answer says `"cancelled": true`). `limit` bounds the worker's
    /// work before and after the word, not the wait for it.
    pub async fn call_gated(
        &self,
        mut request: Value,
        gate: Gate,
        limit: Duration,
    ) -> Result<Value, WorkerError> {
        let Gate { word, drawn } = gate;
        request["gated"] = true.into();
        let (mut busy, id) = self.send(request).await?;
        let running = busy.slot.as_mut().expect("started");
        let mut word = Some(word);
        let first = match drawn_or_answered(running, id, &mut word, limit).await {
            Ok(first) => first,
            Err(unread) => return Err(unread.into_error(running).await),
        };
        let answer = if first["drawn"].as_bool() == Some(true) {
            drawn();
            if let Some(word) = word.take() {
                let go = word.await;
                if let Err(e) = say(&mut running.stdin, id, go).await {
                    return Err(died(running, e.to_string()).await);
                }
            }
            answer_within(running, id, limit).await?
        } else {
            first
        };
        busy.answered = true;
        succeeded(answer)
    }

    /// Writes `request` with an id of its own to the worker (started here
    /// when none runs), which it holds until the answer.
    async fn send(&self, mut request: Value) -> Result<(Busy<'_>, u64), WorkerError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        request["id"] = id.into();
        let mut line = request.to_string();
        line.push('\n');
        let mut busy = Busy {
            slot: self.running.lock().await,
            answered: false,
        };
        // One that died between requests is started again, and so is one
        // whose pipe is found broken before anything of this request went.
        for attempt in 0..2 {
            let gone = match busy.slot.as_mut() {
                None => true,
                Some(running) => running.child.try_wait().ok().flatten().is_some(),
            };
            if gone {
                *busy.slot = Some(self.start()?);
            }
            let running = busy.slot.as_mut().expect("started");
            let sent = running.stdin.write_all(line.as_bytes()).await;
            let sent = match sent {
                Ok(()) => running.stdin.flush().await,
                Err(e) => Err(e),
            };
            match sent {
                Ok(()) => break,
                Err(_) if attempt == 0 && !gone => {
                    if let Some(mut dead) = busy.slot.take() {
                        let _ = dead.child.start_kill();
                    }
                }
                Err(e) => {
                    return Err(died(busy.slot.as_mut().expect("started"), e.to_string()).await);
                }
            }
        }
        Ok((busy, id))
    }
}

/// The judge's word on a gated request: true, go on to the reference;
/// false, stop.
pub type Word = std::pin::Pin<Box<dyn Future<Output = bool> + Send>>;

/// What a gated request waits on: the judge's word, and what to do once
/// the worker says it drew the inputs (`drawn`: run then, or never where
/// it answers first).
pub struct Gate {
    pub word: Word,
    pub drawn: Box<dyn FnOnce() + Send>,
}

impl Gate {
    /// A gate that waits for `word` alone.
    pub fn on(word: Word) -> Gate {
        Gate {
            word,
            drawn: Box::new(|| ()),
        }
    }
}

/// An answer that says it failed, as the error it says.
fn succeeded(answer: Value) -> Result<Value, WorkerError> {
    if answer["ok"].as_bool() == Some(true) {
        Ok(answer)
    } else {
        Err(WorkerError::Failed(
            answer["error"]
                .as_str()
                .unwrap_or("it failed and did not say why")
                .to_string(),
        ))
    }
}

/// The worker's first line on gated request `id` (that it drew, or its
/// answer), within `limit`; the word is said, and taken out of `word`,
/// if it comes first.
async fn drawn_or_answered(
    running: &mut Running,
    id: u64,
    word: &mut Option<Word>,
    limit: Duration,
) -> Result<Value, Unread> {
    let Running { stdin, stdout, .. } = running;
    let reading = line_of(stdout, id);
    tokio::pin!(reading);
    let deadline = tokio::time::sleep(limit);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            go = async { word.as_mut().expect("guarded").await }, if word.is_some() => {
                *word = None;
                say(stdin, id, go).await.map_err(|e| Unread::Ended(e.to_string()))?;
            }
            line = &mut reading => return line,
            () = &mut deadline => return Err(Unread::Other(WorkerError::TimedOut(limit))),
        }
    }
}

/// Says the judge's word on gated request `id`.
async fn say(stdin: &mut ChildStdin, id: u64, go: bool) -> std::io::Result<()> {
    let line = format!("{}\n", serde_json::json!({"id": id, "go": go}));
    stdin.write_all(line.as_bytes()).await?;
    stdin.flush().await
}

/// Why no line came: the worker's output ended (it died), or something
/// else went wrong.
enum Unread {
    Ended(String),
    Other(WorkerError),
}

impl Unread {
    /// The request's error: a worker whose output ended is said dead,
    /// with what it printed last.
    async fn into_error(self, running: &mut Running) -> WorkerError {
        match self {
            Unread::Ended(why) => died(running, why).await,
            Unread::Other(e) => e,
        }
    }
}

/// The worker's answer to request `id`, those of others passed over,
/// within `limit`.
async fn answer_within(
    running: &mut Running,
    id: u64,
    limit: Duration,
) -> Result<Value, WorkerError> {
    match tokio::time::timeout(limit, line_of(&mut running.stdout, id)).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(unread)) => Err(unread.into_error(running).await),
        Err(_) => Err(WorkerError::TimedOut(limit)),
    }
}

/// The worker's next line on request `id`, those on others passed over.
async fn line_of(stdout: &mut BufReader<ChildStdout>, id: u64) -> Result<Value, Unread> {
    loop {
        let mut line = String::new();
        match stdout.read_line(&mut line).await {
            Ok(0) => return Err(Unread::Ended("its output ended".into())),
            Ok(_) => {}
            Err(e) => return Err(Unread::Ended(e.to_string())),
        }
        let value: Value = serde_json::from_str(&line).map_err(|e| {
            Unread::Other(WorkerError::Garbled(format!(
                "{e}: {}",
                hpcagent_common::words::tail(&line, 200)
            )))
        })?;
        if value["id"].as_u64() == Some(id) {
            return Ok(value);
        }
    }
}

/// What is known of a worker that died: its end, and its stderr's last
/// lines.
async fn died(running: &mut Running, why: String) -> WorkerError {
    let status = tokio::time::timeout(Duration::from_secs(2), running.child.wait())
        .await
        .ok()
        .and_then(Result::ok)
        .map(|s| s.to_string())
        .unwrap_or(why);
    // Its stderr's reader may still be reading the last lines.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let lines: Vec<String> = running
        .stderr
        .lock()
        .expect("stderr lines")
        .iter()
        .cloned()
        .collect();
    let stderr = lines[lines.len().saturating_sub(12)..].join("\n");
    WorkerError::Died {
        status,
        stderr: if stderr.is_empty() {
            String::new()
        } else {
            format!(":\n{stderr}")
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_secs(60);

    /// A worker of the judge's own script, in a cache of its own.
    fn worker(home: &Path) -> Worker {
        let python = std::env::var("HPCAGENT_PYTHON").unwrap_or_else(|_| "python3".into());
        Worker::new(&python, home, super::super::hab::SCRIPT, Vec::new()).unwrap()
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn one_worker_answers_request_after_request_and_a_failure_is_said() {
        let home = tempfile::tempdir().unwrap();
        let w = worker(home.path());
        runtime().block_on(async {
            for _ in 0..3 {
                w.call(serde_json::json!({"op": "ping"}), LIMIT)
                    .await
                    .unwrap();
            }
            let missing = w
                .call(
                    serde_json::json!({"op": "modules", "checkout": "/nonexistent",
                                       "names": ["json", "hpcagent_no_such_module"]}),
                    LIMIT,
                )
                .await
                .unwrap();
            assert_eq!(
                missing["missing"],
                serde_json::json!(["hpcagent_no_such_module"])
            );
            match w.call(serde_json::json!({"op": "nothing"}), LIMIT).await {
                Err(WorkerError::Failed(why)) => assert!(why.contains("no operation"), "{why}"),
                other => panic!("{other:?}"),
            }
            // A failed request leaves the worker in place.
            w.call(serde_json::json!({"op": "ping"}), LIMIT)
                .await
                .unwrap();
        });
        assert_eq!(w.starts(), 1);
    }

    #[test]
    fn a_worker_that_died_is_started_again_and_its_death_is_said() {
        let home = tempfile::tempdir().unwrap();
        let w = worker(home.path());
        runtime().block_on(async {
            w.call(serde_json::json!({"op": "ping"}), LIMIT)
                .await
                .unwrap();
            // Killed from outside between requests: the next starts another.
            let pid = {
                let running = w.running.lock().await;
                running.as_ref().unwrap().child.id().unwrap()
            };
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            )
            .unwrap();
            tokio::time::sleep(Duration::from_millis(200)).await;
            w.call(serde_json::json!({"op": "ping"}), LIMIT)
                .await
                .unwrap();
            assert_eq!(w.starts(), 2);
            // A request it dies of: said, with what it printed last; the
            // next request gets another worker.
            let root = tempfile::tempdir().unwrap();
            let plan = plans_of(
                root.path(),
                "import os, sys; print('the initializer gives up', file=sys.stderr, \
                 flush=True); os._exit(3)",
                1,
            )
            .remove(0);
            let out = tempfile::tempdir().unwrap();
            let request = serde_json::json!({"op": "cases", "plans": [plan],
                                             "out": out.path(), "flags": ["--case"]});
            match w.call(request, LIMIT).await {
                Err(WorkerError::Died { status, stderr }) => {
                    assert!(status.contains('3'), "{status}");
                    assert!(stderr.contains("the initializer gives up"), "{stderr}");
                }
                other => panic!("{other:?}"),
            }
            w.call(serde_json::json!({"op": "ping"}), LIMIT)
                .await
                .unwrap();
            assert_eq!(w.starts(), 3);
        });
    }

    #[test]
    fn a_request_past_its_limit_stops_the_worker_and_the_next_gets_another() {
        let home = tempfile::tempdir().unwrap();
        let w = worker(home.path());
        runtime().block_on(async {
            w.call(serde_json::json!({"op": "ping"}), LIMIT)
                .await
                .unwrap();
            // A module that takes 30 s to import, asked for with 1 s to
            // answer: stopped.
            let slow = tempfile::tempdir().unwrap();
            std::fs::write(slow.path().join("slow.py"), "import time\ntime.sleep(30)\n").unwrap();
            let request = serde_json::json!({"op": "modules", "checkout": slow.path(),
                                             "names": ["slow"]});
            let started = std::time::Instant::now();
            let late = w.call(request, Duration::from_secs(1)).await;
            assert!(matches!(late, Err(WorkerError::TimedOut(_))), "{late:?}");
            assert!(started.elapsed() < Duration::from_secs(10));
            w.call(serde_json::json!({"op": "ping"}), LIMIT)
                .await
                .unwrap();
            assert_eq!(w.starts(), 2);
        });
    }

    #[test]
    fn a_kernel_s_own_helper_module_is_not_another_kernel_s() {
        // Two kernels, each with a helper module `helper` beside it, whose
        // initializers fill x with its VALUE: each case gets its own.
        let root = tempfile::tempdir().unwrap();
        for (name, value) in [("a", 1), ("b", 2)] {
            let dir = root.path().join("t").join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join(format!("{name}.yaml")),
                "name: k\nparameters:\n  S: {N: 4}\ninit:\n  func_name: initialize\n\
                 \x20 input_args: [N]\n  output_args: [x]\n  arrays:\n    x: (N,)\n\
                 output_args: [x]\n",
            )
            .unwrap();
            std::fs::write(
                dir.join(format!("{name}_numpy.py")),
                format!("def {name}(x, N):\n    x[:] = 0\n"),
            )
            .unwrap();
            std::fs::write(dir.join("helper.py"), format!("VALUE = {value}\n")).unwrap();
            std::fs::write(
                dir.join(format!("{name}.py")),
                "import numpy as np\nfrom helper import VALUE\n\n\
                 def initialize(N, datatype=np.float64):\n\
                 \x20   return np.full(N, VALUE, dtype=datatype)\n",
            )
            .unwrap();
        }
        let (kernels, refused) = hpcagent_corpus::hab::load(root.path()).unwrap();
        assert!(refused.is_empty(), "{refused:?}");
        let home = tempfile::tempdir().unwrap();
        let w = worker(home.path());
        let out = tempfile::tempdir().unwrap();
        runtime().block_on(async {
            for kernel in kernels.iter().chain(&kernels) {
                let symbols = kernel.preset_symbols("S").unwrap();
                let plan = kernel.input_plan(root.path(), symbols, 42, "fp64").unwrap();
                let to = out.path().join(&kernel.stem);
                let request = serde_json::json!({"op": "cases", "plans": [plan], "out": to,
                                                 "flags": ["--case"]});
                w.call(request, LIMIT).await.unwrap();
                let bytes = std::fs::read(to.join("0/x.bin")).unwrap();
                let first = f64::from_le_bytes(bytes[..8].try_into().unwrap());
                let expected = if kernel.stem == "a" { 1.0 } else { 2.0 };
                assert_eq!(first, expected, "{}", kernel.stem);
            }
        });
        assert_eq!(w.starts(), 1);
    }

    /// `count` plans of the S case of a task `k` whose initializer runs
    /// `body` (Python, after `import time, numpy as np`) and returns x of N
    /// elements, and whose reference sets x to 1.
    fn plans_of(root: &Path, body: &str, count: usize) -> Vec<hpcagent_corpus::hab::InputPlan> {
        plans_with(root, body, "def k(x, N):\n    x[:] = 1\n", count)
    }

    /// As [`plans_of`], with the reference module `reference` (a
    /// function `k(x, N)`).
    fn plans_with(
        root: &Path,
        body: &str,
        reference: &str,
        count: usize,
    ) -> Vec<hpcagent_corpus::hab::InputPlan> {
        let dir = root.join("t/k");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("k.yaml"),
            "name: k\nparameters:\n  S: {N: 8}\ninit:\n  func_name: initialize\n\
             \x20 input_args: [N]\n  output_args: [x]\n  arrays:\n    x: (N,)\n\
             output_args: [x]\n",
        )
        .unwrap();
        std::fs::write(dir.join("k_numpy.py"), reference).unwrap();
        std::fs::write(
            dir.join("k.py"),
            format!(
                "import time, numpy as np\n\ndef initialize(N, datatype=np.float64):\n\
                 \x20   {body}\n    return np.arange(N, dtype=datatype)\n"
            ),
        )
        .unwrap();
        let (kernels, refused) = hpcagent_corpus::hab::load(root).unwrap();
        assert!(refused.is_empty(), "{refused:?}");
        let symbols = kernels[0].preset_symbols("S").unwrap();
        let plan = kernels[0].input_plan(root, symbols, 42, "fp64").unwrap();
        vec![plan; count]
    }

    #[test]
    fn every_request_meets_malloc_settled_whatever_ran_before() {
        // glibc raises its mmap threshold to the largest block a process
        // freed: left to itself, after a reference that freed 20 MiB a
        // 4 MiB array came from the heap where it had been a mapping, and
        // a NumPy reference's temporaries got quicker. The probe's
        // reference says which of a 4 MiB and a 40 MiB array were mapped.
        const PROBE: &str = "import ctypes, numpy as np\n\
            class Info(ctypes.Structure):\n\
            \x20   _fields_ = [(n, ctypes.c_size_t) for n in ('arena', 'ordblks', 'smblks', \
            'hblks', 'hblkhd', 'usmblks', 'fsmblks', 'uordblks', 'fordblks', 'keepcost')]\n\
            libc = ctypes.CDLL(None)\n\
            libc.mallinfo2.restype = Info\n\
            def mapped(mib):\n\
            \x20   before = libc.mallinfo2().hblkhd\n\
            \x20   block = np.empty(mib << 17)\n\
            \x20   return libc.mallinfo2().hblkhd > before\n\
            def k(x, N):\n\
            \x20   x[:] = 0\n\
            \x20   x[0], x[1] = mapped(4), mapped(40)\n";
        const FREES_20_MIB: &str =
            "import numpy as np\ndef k(x, N):\n    np.ones(20 << 17).sum()\n    x[:] = 1\n";
        let (probe, frees) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let probe = plans_with(probe.path(), "pass", PROBE, 1).remove(0);
        let frees = plans_with(frees.path(), "pass", FREES_20_MIB, 1).remove(0);
        let home = tempfile::tempdir().unwrap();
        let w = worker(home.path());
        let out = tempfile::tempdir().unwrap();
        let call = async |plan: &hpcagent_corpus::hab::InputPlan, to: &str| {
            let to = out.path().join(to);
            let request = serde_json::json!({"op": "cases", "plans": [plan], "out": to,
                                             "flags": ["--case", "--reference"]});
            w.call(request, LIMIT).await.unwrap();
            let bytes = std::fs::read(to.join("0/expected/x.bin")).unwrap();
            let first = |i: usize| f64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().unwrap());
            let timing = std::fs::read_to_string(to.join("0/timing.json")).unwrap();
            ((first(0), first(1)), timing)
        };
        runtime().block_on(async {
            // Below 32 MiB from the heap, above it mapped: as a process
            // that once freed 32 MiB, from its first request on.
            let (first, timing) = call(&probe, "first").await;
            assert_eq!(first, (0.0, 1.0), "a 4 MiB and a 40 MiB array mapped");
            assert!(
                timing.contains("malloc's mmap threshold 32 MiB"),
                "{timing}"
            );
            call(&frees, "frees").await;
            let (after, _) = call(&probe, "after").await;
            assert_eq!(after, first, "the request before moved the threshold");
        });
        assert_eq!(w.starts(), 1);
    }

    fn made(out: &Path, count: usize, file: &str) -> usize {
        (0..count)
            .filter(|i| out.join(i.to_string()).join(file).exists())
            .count()
    }

    #[test]
    fn a_gated_request_draws_every_set_first_and_calls_the_reference_on_the_word() {
        let root = tempfile::tempdir().unwrap();
        let plans = plans_of(root.path(), "pass", 3);
        let home = tempfile::tempdir().unwrap();
        let w = worker(home.path());
        let out = tempfile::tempdir().unwrap();
        let request = serde_json::json!({"op": "cases", "plans": plans, "out": out.path(),
                                         "flags": ["--case", "--reference", "--warm"]});
        let (go, word) = tokio::sync::oneshot::channel::<bool>();
        let word: Word = Box::pin(async { word.await.unwrap() });
        // Says go once every set is drawn, and the reference has not been
        // called on any while the worker waited.
        let judge = async {
            let start = std::time::Instant::now();
            while made(out.path(), 3, "x.bin") < 3 {
                assert!(start.elapsed() < LIMIT, "the sets were not drawn");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert_eq!(made(out.path(), 3, "expected"), 0);
            assert_eq!(made(out.path(), 3, "timing.json"), 0);
            go.send(true).unwrap();
        };
        let (answer, ()) = runtime()
            .block_on(async { tokio::join!(w.call_gated(request, Gate::on(word), LIMIT), judge) });
        let answer = answer.unwrap();
        assert_eq!(answer["cancelled"], Value::Null, "{answer}");
        assert_eq!(made(out.path(), 3, "timing.json"), 3);
        for i in 0..3 {
            let bytes = std::fs::read(out.path().join(format!("{i}/expected/x.bin"))).unwrap();
            let values: Vec<f64> = bytes
                .chunks(8)
                .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
                .collect();
            assert_eq!(values, vec![1.0; 8]);
        }
        assert_eq!(w.starts(), 1);
    }

    #[test]
    fn a_word_of_no_stops_the_drawing_and_the_worker_stays() {
        let root = tempfile::tempdir().unwrap();
        let plans = plans_of(root.path(), "time.sleep(0.2)", 20);
        let home = tempfile::tempdir().unwrap();
        let w = worker(home.path());
        let out = tempfile::tempdir().unwrap();
        let request = serde_json::json!({"op": "cases", "plans": plans, "out": out.path(),
                                         "flags": ["--case", "--reference", "--warm"]});
        runtime().block_on(async {
            let answer = w
                .call_gated(request, Gate::on(Box::pin(async { false })), LIMIT)
                .await
                .unwrap();
            assert_eq!(answer["cancelled"], true, "{answer}");
            // The word came while the first sets were drawn: the rest were
            // not, and no reference was called.
            assert!(made(out.path(), 20, "x.bin") <= 2);
            assert_eq!(made(out.path(), 20, "expected"), 0);
            w.call(serde_json::json!({"op": "ping"}), LIMIT)
                .await
                .unwrap();
        });
        assert_eq!(w.starts(), 1);
    }
}
