//! Grading: build, run beside the baseline, verify, and the verdict.
//!
//! A grade builds the submission and the kernel's baseline (both cached,
//! [`prepare`], [`baseline`]), then one run ([`run`], [`hpcagent_runner`])
//! times them in pairs on fresh inputs from outside both processes,
//! compares every pair's outputs, and calls the submission on the public
//! case (and, for `Submit`, the held-out cases and the public case twice
//! more), whose outputs are verified here against the NumPy reference
//! ([`plan`] says what runs in which order, [`outcome`] what it means). A
//! grade holds one slot throughout. This module owns that sequence, Score
//! and Submit; the steps are its submodules'.

mod baseline;
mod confirm;
mod hab;
mod outcome;
mod plan;
mod prepare;
mod retime;
mod run;

use std::time::Instant;

use baseline::build_baseline;
pub use baseline::check_baseline;
use confirm::{confirmed, plausible_speedup};
use hab::grade_hab;
pub(crate) use hab::{can_grade, case_plans, make_ahead};
pub(crate) use outcome::{Checked, Expected, Read, judge_outcome};
pub(crate) use plan::Planner;
use plan::{Marks, PlanError, Public, checks_after_public};
pub(crate) use prepare::{Prepared, prepare};
pub(crate) use run::{Extras, run};

use crate::build::Built;
use crate::cases;
use crate::data::{Case, CaseInputs, Reference};
use crate::judge::{Judge, JudgeError, Submission};
use crate::slots::Slot;
use crate::verdict::{Status, Verdict};
use hpcagent_corpus::{Kernel, Precision, Preset, Sizes};
use hpcagent_runner::timing::StopRule;

/// Score (public case only) or Submit (plus held-out cases and determinism).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Score,
    Submit,
}

impl Judge {
    pub async fn score(&self, submission: Submission) -> Result<Verdict, JudgeError> {
        self.grade(submission, Mode::Score).await
    }

    pub async fn submit(&self, submission: Submission) -> Result<Verdict, JudgeError> {
        self.grade(submission, Mode::Submit).await
    }

    /// Grades `submission`; a submit whose speedup is above its task's
    /// plausible bound is confirmed before it is credited ([`confirm`]).
    async fn grade(&self, submission: Submission, mode: Mode) -> Result<Verdict, JudgeError> {
        let verdict = self
            .grade_once(&submission, mode, self.config.secret)
            .await?;
        if mode == Mode::Score {
            return Ok(verdict);
        }
        let (kernel, _) = self.resolve(&submission.task_id, submission.precision)?;
        let bound = plausible_speedup(self, kernel, &verdict.denominator);
        // Held-out cases of a secret of the confirming grade's own.
        let again = self.grade_once(&submission, mode, rand::random());
        Ok(confirmed(self, &submission, verdict, bound, again).await)
    }

    /// One grade, its held-out cases (a submit's) drawn from `secret`.
    async fn grade_once(
        &self,
        submission: &Submission,
        mode: Mode,
        secret: u64,
    ) -> Result<Verdict, JudgeError> {
        let start = Instant::now();
        let held = self.slots.acquire().await;
        if let Some(tasks) = &self.hab {
            let verdict = grade_hab(self, tasks, submission, mode, secret, &held.slot).await?;
            return Ok(finish(verdict, start));
        }
        let (prepared, mut verdict) = match prepare(self, submission, &[], &held.slot).await? {
            Ok(prepared) => prepared,
            Err(verdict) => return Ok(finish(verdict, start)),
        };
        verdict.status = Status::Ok;
        let baseline = match build_baseline(self, prepared.kernel, prepared.precision, &held.slot)
            .await
        {
            Ok(built) => built,
            Err(message) => return Ok(finish(fail(verdict, Status::HarnessError, message), start)),
        };
        let verdict = self
            .run_and_judge(
                &prepared,
                Some(&baseline),
                mode,
                secret,
                &held.slot,
                verdict,
            )
            .await;
        Ok(finish(verdict, start))
    }

    /// The cases a grade in `mode` runs: the public case, then on a submit
    /// the held-out ones, from `secret`. Warming makes the same cases ahead.
    pub(crate) fn cases_of(
        &self,
        kernel: &Kernel,
        precision: Precision,
        preset: Preset,
        mode: Mode,
        secret: u64,
    ) -> Vec<Case> {
        let config = &self.config;
        let mut cases = vec![cases::public(kernel, precision, preset, config.public_seed)];
        if mode == Mode::Submit {
            cases.extend(cases::held_out(
                kernel,
                precision,
                preset,
                secret,
                config.hidden_cases,
            ));
        }
        cases
    }

