#!/usr/bin/env bash
# Start a real multi-node Slurm on this one Debian machine (run as root).
#
# Debian's slurmctld, slurmd and munge, unmodified: nodes n1..nN, each slurmd in
# its own network namespace (own address 10.77.0.i, own hostname, own
# /etc/hosts) joined by a bridge, with fake GPUs (gres/gpu backed by character
# devices) so GPU requests, CUDA_VISIBLE_DEVICES and step GPU splits are real.
# Idempotent: an already running cluster is left as it is; a half-started one
# is torn down first. Everything lives under $R; /etc is not touched.
#
#   scripts/local-slurm/up.sh            then:  . /tmp/hpcagent-slurm/env.sh
#   scripts/local-slurm/down.sh
#
# Partitions: debug (every node, the default) and cpu (the upper half).
# Knobs (environment): NODES=4 CPUS=4 GPUS=4 R=/tmp/hpcagent-slurm
#   SELECT=CR_Core_Memory (SelectTypeParameters; CR_Core leaves memory out)
set -euo pipefail

NODES=${NODES:-4}
CPUS=${CPUS:-4}        # may exceed the real cores (SlurmdParameters=config_overrides)
GPUS=${GPUS:-4}        # fake gres/gpu per node; 0 = none
R=${R:-/tmp/hpcagent-slurm}
SELECT=${SELECT:-CR_Core_Memory}
MEMORY=4000           # RealMemory per node (MB), shared out by DefMemPerCPU
NET=10.77.0            # node i is $NET.i; the controller is $NET.254 on the bridge
BRIDGE=hpcaslurm0
CTLD_PORT=16817        # not 6817/6818: no clash with a system Slurm
NODE_PORT0=16820
export SLURM_CONF=$R/etc/slurm.conf
CPU_PARTITION=cpu      # the second partition: nodes of the upper half
upper="n[$((NODES / 2 + 1))-$NODES]"

say() { echo "[local-slurm] $*"; }
die() { echo "[local-slurm] $*" >&2; exit 1; }
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
idle_nodes() { sinfo -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l; }
[ "$(id -u)" = 0 ] || die "must run as root (network namespaces, munge, slurmd)"
start=$(date +%s%N)

# Already up: leave it. Half up: clean first.
running=1
alive "$R/munge/munged.pid" && alive "$R/run/slurmctld.pid" || running=0
for i in $(seq "$NODES"); do alive "$R/run/slurmd-n$i.pid" || running=0; done
if [ $running = 1 ] && sinfo -h >/dev/null 2>&1; then
  # A cluster an older version of this script started lacks the second partition.
  sinfo -h -p "$CPU_PARTITION" -o %P 2>/dev/null | grep -q . ||
    scontrol create PartitionName="$CPU_PARTITION" Nodes="$upper" State=UP MaxTime=INFINITE
  say "already up: $(sinfo -h -o '%D nodes %T' | paste -sd, -)"; exit 0
fi
"$(dirname "$0")/down.sh" >/dev/null 2>&1 || true

# Debian 12 ships Slurm 22.05 and munge 0.5.
need=""
for p in slurmctld slurmd slurm-client munge; do dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"; done
if [ -n "$need" ]; then
  say "installing$need"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends $need >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends $need >/dev/null; }
fi

mkdir -p "$R"/{etc,log,run,state,dev,munge}
for i in $(seq "$NODES"); do mkdir -p "$R/spool/n$i"; done
# munged refuses a socket directory it does not own or a key readable by others.
chown munge:munge "$R/munge"; chmod 755 "$R/munge"
[ -f "$R/munge/munge.key" ] || runuser -u munge -- mungekey --create --keyfile="$R/munge/munge.key"
runuser -u munge -- munged --key-file="$R/munge/munge.key" --socket="$R/munge/munge.socket.2" \
  --pid-file="$R/munge/munged.pid" --log-file="$R/munge/munged.log" --seed-file="$R/munge/munged.seed"

# gres/gpu counts only File= entries that are character devices; Slurm stat()s
# them and never opens them. Major 195 is NVIDIA's.
for g in $(seq 0 $((GPUS - 1))); do
  [ -c "$R/dev/gpu$g" ] || mknod -m 600 "$R/dev/gpu$g" c 195 "$g"
done

# One network namespace per node, all on one bridge with the controller.
host=$(hostname)
ip link add "$BRIDGE" type bridge
ip addr add "$NET.254/24" dev "$BRIDGE"
ip link set "$BRIDGE" up
{ echo "127.0.0.1 localhost"; echo "$NET.254 $host"
  for i in $(seq "$NODES"); do echo "$NET.$i n$i"; done; } > "$R/etc/hosts"
