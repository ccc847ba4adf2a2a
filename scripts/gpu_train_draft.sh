#!/usr/bin/env bash
# Train the Gemma 3 270M EAGLE-3 draft on a borrowed CUDA GPU: the target's own continuations
# generated there (draft_data.py generate --target, batched over a KV cache) and the target
# run live on each training batch (train_draft.py --windows), over the corpus windows that
# scripts/train_gemma_draft.sh's first stage collected here. The CPU recipe
# (train_gemma_draft.sh) stays the reproducible one; this is the same trainer with more steps
# than two cores allow in a few hours.
#
#   bash scripts/gpu_train_draft.sh prepare   # here: wheels, corpus, GGUF in parts
#   bash scripts/gpu_train_draft.sh data      # there: GGUF -> checkpoint, continuations
#   bash scripts/gpu_train_draft.sh train     # there (after data): train; writes to $OUT
#   bash scripts/gpu_train_draft.sh join FROM [TO]   # here: $OUT's files -> a draft folder
#
# The defaults are the shipped draft's recipe: 1,000 corpus prompts, 620 prose openings and
# 1,000 chat-style task prompts continued (the last two twice), 3,600 steps (7.4 min on an
# H200).
#
# `prepare` fills build/gpu-train/: site/ (the etspec and gguf wheels, --no-deps), data/
# (corpus.npy.gz, corpus_lengths.npy, openings.jsonl.gz: what draft_data.py corpus wrote) and the
# GGUF cut into parts part-00, part-01, ... of PART_MB (59 MiB) each, so that each part travels
# in one call of a tool that limits a call's files (the device tool here: 64 MiB a call, the
# repository's own files included: move checkpoints/ and docs/results/ out of the checkout
# for those calls, leaving 4 MiB, and back after). Four calls carry a part each; the fifth
# carries the last part, site/ and data/ and runs `data`, a sixth `train` (11 minutes of
# device time in all). The parts are checked against the GGUF's sha256 there. `data` joins
# the parts, converts the GGUF, generates the continuations (or keeps those already in data/)
# and writes the windows; it copies generated.jsonl.gz to $OUT. `train` trains for at most
# MINUTES and writes the draft (fp16, in pieces of at most 15 MB) with its training.json and
# log to $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${GPU_TRAIN_DIR:-build/gpu-train}
cache=${ETSPEC_GEMMA3_270M:-.etspec-cache/gemma-3-270m}
site() {
    python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site \
        "$dir"/site/*.whl
    export PYTHONPATH=/tmp/site
}
case "${1:-}" in
prepare)
    rm -rf "$dir" build/wheel
    mkdir -p "$dir/site" "$dir/data"
    python3 -m pip wheel --no-deps --no-build-isolation . -w build/wheel -q
    python3 -m pip download --no-deps --only-binary=:all: -d build/wheel -q \
        "gguf==$(python3 -c 'import importlib.metadata as m; print(m.version("gguf"))')"
    cp build/wheel/*.whl "$dir/site/"
    cp "$cache/draft-train/data/corpus_lengths.npy" "$dir/data/"
    for f in corpus.npy openings.jsonl; do gzip -c "$cache/draft-train/data/$f" >"$dir/data/$f.gz"; done
    gguf=$cache/gemma-3-270m-q4_k_m.gguf
    sha256sum "$gguf" | cut -d' ' -f1 >"$dir/site/gguf.sha256"
    for ((i = 0; ; i++)); do
        part=$(printf "%s/part-%02d" "$dir" "$i")
        mkdir -p "$part"
        dd if="$gguf" of="$part/gguf" bs=1M skip=$((i * ${PART_MB:-59})) \
            count="${PART_MB:-59}" status=none
        [ -s "$part/gguf" ] || { rm -rf "$part"; break; }
    done
    du -sh "$dir"/*
    ;;
data)
    out=${OUT:-/tmp/gpu-train-out}
    mkdir -p "$out"
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
    site
    cat "$dir"/part-*/gguf >/tmp/gemma.gguf
    [ "$(sha256sum /tmp/gemma.gguf | cut -d' ' -f1)" = "$(cat "$dir/site/gguf.sha256")" ] \
        || { echo "the GGUF parts do not add up to the GGUF: send every part" >&2; exit 1; }
    rm -rf "$dir/hf"
    (cd /tmp && python3 -m etspec convert gguf /tmp/gemma.gguf -o "$OLDPWD/$dir/hf")
    for f in corpus.npy openings.jsonl; do
        [ -f "$dir/data/$f" ] || gunzip -k "$dir/data/$f.gz"
    done
    cd scripts
    python3 draft_data.py generate --target "../$dir/hf" --out "../$dir/data" \
        --count "${COUNT:-1000}" ${PROSE:+--prose "$PROSE"} --tasks "${TASKS:-1000}" 2>&1 | tr '\r' '\n' | awk '!/self-distill/ || ++n % 20 == 0'
    python3 draft_data.py windows --out "../$dir/data"
    gzip -c "../$dir/data/generated.jsonl" >"$out/generated.jsonl.gz"
    ls -la "$out"
    ;;
train)
    out=${OUT:-/tmp/gpu-train-out}
    mkdir -p "$out"
    site
    rm -rf /tmp/draft
    cd scripts
    python3 train_draft.py --target "../$dir/hf" --windows "../$dir/data" --out /tmp/draft \
        --draft-vocab "${VOCAB:-8192}" --ttt-steps "${TTT_STEPS:-7}" --batch "${BATCH:-32}" \
        --steps "${STEPS:-3600}" --lr "${LR:-1e-3}" --warmup 100 --save-every 1000000 \
        --max-minutes "${MINUTES:-8}" 2>&1 | tr '\r' '\n' | awk '!/train draft/ || ++n % 100 == 0' | tee "$out/train.log"
    python3 - "$out" <<'EOF'
import sys, io, torch
from safetensors.torch import load_file
out = sys.argv[1]
state = {k: (v.half() if v.is_floating_point() else v)
         for k, v in load_file("/tmp/draft/model.safetensors").items()}
buf = io.BytesIO()
torch.save(state, buf)
data = buf.getvalue()
for i in range(0, len(data), 15 << 20):
    open(f"{out}/draft-fp16.pt.{i // (15 << 20):02d}", "wb").write(data[i : i + (15 << 20)])
EOF
    cp /tmp/draft/training.json /tmp/draft/config.json "$out/"
    ls -la "$out"
    ;;
join)
    from=${2:?the folder holding what train wrote to OUT}
    to=${3:-$cache/eagle3-draft-gpu}
    mkdir -p "$to"
    cat "$from"/draft-fp16.pt.* >"$to/draft-fp16.pt"
    python3 - "$to" <<'EOF'
import sys, torch
from safetensors.torch import save_file
to = sys.argv[1]
state = torch.load(f"{to}/draft-fp16.pt", weights_only=True)
state = {k: (v.float() if v.is_floating_point() else v).contiguous() for k, v in state.items()}
save_file(state, f"{to}/model.safetensors", metadata={"format": "pt"})
EOF
    rm "$to/draft-fp16.pt"
    cp "$from"/{config.json,training.json,train.log} "$to/"
    echo "wrote $to"
    ;;
*)
    echo "usage: $0 prepare|data|train|join FROM [TO]" >&2
    exit 2
    ;;
esac
