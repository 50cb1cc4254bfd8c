//! Where untrusted code is built and run, and the walls around it.
//!
//! - [`root`]: the directory sandboxes are made in, chosen on every call
//!   (`HPCAGENT_SANDBOX_DIR` with ≥ 512 MiB free; `/dev/shm` only under `CI`;
//!   else the temp dir).
//! - [`confine`]: Landlock rules, applied by the runner to itself or by the
//!   judge to a compiler between fork and exec: read the system and its own
//!   directory, write only its own directory, no TCP, no signals to
//!   processes outside it.
//! - [`limits`]: what the judge sets on a child before it runs: its own
//!   session, resource limits, CPU pinning, and (for runs) a private network
//!   namespace where the kernel permits.

pub mod confine;
pub mod limits;

use std::path::{Path, PathBuf};

/// Free space a sandbox directory needs.
pub const MIN_FREE_BYTES: u64 = 512 << 20;

/// The directory to create sandboxes in, chosen now (free space changes).
pub fn root() -> PathBuf {
    if let Some(dir) = std::env::var_os("HPCAGENT_SANDBOX_DIR").map(PathBuf::from)
        && usable(&dir)
    {
        return dir;
    }
    let shm = Path::new("/dev/shm");
    if std::env::var_os("CI").is_some() && usable(shm) {
        return shm.to_path_buf();
    }
    std::env::temp_dir()
}

fn usable(dir: &Path) -> bool {
    dir.is_dir()
        && nix::sys::statvfs::statvfs(dir)
            .is_ok_and(|s| s.blocks_available() * s.fragment_size() >= MIN_FREE_BYTES)
}

/// A fresh sandbox directory for one build or run, removed when dropped.
pub fn create(label: &str) -> std::io::Result<tempfile::TempDir> {
    let root = root();
    tempfile::Builder::new()
        .prefix(&format!("hpcagent-{label}-"))
        .tempdir_in(&root)
}
