#!/usr/bin/env bash
# Train an EAGLE-3 draft for google/gemma-3-270m on this machine's CPU, from nothing, and
# export it beside the default target export. Every stage resumes where it stopped: run the
# same command again after an interruption. Needs `etspec fetch gemma-3-270m` first
# (the main job does it). The recipe is `etspec draft train`'s defaults with 100 feature shards.
#
#   bash scripts/train_gemma_draft.sh            # everything under .etspec-cache/gemma-3-270m/
#   STEPS=600 bash scripts/train_gemma_draft.sh  # a shorter training run (default 4,000)
#   FEATURE_SHARDS=153 bash scripts/train_gemma_draft.sh  # features of all 153 shards of 64
#                                                         # windows, not the first 100 (the
#                                                         # target's own continuations first)
#   TTT_STEPS=7 bash scripts/train_gemma_draft.sh   # unroll 7 draft steps, as EAGLE-3 (and a
#                                                   # GPU run) does, not 3: half the tokens
#                                                   # per hour; resumes a checkpoint of either
#
# The defaults fit a few hours of a 2-core CPU with bf16 matrix units (about 3.5 h with AMX;
# about 7 h on an AVX-512 CPU without them, where features and training run in fp32:
# docs/results.md). A draft's quality here is bought with
# training tokens, so the recipe stores features for two thirds of the windows (under a
# minute a shard: all of the target's own continuations and 4,100 corpus windows) and trains
# over them about three times (4,000 steps: held-out agreement at the first step 0.63 on the
# target's own continuations; over the first 52 shards, six times, 0.62, and sampled
# acceptance 0.49 on English, not 0.50) rather than computing features for data seen once, and
# unrolls 3 steps (the chains a 2-core verify pays for are short).
#
# Stages (etspec draft train; etspec/training/): tokenize the machine's own text
# (manual pages, /usr/share/doc, the Python standard library), let the exported target
# continue 1,000 prompts made from it, 620 English prose openings (etspec.training.prose_prompts)
# and 600 chat-style task prompts filled from it (etspec.training.chat_tasks: translate,
# summarize, answer from a passage, questions, word problems, code, follow-ups), the last two
# each twice (half greedy, half sampled: self-distillation), store
# the target's tapped hidden states and top-20 next-token log-probabilities over every window
# once, then train the draft over those features alone (the target is not run again).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
cache=${ETSPEC_GEMMA3_270M:-.etspec-cache/gemma-3-270m}
gguf=$cache/gemma-3-270m-q4_k_m.gguf
target_pte=$cache/exports/target-default.pte
if [ ! -f "$gguf" ]; then
    echo "no Gemma 3 270M at $cache: etspec fetch gemma-3-270m" >&2
    exit 1
fi
mkdir -p "$cache/exports"
# The self-distilled continuations come from the artifact users run (the default recipe).
[ -f "$target_pte" ] || etspec export target "$gguf" -o "$target_pte"
# 8,192 draft tokens (the default) cover 95.4% of the target's own held-out output tokens
# (16,384: 97.9%, 32,768: 98.8%). The draft's lm_head is most of its cost, in training and
# when drafting: 8,192 rows train 1.84x the tokens per hour of 16,384
# (scripts/bench_draft_training.py). The draft is exported with the default recipe (int8
# linears and lm_head, int4 embedding: it carries its own copy of the 262k-row table, which
# fp32 would make 670 MB) to $cache/draft-train/draft.pte.
etspec draft train --target "$gguf" --target-pte "$target_pte" --out "$cache/draft-train" \
    --feature-shards "${FEATURE_SHARDS:-100}" ${TTT_STEPS:+--ttt-steps "$TTT_STEPS"} \
    --steps "${STEPS:-4000}"
