#!/usr/bin/env bash
# The README main job: install, export the bundled pair (checkpoints/) to .pte (cached), then
# generate speculatively on a HumanEval prompt, streaming the completion, and compare with the
# target alone: acceptance stats, tokens/s of both, and whether the outputs are identical.
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
python3 -m pip install -q -e '.[bench]' >"$log" 2>&1 || { cat "$log"; exit 1; }
work=${ETSPEC_WORK:-.etspec-cache}
target=checkpoints/etspec-code-14m
draft=checkpoints/etspec-code-14m-eagle3
mkdir -p "$work"
# The cache is keyed by the checkpoints and the code that builds the artifacts: a change to
# either re-exports.
stamp=$(cat "$target/model.safetensors" "$draft/model.safetensors" models/*.py export/*.py |
    sha256sum | cut -c1-16)
stamp="$stamp-$(python3 -c 'import importlib.metadata as m; print(m.version("etspec"))')"
if [ "$(cat "$work/stamp" 2>/dev/null)" != "$stamp" ] ||
    ! etspec inspect "$work/target.pte" >/dev/null 2>&1 ||
    ! etspec inspect "$work/draft.pte" >/dev/null 2>&1; then
    rm -f "$work/stamp"
    etspec export target "$target" -o "$work/target.pte" --max-seq 512 --verify-width 4,8,16 \
        --force
    etspec export draft "$draft" --target "$work/target.pte" -o "$work/draft.pte" --force
    echo "$stamp" >"$work/stamp"
fi
etspec inspect "$work/target.pte" | sed -n 1,12p
task=${ETSPEC_TASK:-0}
echo "--- HumanEval/$task, speculative (EAGLE-3 draft, --tree auto), then target-only"
etspec generate --target "$work/target.pte" --draft "$work/draft.pte" --humaneval "$task" \
    --max-new-tokens 128 --compare
