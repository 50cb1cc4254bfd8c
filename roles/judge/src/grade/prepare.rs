//! Checking a request and building its code: the submission (or a library
//! given ready-made) becomes a [`Prepared`], or a build failure becomes its
//! verdict. It does not run anything nor build the baseline's source (that
//! is [`super::baseline`]'s, through here).

use crate::build::{BuildError, Built, Source, flags};
use crate::judge::{Code, Judge, JudgeError, Submission};
use crate::slots::Slot;
use crate::verdict::{Status, Verdict};
use hpcagent_corpus::language::Language;
use hpcagent_corpus::{Kernel, Precision, Preset};

use super::fail;

/// A built submission, ready to run: the library and what the build said.
pub(crate) struct Prepared<'a> {
    pub kernel: &'a Kernel,
    pub precision: Precision,
    /// The public case's preset (the request's, else the judge's).
    pub preset: Preset,
    pub language: Language,
    pub built: Built,
}

/// Checks the request and builds it; a build failure is a verdict.
pub(crate) async fn prepare<'a>(
    judge: &'a Judge,
    submission: &Submission,
    defines: &[String],
    slot: &Slot,
) -> Result<Result<(Prepared<'a>, Verdict), Verdict>, JudgeError> {
    let (kernel, precision) = judge.resolve(&submission.task_id, submission.precision)?;
    flags::check(
        &submission.flags,
        judge.config.shared.as_deref(),
        &judge.shared_libraries(),
    )
    .map_err(|e| JudgeError::InvalidArgument(e.to_string()))?;
    let language = submission.language;
    let mut verdict = Verdict::new(Status::HarnessError, "");
    verdict.task_id = kernel.id.clone();
    verdict.language = language.to_string();
    verdict.precision = precision.to_string();
    let preset = submission.preset.unwrap_or(judge.config.preset);
    verdict.preset = preset.to_string();
    let built = match &submission.code {
        Code::Library(path) => Built {
            library: judge.copy_library(path)?,
            log: String::new(),
            cached: false,
            seconds: 0.0,
        },
        Code::Source(text) => {
            let symbol = kernel.symbol(precision);
            let source = Source {
                language,
                text,
                stem: &symbol,
                flags: &submission.flags,
                defines,
                run_as: judge.isolation.run_as(slot.index),
                cpus: &slot.cpus,
            };
            match judge.builder.build(&source).await {
                Ok(built) => built,
                Err(BuildError::Missing(what)) => {
                    return Err(JudgeError::FailedPrecondition(what));
                }
                Err(BuildError::Failed { log }) => {
                    verdict.build_log = log;
                    return Ok(Err(fail(
                        verdict,
                        Status::BuildError,
                        "compilation failed (see the build log)",
                    )));
                }
                Err(BuildError::Refused(why)) => {
                    verdict.build_log = why.clone();
                    return Ok(Err(fail(verdict, Status::BuildError, why)));
                }
                Err(e @ BuildError::TimedOut(_)) => {
                    return Ok(Err(fail(verdict, Status::BuildError, e.to_string())));
                }
                Err(BuildError::Harness(e)) => {
                    return Ok(Err(fail(verdict, Status::HarnessError, e)));
                }
            }
        }
    };
    // Built before the device is asked for: a node without one (CI, a
    // login node) still tells code that does not compile.
    check_device(language)?;
    verdict.build_log = built.log.clone();
    verdict.cached_build = built.cached;
    Ok(Ok((
        Prepared {
            kernel,
            precision,
            preset,
            language,
            built,
        },
        verdict,
    )))
}

/// A GPU language needs its runtime on this node, and a device for it:
/// a node with one and not the other is said as plainly, never left to
/// fail each grade as the judge's own error. Asked once per language.
fn check_device(language: Language) -> Result<(), JudgeError> {
    use std::sync::OnceLock;
    static CUDA: OnceLock<Result<usize, String>> = OnceLock::new();
    static HIP: OnceLock<Result<usize, String>> = OnceLock::new();
    let seen = match language {
        Language::Cuda => &CUDA,
        Language::Hip => &HIP,
        _ => return Ok(()),
    };
    let count =
        seen.get_or_init(|| hpcagent_runner::device::count(language).map_err(|e| e.to_string()));
    match count {
        Ok(n) if *n > 0 => Ok(()),
        Ok(_) => Err(JudgeError::FailedPrecondition(format!(
            "{language} needs a GPU, and this node's runtime sees none"
        ))),
        Err(why) => Err(JudgeError::FailedPrecondition(format!(
            "{language} cannot run here: {why}"
        ))),
    }
}
