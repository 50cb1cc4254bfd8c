//! What an agent is told of its job: the system prompt (the job, its tools,
//! the skills pages). The task itself is shown by [`crate::task_view`].
//!
//! Skills are `skills/<name>/SKILL.md` pages with a small frontmatter:
//! `name`, `description`, and optionally `languages` (the page applies to
//! tasks in those languages) or `instrument` (a profiler; the page applies
//! only with `PROFILING_GUIDANCE=1`). Every page's index line is always in the
//! prompt; a body is inlined only when the page applies, and every page is
//! copied into the workspace so the agent can read the others.

use std::path::{Path, PathBuf};

/// Environment variable naming the skills directory (set by `up`).
pub const SKILLS_VAR: &str = "HPCAGENT_SKILLS";

#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// Languages the page applies to; empty: every task (unless an instrument page).
    pub languages: Vec<String>,
    /// The profiler the page is about.
    pub instrument: Option<String>,
    pub body: String,
}

impl Skill {
    fn applies(&self, language: &str, profiling: bool) -> bool {
        match &self.instrument {
            Some(_) => profiling,
            None => self.languages.is_empty() || self.languages.iter().any(|l| l == language),
        }
    }
}

/// The skills directory: `HPCAGENT_SKILLS`, else `skills/` here or in the source tree.
pub fn default_root() -> PathBuf {
    if let Ok(dir) = std::env::var(SKILLS_VAR) {
        return PathBuf::from(dir);
    }
    [
        std::env::current_dir().ok().map(|d| d.join("skills")),
        Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../skills")),
    ]
    .into_iter()
    .flatten()
    .find(|p| p.is_dir())
    .unwrap_or_else(|| PathBuf::from("skills"))
}

/// Every page under `root`, by name.
pub fn load(root: &Path) -> Result<Vec<Skill>, String> {
    let mut pages = Vec::new();
    let entries = std::fs::read_dir(root).map_err(|e| format!("{}: {e}", root.display()))?;
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path().join("SKILL.md");
        if !path.is_file() {
            continue;
        }
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        pages.push(parse(&text).map_err(|e| format!("{}: {e}", path.display()))?);
    }
    pages.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(pages)
}

/// A page: `---` frontmatter of `key: value` lines, then the body. (Four
/// scalar keys do not warrant a YAML parser.)
fn parse(text: &str) -> Result<Skill, String> {
    let rest = text
        .strip_prefix("---\n")
        .ok_or("a page starts with a `---` frontmatter line")?;
    let (front, body) = rest
        .split_once("\n---\n")
        .ok_or("the frontmatter has no closing `---` line")?;
    let mut skill = Skill {
        name: String::new(),
        description: String::new(),
        languages: Vec::new(),
        instrument: None,
        body: body.trim().to_string(),
    };
    for line in front.lines().filter(|l| !l.trim().is_empty()) {
        let (key, value) = line
            .split_once(':')
            .ok_or_else(|| format!("{line:?} is not `key: value`"))?;
        let value = value.trim().trim_matches('"').to_string();
        match key.trim() {
            "name" => skill.name = value,
            "description" => skill.description = value,
            "languages" => {
                skill.languages = value
                    .trim_matches(['[', ']'])
                    .split(',')
                    .map(|l| l.trim().to_string())
                    .filter(|l| !l.is_empty())
                    .collect();
            }
            "instrument" => skill.instrument = Some(value),
            other => return Err(format!("unknown frontmatter key {other:?}")),
        }
    }
    if skill.name.is_empty() || skill.description.is_empty() {
        return Err("the frontmatter needs `name` and `description`".into());
    }
    Ok(skill)
}

/// Copies every page into `<workspace>/skills/<name>.md`.
pub fn copy_into(skills: &[Skill], workspace: &Path) -> std::io::Result<()> {
    let dir = workspace.join("skills");
    std::fs::create_dir_all(&dir)?;
    for s in skills {
        std::fs::write(
            dir.join(format!("{}.md", s.name)),
            format!("# {}\n\n{}\n", s.name, s.body),
        )?;
    }
    Ok(())
}

