"""One-time work's progress off a terminal: a line at each stage's end (what it took, what
runs now, the time since the start), then what each stage took; nothing before the first
stage ends (a refused input stays one line); never a failure when stderr is gone."""

from __future__ import annotations

import io
import re

from etspec.progress import Progress


def test_off_a_terminal_each_stage_is_a_line_and_the_last_line_is_the_profile() -> None:
    out = io.StringIO()
    with Progress("export target -> t.pte", stream=out) as progress:
        progress.expect(2)
        progress.stage("read ckpt")
        progress.stage("lower to xnnpack")
    lines = out.getvalue().splitlines()
    assert re.fullmatch(
        r"export target -> t\.pte: read ckpt took \d+\.\d s; lower to xnnpack \[\d+:\d\d\]",
        lines[0],
    ), lines
    assert re.fullmatch(
        r"export target -> t\.pte: done in \d+:\d\d \(read ckpt \d+\.\d s, lower to xnnpack "
        r"\d+\.\d s\)",
        lines[1],
    ), lines
    assert len(lines) == 2
    assert [name for name, _ in progress.times] == ["read ckpt", "lower to xnnpack"]


def test_a_run_failing_in_its_first_stage_writes_nothing() -> None:
    out = io.StringIO()
    try:
        with Progress("x", stream=out) as progress:
            progress.stage("a")
            raise KeyError("boom")
    except KeyError:
        pass
    assert out.getvalue() == ""


def test_a_closed_stream_does_not_fail_the_work() -> None:
    out = io.StringIO()
    out.close()
    with Progress("x", stream=out) as progress:
        progress.stage("a")
    assert progress.times[0][0] == "a"
