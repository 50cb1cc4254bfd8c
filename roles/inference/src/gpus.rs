//! What a node has: its GPUs (NVIDIA or AMD), CPUs and memory.
//!
//! Nothing here needs a GPU toolkit at build time. NVIDIA GPUs are counted
//! through the CUDA driver loaded at run time (cudarc's dynamic loading,
//! guarded by its library check: an unguarded call panics on a machine
//! without a driver). AMD GPUs are read from the KFD topology in sysfs, and
//! counted through the HIP runtime when `libamdhip64` loads, since only the
//! runtime honours `ROCR_VISIBLE_DEVICES`/`HIP_VISIBLE_DEVICES` as Slurm sets
//! them. A node with neither reports zero GPUs, and says why.

use std::path::Path;

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Vendor {
    Nvidia,
    Amd,
}

#[derive(Debug, Clone, Serialize)]
pub struct Gpu {
    pub vendor: Vendor,
    pub name: String,
    pub memory_bytes: u64,
}

/// A node's resources, as the role found them.
#[derive(Debug, Clone, Serialize)]
pub struct Inventory {
    /// GPUs this process may use (visibility variables applied).
    pub gpus: Vec<Gpu>,
    pub cpus: usize,
    pub memory_bytes: u64,
    /// How the GPUs were looked for, and what was not there.
    pub notes: Vec<String>,
}

impl Inventory {
    /// The inventory as registration capabilities.
    pub fn capabilities(&self) -> Vec<(String, String)> {
        let names: Vec<&str> = self.gpus.iter().map(|g| g.name.as_str()).collect();
        vec![
            ("gpus".into(), self.gpus.len().to_string()),
            ("gpu_names".into(), names.join(",")),
            ("cpus".into(), self.cpus.to_string()),
            (
                "memory_gib".into(),
                format!("{:.1}", self.memory_bytes as f64 / (1u64 << 30) as f64),
            ),
            ("gpu_discovery".into(), self.notes.join("; ")),
        ]
    }

    /// Refuses a node with fewer GPUs than the plan gives the step.
    pub fn check(&self, planned: u32) -> Result<(), TooFewGpus> {
        if self.gpus.len() as u32 >= planned {
            return Ok(());
        }
        Err(TooFewGpus {
            planned,
            visible: self.gpus.len(),
            notes: self.notes.join("; "),
        })
    }
}

/// A node with fewer GPUs than the plan gives its step.
#[derive(Debug, thiserror::Error)]
#[error("the plan gives this step {planned} GPU(s) but {visible} are visible here ({notes})")]
pub struct TooFewGpus {
    pub planned: u32,
    pub visible: usize,
    /// What discovery saw, for the operator.
    pub notes: String,
}

/// Why the HIP runtime could not count its devices.
#[derive(Debug, thiserror::Error)]
enum HipError {
    #[error("no HIP runtime: {0}")]
    NoRuntime(libloading::Error),
    #[error("HIP runtime without hipGetDeviceCount: {0}")]
    NoSymbol(libloading::Error),
    #[error("hipGetDeviceCount failed with error {0}")]
    Count(i32),
}

/// Looks at this node.
pub fn discover() -> Inventory {
    let mut notes = Vec::new();
    let mut gpus = nvidia(&mut notes);
    if gpus.is_empty() {
        gpus = amd(Path::new("/sys/class/kfd/kfd/topology/nodes"), &mut notes);
    }
    let (cpus, memory_bytes) = match sysinfo::System::new() {
        Ok(mut system) => {
            system.refresh_memory();
            system.refresh_cpu_list(sysinfo::CpuRefreshKind::nothing());
            (system.cpus().len(), system.total_memory())
        }
        Err(e) => {
            notes.push(format!("sysinfo: {e}"));
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            (cpus, 0)
        }
    };
    Inventory {
        gpus,
        cpus,
        memory_bytes,
        notes,
    }
}

fn nvidia(notes: &mut Vec<String>) -> Vec<Gpu> {
    use cudarc::driver::{result, sys};
    // SAFETY: only loads (and unloads) the library to see whether it exists.
    if !unsafe { sys::is_culib_present() } {
        notes.push("no CUDA driver (libcuda)".into());
        return Vec::new();
    }
    let count = match result::init().and_then(|()| result::device::get_count()) {
        Ok(n) => n,
        Err(e) => {
            notes.push(format!("the CUDA driver answers: {e}"));
            return Vec::new();
        }
    };
    notes.push(format!("CUDA driver: {count} device(s)"));
    (0..count)
        .filter_map(|ordinal| {
            let device = result::device::get(ordinal).ok()?;
            let name = result::device::get_name(device).unwrap_or_else(|_| "NVIDIA GPU".into());
            // SAFETY: `device` is a valid handle from the initialised driver.
            let memory = unsafe { result::device::total_mem(device) }.unwrap_or(0);
            Some(Gpu {
                vendor: Vendor::Nvidia,
                name,
                memory_bytes: memory as u64,
            })
        })
        .collect()
}

