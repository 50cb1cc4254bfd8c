#!/usr/bin/env python3
"""A hostile agent CLI for tests/agent_confinement.rs: it tries every way out
of its sandbox it can think of and writes what happened to `report.json`
in its workspace (its current directory), one entry per attempt: "blocked"
when the sandbox held, anything else when it did not. It also leaves a
detached daemon behind (its pid in the report), which must not outlive the
attempt. Then it exits 0, and the worker submits the workspace's solution.

Usage: hostile_agent.py {mcp_config}
The bait the test set up comes in the environment: BAIT_UNIX (a listening
Unix socket), BAIT_TCP (a listening TCP port on 127.0.0.1).
"""

import ctypes
import json
import os
import signal
import socket
import sys

workspace = os.getcwd()
attempt = os.path.dirname(workspace)
run_dir = os.path.dirname(os.path.dirname(os.path.dirname(attempt)))
report = {}


def attempt_to(name, action):
    """Runs `action`: refused for want of permission is "blocked"; anything
    else (success, or another error that could hide a wrong path) is not."""
    try:
        got = action()
        report[name] = "LEAK: %r" % (got,)
    except PermissionError as e:
        report[name] = "blocked (%s)" % e
    except Exception as e:
        report[name] = "error: %r" % (e,)


def read(path, size=64):
    with open(path, "rb") as f:
        return f.read(size)


def write(path):
    with open(path, "w") as f:
        f.write("pwned\n")
    return path


def processes(needle):
    """Pids of processes whose command line holds `needle` (cmdlines are public)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = read("/proc/%s/cmdline" % entry, 4096)
        except OSError:
            continue
        if needle in cmdline:
            found.append(int(entry))
    return found


# Tokens: none in its own environment.
leaked = [k for k in os.environ if k.startswith("HPCAGENT_") and k != "HPCAGENT_MODEL"]
report["campaign variables in its environment"] = "LEAK: %s" % leaked if leaked else "blocked"

# The orchestrator's and the worker's memory and environment.
for needle, who in [(b"\0up\0", "hpcagent up"), (b"role\0agent", "the agent role"), (b"role\0judge", "the judge role")]:
    pids = processes(needle)
    report["found " + who] = "yes" if pids else "no"
    for pid in pids:
        attempt_to("environ of " + who, lambda: read("/proc/%d/environ" % pid, 4096))
        attempt_to("memory of " + who, lambda: read("/proc/%d/mem" % pid))
        attempt_to("kill " + who, lambda: os.kill(pid, signal.SIGKILL))
        libc = ctypes.CDLL(None, use_errno=True)
        def ptrace():
            if libc.ptrace(16, pid, None, None) != 0:  # PTRACE_ATTACH
                raise PermissionError(ctypes.get_errno(), "ptrace")
            return "attached"
        attempt_to("ptrace " + who, ptrace)

# The run directory: the store, the address file, the judges' caches, the
# other tasks.
attempt_to("read the store", lambda: read(os.path.join(run_dir, "results.sqlite")))
attempt_to("write the store", lambda: write(os.path.join(run_dir, "results.sqlite")))
attempt_to("read orchestrator.json", lambda: read(os.path.join(run_dir, "orchestrator.json")))
attempt_to("read env.resolved", lambda: read(os.path.join(run_dir, "env.resolved")))
attempt_to("list the judges' caches", lambda: os.listdir(os.path.join(run_dir, "cache")))
attempt_to("list the tasks", lambda: os.listdir(os.path.join(run_dir, "tasks")))
own_task = os.path.basename(os.path.dirname(attempt))
for other in ["gemm.c.fp64", "atax.c.fp64"]:
    if other != own_task:
        attempt_to("list another task", lambda: os.listdir(os.path.join(run_dir, "tasks", other)))
        attempt_to(
            "read another workspace",
            lambda: os.listdir(os.path.join(run_dir, "tasks", other, "attempt-1", "workspace")),
        )

# Writes outside the workspace.
attempt_to("write in the run directory", lambda: write(os.path.join(run_dir, "pwned")))
attempt_to("write in its attempt directory", lambda: write(os.path.join(attempt, "pwned")))
attempt_to("write in HOME", lambda: write(os.path.join(os.environ.get("HOME", "/nonexistent"), "pwned")))
attempt_to("write in /tmp", lambda: write("/tmp/hpcagent-pwned"))
attempt_to("write in /dev/shm", lambda: write("/dev/shm/hpcagent-pwned"))

# The node's servers: a Unix socket (a same-user tmux or D-Bus session
# would run its commands outside any sandbox), a TCP port.
def unix():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.environ["BAIT_UNIX"])
    return "connected"
attempt_to("connect to a Unix socket", unix)

def tcp():
    s = socket.create_connection(("127.0.0.1", int(os.environ["BAIT_TCP"])), timeout=2)
    return "connected"
attempt_to("connect to a TCP port", tcp)

# A daemon of its own, in a session of its own: it must die with the attempt.
read_end, write_end = os.pipe()
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.write(write_end, b"%d\n" % os.getpid())
        os.closerange(0, 256)
        import time
        time.sleep(600)
    os._exit(0)
os.waitpid(pid, 0)
os.close(write_end)
daemon = int(os.read(read_end, 64).decode().strip())
report["daemon pids"] = [daemon]
report["found its daemon running"] = "yes" if os.path.exists("/proc/%d" % daemon) else "no"

with open(os.path.join(workspace, "report.json"), "w") as f:
    json.dump(report, f, indent=1)
print(json.dumps(report))
