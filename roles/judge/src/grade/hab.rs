//! Grading an HPCAgent-Bench task as HPCAgent-Bench grades it: its inputs
//! (made by its own generator's rules, [`crate::data::hab`]), its NumPy
//! reference's outputs, its tolerance rule, five held-out variants of the
//! draw, the sizes its judge times at (the preset's own), and its
//! denominator ([`Denominator`]): the C its translator emits, for the
//! loop-level track (made from the checkout, [`crate::data::translated`]),
//! or a C baseline from the operator's overlay (`BASELINES`), either timed
//! in pairs beside the submission; else the NumPy reference, as
//! HPCAgent-Bench times its machine-learning and scientific tracks, the
//! minimum call over the minimum call. The verdict names the denominator
//! and the sizes.
//!
//! Unlike HPCAgent-Bench, no case but the public one is made at the public
//! case's sizes and values: a held-out case's sizes are drawn around its
//! preset within the manifest's constraints, and its values differ too
//! where its generator's do not follow its seed
//! ([`hpcagent_corpus::hab::Variation`]). Nor is
//! anything timed on the public case: a grade draws inputs of its own from
//! a secret of the grade, so that an answer remembered from an earlier call,
//! or from the public case, is never the one a timed call asks for. Pairs
//! against an overlay baseline draw every pair's inputs afresh, as a native
//! kernel's, where the manifest's generator makes nothing a draw of the
//! judge's cannot ([`Kernel::fresh_draws`]); otherwise, and against NumPy,
//! they run on input sets the task's own generator makes for the grade
//! (against NumPy, up to 20 of them, [`TIMED_SETS`], each called once,
//! small ones in batches timed together: [`BATCH_SETS`]).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use nix::fcntl::Flock;
use rand_core::RngCore;

use crate::data::ahead;
use crate::data::hab::{HabCase, HabDataError, Need, check_fits};
use crate::data::worker::{Gate, Word};
use crate::data::{CaseInputs, Reference};
use crate::hab_tasks::{Denominator, HabTasks, renaming};
use crate::judge::{Judge, JudgeError, Submission};
use crate::slots::Slot;
use crate::verdict::{Status, Verdict};
use hpcagent_corpus::hab::{HabError, InputPlan, Kernel, ROTATIONS, Symbols, Variation};
use hpcagent_corpus::{Precision, Preset, Sizes};
use hpcagent_runner::draw::seeded_rng;
use hpcagent_runner::timing::{FEWEST_TO_TELL, ROUND};

use super::{
    Expected, Extras, Marks, Mode, PlanError, Planner, Prepared, Public, checks_after_public, fail,
    judge_outcome, prepare, run,
};

/// Input sets a grade against the NumPy reference times the submission
/// on, once each, so that every timed call is on inputs it has not seen:
/// as many as fit in [`TIMED_SET_BYTES`] and [`TIMED_SET_REFERENCE`],
/// between these two. Each set is the grade's own (a draw and a call of
/// the reference in Python, in one process for all of them), and the
/// speedup is the fastest reference call over the fastest call of the
/// submission: 20 calls, as many as HPCAgent-Bench times, where the sets
/// are small and the reference quick, and at least 3 (a large case's calls
/// vary less, and each set is gigabytes or seconds of Python).
pub const TIMED_SETS: (u32, u32) = (3, 20);

/// The bytes a grade's input sets against NumPy may take together, where
/// that leaves more than the fewest.
pub const TIMED_SET_BYTES: u64 = 256 << 20;

/// The time the reference's calls on a grade's input sets may take
/// together (as its call on the public case took), where that leaves more
/// than the fewest: a reference in Python loops takes seconds a call.
pub const TIMED_SET_REFERENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// Input sets against NumPy timed together in one batch, about: the
/// round trip through the runner (15–30 µs) is paid once for them, and
/// the fastest of the batches (four, at [`TIMED_SETS`]' most) is the
/// submission's time. A kernel of a few microseconds timed one call at a
/// time left 2–3 µs of round trip that the floor does not take off (the
/// runner's code and the call's inputs cold after the supervisor's
/// work), against HPCAgent-Bench's in-process call of about 1 µs.
pub const BATCH_SETS: usize = 5;

/// The largest input set a batch takes: beyond it a call lasts long
/// enough that its round trip is noise, and a batch's sets would all be
/// in memory at once.
pub const BATCH_SET_BYTES: u64 = 16 << 20;

/// Empty calls measured beside each batch (the runner's floor).
const BATCH_FLOOR_CALLS: u32 = 7;

