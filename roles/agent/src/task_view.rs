//! How a task is shown to the agent: its statement (the first user message,
//! and the `task` tool's reply), the name of its solution file, and what
//! that file holds at first. The words are the model's, and tests read them.
//!
//! The kernel's baseline is C written with `real` and `SYMBOL` macros; for C
//! and C++ tasks it becomes a correct starting point (and what the `baseline`
//! policy submits). Other languages start from the task's prototype.
//!
//! It does not fetch the task (the tools do) nor fill the workspace (the
//! starter does).

use hpcagent_proto::v1 as pb;

/// The file an attempt's solution lives in.
pub fn solution_file(language: &str) -> String {
    let extension = match language {
        "cpp" => "cpp",
        "fortran" => "f90",
        "cuda" => "cu",
        "hip" => "hip",
        _ => "c",
    };
    format!("solution.{extension}")
}

/// The first user message: what to optimise.
pub fn statement(task: &pb::TaskInfo, solution: &str) -> String {
    let sizes: Vec<String> = task
        .sizes
        .iter()
        .map(|d| format!("{}={}", d.name, d.value))
        .collect();
    let mut out = format!(
        "Task: {} ({}), in {} at {}.\n{}\n\nImplement exactly:\n{}\n\n\
         Sizes at preset {}: {}. Tolerances: rtol {:e}, atol {:e}.\n\
         {start}\n",
        task.kernel,
        task.track,
        task.language,
        task.precision,
        task.description.trim(),
        if task.language_prototype.is_empty() {
            &task.c_prototype
        } else {
            &task.language_prototype
        },
        task.preset,
        sizes.join(", "),
        task.rtol,
        task.atol,
        start = if baseline(task, &task.precision).is_some() {
            format!(
                "Your workspace holds {solution}, the baseline: correct, and yours to make faster."
            )
        } else {
            format!(
                "Your workspace holds {solution}, a stub with the prototype: write the kernel there."
            )
        },
    );
    if !task.allowed_flags.is_empty() {
        out.push_str(&format!(
            "Extra compiler flags you may pass: {}\n",
            task.allowed_flags
        ));
    }
    if !task.notes.trim().is_empty() {
        out.push_str(&format!("Notes: {}\n", task.notes.trim()));
    }
    out
}

/// The baseline as a submission in the task's language, where it can be one.
pub fn baseline(task: &pb::TaskInfo, precision: &str) -> Option<String> {
    wrap(
        &task.baseline_source,
        &task.language,
        &task.symbol,
        precision,
    )
}

/// What an attempt's solution file holds at first.
pub fn solution(task: &pb::TaskInfo, precision: &str) -> String {
    baseline(task, precision).unwrap_or_else(|| {
        let comment = match task.language.as_str() {
            "fortran" => "!",
            _ => "//",
        };
        format!(
            "{comment} Implement {} ({}) here, exactly as this prototype says:\n{}\n",
            task.symbol,
            task.language,
            task.language_prototype
                .lines()
                .map(|l| format!("{comment} {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        )
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

    #[test]
    fn other_languages_start_from_the_prototype() {
        let task = pb::TaskInfo {
            language: "fortran".into(),
            symbol: "gemm_fp64".into(),
            language_prototype: "subroutine gemm_fp64(a) bind(C)\nend subroutine".into(),
            ..Default::default()
        };
        let start = solution(&task, "fp64");
        assert!(
            start.contains("! subroutine gemm_fp64(a) bind(C)"),
            "{start}"
        );
    }
}
