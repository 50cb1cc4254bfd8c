//! The tools an agent works a task with, for the built-in loop and for
//! external agent CLIs through `hpcagent mcp` alike.
//!
//! A tool call is a name and a JSON object of arguments, as a model writes
//! them: malformed JSON, unknown tools and missing fields get an error reply
//! the model can act on, never a failure of the attempt. Grading goes through
//! the lease's judge ([`JudgeLink`]); files stay in the attempt's
//! [`Workspace`]. A `submit` keeps its evidence in the attempt directory
//! (`submission.<ext>`, `verdict.json`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use hpcagent_common::AttemptOutcome;
use hpcagent_common::speedup::Speedup;
use hpcagent_common::words::{ends, tail};
use hpcagent_proto::v1 as pb;
use serde_json::{Value, json};

use crate::judge_link::{JudgeLink, LinkError};
use crate::search::Search;
use crate::task_view;
use crate::workspace::{Workspace, WorkspaceError};

/// The verdict file a submit leaves in the attempt directory.
pub const VERDICT_FILE: &str = "verdict.json";
/// The submit's build log, beside its verdict.
pub const BUILD_LOG_FILE: &str = "build.log";
/// The longest a file tool may take before its call is answered with an error.
const FILE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

/// One tool as a model sees it.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    pub parameters: Value,
}

/// The tools of an attempt (`web_search` only when a provider is configured).
pub fn specs(search: bool) -> Vec<ToolSpec> {
    let path = json!({"type": "string", "description": "file in the workspace (default: the solution file)"});
    let flags = json!({"type": "array", "items": {"type": "string"}, "description": "extra compiler flags from the task's allow-list"});
    let mut tools = vec![
        spec("task", "The task: the exact prototype, sizes, tolerances and allowed flags.", json!({})),
        spec(
            "list_files",
            "List the files in the workspace (or under a directory of it).",
            json!({"path": {"type": "string"}}),
        ),
        spec("read_file", "Read a file of the workspace.", json!({"path": {"type": "string"}}))
            .requiring(&["path"]),
        spec(
            "write_file",
            "Write (create or replace) a file of the workspace.",
            json!({"path": {"type": "string"}, "content": {"type": "string"}}),
        )
        .requiring(&["path", "content"]),
        spec(
            "score",
            "Build, check and time a file on the judge against the public case. Use it often.",
            json!({"path": path, "flags": flags}),
        ),
        spec(
            "submit",
            "The final grade (public and held-out cases). Once only: it ends the attempt.",
            json!({"path": path, "flags": flags}),
        ),
        spec(
            "profile",
            "Run a file under a profiler on the judge (tool: linuxperf, papi, nsys, ncu, rocprofv3).",
            json!({"path": path, "flags": flags, "tool": {"type": "string"},
                   "events": {"type": "array", "items": {"type": "string"}}}),
        )
        .requiring(&["tool"]),
        spec(
            "finish",
            "Stop working; the solution file is submitted for you if you did not submit.",
            json!({"summary": {"type": "string"}}),
        ),
    ];
    if search {
        tools.push(
            spec(
                "web_search",
                "Search the web.",
                json!({"query": {"type": "string"}}),
            )
            .requiring(&["query"]),
        );
    }
    tools
}

fn spec(name: &'static str, description: &'static str, properties: Value) -> ToolSpec {
    ToolSpec {
        name,
        description,
        parameters: json!({"type": "object", "properties": properties}),
    }
}

impl ToolSpec {
    fn requiring(mut self, fields: &[&str]) -> ToolSpec {
        self.parameters["required"] = json!(fields);
        self
    }

    /// The OpenAI `tools` entry.
    pub fn openai(&self) -> Value {
        json!({"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}})
    }
}

/// What a tool call answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolReply {
    pub text: String,
    pub is_error: bool,
    /// The call ended the attempt: why (`submitted`, `finished`, or the lease is lost).
    pub ends: Option<String>,
}

impl ToolReply {
    fn ok(text: impl Into<String>) -> ToolReply {
        ToolReply {
            text: text.into(),
            is_error: false,
            ends: None,
        }
    }

    fn error(text: impl Into<String>) -> ToolReply {
        ToolReply {
            text: text.into(),
            is_error: true,
            ends: None,
        }
    }