/// The fewest input sets a grade paired with an overlay baseline makes:
/// a warm-up, and the 6 rounds of two pairs a change needs to show at 95%.
pub const PAIRED_SETS: u32 = 1 + (FEWEST_TO_TELL * ROUND) as u32;

/// How a grade's calls are timed, with the cases they need.
enum Timed {
    /// Pairs against the overlay's baseline, every pair's inputs drawn
    /// afresh at `case`'s shapes and values of scalars.
    Drawn {
        case: CaseInputs,
        draws: std::collections::BTreeMap<String, hpcagent_corpus::Init>,
    },
    /// Pairs against the overlay's baseline, each on copies of the next of
    /// these input sets the task's generator made for the grade (the
    /// warm-up on the first): no pair's inputs are ones an earlier call saw.
    OnSets(Vec<HabCase>),
    /// The submission once on each of these sets, against the NumPy
    /// reference's call on it.
    AgainstNumpy(Vec<HabCase>),
}

impl Timed {
    /// The input sets made for the grade alone.
    fn sets(&self) -> Vec<&HabCase> {
        match self {
            Timed::Drawn { .. } => Vec::new(),
            Timed::OnSets(sets) | Timed::AgainstNumpy(sets) => sets.iter().collect(),
        }
    }
}

/// A grade's own input sets, removed from the cache when the grade is
/// done with them, however it ends: no later grade asks for them.
struct Used<'a> {
    data: &'a crate::data::DataCache,
    sets: Vec<&'a HabCase>,
}

impl Drop for Used<'_> {
    fn drop(&mut self) {
        self.sets.iter().for_each(|set| self.data.discard(set));
    }
}

/// Grades a submission to an HPCAgent-Bench task. Its build and the
/// grade's data (the cases, the baseline, the timed sets' inputs) are made
/// at once; the NumPy reference's timed calls wait for the build's end
/// ([`crate::data::worker::Worker::call_gated`]), so that nothing of the
/// grade runs beside them.
pub(super) async fn grade_hab(
    judge: &Judge,
    tasks: &HabTasks,
    submission: &Submission,
    mode: Mode,
    secret: u64,
    slot: &Slot,
) -> Result<Verdict, JudgeError> {
    let (kernel, precision) = judge.resolve(&submission.task_id, submission.precision)?;
    let preset = submission.preset.unwrap_or(judge.config.preset);
    let grading = judge.ahead.enter().await;
    // The grade's own secret for what it times, unless it takes sets made
    // ahead (of a secret of their own): told to no one.
    let timing: [u8; 32] = rand::random();
    let (built, word) = tokio::sync::oneshot::channel();
    let build = async {
        let prepared = prepare(judge, submission, &[], slot).await;
        let _ = built.send(matches!(prepared, Ok(Ok(_))));
        prepared
    };
    let word: Word = Box::pin(async { word.await.unwrap_or(false) });
    let task = Task {
        judge,
        tasks,
        kernel,
        precision,
        preset,
        slot,
    };
    let (prepared, data) = tokio::join!(build, task.data(mode, secret, &timing, word));
    let _used = data.as_ref().ok().map(|data| Used {
        data: &judge.data,
        sets: data.timed.sets(),
    });
    let (prepared, mut verdict) = match prepared? {
        Ok(prepared) => prepared,
        Err(verdict) => return Ok(verdict),
    };
    verdict.status = Status::Ok;
    let data = match &data {
        Ok(data) => data,
        Err(e) => {
            if let Ok(manifested) = tasks.find(&kernel.id) {
                verdict.denominator = tasks.denominator(manifested).word().into();
            }
            return Ok(fail(verdict, Status::HarnessError, e.clone()));
        }
    };
    let verdict = judged(judge, &prepared, data, mode, &timing, slot, verdict).await;
    drop(grading);
    if let Timed::AgainstNumpy(_) = data.timed {
        make_ahead(judge, tasks, kernel, preset, &data.made[0]);
    }
    Ok(verdict)
}

