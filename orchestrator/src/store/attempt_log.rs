//! The attempts' log: `attempts.jsonl` in the run directory, one JSON line
//! for each attempt's end: how it ended and what became of its task. The
//! store's writer appends the lines of a batch in one write once the batch
//! is committed, so the log never tells of an end the database does not
//! hold.
//!
//! One file for the run, not one per attempt: a file made per lease was the
//! orchestrator's one metadata operation per lease, a round trip to the
//! server of a shared filesystem from the one node that serves every agent
//! (and 15–19% of a lease's CPU in `bench dispatch` on tmpfs). The database
//! stays the record; the log is for reading and grepping, and a torn last
//! line after a crash is possible.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

pub const FILE_NAME: &str = "attempts.jsonl";

/// One attempt's end, as a line of the log.
#[derive(Debug, Serialize)]
pub(super) struct Line {
    pub task: String,
    pub attempt: u32,
    /// How the attempt ended: "submitted" when the agent's Submit verdict
    /// settled its task, the agent's word when it ended otherwise (its
    /// worker may have submitted for it: `submitted_by`), or the
    /// orchestrator's when its lease ran out ("expired", "over budget").
    pub outcome: String,
    /// Whose Submit settled the task: "agent", or the worker's "starter"
    /// (the file the workspace was given) or "left" (the file as the agent
    /// left it), graded for an agent that did not submit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub submitted_by: Option<&'static str>,
    /// The agent's words on how it ended, when it said any ("claude exited
    /// 3", what the sandbox could not start and why).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The task after it: pending (to be tried again), settled or failed.
    pub task_state: String,
    pub attempts: u32,
    pub budget_used_s: f64,
    /// When its batch was committed, in Unix seconds.
    pub at: f64,
}

impl Line {
    /// The line, newline included.
    pub(super) fn to_text(&self) -> String {
        let mut text = serde_json::to_string(self).expect("a log line serializes");
        text.push('\n');
        text
    }
}

/// The writer's end of the log, opened at its first line.
pub(super) struct AttemptLog {
    path: PathBuf,
    file: Option<File>,
    /// A write failed: said once, then tried again with each batch.
    warned: bool,
}

impl AttemptLog {
    pub(super) fn new(run_dir: &Path) -> AttemptLog {
        AttemptLog {
            path: run_dir.join(FILE_NAME),
            file: None,
            warned: false,
        }
    }

    /// Appends `lines` (each ending in a newline) in one write.
    pub(super) fn append(&mut self, lines: &str) {
        if lines.is_empty() {
            return;
        }
        if let Err(e) = self.try_append(lines) {
            self.file = None;
            if !std::mem::replace(&mut self.warned, true) {
                tracing::warn!(
                    "{}: {e}; the store still has every attempt",
                    self.path.display()
                );
            }
        }
    }

    fn try_append(&mut self, lines: &str) -> std::io::Result<()> {
        if self.file.is_none() {
            self.file = Some(open_after_whole_lines(&self.path)?);
        }
        self.file
            .as_mut()
            .expect("opened above")
            .write_all(lines.as_bytes())
    }
}

/// The log opened for appending, after a newline if it ends in a torn line
/// (a crash, or a write that failed part-way): the torn line stays alone
/// and the next one starts whole.
fn open_after_whole_lines(path: &Path) -> std::io::Result<File> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .create(true)
        .append(true)
        .open(path)?;
    let len = file.metadata()?.len();
    let mut last = [0u8];
    if len > 0 && file.read_at(&mut last, len - 1)? == 1 && last[0] != b'\n' {
        file.write_all(b"\n")?;
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_appended_across_writers_and_parse_back() {
        let dir = tempfile::tempdir().unwrap();
        let line = |attempt, state: &str| Line {
            task: "gemm.c.fp64".into(),
            attempt,
            outcome: "submitted".into(),
            submitted_by: Some("agent"),
            message: None,
            task_state: state.into(),
            attempts: attempt,
            budget_used_s: 1.5,
            at: 0.0,
        };
        let mut log = AttemptLog::new(dir.path());
        log.append(&line(1, "pending").to_text());
        // A resumed campaign's writer adds to the same log.
        let mut resumed = AttemptLog::new(dir.path());
        resumed.append(&(line(2, "settled").to_text() + &line(3, "settled").to_text()));
        let text = std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap();
        let states: Vec<(u64, String)> = text
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (
                    v["attempt"].as_u64().unwrap(),
                    v["task_state"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(
            states,
            [
                (1, "pending".into()),
                (2, "settled".into()),
                (3, "settled".into())
            ]
        );
    }

    #[test]
    fn a_torn_last_line_is_left_alone_and_the_next_starts_whole() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE_NAME), "{\"attempt\":1}\n{\"atte").unwrap();
        let mut log = AttemptLog::new(dir.path());
        log.append("{\"attempt\":2}\n");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(FILE_NAME)).unwrap(),
            "{\"attempt\":1}\n{\"atte\n{\"attempt\":2}\n"
        );
    }

    #[test]
    fn a_log_that_cannot_be_written_is_said_and_tried_again() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone");
        let mut log = AttemptLog::new(&gone);
        log.append("{}\n");
        assert!(log.warned, "the failed write is said");
        std::fs::create_dir(&gone).unwrap();
        log.append("{\"attempt\":1}\n");
        assert_eq!(
            std::fs::read_to_string(gone.join(FILE_NAME)).unwrap(),
            "{\"attempt\":1}\n",
            "the next batch gets through once the directory is there"
        );
    }
}
