#!/usr/bin/env bash
# The README main job: install, export the default pair to .pte (cached), inspect it.
# Until the trained bundled pair lands, the default pair is a small random one written by
# scripts/make_demo_pair.py; the export path is the one real checkpoints take.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -e . >/dev/null
work=${ETSPEC_WORK:-.etspec-cache}
mkdir -p "$work"
[ -f "$work/pair/target/config.json" ] || python3 scripts/make_demo_pair.py "$work/pair"
[ -f "$work/target.pte" ] || etspec export target "$work/pair/target" -o "$work/target.pte" --max-seq 256
[ -f "$work/draft.pte" ] || etspec export draft "$work/pair/draft" --target "$work/target.pte" -o "$work/draft.pte"
etspec inspect "$work/target.pte"
etspec inspect "$work/draft.pte"
