//! Work a judge does before it is asked: the cases of the tasks it will
//! grade, made in its idle time, so that an agent's first grade of a task
//! does not wait for them.
//!
//! For an HPCAgent-Bench task, a case is Python's work: inputs drawn as
//! HPCAgent-Bench draws them, and its NumPy reference's outputs. A fresh
//! judge's first grade paid for that, and a submit for five held-out cases
//! more; and on the loop-level track, for the C its translator emits, the
//! grade's baseline, which warming makes first. Made here, they are in
//! the judge's cache when the grade comes, and a later judge on the same
//! cache finds them there. For a task timed against NumPy, the input sets
//! its first grade times on are made last, as after a grade
//! ([`crate::grade::make_ahead`]), for this judge alone.
//!
//! A case is made only while the judge grades nothing, and under the
//! node's timing lock, taken for that case on a descriptor of its own (a lock is per
//! open file, and the runners' descriptor is shared): the reference is
//! timed while no grade on the node times its calls, and no grade's calls
//! are timed while Python draws inputs beside them. A grade that needs a
//! case being made waits for it on the case's own lock and finds it made.
//! A native task's inputs are drawn in Rust in milliseconds and its
//! baseline is timed beside each submission, but its cases' reference
//! outputs are Python's too (a process and NumPy's import per case, 0.3 s
//! at S before the reference's own work): warming makes the public case
//! and the held-out cases of a submit at the task's precision.
//!
//! What is made ahead stays on disk in the judge's cache, and a task's
//! cases can be large (HPCAgent-Bench's gemm at S: about 430 MB for its
//! six): warming stops once the cases it went through take
//! [`WARM_BUDGET`] (and at most half the case cache's bound, so that what
//! it makes ahead is not trimmed by its own later cases), leaving the rest
//! of the list (the tasks leased last) to be made when first graded.
//!
//! This module owns what to make ahead and in what order; how a case is
//! made is [`crate::data::hab`]'s.

use std::time::{Duration, Instant};

use crate::data::hab::{HabCase, Need};
use crate::grade::{Mode, can_grade};
use crate::hab_tasks::Denominator;
use crate::judge::{Judge, node_quiet};
use hpcagent_corpus::{Precision, Preset};

/// The most disk the cases warming goes through may take: over a
/// corpus of hundreds of tasks, making every case ahead would fill a run
/// directory (each judge has its cache) with hundreds of gigabytes.
pub const WARM_BUDGET: u64 = 4 << 30;

/// How often warming looks again whether this judge's grades are done.
const GRADES_FIRST_POLL: Duration = Duration::from_millis(100);

/// A task to make the cases of: a kernel (an id, or an HPCAgent-Bench
/// path key), its precision where the campaign names one (else the
/// kernel's first), and its public case's preset.
#[derive(Debug, Clone, PartialEq)]
pub struct ToWarm {
    pub kernel: String,
    pub precision: Option<Precision>,
    pub preset: Preset,
}