    fn ending(mut self, why: &str) -> ToolReply {
        self.ends = Some(why.to_string());
        self
    }
}

/// The tools of one attempt.
pub struct Toolbox {
    lease: pb::Lease,
    judge: JudgeLink,
    workspace: Workspace,
    attempt_dir: PathBuf,
    instance: String,
    search: Option<Search>,
    task: Option<pb::TaskInfo>,
    /// The status of this attempt's submit, once there was one.
    submitted: Option<String>,
    /// Raised with `submitted`, for a supervisor that must not wait on the
    /// toolbox's lock to learn it.
    submit_seen: Arc<AtomicBool>,
    /// The longest a grade of this attempt took.
    slowest_grade: std::time::Duration,
}

impl Toolbox {
    pub fn new(
        lease: pb::Lease,
        judge: JudgeLink,
        workspace: Workspace,
        instance: &str,
        search: Option<Search>,
    ) -> Toolbox {
        Toolbox {
            attempt_dir: PathBuf::from(&lease.attempt_dir),
            lease,
            judge,
            workspace,
            instance: instance.to_string(),
            search,
            task: None,
            submitted: None,
            submit_seen: Arc::default(),
            slowest_grade: std::time::Duration::ZERO,
        }
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        specs(self.search.is_some())
    }

    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    pub fn solution_file(&self) -> String {
        task_view::solution_file(&self.lease.language)
    }

    /// The longest a grade of this attempt took so far.
    pub fn slowest_grade(&self) -> std::time::Duration {
        self.slowest_grade
    }

    /// What is left of the lease's wall-clock budget.
    pub fn budget_left(&self) -> std::time::Duration {
        self.judge.budget_left()
    }

    /// The status of this attempt's submit, if it submitted.
    pub fn submitted(&self) -> Option<&str> {
        self.submitted.as_deref()
    }

    /// A flag raised when the attempt submits.
    pub fn submit_seen(&self) -> Arc<AtomicBool> {
        self.submit_seen.clone()
    }

    /// The task, asked of the judge once.
    pub async fn task(&mut self) -> Result<pb::TaskInfo, LinkError> {
        if let Some(task) = &self.task {
            return Ok(task.clone());
        }
        let request = pb::TaskRequest {
            task_id: self.lease.kernel.clone(),
            language: self.lease.language.clone(),
            precision: self.lease.precision.clone(),
            preset: self.lease.preset.clone(),
        };
        let task = self
            .judge
            .call(|mut j| {
                let request = request.clone();
                async move { j.task(request).await }
            })
            .await?;
        self.task = Some(task.clone());
        Ok(task)
    }

