#!/usr/bin/env bash
# The README test command: install with test extras, lint, run the default (fast) test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q -e '.[test]' >/dev/null
python3 -m ruff check .
python3 -m pytest -q "$@"