/// The next grade's sets of `kernel` (timed against NumPy) at `preset`,
/// `public` its public case, made while the judge is idle where they are
/// small ([`ahead`]): after a grade, or once warming made its cases.
pub(crate) fn make_ahead(
    judge: &Judge,
    tasks: &HabTasks,
    kernel: &hpcagent_corpus::Kernel,
    preset: Preset,
    public: &HabCase,
) {
    let Ok(manifested) = tasks.find(&kernel.id) else {
        return;
    };
    let secret: [u8; 32] = rand::random();
    let Ok((plans, bytes)) = numpy_plans(&tasks.root, manifested, preset, public, &secret) else {
        return;
    };
    let count = plans.len() as u64;
    let small = bytes.is_some_and(|b| b * count <= ahead::AHEAD_BYTES)
        && (public.reference_ns.first()).is_some_and(|&ns| {
            u128::from(ns) * u128::from(count) <= ahead::AHEAD_REFERENCE.as_nanos()
        });
    if !small {
        return;
    }
    let key = ahead::Key {
        task: manifested.key.clone(),
        preset,
    };
    let quiet = async {
        crate::judge::node_quiet()
            .await
            .map_err(|e| tracing::warn!("making a grade's input sets ahead: {e}"))
            .ok()
    };
    judge.ahead.make(key, kernel.clone(), plans, quiet);
}

/// What a grade of an HPCAgent-Bench task needs besides the submission's
/// build.
struct Task<'a> {
    judge: &'a Judge,
    tasks: &'a HabTasks,
    kernel: &'a hpcagent_corpus::Kernel,
    precision: Precision,
    preset: Preset,
    slot: &'a Slot,
}

/// A grade's data, made beside the submission's build.
struct Data {
    denominator: Denominator,
    /// The library the submission is timed beside: the baseline it is
    /// paired with, else the empty kernel the runner's floor is measured
    /// on (against NumPy).
    beside: crate::build::Built,
    /// The cases it checks.
    made: Vec<HabCase>,
    timed: Timed,
    sizes: Sizes,
}

impl Task<'_> {
    /// The grade's data: the baseline, the cases, and what it times, the
    /// reference's timed calls waiting for `word`.
    async fn data(
        &self,
        mode: Mode,
        secret: u64,
        timing: &[u8; 32],
        word: Word,
    ) -> Result<Data, String> {
        let (judge, tasks) = (self.judge, self.tasks);
        let manifested = tasks.find(&self.kernel.id).map_err(|e| e.to_string())?;
        can_grade(judge, tasks, manifested, self.preset)
            .await
            .map_err(|e| e.to_string())?;
        let denominator = tasks.denominator(manifested);
        let baseline = self.baseline(manifested, &denominator).await?;
        let made = hab_cases(
            judge,
            tasks,
            self.kernel,
            manifested,
            self.preset,
            mode,
            secret,
        )
        .await?;
        let beside = match baseline {
            Some(built) => built,
            None => self.empty_kernel(manifested).await?,
        };
        let paired = !matches!(denominator, Denominator::Numpy);
        let (timed, sizes) = timed_cases(self, manifested, paired, &made[0], timing, word).await?;
        Ok(Data {
            denominator,
            beside,
            made,
            timed,
            sizes,
        })
    }
}

/// The grade of the built submission on its data.
async fn judged(
    judge: &Judge,
    prepared: &Prepared<'_>,
    data: &Data,
    mode: Mode,
    timing: &[u8; 32],
    slot: &Slot,
    mut verdict: Verdict,
) -> Verdict {
    verdict.denominator = data.denominator.word().into();
    verdict.timed_sizes = data.sizes.clone();
    let cases: Vec<(CaseInputs, Reference)> = data
        .made
        .iter()
        .map(|c| (c.inputs.clone(), c.reference.clone()))
        .collect();
    let sets: Vec<(CaseInputs, Reference)> = match &data.timed {
        Timed::AgainstNumpy(sets) => sets
            .iter()
            .map(|c| (c.inputs.clone(), c.reference.clone()))
            .collect(),
        _ => Vec::new(),
    };
    let (planner, marks) = match hab_steps(judge, prepared, &data.timed, timing, mode, &cases) {
        Ok(p) => p,
        Err(e) => return fail(verdict, Status::HarnessError, e.to_string()),
    };
    let read = marks.resolve(&cases, &sets);
    let extras = Extras {
        expected: Some(Expected::of(
            &read,
            prepared.kernel.tolerance(prepared.precision),
        )),
        ..Extras::default()
    };
    // Against NumPy, timed inside its process, the submission's calls
    // are counted as they would be timed inside its runner: the runner's
    // floor, measured on a runner of the judge's empty kernel, is taken
    // off them (runner/floor.rs).
    let outcome = match run(judge, prepared, Some(&data.beside), planner, slot, extras).await {
        Ok((o, _sandbox)) => o,
        Err(e) => return fail(verdict, Status::HarnessError, e.to_string()),
    };
    judge_outcome(&mut verdict, &read, &outcome, mode);
    verdict.denominator = data.denominator.word().into();
    if let Timed::AgainstNumpy(sets) = &data.timed {
        let calls: Vec<ReferenceCall> = sets
            .iter()
            .flat_map(|set| {
                (set.reference_ns.iter().zip(&set.reference_waited_ns))
                    .map(|(&ns, &waited_ns)| ReferenceCall { ns, waited_ns })
            })
            .collect();
        against_numpy(&mut verdict, &calls);
        verdict.reference_runtime = (sets.iter())
            .map(|set| set.reference_runtime.clone())
            .find(|runtime| !runtime.is_empty())
            .unwrap_or_default();
    }
    verdict
}

