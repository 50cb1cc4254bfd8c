//! The live progress line of `hpcagent up`: rewritten in place on a terminal,
//! plain lines (on change, at most every few seconds) otherwise.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use hpcagent_proto::v1 as pb;

pub struct Progress {
    tty: bool,
    last_print: Option<Instant>,
    last_counts: (u32, u32, u32),
}

impl Progress {
    pub fn new() -> Progress {
        Progress {
            tty: std::io::stderr().is_terminal(),
            last_print: None,
            last_counts: (u32::MAX, 0, 0),
        }
    }

    pub fn update(&mut self, s: &pb::StatusSnapshot) {
        let counts = (s.tasks_settled, s.tasks_running, s.tasks_failed);
        let due = self
            .last_print
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(if self.tty { 1 } else { 5 }));
        if self.tty && due {
            eprint!("\r{}\x1b[K", line(s));
            let _ = std::io::stderr().flush();
            self.last_print = Some(Instant::now());
        } else if !self.tty && counts != self.last_counts && due {
            eprintln!("{}", line(s));
            self.last_print = Some(Instant::now());
            self.last_counts = counts;
        }
    }

    pub fn finish(&mut self, s: &pb::StatusSnapshot) {
        if self.tty {
            eprintln!("\r{}\x1b[K", line(s));
        } else {
            eprintln!("{}", line(s));
        }
    }
}

/// One status line: tasks, ready roles, grade rate.
pub fn line(s: &pb::StatusSnapshot) -> String {
    let mut by_role: std::collections::BTreeMap<&str, (u32, u32)> = Default::default();
    for r in &s.roles {
        let name = pb::Role::try_from(r.role)
            .map(|r| {
                r.as_str_name()
                    .trim_start_matches("ROLE_")
                    .to_ascii_lowercase()
            })
            .unwrap_or_default();
        let key: &str = match name.as_str() {
            "judge" => "judges",
            "agent" => "agents",
            "inference" => "inference",
            _ => "other",
        };
        let entry = by_role.entry(key).or_default();
        entry.1 += 1;
        if r.state == "ready" {
            entry.0 += 1;
        }
    }
    let roles: Vec<String> = by_role
        .iter()
        .map(|(k, (ready, all))| format!("{k} {ready}/{all}"))
        .collect();
    format!(
        "[{:>5.0}s] tasks {}/{} settled, {} running, {} failed{} | ready: {} | {:.1} grades/min",
        s.elapsed_s,
        s.tasks_settled,
        s.tasks_total,
        s.tasks_running,
        s.tasks_failed,
        if s.draining { " (draining)" } else { "" },
        roles.join(", "),
        s.grades_per_minute
    )
}
