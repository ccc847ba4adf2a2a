#!/usr/bin/env bash
# Train the Gemma 3 270M EAGLE-3 draft on a borrowed CUDA GPU, the target run live on each
# batch (train_draft.py --windows) over the windows scripts/train_gemma_draft.sh collected.
# The CPU recipe (train_gemma_draft.sh) stays the reproducible one; this is the same trainer
# with more steps than two cores allow in a few hours.
#
#   bash scripts/gpu_train_draft.sh prepare   # here: wheels, windows, GGUF in parts
#   bash scripts/gpu_train_draft.sh run       # there, from the repo root; writes to $OUT
#   bash scripts/gpu_train_draft.sh join FROM [TO]   # here: $OUT's files -> a draft folder
#
# `prepare` fills build/gpu-train/: site/ (the etspec and gguf wheels, --no-deps), data/
# (windows.npy, lengths.npy, generated.npy) and the GGUF cut into parts part-00, part-01, ...
# of PART_MB each, so that each part travels in one call of a tool that limits a call's
# files (the device tool here: 64 MiB a call, the repository's own files included, so the
# bundled checkpoints' 43 MB were untracked and excluded for those calls and restored after);
# the parts are checked against the GGUF's sha256 there.
# `run` joins the parts, converts the GGUF, trains for at most MINUTES and writes the draft
# (fp16, in pieces of at most 15 MB) with its training.json and log to $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build/gpu-train
cache=${ETSPEC_GEMMA3_270M:-.etspec-cache/gemma-3-270m}
case "${1:-run}" in
prepare)
    rm -rf "$dir" build/wheel
    mkdir -p "$dir/site" "$dir/data"
    python3 -m pip wheel --no-deps --no-build-isolation . -w build/wheel -q
    python3 -m pip download --no-deps --only-binary=:all: -d build/wheel -q \
        "gguf==$(python3 -c 'import importlib.metadata as m; print(m.version("gguf"))')"
    cp build/wheel/*.whl "$dir/site/"
    cp "$cache"/draft-data/{windows,lengths,generated}.npy "$dir/data/"
    gguf=$cache/gemma-3-270m-q4_k_m.gguf
    sha256sum "$gguf" | cut -d' ' -f1 >"$dir/site/gguf.sha256"
    for ((i = 0; ; i++)); do
        part=$(printf "%s/part-%02d" "$dir" "$i")
        mkdir -p "$part"
        dd if="$gguf" of="$part/gguf" bs=1M skip=$((i * ${PART_MB:-48})) \
            count="${PART_MB:-48}" status=none
        [ -s "$part/gguf" ] || { rm -rf "$part"; break; }
    done
    du -sh "$dir"/*
    ;;
run)
    out=${OUT:-/tmp/gpu-train-out}
    mkdir -p "$out"
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
        "$dir"/site/*.whl
    export PYTHONPATH=/tmp/site
    cat "$dir"/part-*/gguf >/tmp/gemma.gguf
    [ "$(sha256sum /tmp/gemma.gguf | cut -d' ' -f1)" = "$(cat "$dir/site/gguf.sha256")" ] \
        || { echo "the GGUF parts do not add up to the GGUF: send every part" >&2; exit 1; }
    rm -rf /tmp/hf /tmp/draft
    (cd /tmp && python3 -m etspec convert gguf /tmp/gemma.gguf -o /tmp/hf)
    cd scripts
    python3 train_draft.py --target /tmp/hf --windows "../$dir/data" --out /tmp/draft \
        --draft-vocab 16384 --ttt-steps "${TTT_STEPS:-7}" --batch "${BATCH:-32}" \
        --steps "${STEPS:-3000}" --lr "${LR:-1e-3}" --warmup 100 --save-every 1000000 \
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
    from=${2:?the folder holding what run wrote to OUT}
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
    echo "usage: $0 [prepare|run|join FROM [TO]]" >&2
    exit 2
    ;;
esac
