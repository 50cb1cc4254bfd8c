//! Grading an HPCAgent-Bench task as HPCAgent-Bench grades it: its inputs
//! (made by its own generator's rules, [`crate::data::hab`]), its NumPy
//! reference's outputs, its tolerance rule, five held-out variants of the
//! draw, and its denominator: a C baseline from the operator's overlay
//! (`BASELINES`), timed in pairs beside the submission on the same inputs,
//! or where there is none, the NumPy reference timed on those inputs
//! (HPCAgent-Bench's own for its machine-learning and scientific tracks),
//! the minimum call over the minimum call. The verdict says which.

use crate::corpus::Preset;
use crate::corpus::hab::{ROTATIONS, Rotation};
use crate::data::hab::{HabCase, HabDataError, check_fits};
use crate::data::{CaseInputs, Reference, seeded_rng};
use crate::hab_tasks::{HabTasks, translator_symbol};
use crate::judge::{Judge, Submission};
use crate::slots::Slot;
use crate::verdict::{Status, Verdict};

use super::{
    Expected, Extras, Marks, Mode, PlanError, Planner, Prepared, Public, checks_after_public, fail,
    judge_outcome,
};
use rand_core::RngCore;

/// Calls of the submission timed against the NumPy reference (after one
/// that warms it up), as HPCAgent-Bench times both.
const TIMED_CALLS: u32 = 20;

impl Judge {
    /// Grades a built submission to an HPCAgent-Bench task.
    pub(super) async fn grade_hab(
        &self,
        tasks: &HabTasks,
        prepared: &Prepared<'_>,
        mode: Mode,
        slot: &Slot,
        verdict: Verdict,
    ) -> Verdict {
        let kernel = prepared.kernel;
        let manifested = match tasks.find(&kernel.id) {
            Ok(m) => m,
            Err(e) => return fail(verdict, Status::HarnessError, e.to_string()),
        };
        if let Err(why) = self.can_grade(tasks, manifested, prepared.preset) {
            return fail(verdict, Status::HarnessError, why.to_string());
        }
        let made = match self
            .hab_cases(tasks, kernel, manifested, prepared.preset, mode)
            .await
        {
            Ok(made) => made,
            Err(e) => return fail(verdict, Status::HarnessError, e),
        };
        let baseline = match tasks.baseline(manifested) {
            Some(file) => match self
                .build_overlay_baseline(prepared, manifested, &file, slot)
                .await
            {
                Ok(built) => Some(built),
                Err(e) => return fail(verdict, Status::HarnessError, e),
            },
            None => None,
        };
        let data: Vec<(CaseInputs, Reference)> = made
            .iter()
            .map(|c| (c.inputs.clone(), c.reference.clone()))
            .collect();
        let (planner, marks) = match self.hab_steps(prepared, baseline.is_some(), mode, &data) {
            Ok(p) => p,
            Err(e) => return fail(verdict, Status::HarnessError, e.to_string()),
        };
        let read = marks.resolve(&data);
        let extras = Extras {
            expected: Some(Expected::of(&read, kernel.tolerance(prepared.precision))),
            ..Extras::default()
        };
        let outcome = match self
            .run(prepared, baseline.as_ref(), planner, slot, extras)
            .await
        {
            Ok((o, _sandbox)) => o,
            Err(e) => return fail(verdict, Status::HarnessError, e.to_string()),
        };
        let mut verdict = verdict;
        judge_outcome(&mut verdict, &read, &outcome, mode);
        if baseline.is_some() {
            verdict.denominator = "baselines overlay".into();
        } else {
            against_numpy(&mut verdict, &made[0].reference_ns);
        }
        verdict
    }

    /// The cases a grade in `mode` runs, made on first use: the public one
    /// (timed), then for `Submit` the held-out ones.
    pub(crate) async fn hab_cases(
        &self,
        tasks: &HabTasks,
        kernel: &crate::corpus::Kernel,
        manifested: &crate::corpus::hab::Kernel,
        preset: Preset,
        mode: Mode,
    ) -> Result<Vec<HabCase>, String> {
        let plans = self.hab_case_plans(tasks, manifested, preset, mode)?;
        let mut made = Vec::new();
        for (index, plan) in plans.iter().enumerate() {
            let case = self.data.hab_case(kernel, plan, index == 0).await;
            made.push(case.map_err(|e| e.to_string())?);
        }
        Ok(made)
    }

    /// The plans of the cases a grade in `mode` runs: the public case
    /// first (the only one whose reference is timed), then for `Submit`
    /// the held-out ones.
    pub(crate) fn hab_case_plans(
        &self,
        tasks: &HabTasks,
        manifested: &crate::corpus::hab::Kernel,
        preset: Preset,
        mode: Mode,
    ) -> Result<Vec<crate::corpus::hab::InputPlan>, String> {
        let plan = |preset, rotation, index| {
            self.hab_plan(tasks, manifested, preset, rotation, index)
                .map_err(|e| e.to_string())
        };
        let mut plans = vec![plan(preset, None, 0)?];
        if mode == Mode::Submit {
            for (i, rotation) in ROTATIONS.iter().enumerate() {
                let held_out = held_out_preset(i).min(preset);
                plans.push(plan(held_out, Some(*rotation), i as u32 + 1)?);
            }
        }
        Ok(plans)
    }

