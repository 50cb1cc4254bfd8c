//! The `baseline` policy: submit the kernel's own baseline.
//!
//! No LLM: it proves the whole pipeline (lease, judge, settle) and calibrates
//! a cluster, since its speedup should be about 1. The baseline is C written
//! with `real` and `SYMBOL` macros; the policy defines them for the task's
//! precision, and wraps it for C++. Other languages it cannot write: it says
//! so and the attempt ends unsupported.

use std::time::Duration;

use hpcagent_orchestrator::client::Client;
use hpcagent_proto::v1 as pb;
use hpcagent_proto::v1::judge_client::JudgeClient;

use crate::pool::Attempt;

/// Tries per attempt when the judge does not answer (each on another judge).
const JUDGE_TRIES: usize = 3;

pub async fn attempt(orchestrator: &mut Client, lease: &pb::Lease, instance: &str) -> Attempt {
    let mut judge_url = lease.judge_url.clone();
    let mut last_error = String::new();
    for _ in 0..JUDGE_TRIES {
        match submit(&judge_url, lease, instance).await {
            Ok(attempt) => return attempt,
            Err(Unreachable(why)) => {
                tracing::warn!(judge = %judge_url, "judge failed: {why}");
                last_error = why;
                match orchestrator
                    .renew_lease(pb::RenewLeaseRequest {
                        lease_id: lease.lease_id.clone(),
                        judge_failed: true,
                    })
                    .await
                {
                    Ok(reply) => judge_url = reply.into_inner().judge_url,
                    Err(status) => {
                        return Attempt {
                            outcome: "error",
                            message: format!("the lease is gone: {}", status.message()),
                        };
                    }
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
    Attempt {
        outcome: "error",
        message: format!("no judge answered after {JUDGE_TRIES} tries: {last_error}"),
    }
}

/// The judge could not be reached or could not grade: try another.
struct Unreachable(String);

async fn submit(
    judge_url: &str,
    lease: &pb::Lease,
    instance: &str,
) -> Result<Attempt, Unreachable> {
    let mut judge = JudgeClient::connect(judge_url.to_string())
        .await
        .map_err(|e| Unreachable(e.to_string()))?
        .max_decoding_message_size(64 << 20);
    let task = judge
        .task(pb::TaskRequest {
            task_id: lease.kernel.clone(),
            language: lease.language.clone(),
            precision: lease.precision.clone(),
        })
        .await
        .map_err(|s| Unreachable(s.message().to_string()))?
        .into_inner();
    let Some(source) = wrap(
        &task.baseline_source,
        &lease.language,
        &task.symbol,
        &lease.precision,
    ) else {
        return Ok(Attempt {
            outcome: "unsupported",
            message: format!(
                "the baseline policy writes c and cpp, not {}",
                lease.language
            ),
        });
    };
    let dir = std::path::Path::new(&lease.attempt_dir);
    let _ = std::fs::write(
        dir.join(format!("submission.{}", extension(&lease.language))),
        &source,
    );
    let reply = judge
        .submit(pb::GradeRequest {
            task_id: lease.kernel.clone(),
            language: lease.language.clone(),
            precision: lease.precision.clone(),
            code: Some(pb::grade_request::Code::Source(source)),
            flags: Vec::new(),
            client: instance.to_string(),
            lease_id: lease.lease_id.clone(),
        })
        .await;
    let verdict = match reply {
        Ok(v) => v.into_inner(),
        Err(status)
            if matches!(
                status.code(),
                tonic::Code::Unavailable | tonic::Code::Unknown
            ) =>
        {
            return Err(Unreachable(status.message().to_string()));
        }
        Err(status) => {
            return Ok(Attempt {
                outcome: "error",
                message: format!("the judge refused the submission: {}", status.message()),
            });
        }
    };
    let status = pb::Status::try_from(verdict.status).unwrap_or(pb::Status::Unspecified);
    let summary = serde_json::json!({
        "status": status.as_str_name(),
        "message": verdict.message,
        "speedup": verdict.speedup,
    });
    let _ = std::fs::write(dir.join("verdict.json"), summary.to_string());
    Ok(Attempt {
        outcome: "submitted",
        message: format!("{}: {}", status.as_str_name(), verdict.message),
    })
}

/// The baseline as a submission in `language`, or `None` if this policy cannot write it.
fn wrap(baseline: &str, language: &str, symbol: &str, precision: &str) -> Option<String> {
    let real = if precision == "fp32" {
        "float"
    } else {
        "double"
    };
    let defines = format!("#define SYMBOL {symbol}\n#define real {real}\n");
    match language {
        "c" => Some(format!("{defines}{baseline}")),
        "cpp" => {
            // Headers stay outside the C-linkage block (<math.h> in C++ brings templates).
            let (includes, body): (Vec<&str>, Vec<&str>) = baseline
                .lines()
                .partition(|l| l.trim_start().starts_with("#include"));
            Some(format!(
                "{defines}#define restrict __restrict__\n{}\nextern \"C\" {{\n{}\n}}\n",
                includes.join("\n"),
                body.join("\n")
            ))
        }
        _ => None,
    }
}

fn extension(language: &str) -> &str {
    match language {
        "cpp" => "cpp",
        _ => "c",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_for_c_and_cpp_only() {
        let c = wrap("void SYMBOL(real *x) {}", "c", "k_fp32", "fp32").unwrap();
        assert!(c.starts_with("#define SYMBOL k_fp32\n#define real float\n"));
        let cpp = wrap(
            "#include <math.h>\nvoid SYMBOL() {}",
            "cpp",
            "k_fp64",
            "fp64",
        )
        .unwrap();
        assert!(
            cpp.find("#include <math.h>") < cpp.find("extern \"C\""),
            "{cpp}"
        );
        assert!(wrap("x", "fortran", "k_fp64", "fp64").is_none());
    }
}