    /// Runs one call; `arguments` is the model's JSON text.
    pub async fn call(&mut self, name: &str, arguments: &str) -> ToolReply {
        // The submit ended the attempt: a write now would land in a workspace
        // already graded, a score would be charged to a settled lease.
        if let Some(status) = &self.submitted {
            return ToolReply::error(format!(
                "this attempt has submitted ({status}) and is over: no more tool calls; \
                 end the session"
            ));
        }
        let args = match parse_arguments(arguments) {
            Ok(args) => args,
            Err(why) => return ToolReply::error(why),
        };
        let text = |key: &str| args.get(key).and_then(Value::as_str).map(str::to_string);
        match name {
            "task" => match self.task().await {
                Ok(task) => ToolReply::ok(task_view::statement(&task, &self.solution_file())),
                Err(e) => self.link_failed(e),
            },
            "list_files" => {
                let path = text("path").unwrap_or_default();
                match self.in_workspace(move |ws| ws.list(&path)).await {
                    Ok((files, cut)) => ToolReply::ok(listing(&files, cut)),
                    Err(why) => ToolReply::error(why),
                }
            }
            "read_file" => match required(&args, "path") {
                Ok(path) => match self.in_workspace(move |ws| ws.read(&path)).await {
                    Ok(content) => ToolReply::ok(content),
                    Err(why) => ToolReply::error(why),
                },
                Err(why) => ToolReply::error(why),
            },
            "write_file" => {
                let written = match (required(&args, "path"), required(&args, "content")) {
                    (Ok(path), Ok(content)) => {
                        let shown = path.clone();
                        self.in_workspace(move |ws| ws.write(&path, &content))
                            .await
                            .map(|n| (shown, n))
                    }
                    (Err(why), _) | (_, Err(why)) => Err(why),
                };
                match written {
                    Ok((path, n)) => ToolReply::ok(format!("wrote {n} bytes to {path}")),
                    Err(why) => ToolReply::error(why),
                }
            }
            "score" | "submit" | "profile" => {
                let started = std::time::Instant::now();
                let reply = self.grade(name, &args, None).await;
                self.slowest_grade = self.slowest_grade.max(started.elapsed());
                reply
            }
            "web_search" => self.web_search(&args).await,
            "finish" => ToolReply::ok("finished").ending("finished"),
            other => ToolReply::error(format!(
                "there is no tool {other:?}; the tools are: {}",
                self.specs()
                    .iter()
                    .map(|s| s.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    /// Submits the solution file as the agent left it, when the attempt
    /// has not submitted yet (the agent, which ended as `ended`, had its
    /// chance), and says how that went after `message`. The verdict settles
    /// the task as graded on the agent's behalf, never as its result.
    pub async fn submit_what_is_left(&mut self, message: String, ended: AttemptOutcome) -> String {
        if self.submitted.is_some() {
            return message;
        }
        let reply = self
            .grade("submit", &json!({}), Some((ended, message.clone())))
            .await;
        if reply.ends.as_deref() == Some("submitted") {
            let status = self.submitted().unwrap_or("unknown");
            format!("{message}; the worker submitted the solution file for it: {status}")
        } else {
            format!(
                "{message}; the worker's submit for it failed: {}",
                reply.text
            )
        }
    }

    /// A grade of the file `args` name (the solution file by default);
    /// `behalf`: a Submit the worker makes for an agent that ended so, and
    /// said this of how.
    async fn grade(
        &mut self,
        kind: &str,
        args: &Value,
        behalf: Option<(AttemptOutcome, String)>,
    ) -> ToolReply {
        let path = args
            .get("path")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| self.solution_file());
        let source = match self.in_workspace(move |ws| ws.read_source(&path)).await {
            Ok(source) => source,
            Err(why) => return ToolReply::error(why),
        };
        let flags = match string_list(args, "flags") {
            Ok(flags) => flags,
            Err(why) => return ToolReply::error(why),
        };
        let on_behalf = behalf.map(|(ended, message)| pb::OnBehalf {
            agent_ended: ended.to_wire(),
            starter: self.is_starter(&source),
            message,
        });
        let request = crate::judge_link::grade_request(
            &self.lease,
            &self.instance,
            source.clone(),
            flags,
            on_behalf,
        );
        match kind {
            "submit" => {
                let verdict = self
                    .judge
                    .call(|mut j| {
                        let request = request.clone();
                        async move { j.submit(request).await }
                    })
                    .await;
                match verdict {
                    Ok(v) => self.submitted_with(&source, &v),
                    Err(e) => self.link_failed(e),
                }
            }
            "profile" => {
                let request = pb::ProfileRequest {
                    submission: Some(request),
                    tool: args["tool"].as_str().unwrap_or_default().to_string(),
                    events: string_list(args, "events").unwrap_or_default(),
                };
                let report = self
                    .judge
                    .call(|mut j| {
                        let request = request.clone();
                        async move { j.profile(request).await }
                    })
                    .await;
                match report {
                    Ok(r) => ToolReply::ok(profile_summary(&r)),
                    Err(e) => self.link_failed(e),
                }
            }
            _ => {
                let verdict = self
                    .judge
                    .call(|mut j| {
                        let request = request.clone();
                        async move { j.score(request).await }
                    })
                    .await;
                match verdict {
                    Ok(v) => ToolReply::ok(verdict_summary(&v, true).to_string()),
                    Err(e) => self.link_failed(e),
                }
            }
        }
    }

    /// Keeps a submit's evidence and ends the attempt.
    fn submitted_with(&mut self, source: &str, verdict: &pb::Verdict) -> ToolReply {
        let summary = verdict_summary(verdict, false);
        let status = summary["status"].as_str().unwrap_or("unknown").to_string();
        let extension = self
            .solution_file()
            .rsplit('.')
            .next()
            .unwrap_or("c")
            .to_string();
        let _ = std::fs::write(
            self.attempt_dir.join(format!("submission.{extension}")),
            source,
        );
        keep_verdict(&self.attempt_dir, verdict);
        if status == "harness_error" {
            // The judge failed, not the code: the attempt may submit again.
            return ToolReply::error(summary.to_string());
        }
        self.submitted = Some(status);
        self.submit_seen.store(true, Ordering::Release);
        ToolReply::ok(summary.to_string()).ending("submitted")
    }

    /// Runs a file operation off the async runtime, with a deadline: what
    /// the agent left in its workspace must never stall the role, whose
    /// heartbeats and other attempts share this runtime.
    async fn in_workspace<T: Send + 'static>(
        &self,
        operation: impl FnOnce(&Workspace) -> Result<T, WorkspaceError> + Send + 'static,
    ) -> Result<T, String> {
        let workspace = self.workspace.clone();
        let blocking = tokio::task::spawn_blocking(move || operation(&workspace));
        match tokio::time::timeout(FILE_DEADLINE, blocking).await {
            Ok(Ok(done)) => done.map_err(|e| e.to_string()),
            Ok(Err(panicked)) => Err(format!("the file operation failed: {panicked}")),
            Err(_) => Err(format!(
                "the file operation took over {} s and was abandoned",
                FILE_DEADLINE.as_secs()
            )),
        }
    }

    fn link_failed(&self, e: LinkError) -> ToolReply {
        match e {
            LinkError::Refused(status) => ToolReply::error(status.message().to_string()),
            // No judge, no budget or no lease: nothing more can be graded.
            other => ToolReply::error(other.to_string()).ending(&other.to_string()),
        }
    }

    async fn web_search(&self, args: &Value) -> ToolReply {
        let Some(search) = &self.search else {
            return ToolReply::error("web search is not configured for this campaign");
        };
        let query = match required(args, "query") {
            Ok(q) => q,
            Err(why) => return ToolReply::error(why),
        };
        match search.query(&query).await {
            Ok(hits) => ToolReply::ok(serde_json::to_string(&hits).unwrap_or_default()),
            Err(why) => ToolReply::error(why),
        }
    }

    pub fn attempt_dir(&self) -> &Path {
        &self.attempt_dir
    }

    /// Whether `source` is the starter the workspace was given.
    fn is_starter(&self, source: &str) -> bool {
        self.task
            .as_ref()
            .is_some_and(|task| task_view::solution(task, &task.precision) == source)
    }
}

/// Keeps a settled verdict in its attempt directory: `verdict.json` (as
/// [`verdict_summary`] words it, the one schema of that file) and its
/// build log.
pub fn keep_verdict(dir: &Path, verdict: &pb::Verdict) {
    let summary = verdict_summary(verdict, false);
    let _ = std::fs::write(dir.join(VERDICT_FILE), summary.to_string());
    keep_build_log(dir, verdict);
}

/// Keeps a submit's build log beside its verdict ([`BUILD_LOG_FILE`]), where
/// a verdict that says "see the build log" sends the operator.
pub fn keep_build_log(attempt_dir: &Path, verdict: &pb::Verdict) {
    if verdict.build_log.trim().is_empty() {
        return;
    }
    let path = attempt_dir.join(BUILD_LOG_FILE);
    if let Err(e) = std::fs::write(&path, &verdict.build_log) {
        tracing::warn!("{}: {e}", path.display());
    }
}

/// The model's arguments as an object ("" and `null` are `{}`).
fn parse_arguments(arguments: &str) -> Result<Value, String> {
    let trimmed = arguments.trim();
    if trimmed.is_empty() || trimmed == "null" {
        return Ok(json!({}));
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(other) => Err(format!(
            "the arguments must be a JSON object, not {other}; call the tool again"
        )),
        Err(e) => {
            let excerpt: String = trimmed.chars().take(200).collect();
            Err(format!(
                "the arguments are not valid JSON ({e}): {excerpt}; call the tool again with a JSON object"
            ))
        }
    }
}

fn required(args: &Value, key: &str) -> Result<String, String> {
    args.get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| format!("the argument {key:?} (a string) is missing"))
}

fn string_list(args: &Value, key: &str) -> Result<Vec<String>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("{key:?} must be a list of strings"))
            })
            .collect(),
        Some(_) => Err(format!("{key:?} must be a list of strings")),
    }
}

