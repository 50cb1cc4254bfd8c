//! The vLLM the step will run, and the flags it accepts.
//!
//! Images pin vLLM (Alps: 0.11.0, Beverin: AMD's 0.14.0), and vLLM refuses
//! a flag it does not know (argparse: exit 2, "unrecognized arguments")
//! before loading anything. So the role asks the image's vLLM its version
//! once (`vllm --version`, which needs the node's GPU, as `serve` does),
//! keeps the answer beside its logs, and fits the plan's line to it:
//!
//! | flag | since | without it |
//! |---|---|---|
//! | `--distributed-timeout-seconds` | 0.18.0 (PR 36047) | dropped: PyTorch's 600 s |
//! | `--nnodes`, `--node-rank`, `--master-addr`, `--master-port` (`mp` over nodes) | 0.11.1 (PR 23691) | refused: one replica per node |
//!
//! A version it cannot read leaves the line as planned, said in the log:
//! vLLM itself then names what it refuses.

use std::path::Path;
use std::time::Duration;

/// How long `vllm --version` may take (it imports torch and finds the GPU).
const ASK_WITHIN: Duration = Duration::from_secs(180);

/// A vLLM release, as `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// A flag of the plan's line and the release that first accepts it.
struct Newer {
    flag: &'static str,
    since: Version,
    /// Whether the line works without it (dropped) or not (refused).
    optional: bool,
}

const NEWER: [Newer; 5] = [
    Newer {
        flag: "--distributed-timeout-seconds",
        since: Version(0, 18, 0),
        optional: true,
    },
    Newer {
        flag: "--nnodes",
        since: Version(0, 11, 1),
        optional: false,
    },
    Newer {
        flag: "--node-rank",
        since: Version(0, 11, 1),
        optional: false,
    },
    Newer {
        flag: "--master-addr",
        since: Version(0, 11, 1),
        optional: false,
    },
    Newer {
        flag: "--master-port",
        since: Version(0, 11, 1),
        optional: false,
    },
];

/// The first `X.Y.Z` of `text` (`0.14.0+rocm700`, `vLLM 0.11.0`).
pub fn parse(text: &str) -> Option<Version> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find_map(|word| {
            let mut parts = word.split('.').map(|p| p.parse::<u32>().ok());
            Some(Version(parts.next()??, parts.next()??, parts.next()??))
        })
}

/// `argv` as `version` accepts it, with what was dropped and why; or why
/// it cannot run at all.
pub fn fit(argv: &[String], version: Version) -> Result<(Vec<String>, Vec<String>), String> {
    let mut kept = Vec::with_capacity(argv.len());
    let mut dropped = Vec::new();
    let mut words = argv.iter();
    while let Some(word) = words.next() {
        let Some(newer) = NEWER.iter().find(|n| n.flag == word && version < n.since) else {
            kept.push(word.clone());
            continue;
        };
        if !newer.optional {
            return Err(format!(
                "vLLM {version} in this image cannot serve one replica over several nodes \
                 ({} came in {}): set NODES_PER_REPLICA=1, or use an image with vLLM {} or later",
                newer.flag, newer.since, newer.since
            ));
        }
        let value = words.next().cloned().unwrap_or_default();
        dropped.push(format!(
            "{} {value} (vLLM {version} has no such flag; it came in {})",
            newer.flag, newer.since
        ));
    }
    Ok((kept, dropped))
}

/// Asks the vLLM of `argv` (the words before `serve`) its version, and
/// writes the answer to `log_dir/vllm-version`.
pub async fn ask(argv: &[String], log_dir: &Path) -> Result<Version, String> {
    let serve = argv
        .iter()
        .position(|a| a == "serve")
        .ok_or("the line has no `serve`")?;
    let (program, args) = argv[..serve]
        .split_first()
        .ok_or("the line has no program")?;
    let run = tokio::process::Command::new(program)
        .args(args)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(ASK_WITHIN, run)
        .await
        .map_err(|_| format!("`{program} --version` took over {ASK_WITHIN:?}"))?
        .map_err(|e| format!("`{program} --version`: {e}"))?;
    let said = String::from_utf8_lossy(&out.stdout);
    // vLLM logs to stdout: the version is its last line.
    let answer = said.lines().last().unwrap_or_default();
    let version = parse(answer)
        .filter(|_| out.status.success())
        .ok_or_else(|| {
            format!(
                "`{program} --version` said {answer:?} ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or_default()
            )
        })?;
    let _ = std::fs::write(log_dir.join("vllm-version"), format!("{version}\n"));
    Ok(version)
}

/// The plan's line for this image's vLLM: asked, fitted, and what was
/// dropped said in the log. A line that cannot run is refused.
pub async fn fitted(
    argv: Vec<String>,
    log_dir: &Path,
) -> Result<Vec<String>, hpcagent_common::Refused> {
    let version = match ask(&argv, log_dir).await {
        Ok(version) => version,
        Err(why) => {
            tracing::warn!("cannot tell which vLLM this is, so its line is run as planned: {why}");
            return Ok(argv);
        }
    };
    let (argv, dropped) = fit(&argv, version).map_err(hpcagent_common::Refused)?;
    for what in dropped {
        tracing::warn!("dropped {what}");
    }
    tracing::info!(%version, "vLLM");
    Ok(argv)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn versions_are_read_from_what_vllm_and_its_images_print() {
        assert_eq!(parse("0.11.0"), Some(Version(0, 11, 0)));
        assert_eq!(parse("0.14.0+rocm700"), Some(Version(0, 14, 0)));
        assert_eq!(parse("0.32.0+cpu"), Some(Version(0, 32, 0)));
        assert_eq!(parse("RuntimeError: Failed to infer device type"), None);
    }

    /// Beverin's line (a replica over two nodes, the site's distributed
    /// timeout) on each pinned image, and on a vLLM that has it all.
    #[test]
    fn a_line_is_fitted_to_the_images_vllm() {
        let line = words(
            "vllm serve m --nnodes 2 --node-rank 0 --master-addr n1 --master-port 8100 \
             --distributed-timeout-seconds 3600",
        );
        let (beverin, dropped) = fit(&line, Version(0, 14, 0)).unwrap();
        assert_eq!(
            beverin,
            words("vllm serve m --nnodes 2 --node-rank 0 --master-addr n1 --master-port 8100")
        );
        assert_eq!(dropped.len(), 1);
        assert!(
            dropped[0].starts_with("--distributed-timeout-seconds 3600"),
            "{dropped:?}"
        );
        let (newest, dropped) = fit(&line, Version(0, 18, 0)).unwrap();
        assert_eq!((newest, dropped.len()), (line.clone(), 0));
        let alps = fit(&line, Version(0, 11, 0)).unwrap_err();
        assert!(
            alps.contains("vLLM 0.11.0") && alps.contains("NODES_PER_REPLICA=1"),
            "{alps}"
        );
        // Alps's own line, a replica per node, runs on its image.
        let single = words("vllm serve m --tensor-parallel-size 4 --port 8000");
        assert_eq!(fit(&single, Version(0, 11, 0)).unwrap().0, single);
    }
}
