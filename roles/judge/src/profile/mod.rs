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
//! that can. A tool that cannot work here (missing, no counters, or it did
//! not run the submission) gives a report that says so (`unavailable`),
//! not an error.
//!
//! A profiled run is not a timed run, and has a sandbox of its own: the
//! profiler, the supervisor and the runner share a network namespace whose
//! only interface is loopback (nsys and ncu talk to their library in the
//! run over sockets), the run may open Internet sockets there (still no
//! Unix socket), and it may write the profiler's output directory
//! (rocprofv3's library writes from inside the run).

use std::collections::BTreeMap;
use std::path::Path;

use hpcagent_proto::v1 as pb;

mod summaries;

use crate::profilers::Tool;
use summaries::{csv_text, nsys_summary, perf_report, perf_stat_summary, rocprof_summary};

use crate::cases;
use crate::grade::{
    Checked, Expected, Extras, Mode, Planner, Read, finish, judge_outcome, prepare, run,
};
use crate::judge::{Judge, JudgeError, Submission};
use crate::verdict::Status;
use hpcagent_runner::protocol::Event;

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
        if let Err(why) = self.profilers.check(tool) {
            return Ok(unavailable(tool, why));
        }
        let held = self.slots.acquire().await;
        let (prepared, mut verdict) = match prepare(self, &submission, &[], &held.slot).await? {
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
                .map_err(|e| JudgeError::Internal(e.to_string()))?;
            if tool != Tool::None {
                planner
                    .profile(&data.0, PROFILE_SECONDS, PROFILE_REPS, 200)
                    .map_err(|e| JudgeError::Internal(e.to_string()))?;
            }
            Ok((planner, public))
        };
        let (planner, public) = plan()?;
        let read = Read {
            public: Checked {
                step: public,
                data: &data,
            },
            held_out: Vec::new(),
            timed: Vec::new(),
            repeats: &[],
            stop: None,
        };
        let tolerance = prepared.kernel.tolerance(prepared.precision);
        let profiled = (tool != Tool::None).then(|| out.path().to_path_buf());
        let extras = Extras {
            expected: Some(Expected::of(&read, tolerance)),
            wrapper: wrapper(tool, out.path()),
            papi_events,
            profile_output: profiled.clone(),
        };
        let (outcome, _sandbox) = run(self, &prepared, None, planner, &held.slot, extras)
            .await
            .map_err(|e| JudgeError::Internal(e.to_string()))?;
        let papi_failed = outcome.events.iter().find_map(|e| match e {
            Event::Failed { stage, message, .. } if stage == "papi" => Some(message),
            _ => None,
        });
        if let Some(message) = papi_failed {
            return Ok(unavailable(tool, format!("papi: {message}")));
        }
        if let (true, Some(why)) = (
            tool != Tool::None && outcome.events.is_empty(),
            &outcome.supervisor_error,
        ) {
            let said = outcome.stderr_tail.trim();
            return Ok(unavailable(
                tool,
                format!("{tool} did not run the submission here ({why}); it said: {said}"),
            ));
        }
        let reps = outcome
            .events
            .iter()
            .filter(|e| matches!(e, Event::Call { step, .. } if *step != public))
            .count();
        judge_outcome(&mut verdict, &read, &outcome, Mode::Score);
        let (summary, counters) = match tool {
            Tool::None => (format!("ran once: {}", verdict.message), BTreeMap::new()),
            Tool::LinuxPerf => {
                let (stat, counters) = perf_stat_summary(&out.path().join("perf-stat.csv"));
                // The sandbox stays until perf report has read the submission's symbols from it.
                let extras = Extras {
                    wrapper: perf_record_wrapper(out.path()),
                    profile_output: profiled.clone(),
                    ..Extras::default()
                };
                let (record, _sandbox) = run(self, &prepared, None, plan()?.0, &held.slot, extras)
                    .await
                    .map_err(|e| JudgeError::Internal(e.to_string()))?;
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

/// The answer when `tool` cannot profile here: why, and nothing ran.
fn unavailable(tool: Tool, why: String) -> pb::ProfileReport {
    pb::ProfileReport {
        tool: tool.to_string(),
        summary: format!("{tool} is unavailable here: {why}"),
        unavailable: why,
        ..Default::default()
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
        unavailable: String::new(),
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
