//! What Slurm granted: nodes, and GPUs and CPUs per node.
//!
//! Read from the batch environment inside an allocation, or described by hand
//! (`--nodelist`, `--gpus-per-node`) for a dry run. Nodes are assumed alike:
//! `hpcagent submit` asks for whole, identical nodes.

use serde::Serialize;

use crate::hostlist::{self, HostlistError};

/// Where an allocation fact came from, for messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sourced<T> {
    pub value: T,
    pub source: String,
}

/// The nodes (in Slurm's order) and their resources.
#[derive(Debug, Clone, Serialize)]
pub struct Allocation {
    /// `SLURM_JOB_ID` inside a job; `None` for a dry run.
    pub job_id: Option<String>,
    pub nodes: Vec<String>,
    /// The expression the nodes came from.
    pub nodelist: String,
    /// GPUs per node, if the allocation says.
    pub gpus_per_node: Option<Sourced<u32>>,
    /// CPUs per node (the smallest node's), if the allocation says.
    pub cpus_per_node: Option<Sourced<u32>>,
    /// A heterogeneous job's components, in Slurm's order (their nodes are
    /// `nodes`, group after group); empty for an ordinary job.
    pub het_groups: Vec<HetGroup>,
}

/// One component of a heterogeneous job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HetGroup {
    /// The component's own job id, under which Slurm lists its steps.
    pub job_id: String,
    pub nodes: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum AllocationError {
    #[error(transparent)]
    Hostlist(#[from] HostlistError),
    #[error("{var}={value:?} is not understood: {reason}")]
    Variable {
        var: &'static str,
        value: String,
        reason: String,
    },
    #[error("the node list {0:?} is empty")]
    Empty(String),
    #[error(
        "the node list {list:?} names {node} twice: two roles would share it as if it were two nodes"
    )]
    Repeated { list: String, node: String },
    #[error("a heterogeneous job without {0}")]
    HetGroup(String),
}

