//! Running a submission out of process.
//!
//! The judge starts `hpcagent judge exec` (the runner, [`exec`]) in the run's
//! sandbox directory with resource limits, its own session, a clean
//! environment and a result pipe ([`protocol`]). A crash, a hang, a fork bomb
//! or an exhausted address space ends the runner, never the judge: [`launch`]
//! waits with a deadline, kills the whole process group (and, for root judges,
//! every process of the run's user), and reports how the run ended.

pub mod canary;
mod device;
pub mod exec;
mod papi;
pub mod protocol;
mod reap;
mod window;

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::data::tail;
use crate::sandbox::limits::Limits;
use protocol::{Event, Request, read_frame};

/// The arguments that make the hpcagent binary the runner, followed by the
/// result channel's descriptor. `main` looks for exactly these before it
/// parses anything else: the runner starts once per grade, and building the
/// parser of the whole command line took about a millisecond of its start.
pub const RUNNER_ARGS: [&str; 3] = ["judge", "exec", "--channel"];

/// The result channel's descriptor, when `args` (without the program's
/// name) are [`RUNNER_ARGS`] and one.
pub fn runner_channel(args: &[std::ffi::OsString]) -> Option<i32> {
    match args {
        [rest @ .., fd] if *rest == RUNNER_ARGS => fd.to_str()?.parse().ok(),
        _ => None,
    }
}

/// How the runner process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    Exited(i32),
    /// Killed by a signal it did not get from the judge's deadline.
    Signaled(i32),
    /// The deadline passed and the judge killed it.
    TimedOut,
}

/// Everything a run produced.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub events: Vec<Event>,
    /// (case, output name) → bytes after the last call.
    pub outputs: BTreeMap<(usize, String), Vec<u8>>,
    pub end: End,
    /// The result channel could not be read to its end (corrupted or flooded).
    pub channel_error: Option<String>,
    pub stdout_tail: String,
    pub stderr_tail: String,
    pub wall: Duration,
}

/// One runner launch.
pub struct Launch<'a> {
    /// The hpcagent binary.
    pub exe: &'a Path,
    /// A profiler command the runner runs under (`perf stat ... --`).
    pub wrapper: Vec<String>,
    pub request: Request,
    pub limits: Limits,
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
    /// Bytes of outputs the run may send back.
    pub output_bytes: u64,
}

