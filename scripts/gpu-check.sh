#!/usr/bin/env bash
# What only a real GPU node can answer, run before the first campaign on a
# site (docs/operator-guide.md, "Run first on a GPU node"). Inside an
# allocation of one node, from the checkout, after the images are built
# and the binary is built for the node:
#
#   salloc -N1 --exclusive --gpus-per-node=4 -t 00:30:00 [-p PARTITION]
#   scripts/gpu-check.sh alps|beverin | tee gpu-check.txt
#
# One line per check: PASS, FAIL, SKIP (what it needs failed) or INFO,
# and what it found. Exits 1 when a check failed. Keep its output with the site's notes: it is what the
# project knows about the node. Outside a job it says so and stops.
set -uo pipefail

site=${1:-}
case $site in
  alps) gpu=gh200 lang=cuda ext=cu tools="nsys ncu" ;;
  beverin) gpu=mi300a lang=hip ext=hip tools="rocprofv3" ;;
  *) echo "usage: $0 alps|beverin (inside an allocation of one GPU node)" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")/.." && pwd)
exe=${HPCAGENT:-$here/target/release/hpcagent}
# The binary inside the images (CONTAINER_EXE).
inside=/opt/hpcagent/bin/hpcagent
failed=0

say() {
  printf '%-4s  %-34s %s\n' "$1" "$2" "$3"
  [ "$1" = FAIL ] && failed=1
  return 0
}

# check NAME COMMAND...: PASS with its output's first line, FAIL with its
# last; its status is the command's.
check() {
  local name=$1 out
  shift
  if out=$("$@" 2>&1); then
    say PASS "$name" "$(printf '%s' "$out" | head -n1)"
  else
    say FAIL "$name" "$(printf '%s' "$out" | tail -n3 | tr '\n' ' ')"
    return 1
  fi
}

if [ -z "${SLURM_JOB_ID:-}" ]; then
  say FAIL "allocation" "not inside a Slurm job: salloc one GPU node first"
  exit 1
fi
if [ ! -x "$exe" ]; then
  say FAIL "hpcagent" "$exe is not built (cargo build --release), or set HPCAGENT"
  exit 1
fi
if [ -z "${SCRATCH:-}" ]; then
  say FAIL "SCRATCH" "not set: the EDFs mount it, and the images lie under it"
  exit 1
fi
work=$(mktemp -d "$SCRATCH/hpcagent-gpu-check.XXXXXX")
node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" 2>/dev/null | head -n1)

# --- Slurm -----------------------------------------------------------------
say INFO "slurm" "$(scontrol --version 2>&1)"
say INFO "gres of $node" "$(scontrol show node "$node" -o 2>&1 | grep -o 'Gres=[^ ]*')"
# Slurm 26.05 and later refuse a step's --gres beside an inherited
# --gpus-per-node; hpcagent's steps do not inherit SLURM_GPUS* (the list
# is orchestrator/src/executor/slurm.rs NOT_INHERITED).
if srun -n1 --gres=gpu:1 true >/dev/null 2>&1; then
  say INFO "step --gres, job's GPUs inherited" "accepted (Slurm before 26.05, or no --gpus-per-node)"
else
  say INFO "step --gres, job's GPUs inherited" "refused, as Slurm 26.05+ does: hpcagent clears them"
fi
check "step --gres as hpcagent starts it" env -u SLURM_MEM_PER_NODE -u SLURM_MEM_PER_CPU \
  -u SLURM_MEM_PER_GPU -u SLURM_GPUS -u SLURM_GPUS_PER_NODE -u SLURM_GPUS_PER_SOCKET \
  -u SLURM_GPUS_PER_TASK -u SLURM_CPUS_PER_GPU -u SLURM_TRES_PER_TASK \
  srun -n1 --gres=gpu:1 true

# --- Container Engine environments ----------------------------------------
check "edf install" "$exe" edf install --to "$work/edf"
roles=$work/edf/hpcagent-roles-$gpu.toml
vllm=$work/edf/hpcagent-vllm-$gpu.toml
in_roles() { srun -n1 --environment="$roles" "$@"; }
in_vllm() { srun -n1 --environment="$vllm" "$@"; }
# first_line COMMAND...: its output's first line, or nothing when it failed.
first_line() { local out; out=$("$@" 2>/dev/null) && printf '%s' "$out" | head -n1; }
roles_ok=false vllm_ok=false
check "roles EDF starts" in_roles uname -m && roles_ok=true
check "vllm EDF starts" in_vllm uname -m && vllm_ok=true
skip() { say SKIP "$1" "the $2 EDF did not start"; }

if $roles_ok; then
  check "hpcagent in the roles image" in_roles "$inside" --version
  check "checkout seen from the roles image" in_roles test -d "$here/benchmarks"
fi

