#!/usr/bin/env bash
# Regenerate every headline figure of README.md at HEAD on this machine, into
# docs/results/headline/ (each run's full `etspec bench` report: every prompt's record,
# manifest with revision, CPU and artifact hashes), then write README's headline table and
# docs/results.md's headline section from those files (python -m etspec.tools.headline).
#
#   bash scripts/reproduce.sh           # three runs, all 36 task prompts, 40 HumanEval prompts
#   bash scripts/reproduce.sh --quick   # one run, two prompts of each task type
#
# Keep the machine otherwise idle: every figure is a ratio timed side by side in one run.
# The first time it also fetches Gemma 3 270M and exports it and the bundled pair (the main
# job's cached exports are reused). Refuses uncommitted changes outside docs/: a figure
# must name the code it measured.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
"") runs="1 2 3" tasks=tasks ;;
--quick) runs="1" tasks=tasks:2 ;;
*) echo "usage: bash scripts/reproduce.sh [--quick]" >&2; exit 2 ;;
esac
start=$SECONDS
source scripts/env.sh bench,gguf
if [ -n "$(git status --porcelain --untracked-files=no -- . ':(exclude)docs')" ]; then
    echo "error: uncommitted changes outside docs/; commit or stash them first (a figure names the revision it measured)" >&2
    exit 1
fi
source scripts/gemma_exports.sh
bash scripts/export_bundled.sh .etspec-cache
cpp=$(bash runtime/cpp/build.sh)
out=docs/results/headline
new=$out.new
rm -rf "$new"
mkdir -p "$new"
stage() { echo "--- $1 ($((SECONDS - start)) s)"; }
sampled=(--temperature 0.8 --top-p 0.95 --ignore-eos)  # no seed: each request timed here
for run in $runs; do
    for mode in greedy sampled; do
        args=()
        [ "$mode" = sampled ] && args=("${sampled[@]}")
        stage "Gemma 3 270M, $tasks, $mode, run $run: target-only, prompt lookup, the draft, both"
        etspec bench --target "$target" --draft "$draft" --prompts "$tasks" \
            --draft-methods prompt-lookup,eagle3,combined --trees auto --cpp-runner "$cpp" \
            "${args[@]}" --json "$new/gemma-tasks-$mode-run$run.json"
        stage "the draft alone, chain5, $mode, run $run"
        etspec bench --target "$target" --draft "$draft" --prompts "$tasks" --draft-method eagle3 \
            --trees chain5 "${args[@]}" --json "$new/gemma-draft-chain5-$mode-run$run.json"
    done
    stage "bundled pair, 40 HumanEval prompts, greedy, run $run: auto against fixed shapes"
    etspec bench --target .etspec-cache/target.pte --draft .etspec-cache/draft.pte \
        --num-prompts 40 --trees auto,chain3,chain5,chain6,chain7,N7 --cpp-runner "$cpp" \
        --json "$new/bundled-humaneval40-run$run.json"
done
stage "memory"
python3 -m etspec.tools.memory --target "$target" --draft "$draft" --cpp-runner "$cpp" \
    --json "$new/gemma-memory.json" >/dev/null
stage "sampling host work"
python3 scripts/bench_sampling.py --target "$target" --json "$new/gemma-sampling.json" >/dev/null
rm -rf "$out"
mv "$new" "$out"
python3 -m etspec.tools.headline
stage "done: $out, README.md and docs/results.md rewritten"
