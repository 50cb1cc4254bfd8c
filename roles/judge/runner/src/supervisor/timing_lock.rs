//! The node's timing lock, which a supervisor opens itself and holds
//! through its timed pairs.
//!
//! A host run's pairs take the node alone: a CPU kernel shares caches and
//! memory bandwidth with everything else on the node. A device run's pairs
//! share the node with other device runs and take only their own GPU:
//! grades on different GPUs share nothing but the host (their supervisors
//! and transfers), and a 4-GPU node would otherwise time one GPU at a time.
//! Host runs were not measured beside one another, so they stay alone.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

/// The lock files of one run: the node's, and its GPU's when it has one.
pub struct TimingLock {
    node: File,
    device: Option<File>,
}

impl TimingLock {
    /// Opens the node's lock at `path`, and GPU `device`'s beside it.
    pub fn open(path: &Path, device: Option<u32>) -> std::io::Result<TimingLock> {
        let device = match device {
            Some(gpu) => Some(open(&device_path(path, gpu))?),
            None => None,
        };
        Ok(TimingLock {
            node: open(path)?,
            device,
        })
    }

    /// Blocks until this run may time: the node alone (a host run), or the
    /// node shared and its GPU alone (a device run).
    pub fn take(&self) -> Held {
        match &self.device {
            None => Held(vec![flock(&self.node, libc::LOCK_EX)]),
            Some(gpu) => Held(vec![
                flock(&self.node, libc::LOCK_SH),
                flock(gpu, libc::LOCK_EX),
            ]),
        }
    }
}

/// Held locks, released when dropped.
pub struct Held(Vec<RawFd>);

impl Drop for Held {
    fn drop(&mut self) {
        for &fd in self.0.iter().rev() {
            // SAFETY: releases a lock taken in `take` on a descriptor the
            // `TimingLock` still owns (it outlives the `Held`).
            unsafe { libc::flock(fd, libc::LOCK_UN) };
        }
    }
}

fn device_path(node: &Path, gpu: u32) -> PathBuf {
    let mut path = node.as_os_str().to_owned();
    path.push(format!(".gpu{gpu}"));
    PathBuf::from(path)
}

fn open(path: &Path) -> std::io::Result<File> {
    File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

fn flock(file: &File, how: libc::c_int) -> RawFd {
    let fd = file.as_raw_fd();
    // SAFETY: flock on a descriptor we own; it blocks until granted.
    while unsafe { libc::flock(fd, how) } != 0
        && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
    {}
    fd
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// Whether `lock` can be taken within a moment while `held` is held.
    fn waits(held: &TimingLock, lock: TimingLock) -> bool {
        let _held = held.take();
        let (tx, rx) = mpsc::channel();
        let taker = std::thread::spawn(move || {
            let _taken = lock.take();
            tx.send(()).unwrap();
        });
        let waited = rx.recv_timeout(Duration::from_millis(300)).is_err();
        drop(_held);
        taker.join().unwrap();
        waited
    }

    #[test]
    fn gpus_time_together_and_a_host_run_times_alone() {
        let dir = tempfile::tempdir().unwrap();
        let node = dir.path().join("timing.lock");
        let run = |gpu| TimingLock::open(&node, gpu).unwrap();
        assert!(!waits(&run(Some(0)), run(Some(1))), "two GPUs wait");
        assert!(waits(&run(Some(0)), run(Some(0))), "one GPU twice at once");
        assert!(waits(&run(Some(0)), run(None)), "a host run beside a GPU's");
        assert!(waits(&run(None), run(Some(2))), "a GPU's beside a host run");
        assert!(waits(&run(None), run(None)), "two host runs at once");
    }
}
