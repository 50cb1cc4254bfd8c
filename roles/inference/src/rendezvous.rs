//! Where the ranks of a multi-node replica meet.
//!
//! The plan names rank 0's node as `--master-addr`; a node name resolves to
//! the management network, not the high-speed one NCCL/RCCL use. When the
//! plan gives an interface ([`VllmLaunch::rendezvous_ifname`]), each rank
//! finds its own IPv4 address on it (its `VLLM_HOST_IP`, which vLLM's
//! message queues announce); rank 0 publishes its address in the run
//! directory, under the step's own name (a resumed campaign's old file is
//! never read), and the other ranks wait for it and put it in their
//! `--master-addr`.
//!
//! Owns nothing of vLLM's lifecycle (the role does) or of the plan.
//!
//! [`VllmLaunch::rendezvous_ifname`]: hpcagent_common::plan::VllmLaunch

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often a waiting rank looks for rank 0's address.
const POLL: Duration = Duration::from_millis(500);

/// Why the ranks of a replica could not meet.
#[derive(Debug, thiserror::Error)]
pub enum RendezvousError {
    #[error("listing interfaces: {0}")]
    Interfaces(nix::Error),
    #[error("no IPv4 address on {ifname} (NET_IFNAME); this node has {seen}")]
    NoAddress { ifname: String, seen: String },
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("rank 0 did not publish its address in {file} within {limit:?}")]
    NoMaster { file: PathBuf, limit: Duration },
}

fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> RendezvousError + '_ {
    move |error| RendezvousError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// The first IPv4 address of interface `ifname` on this node.
pub fn interface_address(ifname: &str) -> Result<Ipv4Addr, RendezvousError> {
    let addresses = nix::ifaddrs::getifaddrs().map_err(RendezvousError::Interfaces)?;
    let mut seen = Vec::new();
    for entry in addresses {
        if !seen.contains(&entry.interface_name) {
            seen.push(entry.interface_name.clone());
        }
        if entry.interface_name != ifname {
            continue;
        }
        if let Some(ip) = entry
            .address
            .as_ref()
            .and_then(|a| a.as_sockaddr_in())
            .map(|a| a.ip())
        {
            return Ok(ip);
        }
    }
    Err(RendezvousError::NoAddress {
        ifname: ifname.to_string(),
        seen: seen.join(", "),
    })
}

/// The file rank 0 of this step publishes its address in.
pub fn master_file(run_dir: &Path, instance: &str, step: &str) -> PathBuf {
    run_dir
        .join("roles")
        .join(instance)
        .join(format!("master-addr.{step}"))
}

/// Rank 0: makes `addr` known to the other ranks of its step.
pub fn publish(file: &Path, addr: Ipv4Addr) -> Result<(), RendezvousError> {
    hpcagent_common::files::write_atomic(file, addr.to_string().as_bytes(), 0o644)
        .map_err(io_at(file))
}

/// Ranks 1..: rank 0's address, once it has published it (at most `limit`).
pub async fn await_master(file: &Path, limit: Duration) -> Result<Ipv4Addr, RendezvousError> {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(file)
            && let Ok(addr) = text.trim().parse()
        {
            return Ok(addr);
        }
        if start.elapsed() >= limit {
            return Err(RendezvousError::NoMaster {
                file: file.to_path_buf(),
                limit,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `argv` with its `--master-addr` value replaced by `master`.
pub fn with_master(argv: &[String], master: Ipv4Addr) -> Vec<String> {
    let mut argv = argv.to_vec();
    if let Some(at) = argv.iter().position(|a| a == "--master-addr")
        && let Some(value) = argv.get_mut(at + 1)
    {
        *value = master.to_string();
    }
    argv
}

/// The step's name for its files: the job and step Slurm gave it, or this
/// process's own id where there is no Slurm (a local replica has one rank).
pub fn step_name() -> String {
    match (
        std::env::var("SLURM_JOB_ID"),
        std::env::var("SLURM_STEP_ID"),
    ) {
        (Ok(job), Ok(step)) => format!("{job}.{step}"),
        _ => format!("pid{}", std::process::id()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loopback_interface_has_its_address_and_a_missing_one_is_named() {
        assert_eq!(interface_address("lo").unwrap(), Ipv4Addr::LOCALHOST);
        let missing = interface_address("hsn9").unwrap_err().to_string();
        assert!(
            missing.contains("hsn9") && missing.contains("lo"),
            "{missing}"
        );
    }

    #[test]
    fn other_ranks_take_rank_0_s_address_as_their_master() {
        let argv: Vec<String> = [
            "vllm",
            "serve",
            "m",
            "--master-addr",
            "nid001",
            "--headless",
        ]
        .map(String::from)
        .to_vec();
        let master = Ipv4Addr::new(172, 28, 0, 7);
        assert_eq!(
            with_master(&argv, master),
            [
                "vllm",
                "serve",
                "m",
                "--master-addr",
                "172.28.0.7",
                "--headless"
            ]
        );
    }

    #[tokio::test]
    async fn a_waiting_rank_reads_what_rank_0_published_for_its_step_only() {
        let run = tempfile::tempdir().unwrap();
        let file = master_file(run.path(), "inference-0", "41.3");
        let old = master_file(run.path(), "inference-0", "40.3");
        publish(&old, Ipv4Addr::new(10, 0, 0, 1)).unwrap();
        let missing = await_master(&file, Duration::from_millis(600)).await;
        assert!(missing.unwrap_err().to_string().contains("did not publish"));
        let waiter = tokio::spawn({
            let file = file.clone();
            async move { await_master(&file, Duration::from_secs(10)).await }
        });
        publish(&file, Ipv4Addr::new(172, 28, 0, 7)).unwrap();
        assert_eq!(waiter.await.unwrap().unwrap(), Ipv4Addr::new(172, 28, 0, 7));
    }
}
