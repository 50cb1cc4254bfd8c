//! Where builds and runs get their directories: made fresh for each, under
//! `HPCAGENT_SANDBOX_DIR` when it has ≥ 512 MiB free, `/dev/shm` only under
//! `CI`, else the temporary directory. The walls around what runs in them
//! are `hpcagent_sandbox`'s.

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