/// A verdict as a model reads it; `logs`: include what the build and run printed.
pub fn verdict_summary(v: &pb::Verdict, logs: bool) -> Value {
    let mut out = json!({"status": pb::Status::word_of(v.status), "message": v.message});
    if let Some(speedup) = Speedup::of_verdict(v) {
        out["speedup"] = json!(speedup.value);
        if let Some((low, high)) = speedup.interval {
            out["speedup_low"] = json!(low);
            out["speedup_high"] = json!(high);
        }
        // Said outright: a model reading 1.02 would take it for a gain.
        out["no_change"] = json!(speedup.no_change());
    }
    if let Some(t) = &v.timing {
        out["time_ms"] = json!(t.median_ns / 1e6);
    }
    if let Some(t) = &v.baseline {
        out["baseline_ms"] = json!(t.median_ns / 1e6);
    }
    if v.max_rel_error > 0.0 || v.max_abs_error > 0.0 {
        out["max_rel_error"] = json!(v.max_rel_error);
        out["max_abs_error"] = json!(v.max_abs_error);
    }
    if v.hidden_total > 0 {
        out["held_out"] = json!(format!("{}/{} passed", v.hidden_passed, v.hidden_total));
    }
    if !v.signal.is_empty() {
        out["signal"] = json!(v.signal);
    }
    if logs {
        // A compiler's first error is the one to fix; a crash's last words
        // are the ones that say why.
        if !v.build_log.trim().is_empty() {
            out["build_log"] = json!(ends(&v.build_log, 4000));
        }
        if !v.stderr_tail.trim().is_empty() {
            out["stderr"] = json!(tail(&v.stderr_tail, 4000));
        }
    }
    out
}

