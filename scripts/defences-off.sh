#!/usr/bin/env bash
# Issue 32's attacks against the judge before its defences: builds the
# judge of the commit before them (b62b2c8, or $DEFENCES_BEFORE) in a
# worktree under target/defences-off, runs this tree's hostile tests with
# that judge serving (HPCAGENT_JUDGE_UNDER_TEST; the clients stay this
# tree's), and prints each case's row. It succeeds when every one of those
# tests fails there and each attack has a failing row: the attacks are
# real, and only the defences stop them. The same tests pass in
# scripts/test.sh, with the defences.
#
# The cases (parts of their names, `|` between them) are in
# HPCAGENT_HOSTILE_CASES. The default leaves out "never drains": against
# the old judge it waits out the run's 11.5-minute deadline.
#
# Slow: a debug build of the old tree (minutes, once), then the tests.
set -euo pipefail
cd "$(dirname "$0")/.."

before=${DEFENCES_BEFORE:-b62b2c8}
root=$PWD/target/defences-off
if [ ! -d "$root/src" ]; then
  git worktree add --detach "$root/src" "$before"
fi
echo "== building the judge at $before"
(cd "$root/src" && CARGO_TARGET_DIR="$root/target" cargo build --locked --quiet --bin hpcagent)
export HPCAGENT_JUDGE_UNDER_TEST=$root/target/debug/hpcagent

default="continues itself|reopens its call channel|fast-math by a pragma|/proc entry"
export HPCAGENT_HOSTILE_CASES=${HPCAGENT_HOSTILE_CASES:-$default}

rm -rf target/tmp/suite
won=()
run() {
  echo "== $* (against $before)"
  if cargo test --locked --test "$@"; then
    won+=("$*")
  fi
}
run hostile_suite hostile_submissions_get_their_verdicts
run hostile_suite a_grade_killed_mid_call_frees_the_nodes_timing_lock_at_once
run hab_hostile

echo
echo "== the attacks against the judge at $before"
table=$(cat target/tmp/suite/*.tsv 2>/dev/null | grep -a -v "correct gemm afterwards" || true)
printf '%s\n' "$table" | awk -F'\t' '{ printf "%-70s %-44s %s\n", $2, substr($4, 1, 44), $5 }'

status=0
for passed in "${won[@]}"; do
  echo "NOT SHOWN: $passed passed against $before"
  status=1
done
IFS='|' read -r -a attacks <<<"$HPCAGENT_HOSTILE_CASES|timing lock|answer table|replays its first answer"
for attack in "${attacks[@]}"; do
  if ! printf '%s\n' "$table" | grep -F -- "$attack" | grep -q $'\tFAIL$'; then
    echo "NOT SHOWN: no row of \"$attack\" failed against $before"
    status=1
  fi
done
[ $status = 0 ] && echo "every attack wins against $before, and only the defences stop it"
exit $status
