//! The inference role (not built yet: see issue #5).
//!
//! Will own launching vLLM per the plan (single- and multi-node replicas),
//! readiness (`/health`, then the served model listed), and GPU discovery on
//! NVIDIA and AMD nodes. It will not decide placement: the orchestrator's plan
//! says which nodes and GPUs a replica gets.
