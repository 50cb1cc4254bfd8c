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
use std::sync::{Arc, Mutex, mpsc};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

pub mod attempt_log;
use attempt_log::AttemptLog;
pub use hpcagent_client::speedup;

pub const FILE_NAME: &str = "results.sqlite";

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS campaign (
    id TEXT PRIMARY KEY, run_dir TEXT, job_id TEXT, started_at REAL, ended_at REAL,
    state TEXT, config TEXT);
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY, kernel TEXT, language TEXT, precision TEXT, repeat INTEGER,
    state TEXT, attempts INTEGER, budget_used_s REAL,
    status TEXT, speedup REAL, verdict TEXT, settled_at REAL,
    speedup_low REAL, speedup_high REAL);
CREATE TABLE IF NOT EXISTS attempts (
    task_id TEXT, attempt INTEGER, lease_id TEXT, agent TEXT, worker INTEGER, judge TEXT,
    started_at REAL, ended_at REAL, outcome TEXT, tokens INTEGER, transcript TEXT, message TEXT,
    PRIMARY KEY (task_id, attempt));
CREATE TABLE IF NOT EXISTS verdicts (
    id INTEGER PRIMARY KEY, task_id TEXT, attempt INTEGER, lease_id TEXT, kind TEXT,
    judge TEXT, status TEXT, speedup REAL, median_ns REAL, message TEXT, settled INTEGER,
    verdict TEXT, at REAL, speedup_low REAL, speedup_high REAL);
CREATE TABLE IF NOT EXISTS roles (
    instance TEXT PRIMARY KEY, role TEXT, node TEXT, endpoint TEXT, state TEXT,
    restarts INTEGER, updated_at REAL);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY, at REAL, instance TEXT, kind TEXT, message TEXT);
";

/// Columns [`SCHEMA`] has that stores made before them lack: (table, column,
/// type). `CREATE TABLE IF NOT EXISTS` leaves an existing table as it is, so
/// a resumed campaign's store gets them with `ALTER TABLE`.
const COLUMNS_ADDED: &[(&str, &str, &str)] = &[
    ("tasks", "speedup_low", "REAL"),
    ("tasks", "speedup_high", "REAL"),
    ("verdicts", "speedup_low", "REAL"),
    ("verdicts", "speedup_high", "REAL"),
];

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
}

/// A task as the store keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRow {
    pub id: String,
    pub kernel: String,
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
}

impl TaskRow {
    /// A task of the campaign's set, before anything happened to it.
    pub fn pending(spec: &crate::scheduler::TaskSpec) -> TaskRow {
        TaskRow {
            id: spec.id.clone(),
            kernel: spec.kernel.clone(),
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
        }
    }
}

/// A change to the store. `Fn`, not `FnOnce`: a batch in which one change
/// fails is rolled back and applied again change by change.
type Job = Box<dyn Fn(&Connection) -> rusqlite::Result<()> + Send>;

/// A job, and the line it adds to the attempts' log once committed.
struct Change {
    job: Job,
    line: Option<attempt_log::Line>,
}

enum Op {
    Write(Change),
    /// Answered once everything before it is committed, with the first
    /// failure of the store if there was one.
    Flush(tokio::sync::oneshot::Sender<Result<(), String>>),
}

/// The writer's handle.
#[derive(Clone)]
pub struct Store {
    path: PathBuf,
    ops: mpsc::Sender<Op>,
    failure: Arc<Mutex<Option<String>>>,
}

pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl Store {
    /// Opens (or creates) the store of `run_dir` and starts its writer.
    pub fn open(run_dir: &Path, allow_memory: bool) -> Result<Store, StoreError> {
        let path = run_dir.join(FILE_NAME);
        let fstype = filesystem_of(run_dir);
        if !allow_memory && is_memory_filesystem(&fstype) {
            return Err(StoreError::MemoryFilesystem { path, fstype });
        }
        let sqlite = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let conn = Connection::open(&path).map_err(sqlite)?;
        let journal = if is_network_filesystem(&fstype) {
            "DELETE"
        } else {
            "WAL"
        };
        conn.pragma_update(None, "journal_mode", journal)
            .map_err(sqlite)?;
        // FULL: a settle the judge was told about survives a power cut too.
        conn.pragma_update(None, "synchronous", "FULL")
            .map_err(sqlite)?;
        conn.busy_timeout(std::time::Duration::from_secs(30))
            .map_err(sqlite)?;
        conn.execute_batch(SCHEMA).map_err(sqlite)?;
        add_missing_columns(&conn).map_err(sqlite)?;
        let (ops, queue) = mpsc::channel();
        let log = AttemptLog::new(run_dir);
        let failure = Arc::new(Mutex::new(None));
        let writer_failure = failure.clone();
        std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || writer(conn, queue, log, writer_failure))
            .map_err(|e| sqlite(rusqlite::Error::ToSqlConversionFailure(Box::new(e))))?;
        Ok(Store { path, ops, failure })
    }

    /// The first write that failed, if one did: the store no longer holds
    /// everything that happened.
    pub fn failure(&self) -> Option<String> {
        self.failure.lock().expect("store failure lock").clone()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queues a change; it is committed with the next batch.
    pub fn write(&self, job: impl Fn(&Connection) -> rusqlite::Result<()> + Send + 'static) {
        self.change(job, None);
    }

    fn change(
        &self,
        job: impl Fn(&Connection) -> rusqlite::Result<()> + Send + 'static,
        line: Option<attempt_log::Line>,
    ) {
        let job = Box::new(job);
        // A stopped writer means the campaign is ending; the flush reports it.
        let _ = self.ops.send(Op::Write(Change { job, line }));
    }

    /// Waits until every change queued so far is committed; fails if any
    /// change of the store failed.
    pub async fn flush(&self) -> Result<(), StoreError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.ops
            .send(Op::Flush(tx))
            .map_err(|_| StoreError::Closed)?;
        rx.await
            .map_err(|_| StoreError::Closed)?
            .map_err(|why| StoreError::Failed {
                path: self.path.clone(),
                why,
            })
    }

    pub fn campaign_started(&self, id: &str, run_dir: &Path, job_id: Option<&str>, config: &str) {
        let (id, run_dir, job, config) = (
            id.to_string(),
            run_dir.display().to_string(),
            job_id.map(str::to_string),
            config.to_string(),
        );
        self.write(move |c| {
            execute(
                c,
                "INSERT INTO campaign (id, run_dir, job_id, started_at, state, config)
                 VALUES (?1, ?2, ?3, ?4, 'running', ?5)
                 ON CONFLICT(id) DO UPDATE SET job_id = ?3, state = 'running', config = ?5",
                params![id, run_dir, job, now(), config],
            )
            .map(drop)
        });
    }

    pub fn campaign_state(&self, state: &str) {
        let state = state.to_string();
        self.write(move |c| {
            execute(
                c,
                "UPDATE campaign SET state = ?1, ended_at = ?2",
                params![state, now()],
            )
            .map(drop)
        });
    }

    /// Adds tasks that are not there yet (a resumed campaign keeps its own).
    pub fn add_tasks(&self, tasks: Vec<TaskRow>) {
        self.write(move |c| {
            let mut insert = c.prepare_cached(
                "INSERT OR IGNORE INTO tasks (id, kernel, language, precision, repeat, state,
                 attempts, budget_used_s) VALUES (?1, ?2, ?3, ?4, ?5, 'pending', 0, 0)",
            )?;
            for t in &tasks {
                insert.execute(params![t.id, t.kernel, t.language, t.precision, t.repeat])?;
            }
            Ok(())
        });
    }

    /// Leases were granted: their attempts start and their tasks are leased.
    pub fn attempts_started(&self, starts: Vec<AttemptStart>) {
        if starts.is_empty() {
            return;
        }
        self.write(move |c| {
            for start in &starts {
                execute(
                    c,
                    "INSERT OR REPLACE INTO attempts (task_id, attempt, lease_id, agent, worker,
                     judge, started_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    params![
                        start.task,
                        start.attempt,
                        start.lease_id,
                        start.agent,
                        start.worker,
                        start.judge,
                        now()
                    ],
                )?;
                execute(
                    c,
                    "UPDATE tasks SET state = 'leased', attempts = ?2, budget_used_s = ?3
                     WHERE id = ?1",
                    params![start.task, start.attempt, start.budget_used_s],
                )?;
            }
            Ok(())
        });
    }

    /// How an attempt ended and what became of its task, in one job, and
    /// in the attempts' log once it is committed.
    pub fn attempt_ended(&self, end: AttemptRecord) {
        // Made into text by the writer: this runs under the scheduler lock.
        let line = attempt_log::Line {
            task: end.task.clone(),
            attempt: end.attempt,
            outcome: end.outcome.clone(),
            task_state: end.state.clone(),
            attempts: end.attempts,
            budget_used_s: end.budget_used_s,
            at: 0.0,
        };
        self.change(move |c| end_attempt(c, &end), Some(line));
    }

    /// The agent's report of an attempt whose end is recorded already (its
    /// verdict settled the task first).
    pub fn agent_report(&self, task: &str, attempt: u32, report: AgentReport) {
        let task = task.to_string();
        self.write(move |c| agent_report(c, &task, attempt, &report));
    }

    /// One grade's verdict that settled nothing (Score, Profile, a refused Submit).
    pub fn verdict(&self, record: VerdictRecord) {
        self.write(move |c| insert_verdict(c, &record));
    }

    pub fn role(
        &self,
        instance: &str,
        role: &str,
        node: &str,
        endpoint: &str,
        state: &str,
        restarts: u32,
    ) {
        let (instance, role, node, endpoint, state) = (
            instance.to_string(),
            role.to_string(),
            node.to_string(),
            endpoint.to_string(),
            state.to_string(),
        );
        self.write(move |c| {
            execute(
                c,
                "INSERT INTO roles (instance, role, node, endpoint, state, restarts, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 ON CONFLICT(instance) DO UPDATE SET role = ?2, node = ?3, endpoint = ?4, state = ?5,
                 restarts = ?6, updated_at = ?7",
                params![instance, role, node, endpoint, state, restarts, now()],
            )
            .map(drop)
        });
    }

    pub fn event(&self, instance: &str, kind: &str, message: &str) {
        let (instance, kind, message) =
            (instance.to_string(), kind.to_string(), message.to_string());
        self.write(move |c| {
            execute(
                c,
                "INSERT INTO events (at, instance, kind, message) VALUES (?1, ?2, ?3, ?4)",
                params![now(), instance, kind, message],
            )
            .map(drop)
        });
    }
}

