//! `Profile`: the submission's public case under a tool, as the judge runs
//! it. Never recorded.
//!
//! | tool | languages | what it returns |
//! |---|---|---|
//! | none | all | one call; the program's stdout/stderr tails |
//! | linuxperf | c, cpp, fortran | `perf stat` counters and `perf record` hot symbols |
//! | papi | c, cpp, fortran | PAPI counters around each timed call |
//! | nsys | cuda | kernel time summary (`nsys stats cuda_gpu_kern_sum`) |
//! | ncu | cuda | duration and DRAM bytes per kernel (caches flushed) |
//! | rocprofv3 | hip | kernel trace summary, parsed by column name |
//!
//! A tool that cannot serve the language is `InvalidArgument` naming the one
//! that can; a tool missing here is `FailedPrecondition` naming what is missing.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::process::Command;
use std::str::FromStr;

use hpcagent_proto::v1 as pb;

use crate::cases;
use crate::data::tail;
use crate::grade::{Checked, Extras, Mode, Planner, Read, finish, judge_outcome};
use crate::judge::{Judge, JudgeError, Submission};
use crate::language::Language;
use crate::runner::protocol::Event;
use crate::verdict::Status;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    None,
    LinuxPerf,
    Papi,
    Nsys,
    Ncu,
    Rocprofv3,
}

impl Tool {
    pub const ALL: [Tool; 6] = [
        Tool::None,
        Tool::LinuxPerf,
        Tool::Papi,
        Tool::Nsys,
        Tool::Ncu,
        Tool::Rocprofv3,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Tool::None => "none",
            Tool::LinuxPerf => "linuxperf",
            Tool::Papi => "papi",
            Tool::Nsys => "nsys",
            Tool::Ncu => "ncu",
            Tool::Rocprofv3 => "rocprofv3",
        }
    }

    fn serves(self, language: Language) -> bool {
        match self {
            Tool::None => true,
            Tool::LinuxPerf | Tool::Papi => !language.is_gpu(),
            Tool::Nsys | Tool::Ncu => language == Language::Cuda,
            Tool::Rocprofv3 => language == Language::Hip,
        }
    }

    /// The tools that profile `language`, for the InvalidArgument message.
    fn for_language(language: Language) -> Vec<&'static str> {
        Tool::ALL
            .into_iter()
            .filter(|t| *t != Tool::None && t.serves(language))
            .map(Tool::as_str)
            .collect()
    }
}

impl fmt::Display for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Tool {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim().to_ascii_lowercase();
        let s = if s.is_empty() { "none".to_string() } else { s };
        Tool::ALL
            .into_iter()
            .find(|t| t.as_str() == s || (s == "perf" && *t == Tool::LinuxPerf))
            .ok_or_else(|| {
                format!("unknown tool {s:?} (none, linuxperf, papi, nsys, ncu, rocprofv3)")
            })
    }
}

/// Which tools this node has, or why each is missing.
#[derive(Debug, Clone, Default)]
pub struct Profilers {
    missing: BTreeMap<&'static str, String>,
}

impl Profilers {
    pub fn detect() -> Profilers {
        let mut missing = BTreeMap::new();
        if let Err(why) = perf_usable() {
            missing.insert("linuxperf", why);
        }
        // SAFETY: loading the PAPI library only to see that it exists.
        let papi = [
            "libpapi.so",
            "libpapi.so.7.0",
            "libpapi.so.7",
            "libpapi.so.6.0",
        ]
        .iter()
        .any(|n| unsafe { libloading::Library::new(*n) }.is_ok());
        if !papi {
            missing.insert("papi", "PAPI (libpapi.so) is not installed".to_string());
        }
        for (tool, command) in [("nsys", "nsys"), ("ncu", "ncu"), ("rocprofv3", "rocprofv3")] {
            if !on_path(command) {
                missing.insert(tool, format!("{command} is not on PATH"));
            }
        }
        Profilers { missing }
    }

