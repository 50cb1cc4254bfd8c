//! The one writer: changes queue to a thread that applies what has queued
//! in one transaction, each change under its own savepoint, and appends the
//! committed ends of attempts to the attempts' log.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, params};

use super::attempt_log::{self, AttemptLog};
use super::schema::{SCHEMA, add_missing_columns};
use super::{FILE_NAME, StoreError, TaskRow, check_filesystem, is_network_filesystem};

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
    /// The file opened (device and inode), to notice it deleted or replaced.
    identity: (u64, u64),
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
        let fstype = check_filesystem(run_dir, allow_memory)?;
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
        let identity = std::fs::metadata(&path)
            .map(|m| (m.dev(), m.ino()))
            .map_err(|why| StoreError::Opened {
                path: path.clone(),
                why,
            })?;
        let (ops, queue) = mpsc::channel();
        let log = AttemptLog::new(run_dir);
        let failure = Arc::new(Mutex::new(None));
        let writer_failure = failure.clone();
        std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || writer(conn, queue, log, writer_failure))
            .map_err(|e| sqlite(rusqlite::Error::ToSqlConversionFailure(Box::new(e))))?;
        Ok(Store {
            path,
            identity,
            ops,
            failure,
        })
    }

    /// Whether the store's file is still the one opened; if not, the store
    /// is failed. SQLite goes on writing to a file deleted under it without
    /// an error, so a campaign would report progress into nothing: this is
    /// how it notices (a `stat` of the path, cheap enough for every tick).
    pub fn check_file(&self) {
        let why = match std::fs::metadata(&self.path) {
            Ok(m) if (m.dev(), m.ino()) == self.identity => return,
            Ok(_) => "was replaced by another file while the campaign ran".to_string(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                "was deleted while the campaign ran".to_string()
            }
            Err(e) => format!("cannot be checked: {e}"),
        };
        let why = format!(
            "{} {why}; what the campaign records from now on would be lost",
            self.path.display()
        );
        let mut failure = self.failure.lock().expect("store failure lock");
        if failure.is_none() {
            tracing::error!("store: {why}");
            *failure = Some(why);
        }
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

    pub(super) fn change(
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
                "INSERT INTO campaign (id, run_dir, job_id, started_at, state, config,
                                       hpcagent_version)
                 VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6)
                 ON CONFLICT(id) DO UPDATE SET job_id = ?3, state = 'running', config = ?5,
                                               hpcagent_version = ?6",
                params![id, run_dir, job, now(), config, env!("CARGO_PKG_VERSION")],
            )
            .map(drop)
        });
    }

    /// The version of the corpus the campaign grades ([`crate::campaign::tasks::corpus_version`]).
    pub fn campaign_corpus(&self, version: &str) {
        let version = version.to_string();
        self.write(move |c| {
            execute(
                c,
                "UPDATE campaign SET corpus_version = ?1",
                params![version],
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
            // A task already there keeps what happened to it; one from a
            // store made before tracks gets its track.
            let mut insert = c.prepare_cached(
                "INSERT INTO tasks (id, kernel, language, precision, repeat, state,
                 attempts, budget_used_s, track) VALUES (?1, ?2, ?3, ?4, ?5, 'pending', 0, 0, ?6)
                 ON CONFLICT (id) DO UPDATE SET track = excluded.track
                 WHERE COALESCE(tasks.track, '') = ''",
            )?;
            for t in &tasks {
                insert.execute(params![
                    t.id,
                    t.kernel,
                    t.language,
                    t.precision,
                    t.repeat,
                    t.track
                ])?;
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
            submitted_by: end.submitted_by,
            message: end
                .agent
                .as_ref()
                .map(|a| a.message.clone())
                .filter(|m| !m.is_empty())
                .or_else(|| end.said.clone()),
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
    /// Whose Submit settled the task: "agent", or the worker's "starter"
    /// or "left" for an agent that did not submit.
    pub submitted_by: Option<&'static str>,
    /// A finished task's outcome: the settling verdict's status, or why it failed.
    pub status: Option<String>,
    pub speedup: Option<f64>,
    /// What the agent said of the attempt, when it said something.
    pub agent: Option<AgentReport>,
    /// The agent's words on how it ended, passed on by its worker with a
    /// Submit for it, where the agent's report comes after this end.
    pub said: Option<String>,
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
            "UPDATE tasks SET state = ?2, attempts = ?3, budget_used_s = ?4, outcome = ?5
             WHERE id = ?1",
            params![
                end.task,
                end.state,
                end.attempts,
                end.budget_used_s,
                end.outcome
            ],
        )
        .map(drop);
    };
    // The task's interval is its settling verdict's; a failed task has neither.
    let verdict = end.verdict.as_ref();
    execute(
        c,
        "UPDATE tasks SET state = ?2, attempts = ?3, budget_used_s = ?4, status = ?5,
         speedup = ?6, verdict = ?7, settled_at = ?8, speedup_low = ?9, speedup_high = ?10,
         outcome = ?11, submitted_by = ?12
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
            verdict.and_then(|v| v.speedup_high),
            end.outcome,
            end.submitted_by
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
