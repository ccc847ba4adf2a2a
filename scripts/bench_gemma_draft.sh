#!/usr/bin/env bash
# Rerun docs/results.md's figures of a Gemma 3 270M EAGLE-3 draft (default target export,
# 128 new tokens per prompt), each whole report (manifest, summary, every prompt's record)
# under docs/results/. Keep the machine otherwise idle for the
# speed stage. By default the draft is the one the repository ships
# (checkpoints/gemma-3-270m-eagle3), exported here with the target when missing.
#
#   bash scripts/bench_gemma_draft.sh                    # both stages, the shipped draft
#   STAGES=acceptance bash scripts/bench_gemma_draft.sh  # one of them
#   DRAFT=$cache/exports/draft-default.pte NAME=cpu bash scripts/bench_gemma_draft.sh
#                                                        # the CPU recipe's draft
#
# acceptance  EAGLE-3 chain of 5: TPC and acceptance by depth on 64 HumanEval (code) and 64
#             English (open prose) prompts, greedy and sampled at T=0.8, top-p 0.95 (seeds
#             0, 1 and 2: SEEDS="0" draws one; their mean per-token acceptance is written
#             to docs/results/gemma3-270m-NAME-draft-SET-chain5-sampled-draws.json);
#             SETS and MODES pick parts, as in the speed stage.
# speed       target-only against the draft (`--tree auto`), prompt lookup and both combined
#             (`--draft-method combined`, the draft method users get with a draft), greedy
#             and sampled, on 16 prompts each of code, open prose, questions (chat) and
#             copy-heavy prompts (sampled: seed = the run number); REPEATS=3 runs it three
#             times (RUNS="2 3": those run numbers), SETS, MODES and METHODS pick parts,
#             CPP=build/cpp/etspec_runner times the C++ runner beside Python (bash
#             runtime/cpp/build.sh) (about 35 minutes a run in all on 2 cores, Python alone).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh bench
cache=${ETSPEC_GEMMA3_270M:-.etspec-cache/gemma-3-270m}
target=$cache/exports/target-default.pte
shipped=checkpoints/gemma-3-270m-eagle3
draft=${DRAFT:-$cache/exports/draft-shipped.pte}
name=${NAME:-h200}  # the shipped draft, trained on an H200
work=$cache/bench
mkdir -p "$work" docs/results
if [ ! -f "$cache/gemma-3-270m-q4_k_m.gguf" ]; then
    echo "no Gemma 3 270M at $cache: python scripts/get_gemma3_270m.py" >&2
    exit 1
fi
[ -f "$target" ] || etspec export target "$cache/gemma-3-270m-q4_k_m.gguf" -o "$target"
if [ -z "${DRAFT:-}" ] && [ ! -f "$draft" ]; then
    # Int8 linears and lm_head, int4 embedding, as train_gemma_draft.sh exports its draft.
    etspec export draft "$shipped" --target "$target" --target-checkpoint "$cache/hf" \
        --dtype 8da8w-e4 -o "$draft"
fi
[ -f "$draft" ] || { echo "no $draft: bash scripts/train_gemma_draft.sh" >&2; exit 1; }
publish() { # the whole report, every prompt's record, for docs/results/
    cp "$1" "$2"
}
for stage in ${STAGES:-acceptance speed}; do
    case $stage in
    acceptance)
        for set in ${SETS:-humaneval english}; do
            for mode in ${MODES:-greedy sampled}; do
                if [ "$mode" = greedy ]; then
                    out=$work/$name-$set-chain5-greedy.json
                    etspec bench --target "$target" --draft "$draft" --draft-method eagle3 \
                        --prompts "$set" --num-prompts 64 \
                        --trees chain5 --json "$out" --force
                    publish "$out" "docs/results/gemma3-270m-$name-draft-$set-chain5-greedy.json"
                    continue
                fi
                # One draw of 64 sampled texts moves per-token acceptance by about 0.04 (the
                # shipped draft: 0.525, 0.568, 0.606 on English for seeds 0, 1, 2): a bar is
                # judged on the mean of several draws.
                draws=()
                for seed in ${SEEDS:-0 1 2}; do
                    tail=-seed$seed
                    [ "$seed" = 0 ] && tail=
                    out=$work/$name-$set-chain5-sampled$tail.json
                    etspec bench --target "$target" --draft "$draft" --draft-method eagle3 \
                        --prompts "$set" --num-prompts 64 --trees chain5 \
                        --temperature 0.8 --top-p 0.95 --seed "$seed" --json "$out" --force
                    publish "$out" "docs/results/gemma3-270m-$name-draft-$set-chain5-sampled$tail.json"
                    draws+=("$out")
                done
                python3 scripts/results_table.py "${draws[@]}" \
                    --json "docs/results/gemma3-270m-$name-draft-$set-chain5-sampled-draws.json"
            done
        done ;;
    speed)
        cpp=()
        [ -n "${CPP:-}" ] && cpp=(--cpp-runner "$CPP")
        for run in ${RUNS:-$(seq "${REPEATS:-1}")}; do
            for set in ${SETS:-humaneval english chat copy}; do
                for mode in ${MODES:-greedy sampled}; do
                    extra=()
                    # Each run draws its own sample (seed = run number): three runs of one
                    # seed would time the same texts three times, and a sampled text's
                    # repetition, which prompt lookup feeds on, varies from draw to draw.
                    [ "$mode" = sampled ] && extra=(--temperature 0.8 --top-p 0.95 --seed "$run")
                    for method in ${METHODS:-eagle3 combined prompt-lookup}; do
                        pair=(--target "$target" --draft "$draft" --draft-method "$method")
                        [ "$method" = prompt-lookup ] && pair=(--target "$target" --draft-method "$method")
                        out=$work/$name-speed-$set-$mode-$method-run$run.json
                        etspec bench "${pair[@]}" --prompts "$set" --num-prompts 16 --trees auto \
                            "${extra[@]}" "${cpp[@]}" --json "$out" --force
                        publish "$out" "docs/results/gemma3-270m-$name-draft-speed-$set-$mode-$method-run$run.json"
                    done
                done
            done
        done ;;
    *) echo "unknown stage $stage (acceptance, speed)" >&2; exit 2 ;;
    esac
done
