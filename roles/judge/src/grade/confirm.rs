//! Defence in depth: a Submit whose speedup is above what honest kernels of
//! its task are expected to reach is not credited on one grade's word.
//!
//! The walls around a run are meant to make a forged speedup impossible;
//! this is for the day one of them has a hole nobody knows of yet. Such a
//! verdict is graded again before it is credited: here, on fresh inputs
//! (the timed inputs of every grade are its own already; the confirming
//! grade draws its held-out cases from a secret of its own too), and by
//! another judge of the campaign, which shares nothing with this one but
//! the code it runs (not its cache, its node's state or its runs). The
//! verdict then says what confirmed it, and credits the least of the
//! speedups; a confirmation that is not `ok` is the verdict instead.
//! HPCAgent-Bench holds a result above 1,000× for review
//! (`implausible_speedup`); the bound here is per task, and lower where the
//! denominator is the task's own C baseline.

use hpcagent_proto::v1 as pb;

use crate::judge::{Code, Judge, JudgeError, Submission};
use crate::verdict::{Status, Verdict};
use hpcagent_corpus::Kernel;

/// Above this speedup over NumPy (an HPCAgent-Bench task without a C
/// baseline) a submit is confirmed: a straight translation of a loop-level
/// task already measures 10× to 1,500× there; HPCAgent-Bench's own bound.
pub const OVER_NUMPY: f64 = 1000.0;

/// The speedup above which a submit of `kernel`, measured against
/// `denominator`, is confirmed before it is credited.
pub(crate) fn plausible_speedup(judge: &Judge, kernel: &Kernel, denominator: &str) -> f64 {
    if let Some(bound) = kernel.plausible_speedup {
        return bound;
    }
    if denominator == "numpy" {
        return OVER_NUMPY;
    }
    judge.config.plausible_per_cpu * judge.slots.runner_cpus() as f64
}

/// `first`, an `ok` submit, once confirmed when its speedup is above
/// its task's plausible bound: graded again here (`again`, with
/// held-out cases of a secret of its own) and by a peer judge when
/// there is one.
pub(crate) async fn confirmed<F>(
    judge: &Judge,
    submission: &Submission,
    first: Verdict,
    bound: f64,
    again: F,
) -> Verdict
where
    F: std::future::Future<Output = Result<Verdict, JudgeError>>,
{
    let above = first.speedup.is_some_and(|s| s > bound);
    if first.status != Status::Ok || !above || submission.confirming {
        return first;
    }
    let here = again.await.map_err(|e| e.to_string());
    let mut confirmations = vec![("a grade again on fresh inputs".to_string(), here)];
    let peer = judge.peers.pick();
    if let Some(peer) = &peer {
        let graded = judge.peers.submit(peer, request(submission)).await;
        confirmations.push((format!("judge {peer}"), graded));
    }
    settle(first, bound, confirmations, peer.is_none())
}

/// The credited verdict: the least `ok` speedup of them all, or the first
/// confirmation that is not `ok`, with the story in `plausibility`.
fn settle(
    first: Verdict,
    bound: f64,
    confirmations: Vec<(String, Result<Verdict, String>)>,
    alone: bool,
) -> Verdict {
    let above = format!(
        "{:.2}× is above the {bound:.2}× plausible for this task",
        first.speedup.unwrap_or(0.0)
    );
    let mut credited = first;
    let mut said = Vec::new();
    for (who, graded) in confirmations {
        let verdict = match graded {
            Ok(verdict) => verdict,
            Err(e) => {
                said.push(format!("{who} could not grade it ({e})"));
                continue;
            }
        };
        if verdict.status != Status::Ok {
            let plausibility = format!(
                "{above}; {who} found it {}: {}",
                verdict.status.as_str(),
                verdict.message
            );
            return Verdict {
                plausibility,
                ..verdict
            };
        }
        said.push(format!("{who} gave {:.2}×", verdict.speedup.unwrap_or(0.0)));
        if verdict.speedup < credited.speedup {
            credited.speedup = verdict.speedup;
            credited.speedup_low = verdict.speedup_low;
            credited.speedup_high = verdict.speedup_high;
        }
    }
    if alone {
        said.push("no other judge to ask".into());
    }
    credited.plausibility = format!(
        "{above}: confirmed before credited ({}); the least is credited",
        said.join("; ")
    );
    credited
}

/// The confirming request a peer grades: the same submission, as a Submit
/// it neither records nor confirms again.
fn request(submission: &Submission) -> pb::GradeRequest {
    let code = match &submission.code {
        Code::Source(text) => pb::grade_request::Code::Source(text.clone()),
        Code::Library(path) => pb::grade_request::Code::LibraryPath(path.display().to_string()),
    };
    pb::GradeRequest {
        on_behalf: None,
        task_id: submission.task_id.clone(),
        language: submission.language.as_str().to_string(),
        precision: submission
            .precision
            .map(|p| p.as_str().to_string())
            .unwrap_or_default(),
        code: Some(code),
        flags: submission.flags.clone(),
        client: "a judge confirming a speedup".into(),
        lease_id: String::new(),
        preset: submission
            .preset
            .map(|p| p.as_str().to_string())
            .unwrap_or_default(),
        confirming: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(speedup: f64) -> Verdict {
        let mut v = Verdict::new(Status::Ok, "correct");
        v.speedup = Some(speedup);
        v.speedup_low = Some(speedup * 0.99);
        v.speedup_high = Some(speedup * 1.01);
        v
    }

    #[test]
    fn confirmed_speedups_credit_the_least_and_say_who_confirmed() {
        let confirmations = vec![
            ("a grade again on fresh inputs".to_string(), Ok(ok(41.0))),
            ("judge http://b:8800".to_string(), Ok(ok(39.5))),
        ];
        let v = settle(ok(40.0), 32.0, confirmations, false);
        assert_eq!(v.status, Status::Ok);
        assert_eq!(v.speedup, Some(39.5));
        assert_eq!(v.speedup_low, Some(39.5 * 0.99));
        assert!(
            v.plausibility
                .starts_with("40.00× is above the 32.00× plausible"),
            "{}",
            v.plausibility
        );
        assert!(
            v.plausibility.contains("judge http://b:8800 gave 39.50×"),
            "{}",
            v.plausibility
        );
    }

    #[test]
    fn a_confirmation_that_is_not_ok_is_the_verdict() {
        let confirmations = vec![(
            "a grade again on fresh inputs".to_string(),
            Ok(Verdict::new(Status::Overfit, "wrong on held-out cases")),
        )];
        let v = settle(ok(900.0), 32.0, confirmations, true);
        assert_eq!(v.status, Status::Overfit);
        assert_eq!(v.speedup, None);
        assert!(
            v.plausibility.contains("found it overfit"),
            "{}",
            v.plausibility
        );
    }

    #[test]
    fn a_peer_that_cannot_grade_is_said_and_the_rest_stands() {
        let confirmations = vec![
            ("a grade again on fresh inputs".to_string(), Ok(ok(50.0))),
            (
                "judge http://gone:1".to_string(),
                Err("cannot reach it".into()),
            ),
        ];
        let v = settle(ok(60.0), 32.0, confirmations, false);
        assert_eq!((v.status, v.speedup), (Status::Ok, Some(50.0)));
        assert!(
            v.plausibility
                .contains("could not grade it (cannot reach it)"),
            "{}",
            v.plausibility
        );
    }
}