/// The system prompt for a task in `language`.
pub fn system(skills: &[Skill], language: &str, profiling: bool, tools: &[&str]) -> String {
    let mut out = String::from(
        "You are an HPC performance engineer. Make the kernel of your task as fast as you \
         can while its results stay correct. A judge builds, checks and times your code; \
         only its verdicts count.\n\n\
         Work in steps: read the task (`task`), write your code in the workspace \
         (`write_file`), grade it with `score` (correctness and speedup against the \
         baseline) as often as you like, and `submit` once when you are done: submit \
         grades on held-out inputs too, and ends the attempt. `finish` stops without \
         submitting; the workspace's solution file is then submitted for you.\n\n",
    );
    out.push_str(&format!("Tools: {}.\n\n", tools.join(", ")));
    out.push_str("Skills (pages in the workspace under skills/; read one with read_file):\n");
    for s in skills {
        out.push_str(&format!("- skills/{}.md: {}\n", s.name, s.description));
    }
    for s in skills.iter().filter(|s| s.applies(language, profiling)) {
        out.push_str(&format!("\n## {}\n\n{}\n", s.name, s.body));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str =
        "---\nname: c\ndescription: C on the judge\nlanguages: c, cpp\n---\nUse restrict.\n";
    const TOOL: &str =
        "---\nname: linuxperf\ndescription: perf stat\ninstrument: linuxperf\n---\nCount cycles.\n";
    const CONTRACT: &str = "---\nname: judge\ndescription: the contract\n---\nScore often.\n";

    fn pages() -> Vec<Skill> {
        [PAGE, TOOL, CONTRACT]
            .iter()
            .map(|p| parse(p).unwrap())
            .collect()
    }

    #[test]
    fn bodies_are_inlined_where_they_apply_and_every_page_is_indexed() {
        let skills = pages();
        let prompt = system(&skills, "c", false, &["task", "score"]);
        for s in &skills {
            assert!(prompt.contains(&format!("- skills/{}.md: {}", s.name, s.description)));
        }
        assert!(prompt.contains("Use restrict.") && prompt.contains("Score often."));
        assert!(
            !prompt.contains("Count cycles."),
            "instruments only with guidance"
        );
        let fortran = system(&skills, "fortran", true, &["task"]);
        assert!(
            !fortran.contains("Use restrict."),
            "the C page is not for Fortran"
        );
        assert!(fortran.contains("Count cycles."));
    }

    #[test]
    fn malformed_pages_are_refused_with_the_reason() {
        assert!(parse("no frontmatter").unwrap_err().contains("starts with"));
        assert!(
            parse("---\nname: x\n---\nbody")
                .unwrap_err()
                .contains("description")
        );
        assert!(
            parse("---\nname: x\ndescription: y\ncolour: red\n---\n")
                .unwrap_err()
                .contains("colour")
        );
    }

    #[test]
    fn the_prompt_of_a_c_task_indexes_every_page_and_gates_the_instruments() {
        let skills = load(&default_root()).unwrap();
        let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        for expected in [
            "judge",
            "c",
            "cpp",
            "fortran",
            "cuda",
            "hip",
            "linuxperf",
            "papi",
            "nsys",
            "ncu",
            "rocprofv3",
        ] {
            assert!(names.contains(&expected), "no {expected} page in {names:?}");
        }
        let prompt = system(&skills, "c", false, &["task"]);
        for s in &skills {
            assert!(
                prompt.contains(&format!("- skills/{}.md: {}", s.name, s.description)),
                "{} is not indexed",
                s.name
            );
            let inlined = prompt.contains(&s.body);
            match (&s.instrument, s.name.as_str()) {
                (Some(_), _) => assert!(!inlined, "{}: instruments need guidance", s.name),
                (None, "judge" | "c") => assert!(inlined, "{} applies to C", s.name),
                (None, _) => assert!(!inlined, "{} is not for C", s.name),
            }
        }
        let guided = system(&skills, "c", true, &["task"]);
        for s in skills.iter().filter(|s| s.instrument.is_some()) {
            assert!(
                guided.contains(&s.body),
                "{} with PROFILING_GUIDANCE=1",
                s.name
            );
        }
    }
}