for i in $(seq "$NODES"); do
  ns=hpcaslurm-n$i
  ip netns add "$ns"
  ip link add "hs-n$i-h" type veth peer name "hs-n$i-n"
  ip link set "hs-n$i-n" netns "$ns"
  ip link set "hs-n$i-h" master "$BRIDGE" up
  ip -n "$ns" addr add "$NET.$i/24" dev "hs-n$i-n"
  ip -n "$ns" link set "hs-n$i-n" up
  ip -n "$ns" link set lo up
done

# cgroup v1 freezer: proctrack/cgroup kills every process of a step, even
# daemonized ones. Without it, linuxproc (orphans survive their step).
[ -f /sys/fs/cgroup/freezer/cgroup.procs ] && proctrack=cgroup || proctrack=linuxproc
cat > "$R/etc/slurm.conf" <<CONF
ClusterName=hpcagent-local
SlurmctldHost=$host($NET.254)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$R/munge/munge.socket.2
StateSaveLocation=$R/state
SlurmctldPidFile=$R/run/slurmctld.pid
SlurmctldLogFile=$R/log/slurmctld.log
SlurmdPidFile=$R/run/slurmd-%n.pid
SlurmdLogFile=$R/log/slurmd-%n.log
SlurmdSpoolDir=$R/spool/%n
ProctrackType=proctrack/$proctrack
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=$SELECT
SlurmdParameters=config_overrides
GresTypes=gpu
MpiDefault=none
SchedulerType=sched/backfill
# Defaults delay batch starts by ~3 s and heterogeneous jobs by up to 30 s.
SchedulerParameters=batch_sched_delay=0,bf_interval=1
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$R/log/jobcomp.txt
ReturnToService=2
KillWait=5
InactiveLimit=0
MinJobAge=600
MailProg=/bin/true
CONF
echo "AutoDetect=off" > "$R/etc/gres.conf"
gres=""; [ "$GPUS" -gt 0 ] && gres="Gres=gpu:$GPUS"
for i in $(seq "$NODES"); do
  echo "NodeName=n$i NodeHostname=n$i NodeAddr=$NET.$i Port=$((NODE_PORT0 + i)) CPUs=$CPUS RealMemory=$MEMORY $gres State=UNKNOWN" >> "$R/etc/slurm.conf"
  [ "$GPUS" -gt 0 ] && echo "NodeName=n$i Name=gpu File=$R/dev/gpu[0-$((GPUS - 1))]" >> "$R/etc/gres.conf"
done
# Memory is consumable, as on sites that share nodes by memory, and a job or
# step that asks for none gets DefMemPerCPU for each of its CPUs.
echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP DefMemPerCPU=$((MEMORY / CPUS))" >> "$R/etc/slurm.conf"
# A second partition over the upper half of the nodes, for heterogeneous jobs
# (a role on a partition of its own).
echo "PartitionName=$CPU_PARTITION Nodes=$upper MaxTime=INFINITE State=UP DefMemPerCPU=$((MEMORY / CPUS))" >> "$R/etc/slurm.conf"
printf 'CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\nConstrainCores=no\nConstrainDevices=no\nConstrainRAMSpace=no\n' > "$R/etc/cgroup.conf"
echo "export SLURM_CONF=$SLURM_CONF" > "$R/env.sh"

# -c: start from empty state, so a node drained by an earlier run comes back idle.
slurmctld -c
for i in $(seq "$NODES"); do
  # nsenter, not `ip netns exec`: the latter remounts /sys, hiding the cgroup
  # hierarchy, and slurmd dies "Unable to initialize cgroup plugin".
  nsenter --net="/run/netns/hpcaslurm-n$i" unshare --uts --mount --propagation private \
    sh -c "hostname n$i && mount --bind $R/etc/hosts /etc/hosts && exec slurmd -N n$i"
done

for _ in $(seq 300); do [ "$(idle_nodes)" -ge "$NODES" ] && break; sleep 0.1; done
if [ "$(idle_nodes)" -lt "$NODES" ]; then
  sinfo -N -o '%N %T %E' >&2; die "nodes did not become idle; logs in $R/log"
fi
ms=$(( ($(date +%s%N) - start) / 1000000 ))
say "up: $NODES nodes × $CPUS CPUs × $GPUS GPUs (proctrack/$proctrack) in $((ms / 1000)).$(printf %03d $((ms % 1000))) s"
say "use it: . $R/env.sh"