/// The cases a grade in `mode` checks, made on first use: the public
/// one, then for `Submit` the held-out ones, from `secret`.
pub(crate) async fn hab_cases(
    judge: &Judge,
    tasks: &HabTasks,
    kernel: &hpcagent_corpus::Kernel,
    manifested: &Kernel,
    preset: Preset,
    mode: Mode,
    secret: u64,
) -> Result<Vec<HabCase>, String> {
    let plans = case_plans(
        &tasks.root,
        manifested,
        preset,
        judge.config.public_seed,
        secret,
        mode,
    )
    .map_err(|e| e.to_string())?;
    judge
        .data
        .hab_cases(kernel, &plans, Need::Reference)
        .await
        .map_err(|e| e.to_string())
}

/// What the grade times, and the input sets made for it from its
/// `secret`; the sizes they have. Against NumPy the sets' reference calls
/// wait for `word`.
async fn timed_cases(
    task: &Task<'_>,
    manifested: &Kernel,
    paired: bool,
    public: &HabCase,
    secret: &[u8; 32],
    mut word: Word,
) -> Result<(Timed, Sizes), String> {
    let (judge, tasks, kernel, preset) = (task.judge, task.tasks, task.kernel, task.preset);
    if paired {
        let draws = timed_draws(manifested, preset, secret).map_err(|e| e.to_string())?;
        let bytes = manifested.bytes_at(&draws[0]).ok();
        // A warm-up and the 6 rounds that can tell a change, and more
        // where they fit (whole rounds: a last pair alone tells nothing);
        // the generator's sets cost Python, not calls.
        let count = timed_sets(bytes, None).max(PAIRED_SETS) | 1;
        let plans = timed_plans(&tasks.root, manifested, &draws, secret, count)
            .map_err(|e| e.to_string())?;
        let shapes = |case: &CaseInputs| {
            case.arrays
                .iter()
                .map(|a| (a.name.clone(), a.shape.clone()))
                .collect()
        };
        // At the public sizes, the public case gives the calls' shapes
        // and scalars; other sizes need a case of their own, whose
        // inputs a draw then replaces.
        let public_sized =
            manifested.preset_symbols(preset.as_str()).ok().as_ref() == draws.first();
        if public_sized && let Some(draws) = manifested.fresh_draws(&shapes(&public.inputs)) {
            let case = public.inputs.clone();
            return Ok((Timed::Drawn { case, draws }, public.sizes.clone()));
        }
        // One set first: where the judge can draw its inputs, every
        // pair draws its own and the others are not made.
        let mut sets = judge
            .data
            .hab_cases(kernel, &plans[..1], Need::Inputs)
            .await
            .map_err(|e| e.to_string())?;
        let first = sets.pop().expect("one set");
        let sizes = first.sizes.clone();
        if let Some(draws) = manifested.fresh_draws(&shapes(&first.inputs)) {
            let case = first.inputs.clone();
            judge.data.discard(&first);
            return Ok((Timed::Drawn { case, draws }, sizes));
        }
        let rest = judge
            .data
            .hab_cases(kernel, &plans[1..], Need::Inputs)
            .await;
        let rest = match rest {
            Ok(rest) => rest,
            Err(e) => {
                judge.data.discard(&first);
                return Err(e.to_string());
            }
        };
        // Every set at the first one's shapes: the pairs make one call.
        let (same, other): (Vec<HabCase>, Vec<HabCase>) =
            rest.into_iter().partition(|set| set.sizes == first.sizes);
        other.iter().for_each(|set| judge.data.discard(set));
        let sets = std::iter::once(first).chain(same).collect();
        return Ok((Timed::OnSets(sets), sizes));
    }
    let key = ahead::Key {
        task: manifested.key.clone(),
        preset,
    };
    if judge.ahead.has(&key) {
        // Sets made ahead are taken once the build succeeded: a grade that
        // ends at its build leaves them to the next.
        if !word.await {
            return Err("the submission was not built".into());
        }
        if let Some(sets) = judge.ahead.take(&key) {
            let sizes = sets[0].sizes.clone();
            return Ok((Timed::AgainstNumpy(sets), sizes));
        }
        word = Box::pin(async { true });
    }
    let (plans, _) =
        numpy_plans(&tasks.root, manifested, preset, public, secret).map_err(|e| e.to_string())?;
    let (gate, timing) = quiet_gate(word, crate::judge::timing_lock_path()).await?;
    let sets = judge
        .data
        .hab_cases_gated(kernel, &plans, Need::TimedReference, Some(gate))
        .await;
    let held = timing.lock().expect("timing lock").take();
    if let Some(Err(e)) = held {
        return Err(e);
    }
    let sets = sets.map_err(|e| e.to_string())?;
    let sizes = sets[0].sizes.clone();
    Ok((Timed::AgainstNumpy(sets), sizes))
}

