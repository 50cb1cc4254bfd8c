//! One vLLM process: started from its plan line, stopped with everything it
//! started.
//!
//! vLLM runs an API process, an engine process and (multi-node, or several
//! GPUs) workers. It is started in a process group of its own, and stopped by
//! signalling the whole group: TERM, then KILL after a grace period, so no
//! engine outlives its server and holds the GPUs of the next one. The server
//! is also killed by the kernel if the role dies first (`PR_SET_PDEATHSIG`).

use std::process::ExitStatus;
use std::time::Duration;

/// How long vLLM gets to shut down before it is killed: well inside the
/// grace the supervisor gives this role, so the role is there to kill it.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Why vLLM could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("the vLLM command line is empty")]
    Empty,
    #[error("cannot start {program}: {error} (VLLM_COMMAND names the program that runs vLLM)")]
    Spawn {
        program: String,
        error: std::io::Error,
    },
    #[error("vLLM exited as it started")]
    Exited,
}

pub struct Server {
    child: tokio::process::Child,
    pgid: i32,
}

impl Server {
    /// Starts `argv`; its output goes to the role's own stdout and stderr.
    pub fn start(argv: &[String], env: &[(String, String)]) -> Result<Server, StartError> {
        let (program, args) = argv.split_first().ok_or(StartError::Empty)?;
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::null())
            .process_group(0)
            .kill_on_drop(true);
        // SAFETY: prctl only: the server dies with the role, however the role ends.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = command.spawn().map_err(|error| StartError::Spawn {
            program: program.clone(),
            error,
        })?;
        let pgid = child.id().ok_or(StartError::Exited)? as i32;
        Ok(Server { child, pgid })
    }

    /// The process group of the server and everything it started.
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// Resolves when the server exits.
    pub async fn exited(&mut self) -> String {
        describe(self.child.wait().await)
    }

    /// Stops the server and everything it started.
    pub async fn stop(mut self) {
        signal_group(self.pgid, libc::SIGTERM);
        if tokio::time::timeout(STOP_GRACE, self.child.wait())
            .await
            .is_err()
        {
            tracing::warn!("vLLM did not stop within {STOP_GRACE:?}; killing it");
        }
        // Whatever is left of the group (engine, workers) goes too.
        signal_group(self.pgid, libc::SIGKILL);
        let _ = self.child.wait().await;
    }
}

fn describe(status: std::io::Result<ExitStatus>) -> String {
    match status {
        Ok(status) => format!("vLLM exited ({status})"),
        Err(e) => format!("vLLM could not be waited for: {e}"),
    }
}

fn signal_group(pgid: i32, signal: i32) {
    // SAFETY: kill(2) on the process group created for this server.
    unsafe { libc::kill(-pgid, signal) };
}

/// The command line with its `--port` value replaced.
pub fn with_port(argv: &[String], port: u16) -> Vec<String> {
    let mut argv = argv.to_vec();
    if let Some(i) = argv.iter().position(|a| a == "--port")
        && i + 1 < argv.len()
    {
        argv[i + 1] = port.to_string();
    }
    argv
}

/// The value of `flag` in `argv`.
pub fn flag_value<'a>(argv: &'a [String], flag: &str) -> Option<&'a str> {
    let i = argv.iter().position(|a| a == flag)?;
    argv.get(i + 1).map(String::as_str)
}

/// Whether a TCP port can be listened on (on every interface, as vLLM does).
pub fn port_free(port: u16) -> bool {
    std::net::TcpListener::bind(("0.0.0.0", port)).is_ok()
}

/// A port the system considers free now.
pub fn any_free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind(("0.0.0.0", 0))?
        .local_addr()?
        .port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_is_replaced_and_nothing_else() {
        let argv: Vec<String> = [
            "vllm",
            "serve",
            "m",
            "--port",
            "8000",
            "--master-port",
            "8100",
        ]
        .map(String::from)
        .to_vec();
        let moved = with_port(&argv, 41234);
        assert_eq!(flag_value(&moved, "--port"), Some("41234"));
        assert_eq!(flag_value(&moved, "--master-port"), Some("8100"));
    }

    #[test]
    fn a_taken_port_is_not_free() {
        let held = std::net::TcpListener::bind(("0.0.0.0", 0)).unwrap();
        assert!(!port_free(held.local_addr().unwrap().port()));
        assert!(port_free(any_free_port().unwrap()));
    }

    #[tokio::test]
    async fn stopping_takes_the_whole_group() {
        // A "server" that leaves a grandchild behind, as vLLM's engine would be.
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("grandchild");
        let script = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
        let server = Server::start(&["sh".into(), "-c".into(), script], &[]).unwrap();
        let grandchild = loop {
            if let Ok(pid) = std::fs::read_to_string(&pidfile)
                && let Ok(pid) = pid.trim().parse::<i32>()
            {
                break pid;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        server.stop().await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        // Gone, or a zombie waiting for init to reap it.
        let state = std::fs::read_to_string(format!("/proc/{grandchild}/stat")).unwrap_or_default();
        let running = state
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'));
        assert!(
            !running,
            "the engine-like grandchild outlived the stop: {state}"
        );
    }

    #[tokio::test]
    async fn a_missing_program_is_named() {
        let err = Server::start(&["/nonexistent/vllm".into()], &[])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("cannot start /nonexistent/vllm"), "{err}");
        assert!(err.contains("VLLM_COMMAND"), "{err}");
    }
}
