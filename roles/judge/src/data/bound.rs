//! The case cache's bound. A case is an entry of two directories of the
//! same key, `inputs/<key>` and `reference/<key>`; at L one can take
//! gigabytes, and a campaign over a corpus makes cases without end (an
//! L campaign of 30 kernels left 61 GB). After each new entry, the least
//! recently used go until the cache fits its bound again.
//!
//! What stays whatever the bound: a case this judge holds
//! ([`Pins`]: from the moment a grade asks for it until the grade drops
//! its inputs), and one used in the last minute (by another judge process
//! on the same cache, which this one cannot see). An entry goes by renaming
//! it out of the way while the pin table is locked, so a grade pinning
//! that key either comes first and keeps it, or comes after and remakes it.
//!
//! Making a case is deterministic: a case trimmed and asked for again is
//! made again, the same bytes, at the cost of its first making.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// Bytes of cases a judge keeps by default: a few kernels' cases at L
/// (one case can take up to 8 GiB there, a submit grades up to six).
pub const DEFAULT_BYTES: u64 = 32 << 30;

/// How recently used an entry must be to stay whatever the bound.
pub const IN_USE: Duration = Duration::from_secs(60);

/// A staging directory (`.tmp-…`) untouched this long is a killed judge's
/// leftover: making a case takes at most the reference's 15 minutes.
const ABANDONED: Duration = Duration::from_secs(3600);

/// The keys this judge's grades hold, with how many hold each.
#[derive(Debug, Clone, Default)]
pub struct Pins {
    held: Arc<Mutex<HashMap<String, usize>>>,
}

/// A key held: its case stays in the cache until this is dropped.
#[derive(Debug)]
pub struct Pin {
    key: String,
    pins: Pins,
}

impl Pins {
    /// Holds `key` and marks its entry as just used.
    pub fn pin(&self, root: &Path, key: &str) -> Pin {
        let mut held = self.held.lock().expect("pin table");
        *held.entry(key.to_string()).or_default() += 1;
        for dir in dirs(root, key) {
            touch(&dir);
        }
        Pin {
            key: key.to_string(),
            pins: self.clone(),
        }
    }
}

impl Drop for Pin {
    fn drop(&mut self) {
        let mut held = self.pins.held.lock().expect("pin table");
        if let Some(count) = held.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.key);
            }
        }
    }
}

/// What a trim removed.
#[derive(Debug, Default, PartialEq)]
pub struct Trimmed {
    pub entries: usize,
    pub bytes: u64,
}

/// Removes the least recently used cases under `root` until they take at
/// most `bound` bytes, and staging directories abandoned by killed judges.
pub fn trim(root: &Path, bound: u64, pins: &Pins) -> Trimmed {
    let trimmed = evict(entries(root), bound, |key| {
        let moved = {
            let held = pins.held.lock().expect("pin table");
            if held.contains_key(key) {
                return false;
            }
            dirs(root, key)
                .into_iter()
                .filter_map(|dir| set_aside(&dir))
                .collect::<Vec<_>>()
        };
        for dir in moved {
            let _ = std::fs::remove_dir_all(dir);
        }
        true
    });
    remove_abandoned(root, SystemTime::now());
    trimmed
}

/// One entry of a bounded cache: when it was last used, what it takes on
/// disk, and which it is.
pub struct Entry<K> {
    pub used: SystemTime,
    pub bytes: u64,
    pub key: K,
}

/// The policy of the judge's bounded caches (these cases, and the build
/// cache): removes `entries`, least recently used first, until the rest
/// take at most `bound` bytes. An entry used in the last minute stays, and
/// so does one `remove` declines.
pub fn evict<K>(
    mut entries: Vec<Entry<K>>,
    bound: u64,
    mut remove: impl FnMut(&K) -> bool,
) -> Trimmed {
    let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
    entries.sort_by_key(|e| e.used);
    let now = SystemTime::now();
    let mut trimmed = Trimmed::default();
    for entry in entries {
        if total <= bound {
            break;
        }
        if now.duration_since(entry.used).unwrap_or_default() < IN_USE || !remove(&entry.key) {
            continue;
        }
        total -= entry.bytes;
        trimmed.entries += 1;
        trimmed.bytes += entry.bytes;
    }
    trimmed
}

/// The cases under `root`, by key, with when each was last used (its
/// directories' latest modification) and what its two directories take.
fn entries(root: &Path) -> Vec<Entry<String>> {
    let mut by_key: HashMap<String, Entry<String>> = HashMap::new();
    for side in ["inputs", "reference"] {
        for dir in subdirs(&root.join(side)) {
            let Some(key) = dir.file_name().map(|n| n.to_string_lossy().into_owned()) else {
                continue;
            };
            if key.starts_with(".tmp-") {
                continue;
            }
            let used = modified(&dir);
            let bytes = bytes_under(&dir);
            let entry = by_key.entry(key.clone()).or_insert(Entry {
                key,
                used,
                bytes: 0,
            });
            entry.used = entry.used.max(used);
            entry.bytes += bytes;
        }
    }
    by_key.into_values().collect()
}

