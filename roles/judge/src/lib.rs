//! The judge role: it grades submissions, and a leaderboard rests on it.
//!
//! Owns test data and the NumPy oracle over the task corpus
//! ([`hpcagent_corpus`], a crate of its own) ([`data`]), building with a per-rank cache ([`build`]), where builds and
//! runs get their directories ([`sandbox_dir`]), what to run and how to
//! read it back (a run itself, timed from outside and its outputs compared,
//! is [`hpcagent_runner`]'s, a crate of its own), verdicts ([`verdict`]), an HPCAgent-Bench checkout's tasks
//! ([`hab_tasks`]), grading slots ([`slots`]), profilers ([`profile`]),
//! the other judges that confirm an implausible speedup ([`peers`]),
//! the gRPC Judge service ([`service`]) and the judge as a campaign's role
//! ([`role`]). [`judge::Judge`] ties them
//! together. It does not own scheduling or the results store: a judge answers
//! requests, the orchestrator decides what is asked and records the answers.

pub mod build;
pub mod cases;
pub mod data;
pub mod discrimination;
pub mod grade;
pub mod hab_tasks;
pub mod judge;
pub mod oracle;
pub mod peers;
pub mod profile;
pub mod profilers;
pub mod role;
pub mod sandbox_dir;
pub mod service;
pub mod slots;
pub mod standalone;
pub mod verdict;
pub mod warm;

pub use judge::{Judge, JudgeConfig, JudgeError, Submission};
