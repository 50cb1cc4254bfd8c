//! Making sure nothing an untrusted process started outlives its work.
//!
//! A process may fork, leave its process group (`setsid`) and keep running
//! after the work it was started for has ended; left alone, such processes
//! would steal the cores of every later timed run, or outlive an agent's
//! attempt. So whoever starts untrusted work is, or starts, a *child
//! subreaper*: every orphan below it is re-parented to it, and when the work
//! ends it stops the whole process tree (SIGSTOP until no new process
//! appears, so a fork bomb cannot outrun it), then kills it. Where the work
//! runs as the first process of a PID namespace of its own, killing that
//! process ends every other in the namespace too; the tree walk is what
//! remains where the kernel gives no such namespace.

use std::collections::{HashMap, HashSet};

/// Asks the kernel to send `signal` to this process when its parent dies,
/// so that nothing outlives the process that started it, however that one
/// ends. A raw system call: safe between fork and exec, and in a clone's
/// child. Changing user clears it: ask again after.
pub fn die_with_parent(signal: libc::c_int) {
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, signal) };
}

/// Makes this process the reaper of its orphaned descendants.
pub fn become_subreaper() {
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
}

/// SIGKILL to the process group `leader` leads (a session a supervisor or
/// a compiler was started in).
pub fn kill_group(leader: u32) {
    // SAFETY: plain kill(2) on a group id.
    unsafe { libc::kill(-(leader as i32), libc::SIGKILL) };
}

/// Stops and kills every process below `root`, and `root` too unless it is
/// the caller (a supervisor cleaning up under itself).
pub fn kill_tree(root: u32) {
    let me = std::process::id();
    let mut stopped: HashSet<u32> = HashSet::new();
    for _ in 0..100 {
        let fresh: Vec<u32> = descendants(root)
            .into_iter()
            .filter(|p| *p != me && !stopped.contains(p))
            .collect();
        if fresh.is_empty() {
            break;
        }
        for pid in fresh {
            signal(pid, libc::SIGSTOP);
            stopped.insert(pid);
        }
    }
    for pid in stopped {
        signal(pid, libc::SIGKILL);
    }
    // Anything that appeared after the last pass (a tree still growing after
    // 100 rounds) is killed outright, until nothing is left.
    for _ in 0..100 {
        let left: Vec<u32> = descendants(root).into_iter().filter(|p| *p != me).collect();
        if left.is_empty() {
            break;
        }
        for pid in left {
            signal(pid, libc::SIGKILL);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2).
    unsafe { libc::kill(pid as i32, sig) };
}

/// `root` and its living descendants (none once `root` is gone). Walks down
/// from `root` through each process's `children` lists, which costs a few
/// reads per process of the tree; a node's whole process table (thousands
/// of kernel threads on a large node) is scanned only where the kernel has
/// no such lists. Zombies are left out: they are already dead, and waiting
/// for their parent to reap them.
fn descendants(root: u32) -> Vec<u32> {
    if !children_lists() {
        return descendants_by_scan(root);
    }
    if !alive(root) {
        return Vec::new();
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let kids = children(out[i]);
        out.extend(kids.into_iter().filter(|p| alive(*p)));
        i += 1;
    }
    out
}

/// Whether this kernel lists each thread's children (CONFIG_PROC_CHILDREN).
fn children_lists() -> bool {
    static PRESENT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PRESENT.get_or_init(|| {
        let me = std::process::id();
        std::path::Path::new(&format!("/proc/{me}/task/{me}/children")).exists()
    })
}

/// The children of every thread of `pid` (none once it is gone).
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .is_some_and(|stat| stat_fields(&stat).is_some_and(|(state, _)| living(state)))
}

/// Not a zombie (dead, waiting to be reaped) nor dead.
fn living(state: &str) -> bool {
    state != "Z" && state != "X"
}

/// State and parent pid from a `/proc/<pid>/stat` line. The command name may
/// hold spaces and parentheses: the fields start after its last ')'.
fn stat_fields(stat: &str) -> Option<(&str, u32)> {
    let mut rest = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = rest.next()?;
    let ppid = rest.next()?.parse().ok()?;
    Some((state, ppid))
}

/// [`descendants`] from the whole process table.
fn descendants_by_scan(root: u32) -> Vec<u32> {
    let table = parents();
    if !table.iter().any(|(pid, _)| *pid == root) {
        return Vec::new();
    }
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (pid, ppid) in table {
        children.entry(ppid).or_default().push(pid);
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        if let Some(kids) = children.get(&out[i]) {
            out.extend(kids);
        }
        i += 1;
    }
    out
}

/// (pid, parent pid) of every living process.
fn parents() -> Vec<(u32, u32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (state, ppid) = stat_fields(&stat)?;
            living(state).then_some((pid, ppid))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shell waiting for two children of its own.
    fn tree() -> std::process::Child {
        let child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30 & wait"])
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while descendants_by_scan(child.id()).len() < 3 {
            assert!(std::time::Instant::now() < deadline, "the tree never grew");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        child
    }

    #[test]
    fn the_children_walk_and_the_table_scan_see_the_same_tree() {
        let mut child = tree();
        let mut walked = descendants(child.id());
        let mut scanned = descendants_by_scan(child.id());
        walked.sort();
        scanned.sort();
        assert!(
            children_lists(),
            "this kernel lists children: the walk is what ran"
        );
        assert_eq!(walked, scanned);
        assert_eq!(walked.len(), 3, "sh and its two sleeps: {walked:?}");
        kill_tree(child.id());
        child.wait().unwrap();
        assert!(descendants_by_scan(child.id()).is_empty());
    }

    #[test]
    fn stat_fields_skip_a_command_name_with_spaces_and_parentheses() {
        let stat = "42 (a (b) c) S 7 42 42 0 -1";
        assert_eq!(stat_fields(stat), Some(("S", 7)));
        assert!(!living("Z") && living("R"));
    }
}