/// The node's timing lock, once taken by a gate's word.
type TimingLock = Arc<Mutex<Option<Result<Flock<std::fs::File>, String>>>>;

/// The gate of a grade's timed sets: the sets are drawn, and the
/// reference timed on them, while no grade on the node times its calls
/// (the node's timing lock, as warming makes a case); between the two,
/// while the grade waits for its build (`built`), the lock is let go, so
/// that another slot's grade can time its calls. Where the build ends
/// first, the lock is simply held on. The lock taken for the reference
/// is held in what is returned, until the grade drops it. `lock`: the
/// node's timing lock's file.
async fn quiet_gate(built: Word, lock: PathBuf) -> Result<(Gate, TimingLock), String> {
    let drawing = crate::judge::quiet_at(lock.clone())
        .await
        .map_err(|e| e.to_string())?;
    let timing: TimingLock = Arc::new(Mutex::new(None));
    let held = timing.clone();
    let word: Word = Box::pin(async move {
        if !built.await {
            return false;
        }
        let lock = crate::judge::quiet_at(lock)
            .await
            .map_err(|e| e.to_string());
        let go = lock.is_ok();
        *held.lock().expect("timing lock") = Some(lock);
        go
    });
    let gate = Gate {
        word,
        drawn: Box::new(move || drop(drawing)),
    };
    Ok((gate, timing))
}

/// Why this judge cannot grade the task at `preset`, if it cannot: a
/// module its Python lacks, or inputs larger than the node's memory.
pub(crate) async fn can_grade(
    judge: &Judge,
    tasks: &HabTasks,
    manifested: &Kernel,
    preset: Preset,
) -> Result<(), HabDataError> {
    let checkout = hpcagent_corpus::hab::checkout(&tasks.root);
    let missing = judge
        .data
        .missing_modules(&checkout, &manifested.needs())
        .await?;
    if !missing.is_empty() {
        let names: Vec<&str> = missing.iter().map(String::as_str).collect();
        return Err(HabDataError::MissingModules {
            key: manifested.key.clone(),
            python: judge.data.python().to_string(),
            names: names.join(", "),
        });
    }
    check_fits(manifested, preset.as_str())
}

/// The run's steps: the timed calls (pairs beside the overlay's
/// baseline, or the submission once on each set timed against NumPy,
/// after the public case has warmed it up), the public check, and for
/// `Submit` the held-out cases and two more public calls.
fn hab_steps<'a>(
    judge: &Judge,
    prepared: &Prepared<'a>,
    timed: &Timed,
    secret: &[u8; 32],
    mode: Mode,
    data: &[(CaseInputs, Reference)],
) -> Result<(Planner<'a>, Marks), PlanError> {
    let submit = mode == Mode::Submit;
    let mut planner = Planner::per_case(prepared.kernel, prepared.precision);
    match timed {
        Timed::Drawn { case, draws } => {
            planner.draw_as(draws.clone());
            planner.pairs_drawn_on(case, *secret, judge.stop_rule())?;
        }
        Timed::OnSets(sets) => {
            let inputs: Vec<&CaseInputs> = sets.iter().map(|set| &set.inputs).collect();
            planner.pairs_on(&inputs, judge.stop_rule())?;
        }
        Timed::AgainstNumpy(_) => {}
    }
    let public = Public {
        step: planner.check("public", &data[0].0, true, submit)?,
        repeats: false,
    };
    let timed_steps = match timed {
        Timed::AgainstNumpy(sets) => numpy_steps(&mut planner, sets)?,
        _ => Vec::new(),
    };
    let (planner, mut marks) = checks_after_public(planner, public, data, submit)?;
    marks.timed = timed_steps;
    Ok((planner, marks))
}

