//! The judge role (not built yet: see issue #3).
//!
//! Will own the task catalog, sandboxed builds with a per-rank build cache, the
//! out-of-process runner, verification against the NumPy reference, timing,
//! profilers, and the gRPC Judge service. It will not own task scheduling or the
//! results store: those belong to the orchestrator.
