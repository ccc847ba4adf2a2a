"""Progress of one-time work (exporting, fetching a model): minutes a user waits once.

On a terminal it is a bar naming the running stage. Anywhere else (a log file, a pipe, CI)
a bar draws nothing, and a long export looked hung, so there each stage's end writes one
line: what it took, the stage now running and the time since the start; the last line says
what each stage took (the profile of the run, in the log the user already keeps). Lines come
at a stage's end, not its start, so a command that refuses its input in the first stage
(reading and checking it) still says only its one-line error.
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any

from tqdm import tqdm


class Progress:
    """``stage(name)`` starts a stage (ending the previous one); ``close()`` ends the last
    and, off a terminal, writes the per-stage times. ``expect(n)``: n stages are still to
    come (sizes the bar)."""

    def __init__(self, desc: str, stream: IO[str] | None = None) -> None:
        self.desc = desc
        self.stream = stream if stream is not None else sys.stderr
        self.bar: Any = None
        if _is_terminal(self.stream):
            self.bar = tqdm(total=None, desc=desc, unit="step", leave=False, file=self.stream)
        self.start = time.perf_counter()
        self.times: list[tuple[str, float]] = []
        self._current: tuple[str, float] | None = None

    def expect(self, stages: int) -> None:
        if self.bar is not None:
            self.bar.total = len(self.times) + (self._current is not None) + stages
            self.bar.refresh()

    def stage(self, name: str) -> None:
        now = time.perf_counter()
        self._end(now)
        self._current = (name, now)
        if self.bar is not None:
            self.bar.set_postfix_str(name)
        elif self.times:
            done, seconds = self.times[-1]
            clock = _clock(now - self.start)
            self._write(f"{self.desc}: {done} took {seconds:.1f} s; {name} [{clock}]")

    def close(self) -> None:
        now = time.perf_counter()
        self._end(now)
        if self.bar is not None:
            self.bar.close()
            return
        spent = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.times)
        self._write(f"{self.desc}: done in {_clock(now - self.start)} ({spent})")

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.close()
        elif self.bar is not None:
            self.bar.close()

    def _end(self, now: float) -> None:
        if self._current is not None:
            name, began = self._current
            self.times.append((name, now - began))
            self._current = None
            if self.bar is not None:
                self.bar.update()

    def _write(self, line: str) -> None:
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed or full stderr must not fail an export
            pass


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"