    pub fn available(&self) -> Vec<String> {
        Tool::ALL
            .into_iter()
            .filter(|t| !self.missing.contains_key(t.as_str()))
            .map(|t| t.as_str().to_string())
            .collect()
    }

    pub fn missing(&self) -> Vec<String> {
        self.missing
            .iter()
            .map(|(tool, why)| format!("{tool}: {why}"))
            .collect()
    }

    fn check(&self, tool: Tool) -> Result<(), JudgeError> {
        match self.missing.get(tool.as_str()) {
            Some(why) => Err(JudgeError::FailedPrecondition(format!(
                "{tool} cannot run on this node: {why}"
            ))),
            None => Ok(()),
        }
    }
}

fn on_path(command: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(command).is_file()))
}

/// perf exists and `perf_event_paranoid` lets this user count its own processes.
fn perf_usable() -> Result<(), String> {
    let version = Command::new("perf").arg("--version").output();
    if !version.is_ok_and(|o| o.status.success()) {
        return Err("perf is not installed (Debian: linux-perf)".into());
    }
    let paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(2);
    if paranoid > 2 && !nix::unistd::geteuid().is_root() {
        return Err(format!(
            "perf_event_paranoid is {paranoid}: unprivileged users cannot count events (ask for 2 or lower)"
        ));
    }
    Ok(())
}

/// Default PAPI events when the request names none.
const PAPI_DEFAULT: &[&str] = &["PAPI_TOT_INS", "PAPI_TOT_CYC", "PAPI_L1_DCM", "PAPI_L2_DCM"];

/// Fewest calls under a profiler.
const PROFILE_REPS: u32 = 5;
/// Time a profile's calls take at least (up to 200 calls).
const PROFILE_SECONDS: f64 = 0.3;

