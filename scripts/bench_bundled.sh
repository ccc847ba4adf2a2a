#!/usr/bin/env bash
# Rerun the bundled pair's benchmarks in docs/results.md: the side-by-side table on all 164
# HumanEval prompts (target-only and speculative shapes, Python and the C++ runner), the
# outside peers (the eager reference program, transformers greedy and assisted generate),
# the drafter-window ablation and the dynamic-tree node sweep, each with its summary and
# manifest under docs/results/ and its plots under docs/results/plots/ (the full reports,
# with per-prompt records, and the step traces stay in the work folder). Runs for about 45
# minutes on 2 cores; keep the machine otherwise idle. STAGES="main window sweep" picks parts.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh bench,peers
work=${ETSPEC_WORK:-.etspec-cache}
bash scripts/export_bundled.sh "$work"
target=checkpoints/etspec-code-14m
draft=checkpoints/etspec-code-14m-eagle3
pair=(--target "$work/target.pte" --draft "$work/draft.pte" --draft-method eagle3)  # the draft alone
summary() { # the report without its per-prompt records, for docs/results/
    python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); r.pop("records")
json.dump(r, open(sys.argv[2], "w"), indent=1)' "$1" "$2"
}
for stage in ${STAGES:-main peers window sweep}; do
    case $stage in
    window) # EAGLE-Pangu Table 3: chain7 (what auto settles on) with its draft truncated.
        etspec bench "${pair[@]}" --trees chain7 --draft-windows 16,32,64,128 \
            --json "$work/bench-window.json" --force
        summary "$work/bench-window.json" docs/results/bundled-humaneval-draft-window.json
        etspec plot "$work/bench-window.json" -o docs/results/plots/bundled-humaneval-draft-window --force ;;
    sweep) # EAGLE-Pangu Table 2: dynamic-tree node budget at depth 3, top-k 4.
        etspec bench "${pair[@]}" --num-prompts 40 --trees auto --sweep nodes \
            --json "$work/bench-sweep-nodes.json" --force
        summary "$work/bench-sweep-nodes.json" docs/results/bundled-humaneval-dynamic-tree-node-sweep.json
        etspec plot "$work/bench-sweep-nodes.json" -o docs/results/plots/bundled-humaneval-dynamic-tree-node-sweep --force ;;
    main)
        cpp=()
        if command -v cmake >/dev/null && command -v c++ >/dev/null; then
            cpp=(--cpp-runner "$(bash runtime/cpp/build.sh "$work/cpp")")
        fi
        etspec bench "${pair[@]}" --trees auto,chain3,chain7,N7 "${cpp[@]}" \
            --json "$work/bench-humaneval.json" --traces "$work/bench-humaneval.traces.jsonl" \
            --force
        summary "$work/bench-humaneval.json" docs/results/bundled-humaneval-trees-python-and-cpp.json
        python3 scripts/humaneval_syntax.py "$work/bench-humaneval.json"
        etspec plot "$work/bench-humaneval.json" -o docs/results/plots/bundled-humaneval-trees-python-and-cpp \
            --force ;;
    peers)
        etspec bench "${pair[@]}" --num-prompts 40 --trees auto \
            --eager-target "$target" --eager-draft "$draft" \
            --hf-target "$target" --hf-assistant checkpoints/etspec-code-1m-assistant \
            --json "$work/bench-peers.json" --force
        summary "$work/bench-peers.json" docs/results/bundled-humaneval-outside-peers.json ;;
    *) echo "unknown stage $stage (main, peers, window, sweep)" >&2; exit 2 ;;
    esac
done