# --- vLLM in its image ------------------------------------------------------
if $vllm_ok; then
  # Its last line: vLLM may warn first (Triton, the platform).
  check "vllm --version" in_vllm sh -c 'vllm --version 2>/dev/null | tail -n1'
  help=$(in_vllm vllm serve --help=all 2>/dev/null)
  for flag in --headless --nnodes --node-rank --master-addr --distributed-timeout-seconds; do
    if printf '%s' "$help" | grep -q -- "$flag"; then
      say INFO "vllm serve $flag" "listed by --help=all"
    else
      say INFO "vllm serve $flag" "not listed by --help=all (hpcagent gates its flags by the version above)"
    fi
  done
  plugin=$(first_line in_vllm sh -c 'ldconfig -p | grep -Eo "lib[nr]ccl-net[^ ]*"; for d in /opt /usr/lib /usr/local/lib; do find "$d" -name "lib*ccl-net*.so*" 2>/dev/null; done')
  if [ -n "$plugin" ]; then
    say PASS "NCCL/RCCL libfabric plugin" "$plugin"
  else
    say FAIL "NCCL/RCCL libfabric plugin" "none in the vLLM image with its hooks (com.hooks.aws_ofi_nccl)"
  fi
  if [ "$site" = beverin ]; then
    say INFO "ROCm of the vLLM image" "$(first_line in_vllm cat /opt/rocm/.info/version) (the EDF's hook variant is rocm6)"
  fi
else
  skip "vLLM version, flags and plugin" vllm
fi

# --- Isolation and counters inside the engine -------------------------------
say INFO "LSMs (host)" "$(cat /sys/kernel/security/lsm 2>/dev/null || echo 'unknown (no securityfs)')"
say INFO "perf_event_paranoid (host)" "$(cat /proc/sys/kernel/perf_event_paranoid)"
if ! $roles_ok; then
  skip "isolation, counters, a GPU grade" roles
  say INFO "kept" "$work (rendered EDFs)"
  exit 1
fi
probe=$(in_roles "$inside" judge exec --probe 2>&1)
ns=$(printf '%s\n' "$probe" | sed -n 1p)
hold=$(printf '%s\n' "$probe" | sed -n 2p)
[ "$ns" = ok ] && say PASS "namespaces in the roles EDF" ok || say FAIL "namespaces in the roles EDF" "$ns"
[ "$hold" = ok ] && say PASS "ptrace hold in the roles EDF" ok || say FAIL "ptrace hold in the roles EDF" "$hold"
say INFO "perf_event_paranoid (roles EDF)" "$(first_line in_roles cat /proc/sys/kernel/perf_event_paranoid)"
if [ "$lang" = cuda ]; then
  say INFO "GPUs" "$(in_roles nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n4 | tr '\n' ';')"
else
  say INFO "GPUs" "$(in_roles rocm-smi --showproductname 2>/dev/null | grep -m4 -i 'card series' | tr '\n' ';')"
fi

# --- A GPU grade and its profiles, by a judge in the roles EDF --------------
cat >"$work/grade.sh" <<EOF
set -u
cd "$here"
"$inside" judge serve --listen 127.0.0.1:50071 --preset S --cache "$work/cache" \
  --corpus "$here/benchmarks" >"$work/judge.log" 2>&1 &
judge=\$!
for _ in \$(seq 120); do grep -q 'listening on' "$work/judge.log" && break; sleep 1; done
url=http://127.0.0.1:50071
"$inside" judge score --judge \$url --task gemm --language $lang --json \
  tests/submissions/gemm_ok.$ext >"$work/score.json" 2>"$work/score.err"
for tool in linuxperf $tools; do
  language=$lang
  file=tests/submissions/gemm_ok.$ext
  [ \$tool = linuxperf ] && language=c && file=tests/submissions/gemm_ok.c
  "$inside" judge profile --judge \$url --task gemm --language \$language --tool \$tool \
    --json \$file >"$work/profile-\$tool.json" 2>"$work/profile-\$tool.err"
done
kill \$judge
EOF
in_roles bash "$work/grade.sh" >/dev/null 2>&1
field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1" 2>/dev/null; }
status=$(field "$work/score.json" 'd["status"]')
if [ "$status" = ok ]; then
  say PASS "$lang grade of gemm" "$(field "$work/score.json" '"speedup %.2fx, host median %.0f ns, device median %s ns" % (d["speedup"], d["timing"]["median_ns"], (d.get("device") or {}).get("median_ns"))')"
else
  say FAIL "$lang grade of gemm" "${status:-no verdict}: $(field "$work/score.json" 'd["message"]') $(tail -n2 "$work/score.err" 2>/dev/null)"
fi
for tool in linuxperf $tools; do
  why=$(field "$work/profile-$tool.json" 'd["unavailable"]')
  summary=$(field "$work/profile-$tool.json" 'd["summary"].splitlines()[0]')
  if [ -f "$work/profile-$tool.json" ] && [ -z "$why" ] && [ -n "$summary" ]; then
    say PASS "profile $tool" "$summary"
  else
    say FAIL "profile $tool" "${why:-$(tail -n2 "$work/profile-$tool.err" 2>/dev/null | tr '\n' ' ')}"
  fi
done

say INFO "kept" "$work (rendered EDFs, the judge's log, verdicts, profiles)"
exit $failed
