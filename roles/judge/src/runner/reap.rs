//! Making sure nothing a submission started outlives its run.
//!
//! A submission may fork, leave its process group (`setsid`) and keep running
//! after the call returns or the runner dies; left alone, such processes would
//! steal the cores of every later timed run. So the process the judge starts
//! is a small supervisor that only forks the runner and waits: it is a *child
//! subreaper*, so every orphan below it is re-parented to it, and when the
//! runner ends it stops its whole process tree (SIGSTOP until no new process
//! appears, so a fork bomb cannot outrun it), kills it, and only then exits.
//! On a timeout the judge does the same to the supervisor's tree. Landlock's
//! signal scope keeps the sandboxed processes from killing the supervisor
//! (and root judges run them as another user, which cannot).

use std::collections::{HashMap, HashSet};

/// Makes this process the reaper of its orphaned descendants.
pub fn become_subreaper() {
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
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

/// `root` and its descendants, from the process table (none once `root`
/// is gone).
fn descendants(root: u32) -> Vec<u32> {
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

/// (pid, parent pid) of every process.
fn parents() -> Vec<(u32, u32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // The command name may hold spaces and parentheses: skip past its last ')'.
            let rest = &stat[stat.rfind(')')? + 1..];
            let ppid = rest.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid))
        })
        .collect()
}