impl Allocation {
    /// The allocation this process runs in, or `None` outside Slurm.
    pub fn from_env(
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Allocation>, AllocationError> {
        let Some(nodelist) = var("SLURM_JOB_NODELIST").or_else(|| var("SLURM_NODELIST")) else {
            return Ok(None);
        };
        let mut allocation = Allocation::from_nodelist(&nodelist, None, None)?;
        allocation.job_id = var("SLURM_JOB_ID");
        allocation.gpus_per_node = Some(gpus_from_env(var)?);
        allocation.cpus_per_node = cpus_from_env(var)?;
        if let Some(size) = var("SLURM_HET_SIZE") {
            allocation.read_het_groups(var, &size)?;
        }
        Ok(Some(allocation))
    }

    /// A heterogeneous job's nodes are its components' (SLURM_JOB_NODELIST
    /// names only the first's), and the smallest node of any decides CPUs.
    fn read_het_groups(
        &mut self,
        var: &dyn Fn(&str) -> Option<String>,
        size: &str,
    ) -> Result<(), AllocationError> {
        let size: usize = size.trim().parse().map_err(|_| AllocationError::Variable {
            var: "SLURM_HET_SIZE",
            value: size.to_string(),
            reason: "not a count".into(),
        })?;
        let get = |name: String| var(&name).ok_or(AllocationError::HetGroup(name));
        let mut nodes = Vec::new();
        for group in 0..size {
            let list = get(format!("SLURM_JOB_NODELIST_HET_GROUP_{group}"))?;
            let members = hostlist::expand(&list)?;
            self.het_groups.push(HetGroup {
                job_id: get(format!("SLURM_JOB_ID_HET_GROUP_{group}"))?,
                nodes: members.len(),
            });
            nodes.extend(members);
            let cpus = var(&format!("SLURM_JOB_CPUS_PER_NODE_HET_GROUP_{group}"))
                .and_then(|t| parse_cpus_per_node(&t));
            if let (Some(cpus), Some(least)) = (cpus, self.cpus_per_node.as_mut())
                && cpus < least.value
            {
                least.value = cpus;
                least.source = format!("SLURM_JOB_CPUS_PER_NODE_HET_GROUP_{group}");
            }
        }
        self.nodelist = hostlist::compress(&nodes);
        self.nodes = nodes;
        Ok(())
    }

    /// The job ids Slurm lists this job's steps under, as `squeue -j` takes
    /// them: each component's in a heterogeneous job.
    pub fn step_jobs(&self) -> Option<String> {
        if self.het_groups.is_empty() {
            return self.job_id.clone();
        }
        let ids: Vec<&str> = self.het_groups.iter().map(|g| g.job_id.as_str()).collect();
        Some(ids.join(","))
    }

    /// A described allocation, for planning outside Slurm.
    pub fn from_nodelist(
        nodelist: &str,
        gpus_per_node: Option<Sourced<u32>>,
        cpus_per_node: Option<Sourced<u32>>,
    ) -> Result<Allocation, AllocationError> {
        let nodes = hostlist::expand(nodelist)?;
        if nodes.is_empty() {
            return Err(AllocationError::Empty(nodelist.to_string()));
        }
        let mut seen = std::collections::HashSet::new();
        if let Some(node) = nodes.iter().find(|n| !seen.insert(n.as_str())) {
            return Err(AllocationError::Repeated {
                list: nodelist.to_string(),
                node: node.clone(),
            });
        }
        Ok(Allocation {
            job_id: None,
            nodes,
            nodelist: nodelist.to_string(),
            gpus_per_node,
            cpus_per_node,
            het_groups: Vec::new(),
        })
    }
}

/// GPUs on this node: `SLURM_GPUS_ON_NODE`, else the count of `SLURM_JOB_GPUS`,
/// else none (a job that asked for no GPUs has neither).
fn gpus_from_env(var: &dyn Fn(&str) -> Option<String>) -> Result<Sourced<u32>, AllocationError> {
    if let Some(text) = var("SLURM_GPUS_ON_NODE") {
        let value = text.trim().parse().map_err(|_| AllocationError::Variable {
            var: "SLURM_GPUS_ON_NODE",
            value: text.clone(),
            reason: "not a count".into(),
        })?;
        return Ok(Sourced {
            value,
            source: "SLURM_GPUS_ON_NODE".into(),
        });
    }
    if let Some(text) = var("SLURM_JOB_GPUS") {
        let value = text.split(',').filter(|s| !s.trim().is_empty()).count() as u32;
        return Ok(Sourced {
            value,
            source: "SLURM_JOB_GPUS".into(),
        });
    }
    Ok(Sourced {
        value: 0,
        source: "no GPUs in the job (SLURM_GPUS_ON_NODE unset)".into(),
    })
}

/// CPUs per node from `SLURM_JOB_CPUS_PER_NODE` (`72(x4)` or `72,64(x2)`: the
/// smallest wins), else `SLURM_CPUS_ON_NODE`.
fn cpus_from_env(
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Sourced<u32>>, AllocationError> {
    if let Some(text) = var("SLURM_JOB_CPUS_PER_NODE") {
        let value = parse_cpus_per_node(&text).ok_or_else(|| AllocationError::Variable {
            var: "SLURM_JOB_CPUS_PER_NODE",
            value: text.clone(),
            reason: "expected counts like 72(x4),64".into(),
        })?;
        return Ok(Some(Sourced {
            value,
            source: "SLURM_JOB_CPUS_PER_NODE".into(),
        }));
    }
    Ok(var("SLURM_CPUS_ON_NODE")
        .and_then(|t| t.trim().parse().ok())
        .map(|value| Sourced {
            value,
            source: "SLURM_CPUS_ON_NODE".into(),
        }))
}

fn parse_cpus_per_node(text: &str) -> Option<u32> {
    text.split(',')
        .map(|part| {
            part.split('(')
                .next()
                .unwrap_or(part)
                .trim()
                .parse::<u32>()
                .ok()
        })
        .collect::<Option<Vec<u32>>>()?
        .into_iter()
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_named_twice_is_refused() {
        let err = Allocation::from_nodelist("nid[001-002],nid[001-002]", None, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("names nid001 twice"), "{err}");
        assert!(Allocation::from_nodelist("nid[001-002],nid003", None, None).is_ok());
    }

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn reads_the_batch_environment() {
        let a = Allocation::from_env(&env(&[
            ("SLURM_JOB_ID", "42"),
            ("SLURM_JOB_NODELIST", "nid[001-004]"),
            ("SLURM_JOB_GPUS", "0,1,2,3"),
            ("SLURM_JOB_CPUS_PER_NODE", "288(x3),256"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(a.job_id.as_deref(), Some("42"));
        assert_eq!(a.nodes, ["nid001", "nid002", "nid003", "nid004"]);
        assert_eq!(a.gpus_per_node.unwrap().value, 4);
        assert_eq!(a.cpus_per_node.unwrap().value, 256);
    }

    #[test]
    fn a_heterogeneous_job_is_its_components_nodes_in_order() {
        let a = Allocation::from_env(&env(&[
            ("SLURM_JOB_ID", "6"),
            ("SLURM_JOB_NODELIST", "n3"),
            ("SLURM_HET_SIZE", "2"),
            ("SLURM_JOB_NODELIST_HET_GROUP_0", "n3"),
            ("SLURM_JOB_NODELIST_HET_GROUP_1", "n[1,4]"),
            ("SLURM_JOB_ID_HET_GROUP_0", "6"),
            ("SLURM_JOB_ID_HET_GROUP_1", "7"),
            ("SLURM_JOB_CPUS_PER_NODE", "288"),
            ("SLURM_JOB_CPUS_PER_NODE_HET_GROUP_0", "288"),
            ("SLURM_JOB_CPUS_PER_NODE_HET_GROUP_1", "128(x2)"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(a.nodes, ["n3", "n1", "n4"]);
        assert_eq!(a.step_jobs().as_deref(), Some("6,7"));
        assert_eq!(
            a.het_groups[1],
            HetGroup {
                job_id: "7".into(),
                nodes: 2
            }
        );
        assert_eq!(a.cpus_per_node.unwrap().value, 128);
        let missing = Allocation::from_env(&env(&[
            ("SLURM_JOB_NODELIST", "n3"),
            ("SLURM_HET_SIZE", "2"),
        ]));
        assert_eq!(
            missing.unwrap_err().to_string(),
            "a heterogeneous job without SLURM_JOB_NODELIST_HET_GROUP_0"
        );
    }

    #[test]
    fn outside_slurm_there_is_no_allocation() {
        assert!(Allocation::from_env(&env(&[])).unwrap().is_none());
    }

    #[test]
    fn gpus_on_node_wins_and_absence_means_zero() {
        let a = Allocation::from_env(&env(&[
            ("SLURM_JOB_NODELIST", "n1"),
            ("SLURM_GPUS_ON_NODE", "2"),
        ]));
        assert_eq!(a.unwrap().unwrap().gpus_per_node.unwrap().value, 2);
        let a = Allocation::from_env(&env(&[("SLURM_JOB_NODELIST", "n1")]));
        assert_eq!(a.unwrap().unwrap().gpus_per_node.unwrap().value, 0);
    }
}
