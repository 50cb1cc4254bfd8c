//! The campaign's results database: SQLite in the run directory.
//!
//! One writer, the orchestrator: every change goes through a channel to one
//! thread that applies whatever has queued up in one transaction, so lease
//! traffic costs one commit per batch, not per call. Each change is a job
//! applied under its own savepoint: a failing job is rolled back alone, the
//! store is marked failed ([`Store::failure`]; the campaign stops on it), and
//! the next flush reports it. A settle is one job (verdict row and task
//! together) and is made durable before the judge is told it settled
//! ([`Store::flush`]). Once a batch is committed, the ends of attempts it
//! recorded are appended to the run's [`attempt_log`].
//!
//! Where the run directory lives decides the journal: WAL on local disks, the
//! rollback journal on network filesystems (Lustre, NFS, GPFS, BeeGFS, CIFS),
//! where WAL's shared memory does not work. A memory filesystem (tmpfs, ramfs)
//! is refused unless `ALLOW_MEMORY_DB` says otherwise: the results would
//! vanish with the node and the database would take RAM from the measured runs.
//!
//! The schema only grows: a column added since a store was made is added to
//! it when a campaign resumes there (`COLUMNS_ADDED`), and the [`Reader`]
//! reads a store that never got it as one whose rows have it empty.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub mod attempt_log;
mod reader;
mod schema;
mod writer;

pub use reader::{AttemptRow, CampaignRow, EventRow, ReadError, Reader, TaskResult, VerdictRow};
pub use writer::{AgentReport, AttemptRecord, AttemptStart, Store, VerdictRecord, now};

pub const FILE_NAME: &str = "results.sqlite";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {source}")]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error(
        "{path} is on a memory filesystem ({fstype}): results would vanish with the node and \
         take RAM from the measured runs; put RUN_ROOT on disk, or set ALLOW_MEMORY_DB=1"
    )]
    MemoryFilesystem { path: PathBuf, fstype: String },
    #[error("the store's writer has stopped")]
    Closed,
    #[error("{path}: a write failed, the store is incomplete: {why}")]
    Failed { path: PathBuf, why: String },
    #[error("{path}: {why}")]
    Opened { path: PathBuf, why: std::io::Error },
}

/// Whether a task in `state` was settled by its agent's own Submit. One its
/// worker settled for an agent that did not submit (`submitted_by` starter
/// or left) is graded, but is not the agent's result.
pub fn settled_by_agent(state: &str, submitted_by: Option<&str>) -> bool {
    state == "settled" && submitted_by.is_none_or(|s| s == "agent")
}

/// Whether a task's agent failed it: settled by its worker for the agent,
/// or failed after an end that is the agent's own doing (not its node's,
/// its judge's or its model server's).
pub fn agent_failed(state: &str, submitted_by: Option<&str>, outcome: Option<&str>) -> bool {
    const AGENT_ENDS: [&str; 7] = [
        "could not start",
        "crashed",
        "no submission",
        "time budget",
        "turn budget",
        "token budget",
        "context overflow",
    ];
    let settled_for_it = state == "settled" && !settled_by_agent(state, submitted_by);
    settled_for_it || (state == "failed" && outcome.is_some_and(|o| AGENT_ENDS.contains(&o)))
}

/// A task as the store keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRow {
    pub id: String,
    pub kernel: String,
    /// Its kernel's track (empty in stores from before tracks).
    #[serde(default)]
    pub track: String,
    pub language: String,
    pub precision: String,
    pub repeat: u32,
    /// pending | leased | settled | failed
    pub state: String,
    pub attempts: u32,
    pub budget_used_s: f64,
    /// The final verdict's status (settled), or why it failed.
    pub status: Option<String>,
    pub speedup: Option<f64>,
    /// The settling verdict's 95% interval of the speedup (none in stores
    /// from before intervals).
    pub speedup_low: Option<f64>,
    pub speedup_high: Option<f64>,
    /// How its last attempt ended (none in stores from before it).
    pub outcome: Option<String>,
    /// Whose Submit settled it: "agent", or the worker's "starter" or
    /// "left" for an agent that did not submit.
    pub submitted_by: Option<String>,
}

