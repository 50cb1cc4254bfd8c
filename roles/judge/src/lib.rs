//! The judge role: it grades submissions, and a leaderboard rests on it.
//!
//! Owns test data and the NumPy oracle over the task corpus
//! ([`hpcagent_corpus`], a crate of its own) ([`data`]), building with a per-rank cache ([`build`]), where builds and
//! runs get their directories ([`sandbox_dir`]), out-of-process runs timed
//! from outside ([`runner`], [`timing`]), verification ([`verify`]),
//! verdicts ([`verdict`]), an HPCAgent-Bench checkout's tasks
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
pub mod finite;
pub mod grade;
pub mod hab_tasks;
pub mod judge;
pub mod oracle;
pub mod peers;
pub mod profile;
pub mod profilers;
pub mod role;
pub mod runner;
pub mod sandbox_dir;
pub mod service;
pub mod slots;
pub mod standalone;
pub mod timing;
pub mod verdict;
pub mod verify;
pub mod warm;

pub use judge::{Judge, JudgeConfig, JudgeError, Submission};