/// The checks that time the submission on each of `sets` against NumPy,
/// in batches where they can be, with the empty calls of the runner's
/// floor beside them; the checks' steps.
fn numpy_steps(planner: &mut Planner<'_>, sets: &[HabCase]) -> Result<Vec<usize>, PlanError> {
    let mut steps = Vec::new();
    let Some(batches) = batches(sets) else {
        // An empty call beside each timed one, as the timed calls are
        // made (after inputs are written, a runner's CPU idle or not),
        // before and after in turn: the floor as the calls met it.
        for (i, set) in sets.iter().enumerate() {
            if i % 2 == 0 {
                planner.floor(1);
            }
            steps.push(planner.check(&format!("timed {i}"), &set.inputs, true, false)?);
            if i % 2 == 1 {
                planner.floor(1);
            }
        }
        return Ok(steps);
    };
    // The floor's empty calls before each batch, and after the last: the
    // round trip as the batches met it, taken off each once.
    for (i, batch) in batches.into_iter().enumerate() {
        planner.floor(BATCH_FLOOR_CALLS);
        let cases: Vec<&CaseInputs> = batch.iter().map(|set| &set.inputs).collect();
        steps.extend(planner.batch(&format!("timed batch {i}"), &cases)?);
    }
    planner.floor(BATCH_FLOOR_CALLS);
    Ok(steps)
}

/// How a grade's sets against NumPy are cut into batches (`Step::Batch`),
/// if they are: in batches of about [`BATCH_SETS`], where every set is
/// at most [`BATCH_SET_BYTES`] and has no workspace (which a batch's calls
/// would share). Else each set is a call of its own.
fn batches(sets: &[HabCase]) -> Option<Vec<&[HabCase]>> {
    let small = |set: &HabCase| {
        let bytes: u64 = set
            .inputs
            .arrays
            .iter()
            .map(|a| (a.elements * a.dtype.size()) as u64)
            .sum();
        set.inputs.workspace_bytes == 0 && bytes <= BATCH_SET_BYTES
    };
    if sets.len() < 2 || !sets.iter().all(small) {
        return None;
    }
    Some(sets.chunks(batch_size(sets.len())).collect())
}

/// The size of each batch of `sets` (the last may be smaller): as few
/// batches as hold at most [`BATCH_SETS`] each, as even as they can be.
fn batch_size(sets: usize) -> usize {
    let count = sets.div_ceil(BATCH_SETS).max(1);
    sets.div_ceil(count).max(1)
}

impl Task<'_> {
    /// The C the task's speedup divides, built like a submission (from
    /// the build cache after the first time): the overlay's, or the one
    /// HPCAgent-Bench's translator emits (made once per judge cache);
    /// none where the denominator is NumPy. C the translator emitted (its
    /// own symbol, no workspace pair, which the calling convention lets
    /// the caller pass anyway) gets the task's symbol by a define.
    async fn baseline(
        &self,
        manifested: &Kernel,
        denominator: &Denominator,
    ) -> Result<Option<crate::build::Built>, String> {
        let (judge, tasks) = (self.judge, self.tasks);
        let (source, what) = match denominator {
            Denominator::Numpy => return Ok(None),
            Denominator::Overlay(file) => (
                std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?,
                format!("the overlay's baseline {}", file.display()),
            ),
            Denominator::Translator => {
                let translated = judge
                    .data
                    .translated(&tasks.root, manifested, &self.kernel.fingerprint)
                    .await
                    .map_err(|e| {
                        format!(
                            "{}: HPCAgent-Bench times this task against its translator's C, \
                         which cannot be made here: {e}",
                            manifested.key
                        )
                    })?;
                (
                    translated.source,
                    format!(
                        "HPCAgent-Bench's translator's C ({})",
                        translated.file.display()
                    ),
                )
            }
        };
        let defines: Vec<String> = renaming(manifested, &source)
            .map(|emitted| format!("-D{emitted}={}", manifested.abi.symbol))
            .into_iter()
            .collect();
        let submission = Submission::baseline(&self.kernel.id, self.precision, source);
        match prepare(judge, &submission, &defines, self.slot).await {
            Ok(Ok((built, _))) => Ok(Some(built.built)),
            Ok(Err(v)) => Err(format!(
                "{what} does not build: {} {}",
                v.message, v.build_log
            )),
            Err(e) => Err(format!("{what}: {e}")),
        }
    }

    /// A kernel that does nothing, exported under the task's symbol, built
    /// like a baseline (from the build cache after the first time): the
    /// runner the floor is measured on where no baseline is timed in pairs.
    async fn empty_kernel(&self, manifested: &Kernel) -> Result<crate::build::Built, String> {
        let source = format!("void {}(void) {{}}\n", manifested.abi.symbol);
        let submission = Submission::baseline(&self.kernel.id, self.precision, source);
        match prepare(self.judge, &submission, &[], self.slot).await {
            Ok(Ok((built, _))) => Ok(built.built),
            Ok(Err(v)) => Err(format!(
                "the empty kernel the runner's floor is measured on does not build: {} {}",
                v.message, v.build_log
            )),
            Err(e) => Err(format!(
                "the empty kernel the runner's floor is measured on: {e}"
            )),
        }
    }
}

