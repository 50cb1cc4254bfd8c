#!/usr/bin/env bash
# The peers `hpcagent bench` measures against, in a venv of their own
# (~/.cache/hpcagent/venv-peers, which the benches look for), from PyPI:
# Ray, and HyperQueue (its Python package carries the server and worker).
set -euo pipefail
venv="${HPCAGENT_PEERS_VENV:-$HOME/.cache/hpcagent/venv-peers}"
[ -x "$venv/bin/python3" ] || python3 -m venv "$venv"
"$venv/bin/python3" -c 'import ray' 2>/dev/null || "$venv/bin/pip" install --quiet 'ray==2.*'
"$venv/bin/python3" -c 'import hyperqueue' 2>/dev/null || "$venv/bin/pip" install --quiet 'hyperqueue==0.*'
echo "peers ready: $("$venv/bin/python3" -c 'import ray, importlib.metadata as m; print("ray", ray.__version__, "hyperqueue", m.version("hyperqueue"))')"
