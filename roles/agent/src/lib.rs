//! The agent role (not built yet: see issues #4 and #5).
//!
//! Will own the per-node worker pool, the agent policies (the built-in LLM
//! tool-calling loop, external agent commands, the baseline policy), the tools
//! an agent may call, and the MCP server for external agent CLIs. It will not
//! grade anything: every verdict comes from a judge.