/// The plans of the cases a grade in `mode` checks: the public case first
/// (the preset's sizes, the public seed: HPCAgent-Bench's own), then for
/// `Submit` the held-out ones, HPCAgent-Bench's five variants of the draw,
/// each at sizes drawn around its preset (XL, M, M, L, S, capped at the
/// public case's) and unlike the public case's, from a seed of the
/// judge's `secret`.
pub(crate) fn case_plans(
    root: &std::path::Path,
    manifested: &Kernel,
    preset: Preset,
    public_seed: u64,
    secret: u64,
    mode: Mode,
) -> Result<Vec<InputPlan>, HabError> {
    let public = manifested.preset_symbols(preset.as_str())?;
    let mut plans = vec![manifested.input_plan(root, public.clone(), public_seed, "fp64")?];
    if mode == Mode::Submit {
        for (i, rotation) in ROTATIONS.iter().enumerate() {
            let index = i as u32 + 1;
            let mut rng = seeded_rng(&[
                b"hab held-out",
                &secret.to_le_bytes(),
                manifested.key.as_bytes(),
                &index.to_le_bytes(),
            ]);
            let seed = rng.next_u64();
            let base = held_out_preset(i).min(preset);
            let at = draws(manifested, base, &public, &mut rng)?;
            let mut plan = manifested.variant_plan(root, at, seed, "fp64")?;
            plan.rotation = Some(*rotation);
            plans.push(plan);
        }
    }
    Ok(plans)
}

/// What a grade's timed inputs are made at (the first its generator
/// takes, [`InputPlan::fallbacks`]): the public case's symbols, the
/// preset's own, which HPCAgent-Bench's judge times at, for a score and a
/// submit alike (their values are the grade's own, from its seed); for a
/// task whose initializer makes its values from the sizes alone, sizes of
/// its preset drawn from the grade's `secret`, unlike the public case's.
/// (Such an initializer's values at the public sizes are the public
/// case's, or a transformation of them, and some have nothing a
/// transformation may change: integers, constants.)
pub(crate) fn timed_draws(
    manifested: &Kernel,
    preset: Preset,
    secret: &[u8; 32],
) -> Result<Vec<Symbols>, HabError> {
    let public = manifested.preset_symbols(preset.as_str())?;
    if manifested.variation() != Variation::Transform {
        return Ok(vec![public]);
    }
    let mut rng = seeded_rng(&[b"hab timed sizes", secret, manifested.key.as_bytes()]);
    draws(manifested, preset, &public, &mut rng)
}

/// The symbols a case of `manifested` other than the public one is made
/// at, in order: sizes drawn at `preset` unlike `public`'s, then the
/// preset's own, unless those are the public case's and the task's values
/// may not differ from the public case's there (an initializer that makes
/// them from the sizes alone, where some draw exists).
fn draws(
    manifested: &Kernel,
    preset: Preset,
    public: &Symbols,
    rng: &mut impl RngCore,
) -> Result<Vec<Symbols>, HabError> {
    let own = manifested.preset_symbols(preset.as_str())?;
    let mut draws = manifested.size_draws(preset.as_str(), Some(public), &mut || unit(rng))?;
    let values_alone = manifested.variation() != Variation::Transform;
    if draws.is_empty() || values_alone || &own != public {
        draws.push(own);
    }
    Ok(draws)
}

/// The plans of `count` input sets a grade times on, made at `draws`,
/// each from a seed of the grade's `secret` (values unlike the public
/// case's where its generator's would not be:
/// [`hpcagent_corpus::hab::Variation`]).
pub(crate) fn timed_plans(
    root: &std::path::Path,
    manifested: &Kernel,
    draws: &[Symbols],
    secret: &[u8; 32],
    count: u32,
) -> Result<Vec<InputPlan>, HabError> {
    (0..count)
        .map(|i| {
            let seed = seeded_rng(&[
                b"hab timed set",
                secret,
                manifested.key.as_bytes(),
                &i.to_le_bytes(),
            ])
            .next_u64();
            manifested.variant_plan(root, draws.to_vec(), seed, "fp64")
        })
        .collect()
}

