#!/usr/bin/env bash
# The peers `hpcagent bench` measures against, in venvs of their own, which
# the benches look for:
# - ~/.cache/hpcagent/venv-peers, from PyPI: Ray, and HyperQueue (its
#   Python package carries the server and worker);
# - with HPCAGENT_BENCH_SOURCE=<an HPCAgent-Bench checkout> (it is not on
#   PyPI), its judge in ~/.cache/hpcagent/venv-hab from a copy of that
#   checkout, set up as its PEER.md says; `hpcagent bench judge --peer-hab
#   ~/.cache/hpcagent/venv-hab/bin/hpcagent-bench --hab-corpus
#   <checkout>/hpcagent_bench/benchmarks` then measures it.
set -euo pipefail
venv="${HPCAGENT_PEERS_VENV:-$HOME/.cache/hpcagent/venv-peers}"
[ -x "$venv/bin/python3" ] || python3 -m venv "$venv"
"$venv/bin/python3" -c 'import ray' 2>/dev/null || "$venv/bin/pip" install --quiet 'ray==2.*'
"$venv/bin/python3" -c 'import hyperqueue' 2>/dev/null || "$venv/bin/pip" install --quiet 'hyperqueue==0.*'
echo "peers ready: $("$venv/bin/python3" -c 'import ray, importlib.metadata as m; print("ray", ray.__version__, "hyperqueue", m.version("hyperqueue"))')"

if [ -n "${HPCAGENT_BENCH_SOURCE:-}" ]; then
  hab="${HPCAGENT_HAB_VENV:-$HOME/.cache/hpcagent/venv-hab}"
  if [ ! -x "$hab/bin/hpcagent-bench" ]; then
    # A copy: the compiler flag below is edited in it, never in the source.
    rm -rf "$hab"
    python3 -m venv "$hab"
    cp -r "$HPCAGENT_BENCH_SOURCE" "$hab/src"
    # gcc before 14 rejects -std=c23, which its C builds pass.
    if ! echo 'int x;' | gcc -std=c23 -x c -fsyntax-only - 2>/dev/null; then
      sed -i 's/-std=c23/-std=c2x/g' "$hab/src/hpcagent_bench/envs/compilers.yaml"
    fi
    "$hab/bin/pip" install --quiet -e "$hab/src"
    "$hab/bin/python" -m compileall -q "$hab/src/hpcagent_bench"
  fi
  echo "HPCAgent-Bench's judge ready: $hab/bin/hpcagent-bench"
fi