fn amd(topology: &Path, notes: &mut Vec<String>) -> Vec<Gpu> {
    let physical = kfd_gpus(topology);
    if physical.is_empty() {
        notes.push("no AMD GPU in the KFD topology".into());
        return Vec::new();
    }
    let visible = match hip_device_count() {
        Ok(n) => {
            notes.push(format!(
                "HIP runtime: {n} visible of {} in KFD",
                physical.len()
            ));
            n
        }
        Err(why) => {
            let n = visible_by_variables(physical.len());
            notes.push(format!(
                "{} GPU(s) in KFD, {n} visible by the environment ({why})",
                physical.len()
            ));
            n
        }
    };
    physical.into_iter().take(visible).collect()
}

/// The GPU nodes of a KFD topology (CPU nodes have no SIMDs).
fn kfd_gpus(topology: &Path) -> Vec<Gpu> {
    let mut nodes: Vec<_> = std::fs::read_dir(topology)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    nodes.sort();
    nodes
        .iter()
        .filter_map(|node| {
            let properties = std::fs::read_to_string(node.join("properties")).ok()?;
            let field = |key: &str| {
                properties
                    .lines()
                    .filter_map(|l| l.split_once(' '))
                    .find(|(k, _)| *k == key)
                    .and_then(|(_, v)| v.trim().parse::<u64>().ok())
            };
            if field("simd_count").unwrap_or(0) == 0 {
                return None;
            }
            let name = std::fs::read_to_string(node.join("name"))
                .map(|n| n.trim().to_string())
                .ok()
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| format!("gfx{}", field("gfx_target_version").unwrap_or(0)));
            let memory = std::fs::read_to_string(node.join("mem_banks/0/properties"))
                .ok()
                .and_then(|p| {
                    p.lines()
                        .find_map(|l| l.strip_prefix("size_in_bytes "))
                        .and_then(|v| v.trim().parse().ok())
                })
                .unwrap_or(0);
            Some(Gpu {
                vendor: Vendor::Amd,
                name,
                memory_bytes: memory,
            })
        })
        .collect()
}

/// GPUs the visibility variables leave of `physical` (no variable: all).
fn visible_by_variables(physical: usize) -> usize {
    [
        "ROCR_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
        "CUDA_VISIBLE_DEVICES",
    ]
    .iter()
    .filter_map(|v| std::env::var(v).ok())
    .map(|list| list.split(',').filter(|d| !d.trim().is_empty()).count())
    .min()
    .map_or(physical, |n| n.min(physical))
}

/// Devices the HIP runtime sees, loading it at run time.
fn hip_device_count() -> Result<usize, HipError> {
    // SAFETY: loading the HIP runtime runs its initialisers, which is what
    // any HIP program does; the symbol has the documented C signature
    // `hipError_t hipGetDeviceCount(int *count)`.
    unsafe {
        let library = libloading::Library::new("libamdhip64.so").map_err(HipError::NoRuntime)?;
        let get_count: libloading::Symbol<unsafe extern "C" fn(*mut i32) -> i32> = library
            .get(b"hipGetDeviceCount\0")
            .map_err(HipError::NoSymbol)?;
        let mut count = 0;
        let code = get_count(&mut count);
        // An initialised HIP runtime must not be unloaded: keep it.
        std::mem::forget(library);
        match code {
            0 => Ok(count.max(0) as usize),
            code => Err(HipError::Count(code)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_machine_reports_its_cpus_and_memory_and_why_it_has_no_gpu() {
        let inventory = discover();
        assert!(inventory.cpus >= 1);
        assert!(inventory.memory_bytes > 0);
        if inventory.gpus.is_empty() {
            assert!(!inventory.notes.is_empty(), "an empty GPU list says why");
            let refused = inventory.check(1).unwrap_err().to_string();
            assert!(
                refused.contains("gives this step 1 GPU(s) but 0"),
                "{refused}"
            );
        }
        assert!(inventory.check(0).is_ok());
    }

    #[test]
    fn kfd_topologies_list_gpu_nodes_only() {
        let dir = tempfile::tempdir().unwrap();
        let node = |n: u32, simds: u32, name: &str| {
            let path = dir.path().join(n.to_string());
            std::fs::create_dir_all(path.join("mem_banks/0")).unwrap();
            std::fs::write(
                path.join("properties"),
                format!("cpu_cores_count 24\nsimd_count {simds}\ngfx_target_version 90402\n"),
            )
            .unwrap();
            std::fs::write(path.join("name"), name).unwrap();
            std::fs::write(
                path.join("mem_banks/0/properties"),
                "heap_type 1\nsize_in_bytes 137438953472\n",
            )
            .unwrap();
        };
        node(0, 0, "");
        node(1, 912, "gfx942");
        node(2, 912, "gfx942");
        let gpus = kfd_gpus(dir.path());
        assert_eq!(gpus.len(), 2);
        assert_eq!(gpus[0].name, "gfx942");
        assert_eq!(gpus[0].memory_bytes, 128 << 30);
        assert_eq!(gpus[0].vendor, Vendor::Amd);
    }
}
