"""Torch's own thread pool while ``.pte`` programs generate.

ExecuTorch runs a program on its own thread pool; torch's (OpenMP) pool serves only the host
work around the calls (a program's outputs handed over as torch tensors, masks, rows of
logits). A torch op over more than a few thousand elements wakes every OpenMP thread, which
then spins waiting for more work and takes a core from the next program call: on 2 cores a
Gemma 3 270M decode takes 12.6 ms inside the loop against 10.6 ms with torch on one thread
(``scripts/bench_torch_threads.py``, ``docs/results.md``). So a generation over ``.pte``
programs runs torch on one thread and gives the caller's setting back when the last such
generation ends; an eager (reference) program does its model's work in torch and keeps its
threads.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch

_lock = threading.Lock()
_active = 0  # generations inside ``torch_single_threaded`` now
_saved = 1  # torch's thread count when the first of them entered


@contextlib.contextmanager
def torch_single_threaded(enabled: bool = True) -> Iterator[None]:
    """Run the block with torch on one thread (nothing changes when not ``enabled``).
    Reentrant and thread-safe: concurrent generations share one setting, and the caller's
    thread count is restored when the last one leaves."""
    global _active, _saved
    if not enabled:
        yield
        return
    with _lock:
        if _active == 0:
            _saved = torch.get_num_threads()
            if _saved != 1:
                torch.set_num_threads(1)
        _active += 1
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0 and _saved != 1:
                torch.set_num_threads(_saved)