/// A granted lease, as the attempts table records it.
#[derive(Debug, Clone)]
pub struct AttemptStart {
    pub task: String,
    pub attempt: u32,
    pub lease_id: String,
    pub agent: String,
    pub worker: u32,
    pub judge: String,
    pub budget_used_s: f64,
}

/// How an attempt ended, with what it did to its task.
#[derive(Debug, Clone, Default)]
pub struct AttemptRecord {
    pub task: String,
    pub attempt: u32,
    /// How the attempt ended ("submitted", "expired", …).
    pub outcome: String,
    /// The task after it: pending | settled | failed.
    pub state: String,
    pub attempts: u32,
    pub budget_used_s: f64,
    /// A finished task's outcome: the settling verdict's status, or why it failed.
    pub status: Option<String>,
    pub speedup: Option<f64>,
    /// What the agent said of the attempt, when it said something.
    pub agent: Option<AgentReport>,
    /// The verdict that settled the task.
    pub verdict: Option<VerdictRecord>,
}

/// An agent's account of an attempt.
#[derive(Debug, Clone, Default)]
pub struct AgentReport {
    pub outcome: String,
    pub tokens: u64,
    pub transcript: String,
    pub message: String,
}

/// Adds the [`COLUMNS_ADDED`] a store made before them lacks.
fn add_missing_columns(c: &Connection) -> rusqlite::Result<()> {
    for (table, column, kind) in COLUMNS_ADDED {
        if !has_column(c, table, column)? {
            c.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {kind}"))?;
        }
    }
    Ok(())
}

