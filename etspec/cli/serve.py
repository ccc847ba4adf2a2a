"""``etspec serve``: the OpenAI-compatible HTTP server, which is the C++ runtime's
``etspec_server`` (one process, no Python in the serving path); this command finds it,
builds it from the source tree when it is missing, and runs it in its place."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click

from etspec.cli.app import main, user_errors
from etspec.errors import EtspecError

# The source tree this package runs from (an editable install or a clone), if it has one.
SOURCE = Path(__file__).resolve().parents[2]
BUILT = SOURCE / "build" / "cpp" / "etspec_server"


def server_binary(given: Path | None) -> Path:
    """``given``, or the source tree's build (built now if missing), or a one-line error."""
    if given is not None:
        if not (given.is_file() and os.access(given, os.X_OK)):
            raise EtspecError(f"--server-bin {given}: no such executable")
        return given
    if BUILT.is_file():
        return BUILT
    build = SOURCE / "runtime" / "cpp" / "build.sh"
    if not build.is_file():
        raise EtspecError(
            "etspec serve runs the C++ server, which this install does not include: build it "
            "in a clone (bash runtime/cpp/build.sh) and pass --server-bin PATH"
        )
    click.echo("building the C++ server once: bash runtime/cpp/build.sh", err=True)
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(build)], cwd=SOURCE, env=env, capture_output=True, text=True)
    if done.returncode != 0 or not BUILT.is_file():
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise EtspecError(f"building the C++ server failed ({last}); run bash runtime/cpp/build.sh")
    return BUILT


@main.command()
@click.option(
    "--target", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The target .pte.",
)  # fmt: skip
@click.option(
    "--draft", default=None, type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Its EAGLE-3 draft .pte: speculative (with prompt lookup) when given.",
)  # fmt: skip
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535),
              help="Port (0: any free one, printed at start).")  # fmt: skip
@click.option("--queue", default=8, show_default=True, type=click.IntRange(min=0),
              help="Requests that may wait for the one generating; past them: 429.")  # fmt: skip
@click.option(
    "--server-bin", default=None, envvar="ETSPEC_SERVER",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The etspec_server binary (default: the source tree's build/cpp, built if missing).",
)  # fmt: skip
@user_errors
def serve(
    target: Path, draft: Path | None, host: str, port: int, queue: int, server_bin: Path | None
) -> None:
    """Serve the OpenAI HTTP API (POST /v1/chat/completions, /v1/completions; GET /v1/models,
    /health): speculative when --draft is given, each conversation's cache kept."""
    binary = server_binary(server_bin)
    args = [str(binary), "--target", str(target), "--host", host, "--port", str(port)]
    args += ["--queue", str(queue)] + (["--draft", str(draft)] if draft else [])
    sys.stdout.flush()
    os.execv(binary, args)
