//! The `baseline` policy: submit the kernel's own baseline.
//!
//! No LLM: it proves the whole pipeline (lease, judge, settle) and calibrates
//! a cluster, since its speedup should be about 1. The baseline is C written
//! with `real` and `SYMBOL` macros; the policy defines them for the task's
//! precision, and wraps it for C++. Other languages it cannot write: it says
//! so and the attempt ends unsupported.

use hpcagent_proto::v1 as pb;

use crate::judge_link::{JudgeLink, LinkError};
use crate::pool::Attempt;

pub async fn attempt(judge: &mut JudgeLink, lease: &pb::Lease, instance: &str) -> Attempt {
    match submit(judge, lease, instance).await {
        Ok(attempt) => attempt,
        Err(e) => Attempt {
            outcome: "error",
            message: e.to_string(),
        },
    }
}

async fn submit(
    judge: &mut JudgeLink,
    lease: &pb::Lease,
    instance: &str,
) -> Result<Attempt, LinkError> {
    let request = pb::TaskRequest {
        task_id: lease.kernel.clone(),
        language: lease.language.clone(),
        precision: lease.precision.clone(),
    };
    let task = judge
        .call(|mut j| {
            let request = request.clone();
            async move { j.task(request).await }
        })
        .await?;
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
    let request = pb::GradeRequest {
        task_id: lease.kernel.clone(),
        language: lease.language.clone(),
        precision: lease.precision.clone(),
        code: Some(pb::grade_request::Code::Source(source)),
        flags: Vec::new(),
        client: instance.to_string(),
        lease_id: lease.lease_id.clone(),
    };
    let verdict = match judge
        .call(|mut j| {
            let request = request.clone();
            async move { j.submit(request).await }
        })
        .await
    {
        Ok(verdict) => verdict,
        Err(LinkError::Refused(status)) => {
            return Ok(Attempt {
                outcome: "error",
                message: format!("the judge refused the submission: {}", status.message()),
            });
        }
        Err(e) => return Err(e),
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