fn has_column(c: &Connection, table: &str, column: &str) -> rusqlite::Result<bool> {
    c.query_row(
        "SELECT EXISTS (SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2)",
        params![table, column],
        |r| r.get(0),
    )
}

/// Runs one statement, prepared once per connection: lease traffic runs the
/// same few statements thousands of times a second, and parsing each again
/// showed in its profile.
fn execute(c: &Connection, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<usize> {
    c.prepare_cached(sql)?.execute(params)
}

/// An attempt's end: the agent's report and the settling verdict when there
/// are some, and what became of its task.
fn end_attempt(c: &Connection, end: &AttemptRecord) -> rusqlite::Result<()> {
    if let Some(report) = &end.agent {
        agent_report(c, &end.task, end.attempt, report)?;
    }
    if let Some(verdict) = &end.verdict {
        insert_verdict(c, verdict)?;
    }
    let Some(status) = &end.status else {
        return execute(
            c,
            "UPDATE tasks SET state = ?2, attempts = ?3, budget_used_s = ?4 WHERE id = ?1",
            params![end.task, end.state, end.attempts, end.budget_used_s],
        )
        .map(drop);
    };
    // The task's interval is its settling verdict's; a failed task has neither.
    let verdict = end.verdict.as_ref();
    execute(
        c,
        "UPDATE tasks SET state = ?2, attempts = ?3, budget_used_s = ?4, status = ?5,
         speedup = ?6, verdict = ?7, settled_at = ?8, speedup_low = ?9, speedup_high = ?10
         WHERE id = ?1",
        params![
            end.task,
            end.state,
            end.attempts,
            end.budget_used_s,
            status,
            end.speedup,
            verdict.map(|v| &v.verdict),
            now(),
            verdict.and_then(|v| v.speedup_low),
            verdict.and_then(|v| v.speedup_high)
        ],
    )
    .map(drop)
}

fn agent_report(c: &Connection, task: &str, attempt: u32, r: &AgentReport) -> rusqlite::Result<()> {
    execute(
        c,
        "UPDATE attempts SET ended_at = ?3, outcome = ?4, tokens = ?5, transcript = ?6, message = ?7
         WHERE task_id = ?1 AND attempt = ?2",
        params![task, attempt, now(), r.outcome, r.tokens as i64, r.transcript, r.message],
    )
    .map(drop)
}

fn insert_verdict(c: &Connection, record: &VerdictRecord) -> rusqlite::Result<()> {
    execute(
        c,
        "INSERT INTO verdicts (task_id, attempt, lease_id, kind, judge, status, speedup,
         median_ns, message, settled, verdict, at, speedup_low, speedup_high)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
        params![
            record.task_id,
            record.attempt,
            record.lease_id,
            record.kind,
            record.judge,
            record.status,
            record.speedup,
            record.median_ns,
            record.message,
            record.settled as i64,
            record.verdict,
            now(),
            record.speedup_low,
            record.speedup_high
        ],
    )
    .map(drop)
}

/// One row of the verdicts table.
#[derive(Debug, Clone, Default)]
pub struct VerdictRecord {
    pub task_id: String,
    pub attempt: u32,
    pub lease_id: String,
    pub kind: String,
    pub judge: String,
    pub status: String,
    pub speedup: Option<f64>,
    /// The speedup's 95% confidence interval, when the judge measured one.
    pub speedup_low: Option<f64>,
    pub speedup_high: Option<f64>,
    pub median_ns: Option<f64>,
    pub message: String,
    pub settled: bool,
    pub verdict: String,
}

