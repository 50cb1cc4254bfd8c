#!/usr/bin/env bash
# Stop what up.sh started and remove its namespaces and bridge. Safe to run
# when nothing is up. Keeps $R (config, logs, munge key) for inspection.
set -u
R=${R:-/tmp/hpcagent-slurm}
BRIDGE=hpcaslurm0
export SLURM_CONF=$R/etc/slurm.conf
say() { echo "[local-slurm] $*"; }

# stop PIDFILE NAME: stop the process if it is still the one we started.
stop() {
  local file=$1 name=$2 pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file")
  if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ]; then
    kill "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  fi
  rm -f "$file"
}

# Cancel jobs while the controller is up, so each slurmstepd exits (it is
# detached from slurmd and would outlive it).
if [ -f "$R/run/slurmctld.pid" ] && kill -0 "$(cat "$R/run/slurmctld.pid")" 2>/dev/null; then
  jobs=$(squeue -h -o %A 2>/dev/null)
  if [ -n "$jobs" ]; then
    scancel $jobs
    for _ in $(seq 100); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.2; done
  fi
fi
for f in "$R"/run/slurmd-*.pid; do stop "$f" slurmd; done
stop "$R/run/slurmctld.pid" slurmctld
stop "$R/munge/munged.pid" munged

# Whatever still runs inside our namespaces is ours.
for ns in $(ip netns list 2>/dev/null | awk '/^hpcaslurm-n[0-9]+/{print $1}'); do
  pids=$(ip netns pids "$ns" 2>/dev/null)
  [ -n "$pids" ] && kill -9 $pids 2>/dev/null
  ip netns del "$ns"
done
ip link show "$BRIDGE" >/dev/null 2>&1 && ip link del "$BRIDGE"
rmdir /sys/fs/cgroup/freezer/slurm_n[0-9]*/ 2>/dev/null
say "down"
