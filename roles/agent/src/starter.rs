//! What an LLM attempt starts from: a workspace with a solution file and the
//! skills pages, and the briefing (system prompt and task statement). What
//! those say is [`crate::prompt`]'s and [`crate::task_view`]'s.

use crate::prompt::{self, Skill};
use crate::task_view;
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
        .write(&solution, &task_view::solution(&task, &task.precision))
        .map_err(|e| e.to_string())?;
    prompt::copy_into(skills, tools.workspace().root()).map_err(|e| e.to_string())?;
    let names: Vec<&str> = tools.specs().iter().map(|s| s.name).collect();
    Ok(Briefing {
        system: prompt::system(skills, &task.language, profiling, &names),
        task: task_view::statement(&task, &solution),
    })
}