/// Applies queued changes in batches, one transaction per batch.
fn writer(
    mut conn: Connection,
    queue: mpsc::Receiver<Op>,
    mut log: AttemptLog,
    failure: Arc<Mutex<Option<String>>>,
) {
    let fail = |why: String| {
        tracing::error!("store: {why}");
        failure
            .lock()
            .expect("store failure lock")
            .get_or_insert(why);
    };
    while let Ok(first) = queue.recv() {
        let mut changes = Vec::new();
        let mut flushes = Vec::new();
        let mut next = Some(first);
        while let Some(op) = next.take() {
            match op {
                Op::Write(change) => changes.push(change),
                Op::Flush(done) => flushes.push(done),
            }
            if changes.len() < 4096 {
                next = queue.try_recv().ok();
            }
        }
        match commit(&mut conn, &changes, &fail) {
            Ok(applied) => {
                let at = now();
                let lines: String = changes
                    .iter_mut()
                    .zip(applied)
                    .filter(|(_, applied)| *applied)
                    .filter_map(|(change, _)| change.line.as_mut())
                    .map(|line| {
                        line.at = at;
                        line.to_text()
                    })
                    .collect();
                log.append(&lines);
            }
            Err(e) => fail(format!("commit: {e}")),
        }
        let state = failure.lock().expect("store failure lock").clone();
        for done in flushes {
            let _ = done.send(state.clone().map_or(Ok(()), Err));
        }
    }
}

/// Commits `changes` in one transaction; which of them it applied. A
/// failing change is rolled back alone (and reported through `fail`); the
/// others are kept.
///
/// Changes seldom fail, so the batch is first applied as it is: a savepoint
/// per change journals every page it touches a second time, which showed in
/// the lease traffic's profile. Only when a change fails is the batch rolled
/// back and applied again with a savepoint around each change.
fn commit(
    conn: &mut Connection,
    changes: &[Change],
    fail: &impl Fn(String),
) -> rusqlite::Result<Vec<bool>> {
    let tx = conn.transaction()?;
    if changes
        .iter()
        .try_for_each(|change| (change.job)(&tx))
        .is_ok()
    {
        tx.commit()?;
        return Ok(vec![true; changes.len()]);
    }
    tx.rollback()?;
    let mut tx = conn.transaction()?;
    let mut applied = Vec::with_capacity(changes.len());
    for change in changes {
        let savepoint = tx.savepoint()?;
        match (change.job)(&savepoint) {
            Ok(()) => {
                savepoint.commit()?;
                applied.push(true);
            }
            // Dropping the savepoint rolls this change back alone.
            Err(e) => {
                fail(e.to_string());
                applied.push(false);
            }
        }
    }
    tx.commit()?;
    Ok(applied)
}

/// Reads a finished (or running) campaign's store.
pub struct Reader {
    conn: Connection,
    /// What the queries select for each table's interval columns: the
    /// columns, or NULLs in a store made before them (read-only here, so
    /// they cannot be added).
    tasks_interval: &'static str,
    verdicts_interval: &'static str,
}

/// The campaign row: what it is and when it ran.
#[derive(Debug, Clone)]
pub struct CampaignRow {
    pub id: String,
    /// running | finished | drained | interrupted | failed
    pub state: String,
    pub started_at: f64,
    pub ended_at: Option<f64>,
    /// The resolved configuration it ran with, as an env file.
    pub config: String,
}

/// One grade's verdict: a Submit that settled its task, or one that did not
/// (a Score, a Profile, a refused Submit).
#[derive(Debug, Clone)]
pub struct VerdictRow {
    pub task: String,
    pub attempt: u32,
    pub kind: String,
    pub judge: String,
    pub status: String,
    pub speedup: Option<f64>,
    pub speedup_low: Option<f64>,
    pub speedup_high: Option<f64>,
    pub settled: bool,
    pub at: f64,
}