/// A case's two directories.
fn dirs(root: &Path, key: &str) -> [PathBuf; 2] {
    [
        root.join("inputs").join(key),
        root.join("reference").join(key),
    ]
}

/// Renames `dir` to a staging name beside it (which no grade looks up
/// and no trim counts); the new name, or `None` when there was nothing.
fn set_aside(dir: &Path) -> Option<PathBuf> {
    let parent = dir.parent()?;
    let name = dir.file_name()?.to_string_lossy();
    let aside = parent.join(format!(".tmp-trimmed-{name}-{}", std::process::id()));
    std::fs::rename(dir, &aside).ok().map(|()| aside)
}

fn remove_abandoned(root: &Path, now: SystemTime) {
    for side in ["inputs", "reference"] {
        for dir in subdirs(&root.join(side)) {
            let staging = dir
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(".tmp-"));
            if staging && now.duration_since(modified(&dir)).unwrap_or_default() > ABANDONED {
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
    }
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect()
}

fn modified(path: &Path) -> SystemTime {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// Marks `dir` as just used (its modification time: a directory's changes
/// only when entries are added, which a published case never has again).
fn touch(dir: &Path) {
    if let Ok(file) = std::fs::File::open(dir) {
        let _ = file.set_modified(SystemTime::now());
    }
}

/// What the files under `dir` take, its subdirectories' included.
pub fn bytes_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| Some((entry.path(), entry.metadata().ok()?)))
        .map(|(path, meta)| {
            if meta.is_dir() {
                bytes_under(&path)
            } else {
                meta.len()
            }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    /// A case of `bytes` (half inputs, half reference) last used `age` ago.
    fn case(root: &Path, key: &str, bytes: usize, age: Duration) {
        for dir in dirs(root, key) {
            std::fs::create_dir_all(dir.join("expected")).unwrap();
            std::fs::write(dir.join("expected").join("y.bin"), vec![0u8; bytes / 2]).unwrap();
            let file = std::fs::File::open(&dir).unwrap();
            file.set_modified(SystemTime::now() - age).unwrap();
        }
    }

    fn kept(root: &Path, key: &str) -> bool {
        dirs(root, key).iter().all(|d| d.is_dir())
    }

    fn gone(root: &Path, key: &str) -> bool {
        dirs(root, key).iter().all(|d| !d.exists())
    }

    #[test]
    fn the_least_recently_used_cases_go_first_and_whole() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        case(root, "a", 1000, 3 * HOUR);
        case(root, "b", 1000, 2 * HOUR);
        case(root, "c", 1000, HOUR);
        case(root, "d", 5000, Duration::ZERO);
        let pins = Pins::default();
        // 8000 bytes in all, 6000 allowed: the two oldest go, both halves.
        let trimmed = trim(root, 6000, &pins);
        assert_eq!(
            trimmed,
            Trimmed {
                entries: 2,
                bytes: 2000
            }
        );
        assert!(gone(root, "a") && gone(root, "b"));
        assert!(kept(root, "c") && kept(root, "d"));
        // Nothing is left aside: the trimmed directories are removed.
        assert_eq!(subdirs(&root.join("inputs")).len(), 2);
        assert_eq!(subdirs(&root.join("reference")).len(), 2);
    }

    #[test]
    fn a_pinned_case_stays_however_old_and_a_pin_marks_it_used() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        case(root, "held", 1000, 5 * HOUR);
        case(root, "old", 1000, 4 * HOUR);
        case(root, "older", 1000, 6 * HOUR);
        let pins = Pins::default();
        let held = pins.pin(root, "held");
        assert!(
            SystemTime::now()
                .duration_since(modified(&root.join("inputs").join("held")))
                .unwrap()
                < IN_USE,
            "pinning touches the case"
        );
        // Re-age it: the pin alone must keep it.
        case(root, "held", 1000, 5 * HOUR);
        assert_eq!(trim(root, 0, &pins).entries, 2);
        assert!(kept(root, "held"));
        drop(held);
        assert_eq!(trim(root, 0, &pins).entries, 1);
        assert!(gone(root, "held"));
    }

    #[test]
    fn a_case_used_within_the_minute_stays_and_staging_is_left_until_abandoned() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        case(root, "fresh", 1000, Duration::from_secs(5));
        let in_flight = root.join("reference").join(".tmp-making");
        let abandoned = root.join("inputs").join(".tmp-killed");
        for (dir, age) in [(&in_flight, Duration::ZERO), (&abandoned, 2 * HOUR)] {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join("x.bin"), vec![0u8; 4000]).unwrap();
            std::fs::File::open(dir)
                .unwrap()
                .set_modified(SystemTime::now() - age)
                .unwrap();
        }
        assert_eq!(trim(root, 0, &Pins::default()).entries, 0);
        assert!(kept(root, "fresh"));
        assert!(in_flight.is_dir(), "another grade is making that case");
        assert!(!abandoned.exists(), "a killed judge's leftover goes");
    }
}
