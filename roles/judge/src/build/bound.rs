//! The build cache's bound. Submissions come without end, each a new
//! entry; after each new one, the least recently used entries go until the
//! cache fits its bound again. A cache hit marks its entry used, so what
//! agents resubmit stays. An entry used in the last minute stays too: a
//! grade copies its library into its run right after the build, and must
//! not find it gone.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::data::bound::{Entry, bytes_under, evict};

/// Bytes of built libraries (and their logs) a judge keeps.
pub const BYTES: u64 = 4 << 30;

/// Marks the entry of `library` as just used.
pub fn touch(library: &Path) {
    if let Ok(file) = std::fs::File::options().append(true).open(library) {
        let _ = file.set_modified(SystemTime::now());
    }
}

/// Removes the least recently used entries of `builds` until it holds at
/// most `bound` bytes ([`evict`]); returns how many went.
pub fn trim(builds: &Path, bound: u64) -> usize {
    let entries: Vec<Entry<PathBuf>> = std::fs::read_dir(builds)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        // Staging directories are another build's, in flight.
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(".tmp-"))
        })
        .filter_map(|dir| {
            let used = std::fs::metadata(dir.join("lib.so"))
                .ok()?
                .modified()
                .ok()?;
            Some(Entry {
                used,
                bytes: bytes_under(&dir),
                key: dir,
            })
        })
        .collect();
    evict(entries, bound, |dir| std::fs::remove_dir_all(dir).is_ok()).entries
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn entry(builds: &Path, name: &str, bytes: usize, age: Duration) -> PathBuf {
        let dir = builds.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let library = dir.join("lib.so");
        std::fs::write(&library, vec![0u8; bytes]).unwrap();
        let file = std::fs::File::options()
            .append(true)
            .open(&library)
            .unwrap();
        file.set_modified(SystemTime::now() - age).unwrap();
        dir
    }

    #[test]
    fn the_least_recently_used_go_first_and_recent_ones_stay() {
        let builds = tempfile::tempdir().unwrap();
        let hour = Duration::from_secs(3600);
        let oldest = entry(builds.path(), "a", 1000, 3 * hour);
        let older = entry(builds.path(), "b", 1000, 2 * hour);
        let old = entry(builds.path(), "c", 1000, hour);
        let fresh = entry(builds.path(), "d", 5000, Duration::ZERO);
        std::fs::create_dir(builds.path().join(".tmp-staging")).unwrap();
        // 8000 bytes in all, 6000 allowed: the two oldest go.
        assert_eq!(trim(builds.path(), 6000), 2);
        assert!(!oldest.exists() && !older.exists());
        assert!(old.exists() && fresh.exists());
        assert!(builds.path().join(".tmp-staging").exists());
        // Touched, the old one is now the newest; the fresh one, in use, stays
        // even when nothing else is left to remove.
        touch(&old.join("lib.so"));
        assert_eq!(
            trim(builds.path(), 100),
            0,
            "both were used within the minute"
        );
        assert!(old.exists() && fresh.exists());
    }
}
