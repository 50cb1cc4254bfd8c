#!/usr/bin/env bash
# The peers `hpcagent bench` measures against, in a venv of their own
# (~/.cache/hpcagent/venv-peers, which the benches look for): Ray from PyPI.
# HyperQueue's server is a binary published only on GitHub releases; put
# `hq` on PATH to have it measured too.
set -euo pipefail
venv="${HPCAGENT_PEERS_VENV:-$HOME/.cache/hpcagent/venv-peers}"
[ -x "$venv/bin/python3" ] || python3 -m venv "$venv"
"$venv/bin/python3" -c 'import ray' 2>/dev/null || "$venv/bin/pip" install --quiet 'ray==2.*'
echo "peers ready: $("$venv/bin/python3" -c 'import ray; print("ray", ray.__version__)')"
