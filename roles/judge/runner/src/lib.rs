//! Running a submission out of process, timed from outside it: the core a
//! leaderboard rests on, in a crate of its own so that it can be audited
//! alone. The judge (hpcagent-judge) decides what to run and grades what
//! comes back; this crate runs it, times it and compares its outputs.
//!
//! # Threat model
//!
//! The code it runs is hostile: written by an optimizer that gains from
//! any speedup, honest arithmetic or not. It holds, whatever that code
//! does:
//!
//! - **The clock is the supervisor's.** Every call is timed by the
//!   supervisor, from before it hands the call over to after the runner
//!   says it ended; nothing the runner reports is a time, and a byte on its
//!   channel only ends a call ([`supervisor`]).
//! - **Between calls nothing of the runner runs.** Its threads are held by
//!   ptrace-stops (sandbox::hold), which no `SIGCONT` ends; seccomp refuses
//!   what would arrange one anyway (timers, `O_ASYNC`/`F_SETSIG`, signals to
//!   itself), processes, and changes of its scheduling or CPUs, which are
//!   not its supervisor's (`child`, [`process`]).
//! - **The supervisor cannot be held.** Every read and write on a runner's
//!   channels has a deadline, the channels are of mode 0 (not reopened by
//!   `/proc/self/fd`) and cannot be resized: a stall is the submission's
//!   timeout, never the judge's error.
//! - **Inputs it cannot know.** Timed inputs are drawn for the run from a
//!   secret of the grade ([`draw`]), every timed call's outputs are compared
//!   with the baseline's on the same inputs, and output arrays hold
//!   canaries before each call ([`verify`]): caches, replays and skipped
//!   work are wrong answers.
//! - **Inputs it cannot change.** The arrays a kernel only reads are mapped
//!   read-only in every runner from a descriptor that cannot write them
//!   ([`buffers`]); a write faults, and the fault's address says whose input
//!   it was.
//! - **Nothing it does outlives or leaves its run.** A PID, mount, IPC and
//!   network namespace per run, Landlock, limits, and the whole tree killed
//!   at the end; the node's timing lock is the supervisor's own open file,
//!   free the moment it dies.
//!
//! docs/judge-contract.md's threat table names each attack, its defence and
//! the test that attacks it; `scripts/defences-off.sh` runs those tests
//! against the judge before the defences and sees them fail.
//!
//! # How a run goes
//!
//! The judge starts `hpcagent judge exec` (the [`supervisor`]) with the run's
//! request, a channel for its reports and, for a timed run, the node's
//! timing lock. The supervisor starts a runner per library ([`process`]:
//! the submission's, and the baseline's beside it), each the first process
//! of namespaces of its own ([`child`]), confined and filtered, and makes
//! and times every call itself. A crash, a hang, a fork bomb or an
//! exhausted address space ends a runner, never the judge or the
//! supervisor: [`launch`] waits with a deadline, kills the whole tree on
//! it, and collects what the supervisor reported.

mod buffers;
mod child;
pub mod device;
pub mod draw;
pub mod finite;
pub mod floor;
mod papi;
pub mod process;
pub mod protocol;
pub mod supervisor;
pub mod timing;
pub mod verify;

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;

use crate::verify::Comparison;
use hpcagent_common::words::tail;
use protocol::{Event, Request, read_frame_into};

/// What `hpcagent` is asked to be, from its arguments (without the program's
/// name). `main` looks for these before it parses anything else: a runner
/// starts twice per grade, and building the parser of the whole command
/// line took about a millisecond of its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// `judge exec`: the supervisor of a run.
    Supervisor,
    /// `judge exec --runner`: a runner.
    Runner,
    /// `judge exec --probe`: whether runs can have namespaces of their own
    /// here, and be held by ptrace.
    Probe,
    /// `judge exec --compile SETUP COMPILER ARGS...`: a compiler in walls
    /// of its own (the judge's build, `build::confined` in hpcagent-judge).
    Compile,
    /// `judge exec --loopback PROGRAM ARGS...`: PROGRAM (a profiler, with
    /// the supervisor under it) in a network namespace of its own whose
    /// only interface is loopback.
    Loopback,
}