    /// Runs the prepared submission (beside `baseline`, when given, for the
    /// timed pairs) and turns what happened into the verdict.
    async fn run_and_judge(
        &self,
        prepared: &Prepared<'_>,
        baseline: Option<&Built>,
        mode: Mode,
        secret: u64,
        slot: &Slot,
        mut verdict: Verdict,
    ) -> Verdict {
        let (kernel, precision) = (prepared.kernel, prepared.precision);
        let cases = self.cases_of(kernel, precision, prepared.preset, mode, secret);
        let mut data = Vec::new();
        for case in &cases {
            match self.case_data(kernel, case).await {
                Ok(pair) => data.push(pair),
                Err(e) => return fail(verdict, Status::HarnessError, e.to_string()),
            }
        }
        // The grade's own secret: the timed inputs (and for Submit their
        // sizes) cannot be known before the grade draws them.
        let timed = baseline.map(|_| {
            let seed: [u8; 32] = rand::random();
            let sizes = cases::timed_sizes(
                kernel,
                precision,
                prepared.preset,
                mode == Mode::Submit,
                &seed,
            );
            verdict.timed_sizes = sizes.clone();
            (seed, sizes)
        });
        let planned = self.plan(prepared, timed, mode, &data);
        let (planner, marks) = match planned {
            Ok(p) => p,
            Err(e) => return fail(verdict, Status::HarnessError, e.to_string()),
        };
        let read = marks.resolve(&data, &[]);
        let extras = Extras {
            expected: Some(Expected::of(&read, kernel.tolerance(precision))),
            ..Extras::default()
        };
        let outcome = match run(self, prepared, baseline, planner, slot, extras).await {
            Ok((o, _sandbox)) => o,
            Err(e) => return fail(verdict, Status::HarnessError, e.to_string()),
        };
        let unjudged = verdict.clone();
        judge_outcome(&mut verdict, &read, &outcome, mode);
        let (Some(pooled_stop), Some(baseline)) =
            (retime::undecided(&verdict, read.stop), baseline)
        else {
            return verdict;
        };
        let sizes = verdict.timed_sizes.clone();
        let first = verdict.stopped.clone();
        // As many pairs as the first timing at least: the two weigh alike.
        let stop = StopRule {
            fewest: verdict.pairs.max(self.config.reps),
            ..self.stop_rule()
        };
        match retime::again(self, prepared, baseline, &sizes, stop, slot).await {
            Ok(second) => {
                verdict = unjudged;
                let read = Read {
                    stop: Some(pooled_stop),
                    ..read
                };
                judge_outcome(&mut verdict, &read, &retime::pooled(outcome, second), mode);
                verdict.stopped = format!(
                    "{first}; timed again in fresh runners, both timings' pairs: {}",
                    verdict.stopped
                );
            }
            Err(e) => verdict.stopped = format!("{first}; timing again failed: {e}"),
        }
        verdict
    }

    /// A case's inputs and reference outputs (cached).
    pub(crate) async fn case_data(
        &self,
        kernel: &Kernel,
        case: &crate::data::Case,
    ) -> Result<(CaseInputs, Reference), crate::data::DataError> {
        let inputs = self.data.inputs(kernel, case).await?;
        let reference = self.data.reference(kernel, &inputs).await?;
        Ok((inputs, reference))
    }

    /// The run's steps: pairs (when `timed`, on inputs drawn from its
    /// seed at its sizes), the public case, and for `Submit` the held-out
    /// cases and two more public calls.
    fn plan<'a>(
        &self,
        prepared: &Prepared<'a>,
        timed: Option<([u8; 32], Sizes)>,
        mode: Mode,
        data: &[(CaseInputs, Reference)],
    ) -> Result<(Planner<'a>, Marks), PlanError> {
        let submit = mode == Mode::Submit;
        let mut planner = Planner::new(prepared.kernel, prepared.precision);
        if let Some((seed, sizes)) = timed {
            planner.pairs(&sizes, seed, self.stop_rule())?;
        }
        let public = Public {
            step: planner.check("public", &data[0].0, true, submit)?,
            repeats: false,
        };
        checks_after_public(planner, public, data, submit)
    }

    /// When a grade's timed pairs stop.
    fn stop_rule(&self) -> StopRule {
        StopRule {
            fewest: self.config.reps.max(1),
            most: 1000,
            precision: self.config.interval,
            cap_ms: self.config.time_cap.as_millis() as u64,
        }
    }
}

pub(crate) fn fail(mut verdict: Verdict, status: Status, message: impl Into<String>) -> Verdict {
    outcome::set(&mut verdict, status, message);
    verdict
}

pub(crate) fn finish(mut verdict: Verdict, start: Instant) -> Verdict {
    verdict.elapsed_s = start.elapsed().as_secs_f64();
    verdict
}
