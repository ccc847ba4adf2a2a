#!/usr/bin/env bash
# Retrain the bundled pair in checkpoints/ exactly as shipped (2-core CPU: about 1 hour;
# with CUDA present the scripts use it). Data: this Python's standard library sources.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -e . >/dev/null
target=checkpoints/etspec-code-14m
# The shipped target ran 700 steps, then was resumed to 1200 (a warm restart of the cosine).
for steps in 700 1200; do
    python3 scripts/train_target.py --out "$target" --batch 4 --seq-len 512 --steps "$steps" \
        --warmup 50 --resume
done
python3 scripts/train_draft.py --target "$target" --out checkpoints/etspec-code-14m-eagle3 \
    --ttt-steps 5 --batch 4 --seq-len 512 --steps 600 --lr 2e-3 --warmup 30 --resume
