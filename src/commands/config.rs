//! `hpcagent config`: the resolved configuration with provenance, or the docs.

use clap::Args;
use hpcagent_common::config::docs;

use super::ConfigFlags;

#[derive(Debug, Args)]
pub struct ConfigArgs {
    #[command(flatten)]
    config: ConfigFlags,
    /// Print the typed settings as JSON instead of the table.
    #[arg(long)]
    json: bool,
    /// Print the env-file reference (docs/env-file.md) and exit.
    #[arg(long, conflicts_with = "json")]
    docs: bool,
}

pub fn run(args: ConfigArgs) -> anyhow::Result<()> {
    if args.docs {
        print!("{}", docs::markdown());
        return Ok(());
    }
    let config = args.config.load(Vec::new())?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&config.settings)?);
        return Ok(());
    }
    let width = config
        .resolved()
        .iter()
        .map(|r| r.key.len())
        .max()
        .unwrap_or(0);
    let value_width = config
        .resolved()
        .iter()
        .map(|r| r.text.chars().count().min(48))
        .max()
        .unwrap_or(0);
    for r in config.resolved() {
        let text = if r.text.is_empty() {
            "(unset)"
        } else {
            &r.text
        };
        println!("{:width$}  {text:value_width$}  {}", r.key, r.origin);
    }
    Ok(())
}