    /// Why this judge cannot grade the task at `preset`, if it cannot: a
    /// module its Python lacks, or inputs larger than the node's memory.
    pub(crate) fn can_grade(
        &self,
        tasks: &HabTasks,
        manifested: &crate::corpus::hab::Kernel,
        preset: Preset,
    ) -> Result<(), HabDataError> {
        let checkout = crate::corpus::hab::checkout(&tasks.root);
        let missing = self.data.missing_modules(&checkout, &manifested.needs())?;
        if !missing.is_empty() {
            let names: Vec<&str> = missing.iter().map(String::as_str).collect();
            return Err(HabDataError::MissingModules {
                key: manifested.key.clone(),
                python: self.data.python().to_string(),
                names: names.join(", "),
            });
        }
        check_fits(manifested, preset.as_str())
    }

    /// The plan of one case: the public one (`rotation` none, the public
    /// seed), or held-out case `index` (its seed from the judge's secret).
    fn hab_plan(
        &self,
        tasks: &HabTasks,
        manifested: &crate::corpus::hab::Kernel,
        preset: Preset,
        rotation: Option<Rotation>,
        index: u32,
    ) -> Result<crate::corpus::hab::InputPlan, crate::corpus::hab::HabError> {
        let seed = match rotation {
            None => self.config.public_seed,
            Some(_) => seeded_rng(&[
                b"hab held-out",
                &self.config.secret.to_le_bytes(),
                manifested.key.as_bytes(),
                &index.to_le_bytes(),
            ])
            .next_u64(),
        };
        let mut plan = manifested.input_plan(&tasks.root, preset.as_str(), seed, "fp64")?;
        plan.rotation = rotation;
        Ok(plan)
    }

    /// The run's steps: pairs beside the overlay's baseline on the public
    /// case's inputs, or the public case's calls timed alone; the public
    /// check; for `Submit` the held-out cases and two more public calls.
    fn hab_steps<'a>(
        &self,
        prepared: &Prepared<'a>,
        paired: bool,
        mode: Mode,
        data: &[(CaseInputs, Reference)],
    ) -> Result<(Planner<'a>, Marks), PlanError> {
        let submit = mode == Mode::Submit;
        let mut planner = Planner::per_case(prepared.kernel, prepared.precision);
        let public = if paired {
            planner.pairs_on(&data[0].0, self.stop_rule())?;
            Public {
                step: planner.check("public", &data[0].0, true, submit)?,
                repeats: false,
            }
        } else {
            // The calls timed against NumPy check determinism too.
            Public {
                step: planner.check_calls("public", &data[0].0, 1 + TIMED_CALLS, true, submit)?,
                repeats: true,
            }
        };
        checks_after_public(planner, public, data, submit)
    }

    /// The overlay's baseline for the task, built like a submission; one
    /// HPCAgent-Bench's translator emitted (its own symbol, no workspace
    /// pair, which the calling convention lets the caller pass anyway)
    /// gets the task's symbol by a define.
    async fn build_overlay_baseline(
        &self,
        prepared: &Prepared<'_>,
        manifested: &crate::corpus::hab::Kernel,
        file: &std::path::Path,
        slot: &Slot,
    ) -> Result<crate::build::Built, String> {
        let source =
            std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let defines: Vec<String> = translator_symbol(manifested)
            .map(|emitted| format!("-D{emitted}={}", manifested.abi.symbol))
            .into_iter()
            .collect();
        let submission = Submission::baseline(&prepared.kernel.id, prepared.precision, source);
        match self.prepare(&submission, &defines, slot).await {
            Ok(Ok((built, _))) => Ok(built.built),
            Ok(Err(v)) => Err(format!(
                "the overlay's baseline {} does not build: {} {}",
                file.display(),
                v.message,
                v.build_log_tail
            )),
            Err(e) => Err(format!("the overlay's baseline: {e}")),
        }
    }
}

/// HPCAgent-Bench's held-out presets, in its order (each capped at the
/// public case's).
fn held_out_preset(index: usize) -> Preset {
    [Preset::Xl, Preset::M, Preset::M, Preset::L, Preset::S][index % 5]
}

/// The speedup over the NumPy reference: its fastest call over the
/// submission's fastest (after the warm-up), on the public case's inputs.
fn against_numpy(verdict: &mut Verdict, reference_ns: &[u64]) {
    verdict.denominator = "numpy".into();
    let fastest_reference = reference_ns.iter().copied().min();
    let fastest = verdict.timing.map(|t| t.min_ns);
    if let (Status::Ok, Some(reference), Some(candidate)) =
        (verdict.status, fastest_reference, fastest)
        && candidate > 0.0
    {
        let speedup = reference as f64 / candidate;
        verdict.speedup = Some(speedup);
        verdict.speedup_low = Some(speedup);
        verdict.speedup_high = Some(speedup);
    }
    verdict.baseline = crate::verdict::Timing::from_samples(reference_ns);
}