/// Starts the runner, waits for it (or its deadline), and collects its report.
pub async fn launch(launch: Launch<'_>) -> Result<RunOutcome, String> {
    let sandbox = launch.request.sandbox.clone();
    let (reader, writer) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))?;
    let channel_fd = pick_channel_fd(&writer);
    let request = serde_json::to_vec(&launch.request).map_err(|e| e.to_string())?;
    let stdout_path = sandbox.join("stdout.txt");
    let stderr_path = sandbox.join("stderr.txt");
    // Read-write: the judge reads them back through its own copy of the descriptor.
    let open = |p: &PathBuf| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(p)
            .map_err(|e| format!("{}: {e}", p.display()))
    };
    let (stdout, stderr) = (open(&stdout_path)?, open(&stderr_path)?);
    // The judge reads the output through its own descriptors afterwards: the
    // sandbox belongs to the submission, which may replace the files by
    // symlinks to anything the judge could read.
    let clone = |f: &std::fs::File| f.try_clone().map_err(|e| format!("output file: {e}"));
    let (stdout_held, stderr_held) = (clone(&stdout)?, clone(&stderr)?);

    let mut command = match launch.wrapper.split_first() {
        Some((program, args)) => {
            let mut c = std::process::Command::new(program);
            c.args(args).arg(launch.exe);
            c
        }
        None => std::process::Command::new(launch.exe),
    };
    command
        .args(RUNNER_ARGS)
        .arg(channel_fd.to_string())
        .current_dir(&sandbox)
        .env_clear()
        .envs(launch.env.iter().cloned())
        .stdin(Stdio::piped())
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr));
    launch.limits.install(&mut command);
    let write_fd = writer.as_raw_fd();
    // SAFETY: dup2 is async-signal-safe; the copy it makes is not close-on-exec.
    unsafe {
        command.pre_exec(move || {
            if libc::dup2(write_fd, channel_fd) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let started = Instant::now();
    let mut child = tokio::process::Command::from(command)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start the runner: {e}"))?;
    drop(writer);
    let pid = child.id().ok_or("the runner vanished at start")?;
    // Should this future be dropped mid-run, the run's processes go with it.
    let cleanup = KillOnDrop(pid);
    let budget = launch.output_bytes + (64 << 20);
    // Room for the outputs and the events around them, so the read does not
    // grow the buffer step by step.
    let expected = launch.output_bytes + (64 << 10);
    let collect = tokio::spawn(read_channel(reader, budget, expected));
    if let Some(mut stdin) = child.stdin.take() {
        // A runner that dies at once closes its stdin: that is its verdict, not ours.
        let _ = stdin.write_all(&request).await;
    }
    let (top, timed_out) = tokio::select! {
        status = child.wait() => (Some(status.map_err(|e| e.to_string())?), false),
        _ = tokio::time::sleep(launch.timeout) => (None, true),
    };
    let wall = started.elapsed();
    if timed_out {
        reap::kill_tree(pid);
    }
    // Anything left in the run's group goes too.
    kill_group(pid);
    let top = match top {
        Some(status) => status,
        None => child.wait().await.map_err(|e| e.to_string())?,
    };
    // Reaped: its tree is gone, and its pid may now be another process's.
    cleanup.disarm();
    let (events, outputs, channel_error) =
        match tokio::time::timeout(Duration::from_secs(10), collect).await {
            Ok(Ok(result)) => result,
            _ => (
                Vec::new(),
                BTreeMap::new(),
                Some("the result channel stayed open after the run ended".into()),
            ),
        };
    let end = run_end(&events, &top, timed_out);
    Ok(RunOutcome {
        events,
        outputs,
        end,
        channel_error,
        stdout_tail: file_tail(stdout_held),
        stderr_tail: file_tail(stderr_held),
        wall,
    })
}

/// How the run ended: as the supervisor saw the runner end; a crash that
/// raced the deadline is still a crash.
fn run_end(events: &[Event], top: &std::process::ExitStatus, timed_out: bool) -> End {
    let ended = events.iter().rev().find_map(|e| match e {
        Event::Ended { code, signal } => Some((*code, *signal)),
        _ => None,
    });
    match (ended, timed_out) {
        (Some((_, Some(sig))), _) if sig != libc::SIGKILL || !timed_out => End::Signaled(sig),
        (Some((Some(code), _)), false) => End::Exited(code),
        (_, true) => End::TimedOut,
        // The supervisor itself did not report: take its own status.
        (_, false) => match top.signal() {
            Some(sig) => End::Signaled(sig),
            None => End::Exited(top.code().unwrap_or(-1)),
        },
    }
}

type Collected = (
    Vec<Event>,
    BTreeMap<(usize, String), Vec<u8>>,
    Option<String>,
);

/// Reads the whole channel (bounded), then parses its frames.
async fn read_channel(reader: OwnedFd, budget: u64, expected: u64) -> Collected {
    let mut bytes = Vec::with_capacity(expected.min(budget) as usize);
    let pipe = match tokio::net::unix::pipe::Receiver::from_owned_fd(reader) {
        Ok(p) => p,
        Err(e) => return (Vec::new(), BTreeMap::new(), Some(format!("channel: {e}"))),
    };
    let mut limited = pipe.take(budget + 1);
    if let Err(e) = limited.read_to_end(&mut bytes).await {
        return (Vec::new(), BTreeMap::new(), Some(format!("channel: {e}")));
    }
    let mut error =
        (bytes.len() as u64 > budget).then(|| "the run sent more than its outputs".to_string());
    let mut events = Vec::new();
    let mut outputs = BTreeMap::new();
    let mut slice = bytes.as_slice();
    loop {
        match read_frame(&mut slice, budget) {
            Ok(Some((event, payload))) => {
                if let Event::Output { case, array } = &event {
                    outputs.insert((*case, array.clone()), payload);
                }
                events.push(event);
            }
            Ok(None) => break,
            Err(e) => {
                error.get_or_insert_with(|| format!("the result channel is corrupted: {e}"));
                break;
            }
        }
    }
    (events, outputs, error)
}

/// A descriptor number for the channel in the child, hard to guess from
/// inside the submission and distinct from the pipe's own number.
fn pick_channel_fd(writer: &OwnedFd) -> i32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let fd = 100 + (nanos % 800) as i32;
    if fd == writer.as_raw_fd() { fd + 1 } else { fd }
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
        reap::kill_tree(self.0);
        kill_group(self.0);
    }
}

/// SIGKILL to a process group (the runner's session).
pub fn kill_group(pid: u32) {
    // SAFETY: plain kill(2) on a group id.
    unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
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

    fn args(words: &[&str]) -> Vec<std::ffi::OsString> {
        words.iter().map(Into::into).collect()
    }

    #[test]
    fn only_the_runners_own_arguments_make_the_runner() {
        assert_eq!(
            runner_channel(&args(&["judge", "exec", "--channel", "7"])),
            Some(7)
        );
        for other in [
            &["judge", "exec", "--channel"][..],
            &["judge", "exec", "--channel", "x"],
            &["judge", "exec", "--channel=7"],
            &["judge", "score", "--channel", "7"],
            &["judge", "exec", "--channel", "7", "more"],
            &[],
        ] {
            assert_eq!(runner_channel(&args(other)), None, "{other:?}");
        }
    }
}
