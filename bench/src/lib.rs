//! hpcagent's benchmarks (`hpcagent bench …`): each measures one thing the
//! project promises and a peer doing the same work in the same run, and
//! prints the ratio, because absolute times on shared machines are noise.
//!
//! - [`dispatch`]: lease throughput of the real control plane and store, with
//!   simulated agents and judges over loopback gRPC (also the load run the
//!   test suite checks for lost and duplicated tasks); peers Ray and HyperQueue.
//! - [`scale`]: a simulated 1,000-node allocation's orchestrator footprint.
//! - [`startup`]: `hpcagent up` to every role ready, against `srun` and Ray.
//! - [`judge`]: a grade against the same build and runs done by hand.
//! - [`judge_peer`]: hpcagent's judge against HPCAgent-Bench's own on its
//!   gemm at its S and at hpcagent's: warm, a fresh judge's first grade, a
//!   submit.
//! - [`campaign`]: the judge's busy time over a baseline-policy campaign,
//!   against the same builds and calls by hand.
//!
//! It owns the simulations and the measuring; the code measured is the
//! other crates' own, unchanged. Errors are `anyhow`: a bench is an edge.

pub mod agreement;
pub mod campaign;
pub mod dispatch;
pub mod judge;
pub mod judge_peer;
pub mod peers;
pub mod scale;
pub mod sim;
pub mod startup;
pub mod stats;
