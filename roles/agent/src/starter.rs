//! What an LLM attempt starts from: a workspace with a solution file and the
//! skills pages, and the briefing (system prompt and task statement).
//!
//! The kernel's baseline is C written with `real` and `SYMBOL` macros; for C
//! and C++ tasks it becomes a correct starting point (and what the `baseline`
//! policy submits). Other languages start from the task's prototype.

use hpcagent_proto::v1 as pb;

use crate::prompt::{self, Skill};
use crate::tools::Toolbox;

/// What an agent is told at the start.
pub struct Briefing {
    pub system: String,
    pub task: String,
}

/// Fills the attempt's workspace and writes the briefing.
pub async fn prepare(
    tools: &mut Toolbox,
    skills: &[Skill],
    profiling: bool,
) -> Result<Briefing, String> {
    let task = tools.task().await.map_err(|e| e.to_string())?;
    let solution = tools.solution_file();
    tools
        .workspace()
        .write(&solution, &self::solution(&task, &task.precision))?;
    prompt::copy_into(skills, tools.workspace().root()).map_err(|e| e.to_string())?;
    let names: Vec<&str> = tools.specs().iter().map(|s| s.name).collect();
    Ok(Briefing {
        system: prompt::system(skills, &task.language, profiling, &names),
        task: prompt::task_statement(&task, &solution),
    })
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
