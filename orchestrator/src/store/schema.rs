//! The store's tables, and the columns added to them since stores were
//! first made (added to an older store when a campaign resumes in it).

use rusqlite::{Connection, params};

pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS campaign (
    id TEXT PRIMARY KEY, run_dir TEXT, job_id TEXT, started_at REAL, ended_at REAL,
    state TEXT, config TEXT, hpcagent_version TEXT, corpus_version TEXT);
CREATE TABLE IF NOT EXISTS tasks (
    id TEXT PRIMARY KEY, kernel TEXT, language TEXT, precision TEXT, repeat INTEGER,
    state TEXT, attempts INTEGER, budget_used_s REAL,
    status TEXT, speedup REAL, verdict TEXT, settled_at REAL,
    speedup_low REAL, speedup_high REAL, outcome TEXT, submitted_by TEXT, track TEXT);
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
pub(super) const COLUMNS_ADDED: &[(&str, &str, &str)] = &[
    ("tasks", "speedup_low", "REAL"),
    ("tasks", "speedup_high", "REAL"),
    ("verdicts", "speedup_low", "REAL"),
    ("verdicts", "speedup_high", "REAL"),
    ("tasks", "outcome", "TEXT"),
    ("tasks", "submitted_by", "TEXT"),
    ("campaign", "hpcagent_version", "TEXT"),
    ("campaign", "corpus_version", "TEXT"),
    ("tasks", "track", "TEXT"),
];

/// Adds the [`COLUMNS_ADDED`] a store made before them lacks.
pub(super) fn add_missing_columns(c: &Connection) -> rusqlite::Result<()> {
    for (table, column, kind) in COLUMNS_ADDED {
        if !has_column(c, table, column)? {
            c.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {kind}"))?;
        }
    }
    Ok(())
}

pub(super) fn has_column(c: &Connection, table: &str, column: &str) -> rusqlite::Result<bool> {
    c.query_row(
        "SELECT EXISTS (SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2)",
        params![table, column],
        |r| r.get(0),
    )
}
