//! Reading a campaign's store, finished or running, read-only: what
//! `results`, `status` and the report show. Its errors are [`ReadError`],
//! not SQLite's.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension};
use serde::Serialize;

use super::schema::has_column;
use super::{FILE_NAME, StoreError, TaskRow};

/// A query of the store that failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the results store: {0}")]
pub struct ReadError(#[from] rusqlite::Error);

/// Reads a finished (or running) campaign's store.
pub struct Reader {
    conn: Connection,
    /// What the queries select for each table's interval columns: the
    /// columns, or NULLs in a store made before them (read-only here, so
    /// they cannot be added).
    tasks_interval: &'static str,
    verdicts_interval: &'static str,
    /// The same for the tasks' `outcome, submitted_by`.
    tasks_ended: &'static str,
    /// The same for the campaign's `hpcagent_version, corpus_version`.
    campaign_version: &'static str,
    /// The same for the tasks' `track` ('' where a store lacks it).
    tasks_track: &'static str,
    run_dir: std::path::PathBuf,
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
    /// The hpcagent that last ran it (empty in stores from before).
    pub hpcagent_version: String,
    /// Its corpus's version: the commit of the checkout holding it (with
    /// `-dirty` when changed), or empty.
    pub corpus_version: String,
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
    /// The verdict as the control plane stored it (JSON): pairs, medians,
    /// the grade's time at the judge, ….
    pub detail: String,
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
    pub started_at: Option<f64>,
    /// `None` while it runs.
    pub ended_at: Option<f64>,
}

/// A task's outcome, for `hpcagent results`.
#[derive(Debug, Clone, Serialize)]
pub struct TaskResult {
    pub task: String,
    pub kernel: String,
    /// Its kernel's track (empty in stores from before tracks).
    pub track: String,
    pub language: String,
    pub precision: String,
    pub attempts: u32,
    pub state: String,
    pub status: Option<String>,
    pub speedup: Option<f64>,
    /// The speedup's 95% confidence interval (none from older judges).
    pub speedup_low: Option<f64>,
    pub speedup_high: Option<f64>,
    /// How its last attempt ended ("submitted", "crashed", …).
    pub outcome: Option<String>,
    /// Whose Submit settled it: "agent", or the worker's "starter" or
    /// "left", graded for an agent that did not submit.
    pub submitted_by: Option<String>,
    /// Its last attempt's build log, relative to the run directory, when
    /// its Submit left one.
    pub build_log: Option<String>,
}

impl TaskResult {
    /// Whether the agent's own Submit settled it ([`super::settled_by_agent`]).
    pub fn by_agent(&self) -> bool {
        super::settled_by_agent(&self.state, self.submitted_by.as_deref())
    }

    /// Whether its agent failed it ([`super::agent_failed`]).
    pub fn agent_failed(&self) -> bool {
        super::agent_failed(
            &self.state,
            self.submitted_by.as_deref(),
            self.outcome.as_deref(),
        )
    }
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
        let ended = if has_column(&conn, "tasks", "submitted_by").map_err(sqlite)? {
            "outcome, submitted_by"
        } else {
            "NULL, NULL"
        };
        let interval = |table| {
            has_column(&conn, table, "speedup_low").map(|has| {
                if has {
                    "speedup_low, speedup_high"
                } else {
                    "NULL, NULL"
                }
            })
        };
        // Each column on its own: a store may have one and not the other.
        let version = match (
            has_column(&conn, "campaign", "hpcagent_version").map_err(sqlite)?,
            has_column(&conn, "campaign", "corpus_version").map_err(sqlite)?,
        ) {
            (true, true) => "COALESCE(hpcagent_version, ''), COALESCE(corpus_version, '')",
            (true, false) => "COALESCE(hpcagent_version, ''), ''",
            (false, true) => "'', COALESCE(corpus_version, '')",
            (false, false) => "'', ''",
        };
        let track = if has_column(&conn, "tasks", "track").map_err(sqlite)? {
            "COALESCE(track, '')"
        } else {
            "''"
        };
        Ok(Reader {
            tasks_ended: ended,
            tasks_track: track,
            campaign_version: version,
            run_dir: run_dir.to_path_buf(),
            tasks_interval: interval("tasks").map_err(sqlite)?,
            verdicts_interval: interval("verdicts").map_err(sqlite)?,
            conn,
        })
    }

    pub fn tasks(&self) -> Result<Vec<TaskRow>, ReadError> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT id, kernel, language, precision, repeat, state, attempts, budget_used_s, status,
             speedup, {}, {}, {} FROM tasks ORDER BY kernel, language, precision, repeat",
            self.tasks_interval, self.tasks_ended, self.tasks_track
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
                outcome: r.get(12)?,
                submitted_by: r.get(13)?,
                track: r.get(14)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()
        .map_err(ReadError::from)
    }

    pub fn results(&self) -> Result<Vec<TaskResult>, ReadError> {
        Ok(self
            .tasks()?
            .into_iter()
            .map(|t| TaskResult {
                build_log: self.build_log(&t.id, t.attempts),
                task: t.id,
                kernel: t.kernel,
                track: t.track,
                language: t.language,
                precision: t.precision,
                attempts: t.attempts,
                state: t.state,
                status: t.status,
                speedup: t.speedup,
                speedup_low: t.speedup_low,
                speedup_high: t.speedup_high,
                outcome: t.outcome,
                submitted_by: t.submitted_by,
            })
            .collect())
    }

    /// An attempt's `build.log`, relative to the run directory, if it is there.
    fn build_log(&self, task: &str, attempt: u32) -> Option<String> {
        let log = format!("tasks/{task}/attempt-{attempt}/build.log");
        self.run_dir.join(&log).is_file().then_some(log)
    }

    pub fn campaign(&self) -> Result<Option<CampaignRow>, ReadError> {
        self.conn
            .query_row(
                &format!(
                    "SELECT id, state, started_at, ended_at, COALESCE(config, ''), {}
                     FROM campaign LIMIT 1",
                    self.campaign_version
                ),
                [],
                |r| {
                    Ok(CampaignRow {
                        id: r.get(0)?,
                        state: r.get(1)?,
                        started_at: r.get(2)?,
                        ended_at: r.get(3)?,
                        config: r.get(4)?,
                        hpcagent_version: r.get(5)?,
                        corpus_version: r.get(6)?,
                    })
                },
            )
            .optional()
            .map_err(ReadError::from)
    }

    /// Every attempt that has begun, in task and attempt order.
    pub fn attempts(&self) -> Result<Vec<AttemptRow>, ReadError> {
        let mut stmt = self.conn.prepare(
            "SELECT task_id, attempt, agent, judge, COALESCE(outcome, ''), COALESCE(tokens, 0),
             COALESCE(transcript, ''), COALESCE(message, ''), started_at, ended_at
             FROM attempts ORDER BY task_id, attempt",
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
                started_at: r.get(8)?,
                ended_at: r.get(9)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()
        .map_err(ReadError::from)
    }

    /// How many Submit verdicts settled each task (exactly one for a settled task).
    pub fn settlements(&self) -> Result<Vec<(String, u32)>, ReadError> {
        let mut stmt = self.conn.prepare(
            "SELECT t.id, COALESCE(SUM(v.settled), 0) FROM tasks t
             LEFT JOIN verdicts v ON v.task_id = t.id GROUP BY t.id ORDER BY t.id",
        )?;
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()
            .map_err(ReadError::from)
    }

    /// Every verdict, in the order the judges reported them.
    pub fn verdicts(&self) -> Result<Vec<VerdictRow>, ReadError> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT task_id, attempt, COALESCE(kind, ''), COALESCE(judge, ''),
             COALESCE(status, ''), speedup, COALESCE(settled, 0), at, {},
             COALESCE(verdict, '')
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
                detail: r.get(10)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()
        .map_err(ReadError::from)
    }

    /// Every event, in the order they happened.
    pub fn events(&self) -> Result<Vec<EventRow>, ReadError> {
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
        .collect::<rusqlite::Result<_>>()
        .map_err(ReadError::from)
    }
}