impl TaskRow {
    /// Whether the agent's own Submit settled it ([`settled_by_agent`]).
    pub fn by_agent(&self) -> bool {
        settled_by_agent(&self.state, self.submitted_by.as_deref())
    }

    /// Whether its agent failed it ([`agent_failed`]).
    pub fn agent_failed(&self) -> bool {
        agent_failed(
            &self.state,
            self.submitted_by.as_deref(),
            self.outcome.as_deref(),
        )
    }

    /// A task of the campaign's set, before anything happened to it.
    pub fn pending(spec: &crate::scheduler::TaskSpec) -> TaskRow {
        TaskRow {
            id: spec.id.clone(),
            kernel: spec.kernel.clone(),
            track: spec.track.clone(),
            language: spec.language.clone(),
            precision: spec.precision.clone(),
            // A repeated task's id ends in #<repeat>.
            repeat: spec
                .id
                .rsplit_once('#')
                .and_then(|(_, r)| r.parse().ok())
                .unwrap_or(0),
            state: "pending".into(),
            attempts: 0,
            budget_used_s: 0.0,
            status: None,
            speedup: None,
            speedup_low: None,
            speedup_high: None,
            outcome: None,
            submitted_by: None,
        }
    }
}

/// The filesystem type holding `path` (longest matching mount point).
pub fn filesystem_of(path: &Path) -> String {
    // A run directory not made yet is on its nearest existing ancestor's.
    let path = path
        .ancestors()
        .find_map(|p| std::fs::canonicalize(p).ok())
        .unwrap_or_else(|| path.to_path_buf());
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (_, mount, fstype) = (fields.next()?, fields.next()?, fields.next()?);
            let mount = mount.replace("\\040", " ");
            path.starts_with(&mount)
                .then(|| (mount.len(), fstype.to_string()))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, fstype)| fstype)
        .unwrap_or_default()
}

/// The filesystem type of a run directory, refused when it keeps files
/// in memory unless allowed; made to be asked before anything of the run
/// is written.
pub fn check_filesystem(run_dir: &Path, allow_memory: bool) -> Result<String, StoreError> {
    let fstype = filesystem_of(run_dir);
    if !allow_memory && is_memory_filesystem(&fstype) {
        return Err(StoreError::MemoryFilesystem {
            path: run_dir.join(FILE_NAME),
            fstype,
        });
    }
    Ok(fstype)
}

/// Whether a filesystem of type `fstype` keeps its files in memory.
pub fn is_memory_filesystem(fstype: &str) -> bool {
    ["tmpfs", "ramfs", "devtmpfs"].contains(&fstype)
}

pub(super) fn is_network_filesystem(fstype: &str) -> bool {
    [
        "nfs",
        "nfs4",
        "lustre",
        "gpfs",
        "cifs",
        "smb3",
        "beegfs",
        "ceph",
        "fuse.sshfs",
    ]
    .contains(&fstype)
}

#[cfg(test)]
mod tests {
    use super::schema::{COLUMNS_ADDED, has_column};
    use super::*;
    use rusqlite::Connection;