fn profile_summary(r: &pb::ProfileReport) -> String {
    let mut out =
        json!({"tool": r.tool, "summary": tail(&r.summary, 6000), "counters": r.counters});
    if let Some(run) = &r.run {
        out["run"] = verdict_summary(run, true);
    }
    if !r.unavailable.is_empty() {
        out["unavailable"] = json!(r.unavailable);
    }
    out.to_string()
}

/// A `list_files` reply: one file per line with its size.
fn listing(files: &[(String, u64)], cut: bool) -> String {
    let mut lines: Vec<String> = files
        .iter()
        .map(|(f, size)| format!("{f} ({size} bytes)"))
        .collect();
    if cut {
        lines.push(format!(
            "[cut: only the first {} files are listed]",
            files.len()
        ));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_objects_or_an_error_the_model_can_act_on() {
        assert_eq!(parse_arguments("").unwrap(), json!({}));
        assert_eq!(parse_arguments(r#"{"path":"a.c"}"#).unwrap()["path"], "a.c");
        let cut = parse_arguments(r#"{"path": "solution.c", "content": "int ma"#).unwrap_err();
        assert!(
            cut.contains("not valid JSON") && cut.contains("call the tool again"),
            "{cut}"
        );
        assert!(parse_arguments("[1]").unwrap_err().contains("JSON object"));
    }

    #[test]
    fn every_tool_has_an_object_schema_and_search_only_when_configured() {
        let names: Vec<&str> = specs(false).iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            [
                "task",
                "list_files",
                "read_file",
                "write_file",
                "score",
                "submit",
                "profile",
                "finish"
            ]
        );
        assert!(specs(true).iter().any(|s| s.name == "web_search"));
        for s in specs(true) {
            assert_eq!(s.parameters["type"], "object", "{}", s.name);
            assert_eq!(s.openai()["function"]["name"], s.name);
        }
    }

    #[test]
    fn verdicts_read_as_status_speedup_and_logs() {
        let v = pb::Verdict {
            status: pb::Status::BuildError as i32,
            message: "does not build".into(),
            build_log: "error: expected ';'".into(),
            ..Default::default()
        };
        let s = verdict_summary(&v, true);
        assert_eq!(s["status"], "build_error");
        assert_eq!(s["build_log"], "error: expected ';'");
        assert!(verdict_summary(&v, false).get("build_log").is_none());
        assert!(s.get("speedup").is_none() && s.get("no_change").is_none());
        assert_eq!(tail("abcdef", 3), "…def");
    }

    #[test]
    fn a_speedup_comes_with_its_interval_and_whether_it_is_a_change() {
        let v = pb::Verdict {
            status: pb::Status::Ok as i32,
            speedup: 1.02,
            speedup_low: 0.99,
            speedup_high: 1.04,
            ..Default::default()
        };
        let s = verdict_summary(&v, false);
        assert_eq!(s["speedup"], 1.02);
        assert_eq!(s["speedup_low"], 0.99);
        assert_eq!(s["speedup_high"], 1.04);
        assert_eq!(s["no_change"], true);
        let faster = pb::Verdict {
            speedup_low: 1.01,
            ..v
        };
        assert_eq!(verdict_summary(&faster, false)["no_change"], false);
    }
}
