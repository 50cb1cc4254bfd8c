//! Site profiles: what is true of a machine rather than of one campaign.
//!
//! A profile is a layer between the built-in defaults and the env file, so a
//! researcher's env file names only what differs from the site.

use super::values::Site;

/// One site's settings, as (key, text) pairs.
pub fn profile(site: Site) -> &'static [(&'static str, &'static str)] {
    match site {
        // This machine, or a laptop: the local Slurm of scripts/local-slurm, or no Slurm.
        Site::Local => &[("GPUS_PER_NODE", "0"), ("CPUS_PER_NODE", "2")],
        // CSCS Alps: GH200 nodes, 4 GPUs and 4 × 72 Grace cores, Slingshot (cxi).
        // NCCL/libfabric settings as CSCS documents them for the aws-ofi-nccl
        // plugin (the EDF's hook injects it). A large FP8 model loading from
        // Lustre takes longer than the defaults allow to load and to meet.
        Site::Alps => &[
            ("PARTITION", "normal"),
            ("GPUS_PER_NODE", "4"),
            ("CPUS_PER_NODE", "288"),
            ("INFERENCE_CE_ENV", "hpcagent-vllm-gh200"),
            ("ROLE_CE_ENV", "hpcagent-roles-gh200"),
            ("NET_IFNAME", "hsn0"),
            (
                "INFERENCE_ENV",
                "NCCL_NET='AWS Libfabric' NCCL_NET_GDR_LEVEL=PHB NCCL_CROSS_NIC=1 \
                 NCCL_PROTO=^LL128 FI_PROVIDER=cxi \
                 FI_CXI_DISABLE_HOST_REGISTER=1 FI_MR_CACHE_MONITOR=userfaultfd \
                 FI_CXI_DEFAULT_CQ_SIZE=131072 FI_CXI_DEFAULT_TX_SIZE=16384 \
                 FI_CXI_RX_MATCH_MODE=software",
            ),
            ("INFERENCE_READY_TIMEOUT", "01:30:00"),
            ("INFERENCE_DISTRIBUTED_TIMEOUT", "01:00:00"),
        ],
        // CSCS Beverin: MI300A nodes, 4 APUs and 4 × 24 cores, Slingshot (cxi).
        // RCCL through the aws-ofi plugin the vLLM image builds against the
        // host's libfabric (NCCL_NET_PLUGIN=ofi), with the cxi provider, and
        // named (NCCL_NET) so that a plugin that fails to load stops RCCL
        // instead of a silent fallback to TCP sockets; the node's kernel has
        // DMA-BUF off, so RCCL must not try it; and HIP's IPC takes the
        // legacy path, as in HPCAgent-Bench's Beverin image.
        Site::Beverin => &[
            ("PARTITION", "mi300"),
            ("GPUS_PER_NODE", "4"),
            ("CPUS_PER_NODE", "96"),
            ("INFERENCE_CE_ENV", "hpcagent-vllm-mi300a"),
            ("ROLE_CE_ENV", "hpcagent-roles-mi300a"),
            ("NET_IFNAME", "hsn0"),
            (
                "INFERENCE_ENV",
                "NCCL_NET_PLUGIN=ofi NCCL_NET='AWS Libfabric' FI_PROVIDER=cxi NCCL_DMABUF_ENABLE=0 \
                 HSA_ENABLE_IPC_MODE_LEGACY=1 NCCL_CROSS_NIC=1 \
                 FI_CXI_DISABLE_HOST_REGISTER=1 FI_MR_CACHE_MONITOR=userfaultfd \
                 FI_CXI_DEFAULT_CQ_SIZE=131072 FI_CXI_DEFAULT_TX_SIZE=16384 \
                 FI_CXI_RX_MATCH_MODE=software",
            ),
            ("INFERENCE_READY_TIMEOUT", "01:30:00"),
            ("INFERENCE_DISTRIBUTED_TIMEOUT", "01:00:00"),
        ],
    }
}

/// The GPUs a node of the site has: a campaign cannot plan more.
pub fn gpus_per_node_max(site: Site) -> Option<u32> {
    match site {
        Site::Local => None,
        // GH200 nodes: 4 Hopper GPUs; MI300A nodes: 4 APUs.
        Site::Alps | Site::Beverin => Some(4),
    }
}

/// The memory a job asks for on each of the site's nodes, where the site
/// says to: CSCS asks jobs on GH200 nodes for `--exclusive --mem=450G`
/// (the node's memory less the system's). Several steps share it on a
/// node, since steps inherit none of the job's memory requests.
pub fn job_memory(site: Site) -> Option<&'static str> {
    match site {
        Site::Alps => Some("450G"),
        Site::Local | Site::Beverin => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::keys;

    #[test]
    fn profiles_only_name_real_keys() {
        for site in Site::ALL {
            for (key, _) in profile(*site) {
                assert!(keys::find(key).is_some(), "{site}: {key} is not a key");
            }
        }
    }
}
