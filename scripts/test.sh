#!/usr/bin/env bash
# The README test command: make/refresh the project venv (.venv/) with the test extras,
# lint, run the default (fast) test suite. Arguments go to pytest (-m slow, -k ...).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh test
python -m ruff check .
python -m pytest -q "$@"
