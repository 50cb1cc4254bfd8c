//! A compiler in walls of its own: `hpcagent judge exec --compile SETUP
//! COMPILER ARGS...`, which the judge starts (in a session of its own, with
//! its limits) instead of the compiler itself.
//!
//! It moves into PID, mount, IPC and network namespaces of its own, with a
//! `/proc` of its own, as a run's runner does: what a source can ask the
//! preprocessor (`__has_include("/proc/<pid>/...")`, `#include` of a file
//! whose error says it exists) then finds no process of the node's, and a
//! build error tells nothing of the judge's. It starts the compiler as its
//! child there (as the namespace's first process it reaps what the compiler
//! leaves), as the slot's user (root judges), under Landlock (reads: the
//! system and the shared mount; writes: the build directory; no TCP), and
//! exits as the compiler did.

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use hpcagent_sandbox::landlock::{Confinement, restrict_self, switch_user};

/// The entry's first arguments after `hpcagent`; the setup (JSON), the
/// compiler and its arguments follow.
pub const ENTRY: [&str; 3] = ["judge", "exec", "--compile"];

/// How a compiler is confined.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Walls {
    /// The user it runs as (a root judge's slot user).
    pub run_as: Option<u32>,
    /// Directories it may read besides the system's (the shared mount).
    pub read: Vec<PathBuf>,
    /// The build directory, the only place it may write.
    pub write: PathBuf,
    /// Namespaces of its own; `false` only where the operator allowed
    /// weaker isolation and the node gives none.
    pub namespaces: bool,
}

/// Exit codes of the wrapper's own failures (the compiler's are its own),
/// with a first line on stderr that starts [`CANNOT_CONFINE_SAYS`].
pub(crate) const CANNOT_CONFINE: i32 = 125;
pub(crate) const CANNOT_CONFINE_SAYS: &str = "the build's confinement failed:";

/// Runs the entry from this process's arguments; its exit code (the
/// compiler's, 128 + a signal that ended it, or [`CANNOT_CONFINE`]).
pub fn main() -> i32 {
    let args: Vec<OsString> = std::env::args_os().skip(1 + ENTRY.len()).collect();
    let Some((walls, program, rest)) = parse(&args) else {
        eprintln!("hpcagent judge exec --compile: expected SETUP COMPILER [ARGS...]");
        return CANNOT_CONFINE;
    };
    match confine_and_run(&walls, program, rest) {
        Ok(code) => code,
        Err(why) => {
            eprintln!("{CANNOT_CONFINE_SAYS} {why}");
            CANNOT_CONFINE
        }
    }
}

fn parse(args: &[OsString]) -> Option<(Walls, &OsString, &[OsString])> {
    let (setup, rest) = args.split_first()?;
    let walls: Walls = serde_json::from_str(setup.to_str()?).ok()?;
    let (program, rest) = rest.split_first()?;
    Some((walls, program, rest))
}

fn confine_and_run(walls: &Walls, program: &OsString, args: &[OsString]) -> Result<i32, String> {
    if walls.namespaces {
        hpcagent_sandbox::namespaces::own_namespaces().map_err(|e| e.to_string())?;
    }
    let ruleset = Confinement {
        read: walls.read.clone(),
        write: vec![walls.write.clone()],
        system: true,
        connect: Vec::new(),
        gpus: false,
        any_tcp: false,
    }
    .prepare()
    .map_err(|e| e.to_string())?;
    let as_user = walls.run_as;
    let mut command = std::process::Command::new(program);
    command.args(args);
    // SAFETY: the closure makes raw system calls only, on values it owns.
    unsafe {
        command.pre_exec(move || {
            if let Some(id) = as_user {
                switch_user(id)?;
            }
            // No ruleset: the kernel has no Landlock (best effort).
            if let Some(fd) = &ruleset {
                restrict_self(fd)?;
            }
            Ok(())
        });
    }
    let child = command
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", program.to_string_lossy()))?;
    let status = reap_until(child.id() as libc::pid_t);
    Ok(status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
}

/// Reaps every child (as a PID namespace's first process, orphans become
/// this process's) until `pid` has ended; how it ended.
fn reap_until(pid: libc::pid_t) -> std::process::ExitStatus {
    loop {
        let mut status = 0;
        // SAFETY: waits for any child of ours.
        let r = unsafe { libc::waitpid(-1, &mut status, 0) };
        if r == pid {
            return std::process::ExitStatus::from_raw(status);
        }
        if r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return std::process::ExitStatus::from_raw(CANNOT_CONFINE << 8);
        }
    }
}