/// A runner's whole command line, its name first.
pub const RUNNER_PROCESS_ARGS: [&str; 4] = ["hpcagent", "judge", "exec", "--runner"];

/// Which entry `args` ask for, if any.
pub fn entry(args: &[std::ffi::OsString]) -> Option<Entry> {
    let args: Vec<&str> = args.iter().map(|a| a.to_str()).collect::<Option<_>>()?;
    match args.as_slice() {
        ["judge", "exec"] => Some(Entry::Supervisor),
        ["judge", "exec", "--runner"] => Some(Entry::Runner),
        ["judge", "exec", "--probe"] => Some(Entry::Probe),
        ["judge", "exec", "--compile", _, _, ..] => Some(Entry::Compile),
        ["judge", "exec", "--loopback", _, ..] => Some(Entry::Loopback),
        _ => None,
    }
}

/// Runs an entry; its exit code. `compile` is [`Entry::Compile`]'s: the
/// confined compiler belongs to the judge's builds, which this crate does
/// not know.
pub fn run_entry(entry: Entry, compile: fn() -> i32) -> i32 {
    match entry {
        Entry::Supervisor => supervisor::main(&mut std::io::stdin().lock()),
        Entry::Runner => process::main(),
        Entry::Compile => compile(),
        Entry::Loopback => loopback_main(),
        Entry::Probe => {
            let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"));
            // In the namespaces a supervisor has, when it can have them.
            let namespaces = hpcagent_sandbox::namespaces::probe(&exe).map_err(|e| e.to_string());
            let hold = hpcagent_sandbox::hold::probe().map_err(|e| e.to_string());
            let line = |found: Result<(), String>| found.err().unwrap_or_else(|| "ok".into());
            println!("{}\n{}", line(namespaces), line(hold));
            0
        }
    }
}

/// Exit code of `--loopback` when it could not make the network.
pub const LOOPBACK_FAILED: i32 = 125;

fn loopback_main() -> i32 {
    let program: Vec<std::ffi::OsString> = std::env::args_os().skip(4).collect();
    if let Err(e) = hpcagent_sandbox::namespaces::own_loopback_network() {
        eprintln!("hpcagent: a profiled run's own network: {e}");
        return LOOPBACK_FAILED;
    }
    let e = std::os::unix::process::CommandExt::exec(
        std::process::Command::new(&program[0]).args(&program[1..]),
    );
    eprintln!(
        "hpcagent: cannot start {}: {e}",
        program[0].to_string_lossy()
    );
    127
}

/// What a probe found: whether runs here can have namespaces of their
/// own, and be held by ptrace between calls; why not.
#[derive(Debug, Clone)]
pub struct Probed {
    pub namespaces: Result<(), String>,
    pub hold: Result<(), String>,
}

/// Probes what runs started by `exe` can have here: the probe entry, in a
/// process of its own (it must be single-threaded to take a user namespace).
pub fn probe(exe: &Path) -> Probed {
    let out = std::process::Command::new(exe)
        .args(["judge", "exec", "--probe"])
        .env_clear()
        .stdin(Stdio::null())
        .output();
    let said = match &out {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).to_string(),
        Ok(out) => format!("the probe ended with {}", out.status),
        Err(e) => format!("cannot start {}: {e}", exe.display()),
    };
    let mut lines = said.lines();
    let mut next = || match lines.next() {
        Some("ok") => Ok(()),
        Some(why) => Err(why.to_string()),
        None => Err(said.trim().to_string()),
    };
    Probed {
        namespaces: next(),
        hold: next(),
    }
}

/// Holds each output array a check sends back to its answer as it
/// arrives: at L an output is gigabytes and a submit checks five cases,
/// so a run's outputs are compared one at a time and never kept.
pub trait Verifier: Send + Sync {
    /// `actual`, the array `array` after step `step`'s last call, against
    /// its answer; `None` when that step's outputs are not checked.
    fn verify(&self, step: usize, array: &str, actual: &[u8]) -> Option<Comparison>;
}