impl Judge {
    pub async fn profile(
        &self,
        submission: Submission,
        tool: Tool,
        events: Vec<String>,
    ) -> Result<pb::ProfileReport, JudgeError> {
        let start = std::time::Instant::now();
        let language = submission.language;
        if !tool.serves(language) {
            let others = Tool::for_language(language);
            return Err(JudgeError::InvalidArgument(format!(
                "{tool} cannot profile {language} code; use {} (or none)",
                others.join(" or ")
            )));
        }
        self.profilers.check(tool)?;
        let held = self.slots.acquire().await;
        let (prepared, mut verdict) = match self.prepare(&submission, &[], &held.slot).await? {
            Ok(p) => p,
            Err(verdict) => {
                return Ok(report(
                    tool,
                    finish(verdict, start),
                    String::new(),
                    BTreeMap::new(),
                ));
            }
        };
        verdict.status = Status::Ok;
        let case = cases::public(
            prepared.kernel,
            prepared.precision,
            prepared.preset,
            self.config.public_seed,
        );
        let data = self
            .case_data(prepared.kernel, &case)
            .await
            .map_err(|e| JudgeError::Internal(e.to_string()))?;
        let out = tempfile::tempdir().map_err(|e| JudgeError::Internal(e.to_string()))?;
        let papi_events = if tool == Tool::Papi {
            if events.is_empty() {
                PAPI_DEFAULT.iter().map(|s| s.to_string()).collect()
            } else {
                events
            }
        } else {
            Vec::new()
        };
        // One checked call (it warms up too); then, under a tool, calls for
        // long enough that a sampling profiler sees the kernel.
        let plan = || -> Result<(Planner<'_>, usize), JudgeError> {
            let mut planner = Planner::new(prepared.kernel, prepared.precision);
            let public = planner
                .check("public", &data.0, true, false)
                .map_err(JudgeError::Internal)?;
            if tool != Tool::None {
                planner
                    .profile(&data.0, PROFILE_SECONDS, PROFILE_REPS, 200)
                    .map_err(JudgeError::Internal)?;
            }
            Ok((planner, public))
        };
        let (planner, public) = plan()?;
        let extras = Extras {
            wrapper: wrapper(tool, out.path()),
            papi_events,
        };
        let (outcome, _sandbox) = self
            .run(&prepared, None, planner, &held.slot, extras)
            .await
            .map_err(JudgeError::Internal)?;
        let papi_failed = outcome.events.iter().find_map(|e| match e {
            Event::Failed { stage, message, .. } if stage == "papi" => Some(message),
            _ => None,
        });
        if let Some(message) = papi_failed {
            return Err(JudgeError::FailedPrecondition(format!("papi: {message}")));
        }
        let reps = outcome
            .events
            .iter()
            .filter(|e| matches!(e, Event::Call { step, .. } if *step != public))
            .count();
        let read = Read {
            public: Checked {
                step: public,
                data: &data,
            },
            held_out: Vec::new(),
            repeats: &[],
        };
        judge_outcome(
            &mut verdict,
            prepared.kernel,
            prepared.precision,
            &read,
            &outcome,
            Mode::Score,
        );
        let (summary, counters) = match tool {
            Tool::None => (format!("ran once: {}", verdict.message), BTreeMap::new()),
            Tool::LinuxPerf => {
                let (stat, counters) = perf_stat_summary(&out.path().join("perf-stat.csv"));
                // The sandbox stays until perf report has read the submission's symbols from it.
                let extras = Extras {
                    wrapper: perf_record_wrapper(out.path()),
                    papi_events: Vec::new(),
                };
                let (record, _sandbox) = self
                    .run(&prepared, None, plan()?.0, &held.slot, extras)
                    .await
                    .map_err(JudgeError::Internal)?;
                let hot = perf_report(&out.path().join("perf.data"), record.done());
                (
                    format!(
                        "perf stat over {reps} calls (and the supervisor and runner around them):\n{stat}\n{hot}"
                    ),
                    counters,
                )
            }
            Tool::Papi => {
                let counters: BTreeMap<String, f64> = outcome
                    .events
                    .iter()
                    .find_map(|e| match e {
                        Event::Counters { values, .. } => Some(values.clone()),
                        _ => None,
                    })
                    .unwrap_or_default();
                let lines: Vec<String> = counters
                    .iter()
                    .map(|(k, v)| format!("{k}: {v:.0} per call"))
                    .collect();
                (
                    format!(
                        "PAPI counters per call, over {} calls:\n{}",
                        reps + 1,
                        lines.join("\n")
                    ),
                    counters,
                )
            }
            Tool::Nsys => (nsys_summary(out.path()), BTreeMap::new()),
            Tool::Ncu => (csv_text(&out.path().join("ncu.csv")), BTreeMap::new()),
            Tool::Rocprofv3 => rocprof_summary(out.path()),
        };
        let mut report = report(tool, finish(verdict, start), summary, counters);
        report.stdout_tail = outcome.stdout_tail;
        report.stderr_tail = outcome.stderr_tail;
        Ok(report)
    }
}

fn report(
    tool: Tool,
    verdict: crate::verdict::Verdict,
    summary: String,
    counters: BTreeMap<String, f64>,
) -> pb::ProfileReport {
    pb::ProfileReport {
        tool: tool.to_string(),
        stdout_tail: verdict.stdout_tail.clone(),
        stderr_tail: verdict.stderr_tail.clone(),
        run: Some((&verdict).into()),
        summary,
        counters: counters.into_iter().collect(),
    }
}

