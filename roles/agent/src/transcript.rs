//! An attempt's transcript: one JSON object per line
//! (`tasks/<task>/attempt-<k>/transcript.jsonl`), each with its time, written
//! as the attempt goes so a crash keeps everything before it.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

pub const FILE_NAME: &str = "transcript.jsonl";

pub struct Transcript {
    path: PathBuf,
    file: Option<std::fs::File>,
}

impl Transcript {
    /// Appends to `<attempt_dir>/transcript.jsonl`; a transcript that cannot
    /// be written is logged once and skipped, not a reason to stop the attempt.
    pub fn open(attempt_dir: &Path) -> Transcript {
        let path = attempt_dir.join(FILE_NAME);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| tracing::warn!("{}: {e}", path.display()))
            .ok();
        Transcript { path, file }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes one event: `kind` and its fields.
    pub fn record(&mut self, kind: &str, mut event: Value) {
        let Some(file) = &mut self.file else { return };
        if let Value::Object(map) = &mut event {
            map.insert("kind".into(), Value::from(kind));
            // Unix seconds, as the store keeps its times.
            let at = chrono::Utc::now().timestamp_micros() as f64 / 1e6;
            map.insert("at".into(), Value::from(at));
        }
        if let Err(e) = writeln!(file, "{event}") {
            tracing::warn!("{}: {e}", self.path.display());
            self.file = None;
        }
    }
}
