#!/usr/bin/env bash
# The README main job: install, export the default pair to .pte (cached), then generate with
# the target alone and speculatively, and run the greedy-equivalence suite on the pair.
# Until the trained bundled pair lands, the default pair is a small random one written by
# scripts/make_demo_pair.py (so acceptance is near zero); the path is the one real pairs take.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -e . >/dev/null
work=${ETSPEC_WORK:-.etspec-cache}
mkdir -p "$work"
[ -f "$work/pair/target/config.json" ] || python3 scripts/make_demo_pair.py "$work/pair"
# A cached artifact this etspec can no longer read (older format) is exported again.
etspec inspect "$work/target.pte" >/dev/null 2>&1 ||
    etspec export target "$work/pair/target" -o "$work/target.pte" --max-seq 256 --force
etspec inspect "$work/draft.pte" >/dev/null 2>&1 ||
    etspec export draft "$work/pair/draft" --target "$work/target.pte" -o "$work/draft.pte" --force
etspec inspect "$work/target.pte"
etspec inspect "$work/draft.pte"
prompt=1,17,42,7,99,3,250,12
echo "--- target only"
etspec generate --target "$work/target.pte" --prompt-ids "$prompt" --max-new-tokens 48
echo "--- speculative (EAGLE-3 draft, --tree auto: the dispatcher picks the shape)"
etspec generate --target "$work/target.pte" --draft "$work/draft.pte" --prompt-ids "$prompt" \
    --max-new-tokens 48
echo "--- speculative (EAGLE-2 dynamic tree, scratch-commit KV)"
etspec generate --target "$work/target.pte" --draft "$work/draft.pte" --prompt-ids "$prompt" \
    --max-new-tokens 48 --tree dynamic --kv scratch-commit
echo "--- greedy equivalence (chain, static and dynamic trees)"
for tree in chain static dynamic; do
    etspec validate --target "$work/target.pte" --draft "$work/draft.pte" --max-new-tokens 32 \
        --tree "$tree"
done
