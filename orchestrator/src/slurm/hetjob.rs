//! Heterogeneous jobs: one component per partition the roles ask for.
//!
//! Inference wants GPU nodes; judges and agents may want another partition.
//! `AGENT_PARTITION`, `JUDGE_PARTITION` and `INFERENCE_PARTITION` (each
//! `PARTITION` unless set) group the roles into components, in placement
//! order (inference, agents, judges), so the component that holds the first
//! role holds the batch script and the orchestrator. Slurm lists a
//! heterogeneous job's nodes group by group, which is the order placement
//! takes them in; each role's steps run in its component (`srun
//! --het-group`), and are found under the component's own job id.
//!
//! This module decides the components; `sbatch` turns them into flags and
//! placement into node pools. With one partition there is one component and
//! an ordinary job.

use hpcagent_common::config::Config;
use hpcagent_common::plan::Component;
use hpcagent_common::plan::Role;

/// The components the configuration asks for: one, or one per partition.
pub fn components(config: &Config) -> Vec<Component> {
    let s = &config.settings;
    let partition_of = |role| {
        let own = match role {
            Role::Inference => &s.inference_partition,
            Role::Agent => &s.agent_partition,
            // Colocated judges share the agents' nodes, hence their partition.
            Role::Judge if s.colocate_judges => &s.agent_partition,
            Role::Judge => &s.judge_partition,
        };
        own.clone().or_else(|| s.partition.clone())
    };
    let mut components: Vec<Component> = Vec::new();
    for role in [Role::Inference, Role::Agent, Role::Judge] {
        let nodes = config.nodes_of(role);
        if nodes == 0 && !(role == Role::Judge && s.colocate_judges) {
            continue;
        }
        let partition = partition_of(role);
        match components.iter_mut().find(|c| c.partition == partition) {
            Some(c) => {
                c.roles.push(role);
                c.nodes += nodes;
            }
            None => components.push(Component {
                partition,
                roles: vec![role],
                nodes,
            }),
        }
    }
    components
}

/// The component that holds `role`'s nodes.
pub fn component_of(components: &[Component], role: Role) -> usize {
    components
        .iter()
        .position(|c| c.roles.contains(&role))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.env");
        std::fs::write(&path, text).unwrap();
        hpcagent_common::config::resolve(&hpcagent_common::config::Sources {
            env_file: Some(path),
            ..Default::default()
        })
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn one_partition_is_one_component() {
        let c = components(&config("PARTITION=normal\nAGENT_NODES=2\nJUDGE_NODES=1\n"));
        assert_eq!(
            c,
            [Component {
                partition: Some("normal".into()),
                roles: vec![Role::Agent, Role::Judge],
                nodes: 3
            }]
        );
    }

    #[test]
    fn roles_group_by_partition_in_placement_order() {
        let c = components(&config(
            "PARTITION=gpu\nINFERENCE_NODES=2\nAGENT_NODES=1\nJUDGE_NODES=3\n\
             JUDGE_PARTITION=cpu\nVLLM_MODEL=m\n",
        ));
        assert_eq!(c.len(), 2, "{c:?}");
        assert_eq!(c[0].partition.as_deref(), Some("gpu"));
        assert_eq!(c[0].roles, [Role::Inference, Role::Agent]);
        assert_eq!(c[0].nodes, 3);
        assert_eq!(c[1].partition.as_deref(), Some("cpu"));
        assert_eq!(c[1].roles, [Role::Judge]);
        assert_eq!(c[1].nodes, 3);
        assert_eq!(component_of(&c, Role::Judge), 1);
        assert!(c[1].wants_gpus(), "judges time GPU kernels");
    }

    #[test]
    fn colocated_judges_live_in_the_agents_component() {
        let c = components(&config(
            "AGENT_NODES=2\nJUDGE_NODES=0\nCOLOCATE_JUDGES=1\nJUDGE_PARTITION=cpu\n\
             AGENT_PARTITION=small\n",
        ));
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].roles, [Role::Agent, Role::Judge]);
        assert_eq!(c[0].nodes, 2);
        assert!(c[0].wants_gpus());
    }
}