    #[tokio::test]
    async fn writes_are_batched_and_flushed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), false).unwrap();
        store.campaign_started("c1", dir.path(), None, "{}");
        let tasks: Vec<TaskRow> = (0..3)
            .map(|i| TaskRow {
                id: format!("k{i}.c"),
                kernel: format!("k{i}"),
                track: "t".into(),
                language: "c".into(),
                precision: "fp64".into(),
                repeat: 0,
                state: "pending".into(),
                attempts: 0,
                budget_used_s: 0.0,
                status: None,
                speedup: None,
                speedup_low: None,
                speedup_high: None,
                outcome: None,
                submitted_by: None,
            })
            .collect();
        store.add_tasks(tasks.clone());
        store.add_tasks(tasks);
        store.attempt_ended(AttemptRecord {
            task: "k1.c".into(),
            attempt: 1,
            state: "settled".into(),
            attempts: 1,
            status: Some("ok".into()),
            speedup: Some(1.5),
            verdict: Some(VerdictRecord {
                task_id: "k1.c".into(),
                attempt: 1,
                speedup: Some(1.5),
                speedup_low: Some(1.4),
                speedup_high: Some(1.6),
                settled: true,
                verdict: "{\"status\":\"ok\"}".into(),
                ..VerdictRecord::default()
            }),
            ..AttemptRecord::default()
        });
        store.flush().await.unwrap();
        let reader = Reader::open(dir.path()).unwrap();
        let rows = reader.tasks().unwrap();
        assert_eq!(
            rows.len(),
            3,
            "adding the same tasks twice keeps one of each"
        );
        assert_eq!(rows[1].state, "settled");
        assert_eq!(rows[1].speedup, Some(1.5));
        assert_eq!(rows[1].track, "t");
        assert_eq!(
            (rows[1].speedup_low, rows[1].speedup_high),
            (Some(1.4), Some(1.6)),
            "the task's interval is its settling verdict's"
        );
        let verdicts = reader.verdicts().unwrap();
        assert_eq!(
            (verdicts[0].speedup_low, verdicts[0].speedup_high),
            (Some(1.4), Some(1.6))
        );
        assert_eq!(reader.settlements().unwrap()[1], ("k1.c".to_string(), 1));
        assert_eq!(reader.campaign().unwrap().unwrap().state, "running");
        assert_eq!(store.failure(), None);
    }

    /// The tables as stores made before speedup intervals have them.
    const SCHEMA_BEFORE_INTERVALS: &str = "
    CREATE TABLE campaign (
        id TEXT PRIMARY KEY, run_dir TEXT, job_id TEXT, started_at REAL, ended_at REAL,
        state TEXT, config TEXT);
    INSERT INTO campaign (id, started_at, state) VALUES ('old', 1.0, 'finished');
    CREATE TABLE tasks (
        id TEXT PRIMARY KEY, kernel TEXT, language TEXT, precision TEXT, repeat INTEGER,
        state TEXT, attempts INTEGER, budget_used_s REAL,
        status TEXT, speedup REAL, verdict TEXT, settled_at REAL);
    CREATE TABLE verdicts (
        id INTEGER PRIMARY KEY, task_id TEXT, attempt INTEGER, lease_id TEXT, kind TEXT,
        judge TEXT, status TEXT, speedup REAL, median_ns REAL, message TEXT, settled INTEGER,
        verdict TEXT, at REAL);
    INSERT INTO tasks (id, kernel, language, precision, repeat, state, attempts, budget_used_s,
        status, speedup) VALUES ('gemm.c', 'gemm', 'c', 'fp64', 0, 'settled', 1, 3.0, 'ok', 2.5);
    INSERT INTO verdicts (task_id, attempt, kind, status, speedup, settled, at)
        VALUES ('gemm.c', 1, 'submit', 'ok', 2.5, 1, 100.0);
    ";

    #[test]
    fn a_store_with_some_added_columns_and_not_others_is_read() {
        let dir = tempfile::tempdir().unwrap();
        Connection::open(dir.path().join(FILE_NAME))
            .unwrap()
            .execute_batch(
                "CREATE TABLE campaign (id TEXT PRIMARY KEY, run_dir TEXT, job_id TEXT,
                     started_at REAL, ended_at REAL, state TEXT, config TEXT,
                     hpcagent_version TEXT);
                 INSERT INTO campaign (id, started_at, state, hpcagent_version)
                     VALUES ('mid', 1.0, 'finished', '0.1.0');",
            )
            .unwrap();
        let campaign = Reader::open(dir.path())
            .unwrap()
            .campaign()
            .unwrap()
            .unwrap();
        assert_eq!(
            (
                campaign.hpcagent_version.as_str(),
                campaign.corpus_version.as_str()
            ),
            ("0.1.0", "")
        );
    }

    #[tokio::test]
    async fn a_store_from_before_intervals_is_read_as_it_is_and_gets_them_on_resume() {
        let dir = tempfile::tempdir().unwrap();
        Connection::open(dir.path().join(FILE_NAME))
            .unwrap()
            .execute_batch(SCHEMA_BEFORE_INTERVALS)
            .unwrap();
        let old = |reader: &Reader| {
            let task = &reader.tasks().unwrap()[0];
            let verdict = &reader.verdicts().unwrap()[0];
            assert_eq!(task.speedup, Some(2.5));
            assert_eq!(task.track, "", "a store from before tracks has none");
            assert_eq!((task.speedup_low, task.speedup_high), (None, None));
            assert_eq!(verdict.speedup, Some(2.5));
            assert_eq!((verdict.speedup_low, verdict.speedup_high), (None, None));
            let campaign = reader.campaign().unwrap().unwrap();
            assert_eq!(
                (
                    campaign.id.as_str(),
                    campaign.hpcagent_version.as_str(),
                    campaign.corpus_version.as_str()
                ),
                ("old", "", "")
            );
        };
        old(&Reader::open(dir.path()).unwrap());

        let store = Store::open(dir.path(), false).unwrap();
        store.flush().await.unwrap();
        let conn = Connection::open(dir.path().join(FILE_NAME)).unwrap();
        for (table, column, _) in COLUMNS_ADDED {
            assert!(
                has_column(&conn, table, column).unwrap(),
                "{table}.{column}"
            );
        }
        old(&Reader::open(dir.path()).unwrap());
        let spec = |kernel: &str| crate::scheduler::TaskSpec {
            id: format!("{kernel}.c"),
            kernel: kernel.into(),
            track: "dense_linear_algebra".into(),
            language: "c".into(),
            precision: "fp64".into(),
            preset: None,
            budget: None,
        };
        // The resumed campaign's task set: a new task, and the old one
        // again, which keeps its result and gets its track.
        store.add_tasks(vec![
            TaskRow::pending(&spec("atax")),
            TaskRow::pending(&spec("gemm")),
        ]);
        store.attempt_ended(AttemptRecord {
            task: "atax.c".into(),
            attempt: 1,
            state: "settled".into(),
            attempts: 1,
            status: Some("ok".into()),
            speedup: Some(1.01),
            verdict: Some(VerdictRecord {
                task_id: "atax.c".into(),
                attempt: 1,
                speedup: Some(1.01),
                speedup_low: Some(0.99),
                speedup_high: Some(1.03),
                settled: true,
                ..VerdictRecord::default()
            }),
            ..AttemptRecord::default()
        });
        store.flush().await.unwrap();
        let tasks = Reader::open(dir.path()).unwrap().tasks().unwrap();
        assert_eq!(tasks[0].id, "atax.c");
        assert_eq!(
            (tasks[0].speedup_low, tasks[0].speedup_high),
            (Some(0.99), Some(1.03)),
            "a resumed campaign's settles keep their intervals"
        );
        let gemm = &tasks[1];
        assert_eq!(
            (gemm.state.as_str(), gemm.speedup, gemm.track.as_str()),
            ("settled", Some(2.5), "dense_linear_algebra"),
            "an old task keeps its result and gets its track"
        );
        drop(store);
        Store::open(dir.path(), false)
            .expect("opening an upgraded store again adds nothing twice")
            .flush()
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn the_log_has_a_line_for_each_end_committed_and_none_for_one_rolled_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), false).unwrap();
        let end = |task: &str, attempt, state: &str| AttemptRecord {
            task: task.into(),
            attempt,
            outcome: "expired".into(),
            state: state.into(),
            attempts: attempt,
            ..AttemptRecord::default()
        };
        store.attempt_ended(end("a.c", 1, "pending"));
        // An end whose job fails in the same batch: rolled back, not logged.
        let line = attempt_log::Line {
            task: "rolled-back.c".into(),
            attempt: 1,
            outcome: "submitted".into(),
            submitted_by: Some("agent"),
            message: None,
            task_state: "settled".into(),
            attempts: 1,
            budget_used_s: 0.0,
            at: 0.0,
        };
        store.change(
            |c| {
                c.execute("INSERT INTO no_such_table VALUES (1)", [])
                    .map(drop)
            },
            Some(line),
        );
        store.attempt_ended(end("a.c", 2, "failed"));
        assert!(store.flush().await.is_err(), "the failed job is reported");
        let text = std::fs::read_to_string(dir.path().join(attempt_log::FILE_NAME)).unwrap();
        let logged: Vec<(String, u64, String)> = text
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                let field = |k: &str| v[k].as_str().unwrap().to_string();
                (
                    field("task"),
                    v["attempt"].as_u64().unwrap(),
                    field("task_state"),
                )
            })
            .collect();
        assert_eq!(
            logged,
            [
                ("a.c".to_string(), 1, "pending".to_string()),
                ("a.c".to_string(), 2, "failed".to_string())
            ]
        );
        assert!(text.contains("\"outcome\":\"expired\""), "{text}");
    }

    #[test]
    fn a_store_file_deleted_or_replaced_fails_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), false).unwrap();
        store.check_file();
        assert_eq!(store.failure(), None);
        let path = dir.path().join(FILE_NAME);
        std::fs::rename(&path, dir.path().join("moved")).unwrap();
        std::fs::write(&path, "").unwrap();
        store.check_file();
        let why = store.failure().unwrap();
        assert!(
            why.contains(&format!("{} was replaced", path.display())),
            "{why}"
        );

        let other = tempfile::tempdir().unwrap();
        let store = Store::open(other.path(), false).unwrap();
        std::fs::remove_file(other.path().join(FILE_NAME)).unwrap();
        store.check_file();
        assert!(
            store
                .failure()
                .unwrap()
                .contains("was deleted while the campaign ran")
        );
    }

    #[test]
    fn a_run_directory_not_made_yet_is_judged_by_its_ancestor() {
        assert!(matches!(
            check_filesystem(Path::new("/dev/shm/not/made/yet"), false),
            Err(StoreError::MemoryFilesystem { .. })
        ));
        assert!(check_filesystem(Path::new("/dev/shm/not/made/yet"), true).is_ok());
    }

    #[tokio::test]
    async fn a_failing_write_is_rolled_back_alone_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), false).unwrap();
        store.event("", "before", "");
        store.write(|c| {
            c.execute("INSERT INTO events (at, kind) VALUES (1, 'half')", [])?;
            c.execute("INSERT INTO no_such_table VALUES (1)", [])
                .map(drop)
        });
        store.event("", "after", "");
        let err = store.flush().await.unwrap_err();
        assert!(err.to_string().contains("no_such_table"), "{err}");
        assert!(store.failure().unwrap().contains("no_such_table"));
        let conn = Connection::open(dir.path().join(FILE_NAME)).unwrap();
        let kinds: Vec<String> = conn
            .prepare("SELECT kind FROM events ORDER BY id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            kinds,
            ["before", "after"],
            "the failed job left nothing behind"
        );
    }

    #[test]
    fn memory_filesystems_are_refused_unless_allowed() {
        assert_eq!(
            filesystem_of(Path::new("/dev/shm")),
            "tmpfs",
            "the test needs a tmpfs /dev/shm"
        );
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let err = Store::open(dir.path(), false).err().expect("refused");
        assert!(
            err.to_string().contains("memory filesystem (tmpfs)"),
            "{err}"
        );
        assert!(Store::open(dir.path(), true).is_ok());
    }
}