/// Everything a run produced.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub events: Vec<Event>,
    /// (step, output name) → how the output after the step's last call
    /// compared with its answer ([`Launch::verifier`]).
    pub compared: BTreeMap<(usize, String), Comparison>,
    /// The supervisor did not finish its report: how it ended, or why its
    /// channel could not be read.
    pub supervisor_error: Option<String>,
    pub stdout_tail: String,
    pub stderr_tail: String,
    pub wall: Duration,
}

impl RunOutcome {
    /// Whether every step ran.
    pub fn done(&self) -> bool {
        self.events.contains(&Event::Done)
    }
}

/// One run.
pub struct Launch<'a> {
    /// The hpcagent binary.
    pub exe: &'a Path,
    /// A profiler command the supervisor runs under (`perf stat ... --`).
    pub wrapper: Vec<String>,
    /// Profiler and supervisor in a loopback-only network of their own
    /// (`judge exec --loopback`), which the runners share.
    pub loopback: bool,
    pub request: Request,
    pub env: Vec<(String, String)>,
    /// How long the whole run may take.
    pub timeout: Duration,
    /// Bytes of outputs the run may send back.
    pub output_bytes: u64,
    /// The CPUs the supervisor runs on (its runners get theirs from the request).
    pub cpus: Vec<usize>,
    /// What the checks' outputs are held to; without one they are read and
    /// dropped.
    pub verifier: Option<Arc<dyn Verifier>>,
}

/// Why a run could not be started or followed to its end.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("pipe: {0}")]
    Pipe(nix::Error),
    #[error(transparent)]
    Request(#[from] serde_json::Error),
    #[error("{path}: {error}")]
    OutputFile { path: String, error: std::io::Error },
    #[error("output file: {0}")]
    CloneOutput(std::io::Error),
    #[error("cannot start the supervisor: {0}")]
    Start(std::io::Error),
    #[error("the supervisor vanished at start")]
    Vanished,
    #[error(transparent)]
    Wait(std::io::Error),
}

/// Starts the supervisor, waits for it (or the deadline), and collects its report.
pub async fn launch(launch: Launch<'_>) -> Result<RunOutcome, LaunchError> {
    let sandbox = launch.request.sandbox.clone();
    let (reader, writer) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(LaunchError::Pipe)?;
    let request = serde_json::to_vec(&launch.request)?;
    let (stdout, stderr, held) = output_files(&sandbox)?;
    let mut words: Vec<std::ffi::OsString> = Vec::new();
    if launch.loopback {
        words.push(launch.exe.into());
        words.extend(["judge", "exec", "--loopback"].map(Into::into));
    }
    words.extend(launch.wrapper.iter().map(Into::into));
    words.push(launch.exe.into());
    words.extend(["judge", "exec"].map(Into::into));
    let mut command = std::process::Command::new(&words[0]);
    command
        .args(&words[1..])
        .current_dir(&sandbox)
        .env_clear()
        .envs(launch.env.iter().cloned())
        .stdin(Stdio::piped())
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr));
    hpcagent_sandbox::limits::Limits {
        cpus: launch.cpus.clone(),
        ..Default::default()
    }
    .install(&mut command);
    let channel = writer.as_raw_fd();
    // SAFETY: dup2 is async-signal-safe; the copy it makes is not close-on-exec.
    unsafe {
        command.pre_exec(move || {
            if libc::dup2(channel, supervisor::CHANNEL_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // Nothing else of the judge's (nor what it inherited) goes on.
            hpcagent_sandbox::limits::close_on_exec_from(supervisor::CHANNEL_FD as u32 + 1);
            Ok(())
        });
    }
    let started = Instant::now();
    let mut child = tokio::process::Command::from(command)
        .kill_on_drop(true)
        .spawn()
        .map_err(LaunchError::Start)?;
    drop(writer);
    let pid = child.id().ok_or(LaunchError::Vanished)?;
    // Should this future be dropped mid-run, the run's processes go with it.
    let cleanup = KillOnDrop(pid);
    let budget = launch.output_bytes + (64 << 20);
    let verifier = launch.verifier.clone();
    let collect =
        tokio::task::spawn_blocking(move || read_channel(reader, budget, verifier.as_deref()));
    if let Some(mut stdin) = child.stdin.take() {
        // A supervisor that dies at once closes its stdin: its status says why.
        let _ = stdin.write_all(&request).await;
    }
    let status = tokio::select! {
        status = child.wait() => Some(status.map_err(LaunchError::Wait)?),
        _ = tokio::time::sleep(launch.timeout) => None,
    };
    let wall = started.elapsed();
    hpcagent_sandbox::reap::kill_tree(pid);
    hpcagent_sandbox::reap::kill_group(pid);
    let status = match status {
        Some(status) => Some(status),
        None => {
            let _ = child.wait().await;
            None
        }
    };
    // Reaped: its tree is gone, and its pid may now be another process's.
    cleanup.disarm();
    let (events, compared, channel_error) =
        match tokio::time::timeout(Duration::from_secs(10), collect).await {
            Ok(Ok(result)) => result,
            _ => (
                Vec::new(),
                BTreeMap::new(),
                Some("the supervisor's channel stayed open after it ended".into()),
            ),
        };
    let done = events.iter().any(Event::ends_run);
    let supervisor_error =
        match (status, done) {
            (None, _) => Some(format!(
                "the run was still going after {:.1} s and was stopped",
                wall.as_secs_f64()
            )),
            (Some(_), true) => channel_error,
            (Some(status), false) => Some(channel_error.unwrap_or_else(|| {
                format!("the supervisor ended ({status}) before its report did")
            })),
        };
    Ok(RunOutcome {
        events,
        compared,
        supervisor_error,
        stdout_tail: file_tail(held.0),
        stderr_tail: file_tail(held.1),
        wall,
    })
}