/// The command the runner runs under for `tool`; outputs go to `out`.
fn wrapper(tool: Tool, out: &Path) -> Vec<String> {
    let out = |name: &str| out.join(name).display().to_string();
    let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match tool {
        Tool::None | Tool::Papi => Vec::new(),
        Tool::LinuxPerf => {
            let mut w = words(&["perf", "stat", "-x", ",", "-o"]);
            w.push(out("perf-stat.csv"));
            w.extend(words(&[
                "-e",
                "task-clock,cycles,instructions,cache-references,cache-misses,branches,branch-misses,context-switches,page-faults",
                "--",
            ]));
            w
        }
        Tool::Nsys => {
            let mut w = words(&[
                "nsys",
                "profile",
                "--force-overwrite",
                "true",
                "-t",
                "cuda,nvtx",
                "-o",
            ]);
            w.push(out("report"));
            w
        }
        // ncu's default flushes caches before each kernel (cold numbers); say so in the skill page.
        Tool::Ncu => {
            let mut w = words(&[
                "ncu",
                "--csv",
                "--cache-control",
                "all",
                "--clock-control",
                "base",
                "--log-file",
            ]);
            w.push(out("ncu.csv"));
            w.extend(words(&[
                "--metrics",
                "gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum",
            ]));
            w
        }
        Tool::Rocprofv3 => {
            let mut w = words(&[
                "rocprofv3",
                "--kernel-trace",
                "--output-format",
                "csv",
                "-d",
            ]);
            w.push(out("rocprof"));
            w.extend(words(&["-o", "run", "--"]));
            w
        }
    }
}

fn perf_record_wrapper(out: &Path) -> Vec<String> {
    vec![
        "perf".into(),
        "record".into(),
        "-g".into(),
        "-q".into(),
        // Otherwise perf copies every binary it sampled (the 70+ MB runner
        // too) into $HOME/.debug, which is the sandbox: across filesystems
        // that copy hits the run's file-size limit and perf dies before it
        // finishes perf.data. Reports read the binaries where they lie.
        "--no-buildid-cache".into(),
        "-o".into(),
        out.join("perf.data").display().to_string(),
        "--".into(),
    ]
}

/// `perf stat -x,` lines: value,unit,event,...; unsupported events say so.
fn perf_stat_summary(path: &Path) -> (String, BTreeMap<String, f64>) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut counters = BTreeMap::new();
    let mut lines = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let fields: Vec<&str> = line.split(',').collect();
        let (Some(value), Some(event)) = (fields.first(), fields.get(2)) else {
            continue;
        };
        match value.trim().parse::<f64>() {
            Ok(v) => {
                counters.insert(event.to_string(), v);
                lines.push(format!("{event}: {v}"));
            }
            Err(_) => lines.push(format!(
                "{event}: {}",
                value.trim_matches(|c| c == '<' || c == '>')
            )),
        }
    }
    if lines.is_empty() {
        lines.push("perf stat produced no counters".into());
    }
    (lines.join("\n"), counters)
}

/// Where a `perf record` profile's samples fell: by shared object, then the
/// hottest symbols inside the submission.
fn perf_report(data: &Path, recorded: bool) -> String {
    if !recorded || !data.is_file() {
        return "perf record did not complete".into();
    }
    let by_dso = perf_report_lines(data, &["--sort", "dso"]);
    let in_submission = perf_report_lines(data, &["--sort", "symbol", "--dsos", "submission.so"]);
    format!(
        "samples by shared object (perf record; the runner's own work is in hpcagent):\n{by_dso}\n\
         hottest symbols of the submission:\n{in_submission}"
    )
}

fn perf_report_lines(data: &Path, sort: &[&str]) -> String {
    let out = Command::new("perf")
        .args([
            "report",
            "--stdio",
            "--no-children",
            "-g",
            "none",
            "--percent-limit",
            "1",
        ])
        .args(sort)
        .arg("-i")
        .arg(data)
        .output();
    match out {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            let lines: Vec<&str> = text
                .lines()
                .filter(|l| {
                    l.trim_start()
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_digit())
                })
                // Newer perf appends empty columns shown as "-".
                .map(|l| l.trim_end_matches(|c: char| c == '-' || c.is_whitespace()))
                .take(15)
                .collect();
            if lines.is_empty() {
                no_samples(&String::from_utf8_lossy(&o.stderr))
            } else {
                lines.join("\n")
            }
        }
        Ok(o) => format!(
            "perf report failed: {}",
            tail(&String::from_utf8_lossy(&o.stderr), 500)
        ),
        Err(e) => format!("perf report: {e}"),
    }
}