/// Why a task was not warmed.
#[derive(Debug, thiserror::Error)]
pub enum WarmError {
    #[error(transparent)]
    Task(#[from] crate::hab_tasks::HabTaskError),
    #[error(transparent)]
    Data(#[from] crate::data::hab::HabDataError),
    #[error(transparent)]
    Lock(#[from] crate::judge::LockError),
    #[error(transparent)]
    Plan(#[from] hpcagent_corpus::hab::HabError),
    #[error(transparent)]
    CaseData(#[from] crate::data::DataError),
    #[error(transparent)]
    Resolve(#[from] crate::judge::JudgeError),
    #[error(transparent)]
    Size(#[from] hpcagent_corpus::SizeError),
    #[error(transparent)]
    Translate(#[from] crate::data::translated::TranslateError),
}

/// What warming did: tasks whose cases are made, and those refused with why.
#[derive(Debug, Default)]
pub struct Warmed {
    pub made: Vec<String>,
    pub refused: Vec<(String, WarmError)>,
    /// What the cases of `made` take on disk.
    pub bytes: u64,
    /// Tasks left unwarmed once [`WARM_BUDGET`] was reached.
    pub left: usize,
    pub took: Duration,
}

/// Makes the cases a submit of each of `tasks` runs: the public case,
/// then the held-out ones.
pub async fn warm(judge: &Judge, tasks: &[ToWarm], budget: u64) -> Warmed {
    let started = Instant::now();
    let budget = budget.min(judge.data.bound() / 2);
    let mut warmed = Warmed::default();
    for (done, task) in tasks.iter().enumerate() {
        if warmed.bytes >= budget {
            warmed.left = tasks.len() - done;
            break;
        }
        let made = match &judge.hab {
            Some(hab) => warm_task(judge, hab, &task.kernel, task.preset).await,
            None => warm_native(judge, task).await,
        };
        match made {
            Ok(bytes) => {
                warmed.made.push(task.kernel.clone());
                warmed.bytes += bytes;
            }
            Err(why) => {
                tracing::warn!("warming {}: {why}", task.kernel);
                warmed.refused.push((task.kernel.clone(), why));
            }
        }
    }
    warmed.took = started.elapsed();
    warmed
}

/// A native task's cases: inputs and reference outputs; what they take
/// on disk.
async fn warm_native(judge: &Judge, task: &ToWarm) -> Result<u64, WarmError> {
    let (kernel, precision) = judge.resolve(&task.kernel, task.precision)?;
    let plan = judge.cases_of(
        kernel,
        precision,
        task.preset,
        Mode::Submit,
        judge.config.secret,
    );
    let mut bytes = 0;
    for case in &plan {
        grades_first(judge).await;
        let _quiet = node_quiet().await?;
        judge.case_data(kernel, case).await?;
        bytes += kernel.bytes(&case.sizes, precision)?;
    }
    Ok(bytes)
}

/// Returns once this judge grades nothing.
async fn grades_first(judge: &Judge) {
    while !judge.slots.all_free() {
        tokio::time::sleep(GRADES_FIRST_POLL).await;
    }
}

async fn warm_task(
    judge: &Judge,
    hab: &crate::hab_tasks::HabTasks,
    id: &str,
    preset: Preset,
) -> Result<u64, WarmError> {
    let manifested = hab.find(id)?;
    let kernel = hab.graded(&judge.corpus, id)?;
    can_grade(judge, hab, manifested, preset).await?;
    if hab.denominator(manifested) == Denominator::Translator {
        // The C a grade builds as its baseline: seconds of Python.
        grades_first(judge).await;
        let _quiet = node_quiet().await?;
        judge
            .data
            .translated(&hab.root, manifested, &kernel.fingerprint)
            .await?;
    }
    let plans = crate::grade::case_plans(
        &hab.root,
        manifested,
        preset,
        judge.config.public_seed,
        judge.config.secret,
        Mode::Submit,
    )?;
    let mut bytes = 0;
    let mut public = None;
    for plan in &plans {
        // Grades first: a case is made only while this judge grades
        // nothing, and the node's lock is held for one case at a time,
        // so another judge's grade waits for one case at most.
        grades_first(judge).await;
        let _quiet = node_quiet().await?;
        let case = judge
            .data
            .hab_cases(kernel, std::slice::from_ref(plan), Need::Reference)
            .await?;
        bytes += case.iter().map(HabCase::bytes).sum::<u64>();
        public = public.or(case.into_iter().next());
    }
    if let Some(public) = public
        && hab.denominator(manifested) == Denominator::Numpy
    {
        grades_first(judge).await;
        crate::grade::make_ahead(judge, hab, kernel, preset, &public);
    }
    Ok(bytes)
}

/// Warms `tasks` in the background, within `budget` bytes, and logs what
/// it made; for an HPCAgent-Bench corpus, starts the judge's Python worker
/// first (a Python start and NumPy's import, which a first grade would
/// otherwise wait for).
pub fn spawn(judge: std::sync::Arc<Judge>, tasks: Vec<ToWarm>, budget: u64) {
    if judge.hab.is_some() {
        judge.data.start_worker();
    }
    if tasks.is_empty() {
        return;
    }
    tokio::spawn(async move {
        let warmed = warm(&judge, &tasks, budget).await;
        tracing::info!(
            made = warmed.made.len(),
            refused = warmed.refused.len(),
            left = warmed.left,
            mib = warmed.bytes >> 20,
            took_s = warmed.took.as_secs_f64(),
            "warmed the tasks' cases"
        );
    });
}