/// The submission's stdout and stderr files in its sandbox, and the judge's
/// own descriptors of them: the sandbox belongs to the submission, which may
/// replace the files by symlinks to anything the judge could read, so the
/// judge reads them back only through descriptors it opened.
fn output_files(
    sandbox: &Path,
) -> Result<(std::fs::File, std::fs::File, (std::fs::File, std::fs::File)), LaunchError> {
    let open = |p: PathBuf| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&p)
            .map_err(|error| LaunchError::OutputFile {
                path: p.display().to_string(),
                error,
            })
    };
    let (stdout, stderr) = (
        open(sandbox.join("stdout.txt"))?,
        open(sandbox.join("stderr.txt"))?,
    );
    let clone = |f: &std::fs::File| f.try_clone().map_err(LaunchError::CloneOutput);
    let held = (clone(&stdout)?, clone(&stderr)?);
    Ok((stdout, stderr, held))
}

type Collected = (
    Vec<Event>,
    BTreeMap<(usize, String), Comparison>,
    Option<String>,
);

/// Reads the channel frame by frame until it closes, `budget` bytes at
/// most, each output verified as it arrives into one buffer reused for
/// all of them.
fn read_channel(reader: OwnedFd, budget: u64, verifier: Option<&dyn Verifier>) -> Collected {
    let mut channel = std::io::BufReader::with_capacity(1 << 16, std::fs::File::from(reader));
    let mut events = Vec::new();
    let mut compared = BTreeMap::new();
    let mut payload = Vec::new();
    let mut read = 0u64;
    loop {
        match read_frame_into::<Event>(&mut channel, budget, &mut payload) {
            Ok(Some(event)) => {
                read += payload.len() as u64;
                if read > budget {
                    let error = "the supervisor sent more than the outputs".to_string();
                    return (events, compared, Some(error));
                }
                if let (Event::Output { step, array }, Some(verifier)) = (&event, verifier)
                    && let Some(comparison) = verifier.verify(*step, array, &payload)
                {
                    compared.insert((*step, array.clone()), comparison);
                }
                events.push(event);
            }
            Ok(None) => return (events, compared, None),
            Err(e) => {
                let error = format!("the supervisor's channel is corrupted: {e}");
                return (events, compared, Some(error));
            }
        }
    }
}

/// Kills a run's process tree and group when dropped, until disarmed.
struct KillOnDrop(u32);

impl KillOnDrop {
    fn disarm(self) {
        std::mem::forget(self);
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        hpcagent_sandbox::reap::kill_tree(self.0);
        hpcagent_sandbox::reap::kill_group(self.0);
    }
}