/// The plans of a grade's input sets against NumPy, from `secret`
/// (as many as [`timed_sets`] allows, `public` the task's public case),
/// and the bytes of one where they are known.
fn numpy_plans(
    root: &std::path::Path,
    manifested: &Kernel,
    preset: Preset,
    public: &HabCase,
    secret: &[u8; 32],
) -> Result<(Vec<InputPlan>, Option<u64>), HabError> {
    let draws = timed_draws(manifested, preset, secret)?;
    let bytes = manifested.bytes_at(&draws[0]).ok();
    let count = timed_sets(bytes, public.reference_ns.first().copied());
    Ok((timed_plans(root, manifested, &draws, secret, count)?, bytes))
}

/// How many input sets a grade against NumPy times on, for sets of
/// `bytes` each (unknown where an initializer decides a shape: as if the
/// fewest but two fit) and a reference call of `reference_ns` (its call on
/// the public case).
pub(crate) fn timed_sets(bytes: Option<u64>, reference_ns: Option<u64>) -> u32 {
    let (fewest, most) = TIMED_SETS;
    let by_bytes = bytes.map_or(u64::from(fewest) + 2, |b| TIMED_SET_BYTES / b.max(1));
    let by_time = reference_ns.map_or(u64::from(most), |ns| {
        TIMED_SET_REFERENCE.as_nanos() as u64 / ns.max(1)
    });
    by_bytes
        .min(by_time)
        .clamp(u64::from(fewest), u64::from(most)) as u32
}

/// A uniform draw in [0, 1) from `rng`.
fn unit(rng: &mut impl RngCore) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// HPCAgent-Bench's held-out presets, in its order (each capped at the
/// public case's).
fn held_out_preset(index: usize) -> Preset {
    [Preset::Xl, Preset::M, Preset::M, Preset::L, Preset::S][index % 5]
}

/// The speedup over the NumPy reference: its fastest call over the
/// submission's fastest, on the same secret input sets (the submission's
/// as timed inside its runner: the verdict's `timing`).
fn against_numpy(verdict: &mut Verdict, calls: &[ReferenceCall]) {
    verdict.denominator = "numpy".into();
    let fastest_reference = calls.iter().min_by_key(|call| call.ns);
    let fastest = verdict.timing.map(|t| t.min_ns);
    if let (Status::Ok, Some(reference), Some(candidate)) =
        (verdict.status, fastest_reference, fastest)
        && candidate > 0.0
    {
        let speedup = reference.ns as f64 / candidate;
        verdict.speedup = Some(speedup);
        verdict.speedup_low = Some(speedup);
        verdict.speedup_high = Some(speedup);
        if let Some(waited) = reference.slowed() {
            verdict.stopped = waited;
        }
    }
    let reference_ns: Vec<u64> = calls.iter().map(|call| call.ns).collect();
    verdict.baseline = crate::verdict::Timing::from_samples(&reference_ns);
}

/// A timed call of the NumPy reference on one of a grade's sets: its
/// time, and how long of it its threads waited for a CPU.
#[derive(Debug, Clone, Copy)]
struct ReferenceCall {
    ns: u64,
    waited_ns: u64,
}

impl ReferenceCall {
    /// What the verdict says of a call the node's other work slowed: its
    /// threads waited for a CPU, together, more than [`REFERENCE_WAITED`]
    /// of its time and [`REFERENCE_WAIT_FLOOR_NS`] (hab_inputs.py made it
    /// again, up to three times, before it was kept). The speedup over it
    /// reads high.
    fn slowed(self) -> Option<String> {
        let allowed = (self.ns as f64 * REFERENCE_WAITED).max(REFERENCE_WAIT_FLOOR_NS as f64);
        (self.waited_ns as f64 > allowed).then(|| {
            format!(
                "the NumPy reference's fastest call took {:.3} ms, of which its threads waited \
                 {:.3} ms for a CPU, as the calls made again did (the node's noise): the speedup \
                 over it reads high",
                self.ns as f64 / 1e6,
                self.waited_ns as f64 / 1e6,
            )
        })
    }
}

/// The share of a reference call spent waiting for a CPU beyond which
/// the verdict names it (as hab_inputs.py's `INTERFERED` makes it again).
const REFERENCE_WAITED: f64 = 0.1;

/// Waits below this are a few wake-ups of NumPy's BLAS threads, not the
/// node's other work (hab_inputs.py's `WAIT_FLOOR_NS`).
const REFERENCE_WAIT_FLOOR_NS: u64 = 50_000;

#[cfg(test)]
mod tests;
