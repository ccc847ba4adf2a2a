#!/usr/bin/env bash
# The README main job: install, export the bundled pair (checkpoints/) to .pte (cached), then
# generate speculatively on a HumanEval prompt, streaming the completion, and compare with the
# target alone: acceptance stats, tokens/s of both, and whether the outputs are identical.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
python3 -m pip install -q -e '.[bench]' >"$log" 2>&1 || { cat "$log"; exit 1; }
work=${ETSPEC_WORK:-.etspec-cache}
bash scripts/export_bundled.sh "$work"
etspec inspect "$work/target.pte" | sed -n 1,12p
task=${ETSPEC_TASK:-0}
echo "--- HumanEval/$task, speculative (EAGLE-3 draft, --tree auto), then target-only"
etspec generate --target "$work/target.pte" --draft "$work/draft.pte" --humaneval "$task" \
    --max-new-tokens 128 --compare