fn file_tail(mut file: std::fs::File) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(8192)));
    let mut buf = Vec::new();
    let _ = file.take(8192).read_to_end(&mut buf);
    tail(&String::from_utf8_lossy(&buf), 4000)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records what it was asked to verify; checks step 1 only.
    struct Asked(std::sync::Mutex<Vec<(usize, String, Vec<u8>)>>);

    impl Verifier for Asked {
        fn verify(&self, step: usize, array: &str, actual: &[u8]) -> Option<Comparison> {
            let asked = (step, array.to_string(), actual.to_vec());
            self.0.lock().unwrap().push(asked);
            (step == 1).then(|| Comparison {
                correct: actual == [7, 7],
                ..Comparison::default()
            })
        }
    }

    fn channel_of(frames: &[(Event, &[u8])]) -> OwnedFd {
        let (reader, writer) = nix::unistd::pipe().unwrap();
        let frames: Vec<(Event, Vec<u8>)> = frames
            .iter()
            .map(|(e, p)| (e.clone(), p.to_vec()))
            .collect();
        std::thread::spawn(move || {
            let mut writer = std::fs::File::from(writer);
            for (event, payload) in frames {
                protocol::write_frame(&mut writer, &event, &payload).unwrap();
            }
        });
        reader
    }

    #[test]
    fn each_output_is_verified_as_it_arrives_and_only_its_comparison_kept() {
        let output = |step, array: &str| Event::Output {
            step,
            array: array.into(),
        };
        let reader = channel_of(&[
            (output(0, "y"), &[1, 2, 3]),
            (output(1, "y"), &[7, 7]),
            (output(1, "z"), &[7, 8]),
            (Event::Done, &[]),
        ]);
        let asked = Asked(Default::default());
        let (events, compared, error) = read_channel(reader, 100, Some(&asked));
        assert_eq!(error, None);
        assert_eq!(events.len(), 4);
        assert_eq!(
            *asked.0.lock().unwrap(),
            [
                (0, "y".to_string(), vec![1, 2, 3]),
                (1, "y".to_string(), vec![7, 7]),
                (1, "z".to_string(), vec![7, 8]),
            ],
            "every payload whole, in its own frame's length"
        );
        let verdicts: Vec<_> = compared
            .iter()
            .map(|(k, c)| (k.clone(), c.correct))
            .collect();
        assert_eq!(
            verdicts,
            [((1, "y".to_string()), true), ((1, "z".to_string()), false)],
            "step 0 is not checked"
        );
    }

    #[test]
    fn a_channel_that_sends_more_than_the_outputs_is_cut_off() {
        let output = Event::Output {
            step: 1,
            array: "y".into(),
        };
        let reader = channel_of(&[(output.clone(), &[7; 60]), (output, &[7; 60])]);
        let (events, _, error) = read_channel(reader, 100, None);
        assert_eq!(events.len(), 1, "the frame past the budget is not taken");
        assert!(error.is_some_and(|e| e.contains("more than the outputs")));
    }

    fn args(words: &[&str]) -> Vec<std::ffi::OsString> {
        words.iter().map(Into::into).collect()
    }

    #[test]
    fn only_the_exact_arguments_make_a_run_process() {
        assert_eq!(entry(&args(&["judge", "exec"])), Some(Entry::Supervisor));
        assert_eq!(
            entry(&args(&["judge", "exec", "--runner"])),
            Some(Entry::Runner)
        );
        assert_eq!(
            entry(&args(&["judge", "exec", "--probe"])),
            Some(Entry::Probe)
        );
        assert_eq!(
            entry(&args(&["judge", "exec", "--loopback", "perf", "stat"])),
            Some(Entry::Loopback)
        );
        assert_eq!(&RUNNER_PROCESS_ARGS[1..], ["judge", "exec", "--runner"]);
        for other in [
            &["judge", "exec", "--loopback"][..],
            &["judge", "exec", "--runner", "x"],
            &["judge", "exec", "--channel", "7"],
            &["judge", "score"],
            &[],
        ] {
            assert_eq!(entry(&args(other)), None, "{other:?}");
        }
    }
}
