#!/usr/bin/env bash
# Whether a change is faster: the working tree's etspec against another revision's, on
# Gemma 3 270M's task prompts, run alternately (base, new, new, base, ...), then paired
# prompt by prompt (python -m etspec.tools.paired).
#
#   bash scripts/ab.sh BASE_REV                     # seeded sampled, the default, 3 runs each
#   RUNS=5 OUT=/tmp/ab bash scripts/ab.sh HEAD~1 -- --draft-methods combined --trees auto
#
# Arguments after -- replace the bench settings below (the prompts, systems and sampling).
# Seeded by default: a seeded request samples by coupling, so both versions emit the same
# text and differ only in how fast (docs/benchmark.md, "Comparing two versions"). Keep the
# machine otherwise idle. Python runtime only: the base is a `pip install --target` of
# BASE_REV's tree, imported ahead of the editable install.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: bash scripts/ab.sh BASE_REV [-- bench args]" >&2; exit 2; }
rev=$(git rev-parse --verify "$1^{commit}") || { echo "error: no revision '$1'" >&2; exit 2; }
shift
settings=(--prompts tasks --draft-methods combined --trees auto
    --temperature 0.8 --top-p 0.95 --ignore-eos --seed 5)
if [ "${1:-}" = "--" ]; then shift; settings=("$@"); fi
source scripts/env.sh bench
source scripts/gemma_exports.sh
out=${OUT:-.etspec-cache/ab/${rev:0:12}}
mkdir -p "$out"
rm -f "$out"/base-run*.json "$out"/new-run*.json
work=$(mktemp -d)
trap 'git worktree remove --force "$work/tree" 2>/dev/null || true; rm -rf "$work"' EXIT
git worktree add -q --detach "$work/tree" "$rev"
# Installed inside its own worktree, so a run's manifest names BASE_REV as its revision.
site=$work/tree/.ab-site
pip install -q --no-deps --no-build-isolation --target "$site" "$work/tree" >/dev/null
# The base: its install ahead of everything, the editable install's import hook removed.
base=(python3 -c "
import runpy, sys
sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]
sys.path.insert(0, sys.argv.pop(1))
import etspec.runtime
assert etspec.runtime.__file__.startswith(sys.path[0]), etspec.runtime.__file__
runpy.run_module('etspec', run_name='__main__')
" "$site")
# Alternated base, new | new, base | ...: a machine that speeds up or slows down through the
# runs weighs on both alike.
for run in $(seq "${RUNS:-3}"); do
    order="base new"
    [ $((run % 2)) = 0 ] && order="new base"
    for version in $order; do
        cmd=(etspec)
        [ "$version" = base ] && cmd=("${base[@]}")
        echo "--- $version, run $run"
        "${cmd[@]}" bench --target "$target" --draft "$draft" "${settings[@]}" \
            --json "$out/$version-run$run.json" --force >/dev/null
    done
done
args=()
for f in "$out"/base-run*.json; do args+=(--base "$f"); done
for f in "$out"/new-run*.json; do args+=(--new "$f"); done
python3 -m etspec.tools.paired "${args[@]}" --json "$out/paired.json"