/// "(no samples)", with perf's own explanation when it gave one (a
/// truncated perf.data says so on stderr yet exits 0).
fn no_samples(stderr: &str) -> String {
    let why: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(2)
        .collect();
    if why.is_empty() {
        "(no samples)".into()
    } else {
        format!("(no samples: {})", why.join(" "))
    }
}

/// `nsys stats` on the report: per-kernel GPU time. The export must be forced
/// to be overwritten, or a rerun silently reports the old profile.
fn nsys_summary(out: &Path) -> String {
    let result = Command::new("nsys")
        .args([
            "stats",
            "--force-export=true",
            "--force-overwrite=true",
            "--report",
            "cuda_gpu_kern_sum",
            "--format",
            "csv",
            "--output",
        ])
        .arg(out.join("stats"))
        .arg(out.join("report.nsys-rep"))
        .output();
    match result {
        Ok(o) if o.status.success() => {
            let csv = std::fs::read_dir(out)
                .into_iter()
                .flatten()
                .filter_map(Result::ok)
                .map(|e| e.path())
                .find(|p| p.to_string_lossy().contains("cuda_gpu_kern_sum"));
            csv.map(|p| csv_text(&p))
                .unwrap_or_else(|| String::from_utf8_lossy(&o.stdout).into_owned())
        }
        Ok(o) => format!(
            "nsys stats failed: {}",
            tail(&String::from_utf8_lossy(&o.stderr), 1000)
        ),
        Err(e) => format!("nsys stats: {e}"),
    }
}

fn csv_text(path: &Path) -> String {
    std::fs::read_to_string(path)
        .map(|t| tail(&t, 6000))
        .unwrap_or_else(|e| format!("{}: {e}", path.display()))
}

/// Sums kernel durations from rocprofv3's kernel trace. Columns differ
/// between versions, so they are found by header name.
fn rocprof_summary(out: &Path) -> (String, BTreeMap<String, f64>) {
    let trace = walk(&out.join("rocprof"))
        .into_iter()
        .find(|p| p.to_string_lossy().ends_with("kernel_trace.csv"));
    let Some(trace) = trace else {
        return (
            "rocprofv3 wrote no kernel_trace.csv".into(),
            BTreeMap::new(),
        );
    };
    let text = std::fs::read_to_string(&trace).unwrap_or_default();
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or("")
        .split(',')
        .map(|h| h.trim_matches('"'))
        .collect();
    let col = |name: &str| header.iter().position(|h| *h == name);
    let (Some(name), Some(start), Some(end)) = (
        col("Kernel_Name"),
        col("Start_Timestamp"),
        col("End_Timestamp"),
    ) else {
        return (
            format!("unexpected kernel_trace.csv columns: {}", header.join(",")),
            BTreeMap::new(),
        );
    };
    let mut totals: BTreeMap<String, f64> = BTreeMap::new();
    for line in lines {
        let fields: Vec<&str> = line.split(',').map(|f| f.trim_matches('"')).collect();
        let (Some(k), Some(s), Some(e)) = (fields.get(name), fields.get(start), fields.get(end))
        else {
            continue;
        };
        if let (Ok(s), Ok(e)) = (s.parse::<f64>(), e.parse::<f64>()) {
            *totals.entry(k.to_string()).or_default() += e - s;
        }
    }
    let summary: Vec<String> = totals
        .iter()
        .map(|(k, ns)| format!("{k}: {ns:.0} ns total"))
        .collect();
    (
        format!("kernel time by kernel:\n{}", summary.join("\n")),
        totals,
    )
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.filter_map(Result::ok) {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}
