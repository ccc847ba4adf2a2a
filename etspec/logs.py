"""Third-party chatter, kept out of user output.

ExecuTorch writes log lines (CPU probes at the first method load, loader diagnostics)
straight to file descriptor 2; torchao and torch warn through ``logging`` when ExecuTorch
imports them; ``torch.export`` raises UserWarnings about its own internals during every
export. None of it is about the user's command, and it buried our one-line errors. Inside
``quiet()`` all of it goes to the ``etspec.thirdparty`` logger at DEBUG instead:
``etspec --verbose`` shows it, and a library user who wants it attaches a handler
(``logging.getLogger("etspec").setLevel(logging.DEBUG)``).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator

LOG = logging.getLogger("etspec.thirdparty")
# Libraries whose loggers (and their children's) warn about their own set-up: optional
# CUDA kernels and Triton, deprecations inside torch, and XNNPACK's partitioner calling
# ExecuTorch's ``to_backend`` deprecated (export/decompose.py calls it on purpose).
NOISY_LOGGERS = ("torchao", "torch", "executorch.backends.xnnpack.partition")


class _Relay(logging.Handler):
    """Re-logs a noisy library's record at DEBUG on ``LOG``."""

    def emit(self, record: logging.LogRecord) -> None:
        LOG.debug("%s: %s", record.name, record.getMessage())


def _relay_loggers() -> list[tuple[logging.Logger, list[logging.Handler], bool]]:
    """Point the noisy loggers at ``_Relay`` alone; returns what ``_restore`` puts back."""
    saved = []
    for name in NOISY_LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.handlers[:], logger.propagate))
        logger.handlers = [_Relay()]
        logger.propagate = False
    return saved


def _restore(saved: list[tuple[logging.Logger, list[logging.Handler], bool]]) -> None:
    for logger, handlers, propagate in reversed(saved):
        logger.handlers = handlers
        logger.propagate = propagate


@contextlib.contextmanager
def _native_stderr() -> Iterator[None]:
    """File descriptor 2 (where the C++ runtime writes) and ``sys.stderr`` (where
    ExecuTorch's Python bindings print its log lines) into temporary buffers, whose lines
    are then logged at DEBUG."""
    original = sys.stderr
    original.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        sys.stderr = text = io.StringIO()
        try:
            yield
        finally:
            sys.stderr = original
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            lines = sink.read().decode("utf-8", "replace").splitlines()
            for line in [*lines, *text.getvalue().splitlines()]:
                if line.strip():
                    LOG.debug("%s", line)


@contextlib.contextmanager
def quiet(native: bool = False) -> Iterator[None]:
    """Route Python warnings and the noisy libraries' log records to ``LOG`` (DEBUG) for
    the duration; with ``native``, also what native code writes to stderr. Not for blocks
    that draw a progress bar on stderr (it would be captured too) or that run while other
    threads write to stderr (the redirection is process-wide)."""
    saved = _relay_loggers()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with _native_stderr() if native else contextlib.nullcontext():
                yield
        for w in caught:
            LOG.debug("%s: %s (%s:%s)", w.category.__name__, w.message, w.filename, w.lineno)
    finally:
        _restore(saved)


def quiet_process() -> None:
    """For a process the command line owns: every Python warning and the noisy libraries'
    records go to ``LOG`` for good, not only inside ``quiet()`` blocks."""
    _relay_loggers()

    def showwarning(message, category, filename, lineno, file=None, line=None):  # type: ignore[no-untyped-def]
        LOG.debug("%s: %s (%s:%s)", category.__name__, message, filename, lineno)

    warnings.showwarning = showwarning
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")  # torch's own C++ warnings


def show(verbose: bool = True) -> None:
    """The command line's ``--verbose``: print what was routed to ``LOG`` on stderr."""
    root = logging.getLogger("etspec")
    if verbose and not any(getattr(h, "etspec_verbose", False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        handler.etspec_verbose = True  # type: ignore[attr-defined]
        root.addHandler(handler)
        root.setLevel(logging.DEBUG)
