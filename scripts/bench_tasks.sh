#!/usr/bin/env bash
# Rerun docs/results.md's task-type figures on Gemma 3 270M with the shipped draft (default
# target export, 128 new tokens, --prompts tasks): target-only, prompt lookup alone, the draft
# alone and the default (both combined), all under --tree auto, Python and the C++ runner side
# by side in one run. Keep the machine otherwise idle (but for LOAD=1's own process).
#
#   bash scripts/bench_tasks.sh                 # greedy and sampled (T=0.8, top-p 0.95, no
#                                               # seed), RUNS="1 2 3"
#   MODES=sampled LOAD=1 bash scripts/bench_tasks.sh  # beside one `nice -n 19` busy process
#   CONTROL=1 bash scripts/bench_tasks.sh       # also target-only timed again (--control)
#   METHODS=combined TREES=auto,chain2,chain3,chain4,chain5 NAME=tasks-auto-vs-chains \
#       bash scripts/bench_tasks.sh             # `auto` against fixed chains (the table's last)
#
# Each run's full report (every prompt's record) goes to docs/results/, and
# scripts/tasks_table.py writes the table over the runs of a mode.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh bench
cache=${ETSPEC_GEMMA3_270M:-.etspec-cache/gemma-3-270m}
target=$cache/exports/target-default.pte
draft=${DRAFT:-$cache/exports/draft-shipped.pte}
cpp=${CPP:-build/cpp/etspec_runner}
[ -f "$target" ] && [ -f "$draft" ] || {
    echo "no $target or $draft: see scripts/bench_gemma_draft.sh (it exports both)" >&2
    exit 1
}
[ -x "$cpp" ] || bash runtime/cpp/build.sh >/dev/null
tag=${NAME:-tasks}${LOAD:+-load}${CONTROL:+-control}
control=()
[ -n "${CONTROL:-}" ] && control=(--control)
busy=
if [ -n "${LOAD:-}" ]; then
    nice -n 19 python3 -c 'while True: pass' &
    busy=$!
    trap 'kill $busy' EXIT
fi
for mode in ${MODES:-greedy sampled}; do
    args=()
    [ "$mode" = sampled ] && args=(--temperature 0.8 --top-p 0.95 --ignore-eos)
    runs=()
    for run in ${RUNS:-1 2 3}; do
        out=docs/results/gemma3-270m-$tag-$mode-run$run.json
        etspec bench --target "$target" --draft "$draft" \
            --draft-methods "${METHODS:-prompt-lookup,eagle3,combined}" --trees "${TREES:-auto}" \
            --prompts tasks \
            --cpp-runner "$cpp" "${control[@]}" "${args[@]}" --json "$out" --force
        runs+=("$out")
    done
    python3 scripts/tasks_table.py "${runs[@]}" --json "docs/results/gemma3-270m-$tag-$mode.json"
done