/// One event of a role instance (launched, ready, dead, …) or of the campaign
/// ("" instance: a drain).
#[derive(Debug, Clone)]
pub struct EventRow {
    pub at: f64,
    pub instance: String,
    pub kind: String,
    pub message: String,
}

/// One attempt as the store keeps it ("" outcome: still running).
#[derive(Debug, Clone, Serialize)]
pub struct AttemptRow {
    pub task: String,
    pub attempt: u32,
    pub agent: String,
    pub judge: String,
    pub outcome: String,
    pub tokens: u64,
    pub transcript: String,
    pub message: String,
}

/// A task's outcome, for `hpcagent results`.
#[derive(Debug, Clone, Serialize)]
pub struct TaskResult {
    pub task: String,
    pub kernel: String,
    pub language: String,
    pub precision: String,
    pub attempts: u32,
    pub state: String,
    pub status: Option<String>,
    pub speedup: Option<f64>,
    /// The speedup's 95% confidence interval (none from older judges).
    pub speedup_low: Option<f64>,
    pub speedup_high: Option<f64>,
}

impl Reader {
    pub fn open(run_dir: &Path) -> Result<Reader, StoreError> {
        let path = run_dir.join(FILE_NAME);
        let conn = Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|source| StoreError::Sqlite {
            path: path.clone(),
            source,
        })?;
        let sqlite = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(sqlite)?;
        let interval = |table| {
            has_column(&conn, table, "speedup_low").map(|has| {
                if has {
                    "speedup_low, speedup_high"
                } else {
                    "NULL, NULL"
                }
            })
        };
        Ok(Reader {
            tasks_interval: interval("tasks").map_err(sqlite)?,
            verdicts_interval: interval("verdicts").map_err(sqlite)?,
            conn,
        })
    }

    pub fn tasks(&self) -> rusqlite::Result<Vec<TaskRow>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT id, kernel, language, precision, repeat, state, attempts, budget_used_s, status,
             speedup, {} FROM tasks ORDER BY kernel, language, precision, repeat",
            self.tasks_interval
        ))?;
        stmt.query_map([], |r| {
            Ok(TaskRow {
                id: r.get(0)?,
                kernel: r.get(1)?,
                language: r.get(2)?,
                precision: r.get(3)?,
                repeat: r.get(4)?,
                state: r.get(5)?,
                attempts: r.get(6)?,
                budget_used_s: r.get(7)?,
                status: r.get(8)?,
                speedup: r.get(9)?,
                speedup_low: r.get(10)?,
                speedup_high: r.get(11)?,
            })
        })?
        .collect()
    }

    pub fn results(&self) -> rusqlite::Result<Vec<TaskResult>> {
        Ok(self
            .tasks()?
            .into_iter()
            .map(|t| TaskResult {
                task: t.id,
                kernel: t.kernel,
                language: t.language,
                precision: t.precision,
                attempts: t.attempts,
                state: t.state,
                status: t.status,
                speedup: t.speedup,
                speedup_low: t.speedup_low,
                speedup_high: t.speedup_high,
            })
            .collect())
    }

    pub fn campaign(&self) -> rusqlite::Result<Option<CampaignRow>> {
        self.conn
            .query_row(
                "SELECT id, state, started_at, ended_at, COALESCE(config, '') FROM campaign LIMIT 1",
                [],
                |r| {
                    Ok(CampaignRow {
                        id: r.get(0)?,
                        state: r.get(1)?,
                        started_at: r.get(2)?,
                        ended_at: r.get(3)?,
                        config: r.get(4)?,
                    })
                },
            )
            .optional()
    }

    /// Every attempt that has begun, in task and attempt order.
    pub fn attempts(&self) -> rusqlite::Result<Vec<AttemptRow>> {
        let mut stmt = self.conn.prepare(
            "SELECT task_id, attempt, agent, judge, COALESCE(outcome, ''), COALESCE(tokens, 0),
             COALESCE(transcript, ''), COALESCE(message, '') FROM attempts ORDER BY task_id, attempt",
        )?;
        stmt.query_map([], |r| {
            Ok(AttemptRow {
                task: r.get(0)?,
                attempt: r.get(1)?,
                agent: r.get(2)?,
                judge: r.get(3)?,
                outcome: r.get(4)?,
                tokens: r.get::<_, i64>(5)? as u64,
                transcript: r.get(6)?,
                message: r.get(7)?,
            })
        })?
        .collect()
    }

    /// How many Submit verdicts settled each task (exactly one for a settled task).
    pub fn settlements(&self) -> rusqlite::Result<Vec<(String, u32)>> {
        let mut stmt = self.conn.prepare(
            "SELECT t.id, COALESCE(SUM(v.settled), 0) FROM tasks t
             LEFT JOIN verdicts v ON v.task_id = t.id GROUP BY t.id ORDER BY t.id",
        )?;
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect()
    }

    /// Every verdict, in the order the judges reported them.
    pub fn verdicts(&self) -> rusqlite::Result<Vec<VerdictRow>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT task_id, attempt, COALESCE(kind, ''), COALESCE(judge, ''),
             COALESCE(status, ''), speedup, COALESCE(settled, 0), at, {}
             FROM verdicts ORDER BY id",
            self.verdicts_interval
        ))?;
        stmt.query_map([], |r| {
            Ok(VerdictRow {
                task: r.get(0)?,
                attempt: r.get(1)?,
                kind: r.get(2)?,
                judge: r.get(3)?,
                status: r.get(4)?,
                speedup: r.get(5)?,
                settled: r.get::<_, i64>(6)? != 0,
                at: r.get(7)?,
                speedup_low: r.get(8)?,
                speedup_high: r.get(9)?,
            })
        })?
        .collect()
    }

    /// Every event, in the order they happened.
    pub fn events(&self) -> rusqlite::Result<Vec<EventRow>> {
        let mut stmt = self.conn.prepare(
            "SELECT at, COALESCE(instance, ''), COALESCE(kind, ''), COALESCE(message, '')
             FROM events ORDER BY id",
        )?;
        stmt.query_map([], |r| {
            Ok(EventRow {
                at: r.get(0)?,
                instance: r.get(1)?,
                kind: r.get(2)?,
                message: r.get(3)?,
            })
        })?
        .collect()
    }
}

/// The filesystem type holding `path` (longest matching mount point).
pub fn filesystem_of(path: &Path) -> String {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
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

/// Whether a filesystem of type `fstype` keeps its files in memory.
pub fn is_memory_filesystem(fstype: &str) -> bool {
    ["tmpfs", "ramfs", "devtmpfs"].contains(&fstype)
}

fn is_network_filesystem(fstype: &str) -> bool {
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
    use super::*;

    #[tokio::test]
    async fn writes_are_batched_and_flushed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), false).unwrap();
        store.campaign_started("c1", dir.path(), None, "{}");
        let tasks: Vec<TaskRow> = (0..3)
            .map(|i| TaskRow {
                id: format!("k{i}.c"),
                kernel: format!("k{i}"),
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
            assert_eq!((task.speedup_low, task.speedup_high), (None, None));
            assert_eq!(verdict.speedup, Some(2.5));
            assert_eq!((verdict.speedup_low, verdict.speedup_high), (None, None));
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
        store.add_tasks(vec![TaskRow::pending(&crate::scheduler::TaskSpec {
            id: "atax.c".into(),
            kernel: "atax".into(),
            language: "c".into(),
            precision: "fp64".into(),
            preset: None,
            budget: None,
        })]);
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
