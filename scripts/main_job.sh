#!/usr/bin/env bash
# The README main job: make/refresh the project venv (.venv/), export the bundled pair (checkpoints/) to .pte (cached), then
# generate speculatively on a HumanEval prompt, streaming the completion, and compare with the
# target alone: acceptance stats, tokens/s of both, and whether the outputs are identical.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh bench
work=${ETSPEC_WORK:-.etspec-cache}
bash scripts/export_bundled.sh "$work"
etspec inspect "$work/target.pte" | sed -n 1,12p
task=${ETSPEC_TASK:-0}
echo "--- HumanEval/$task, speculative (EAGLE-3 draft and prompt lookup combined, --tree auto), then target-only"
etspec generate --target "$work/target.pte" --draft "$work/draft.pte" --humaneval "$task" \
    --max-new-tokens 128 --compare
