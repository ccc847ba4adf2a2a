"""Streaming decode overhead: what turning generated ids into streamed text costs.

    python scripts/bench_stream.py [--tokenizer tokenizer.json | --target T.pte]
        [--tokens 8192] [--chunk 1] [--repeats 3] [--baseline] [--json OUT.json]

Feeds ``--tokens`` ids (the tokenization of Python standard-library source, the kind of
text the bundled pair writes) to ``StreamDecoder`` in pushes of ``--chunk`` ids, as the
runner does after every emission, then flushes; reports the total seconds (best of
``--repeats``) beside one one-shot ``decode`` of the same ids, and whether the streamed
pieces concatenate to exactly that text. ``--baseline`` also times the previous decoder,
which decoded the whole output again on every push (quadratic). Defaults to the bundled
tokenizer in ``checkpoints/``.
"""

from __future__ import annotations

import json
import sysconfig
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from etspec.runtime.tokenizer import StreamDecoder, Tokenizer

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "checkpoints" / "etspec-code-14m" / "tokenizer.json"


def corpus_ids(tok: Tokenizer, n: int) -> list[int]:
    """At least ``n`` ids of real text: standard-library sources, file by file."""
    ids: list[int] = []
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        ids += tok.encode(path.read_text(encoding="utf-8", errors="replace"))
        if len(ids) >= n:
            return ids[:n]
    raise click.ClickException(f"the standard library holds fewer than {n} tokens")


def stream_text(tok: Tokenizer, ids: Sequence[int], chunk: int) -> tuple[str, float]:
    t0 = time.perf_counter()
    dec = StreamDecoder(tok)
    pieces = [dec.push(ids[i : i + chunk]) for i in range(0, len(ids), chunk)]
    pieces.append(dec.flush())
    return "".join(pieces), time.perf_counter() - t0


def quadratic_text(tok: Tokenizer, ids: Sequence[int], chunk: int) -> tuple[str, float]:
    """The decoder this replaced: the whole output decoded again on every push."""
    t0 = time.perf_counter()
    seen: list[int] = []
    for i in range(0, len(ids), chunk):
        seen += ids[i : i + chunk]
        tok.decode(seen)
    return tok.decode(seen), time.perf_counter() - t0


@click.command()
@click.option("--tokenizer", "tokenizer_path", type=click.Path(path_type=Path), default=None)
@click.option("--target", type=click.Path(path_type=Path), default=None, help="Its tokenizer.")
@click.option("--tokens", default=8192, show_default=True)
@click.option("--chunk", default=1, show_default=True, help="Ids per push.")
@click.option("--repeats", default=3, show_default=True)
@click.option("--baseline", is_flag=True, help="Also time the quadratic decoder it replaced.")
@click.option("--json", "json_out", type=click.Path(path_type=Path), default=None)
def main(
    tokenizer_path: Path | None,
    target: Path | None,
    tokens: int,
    chunk: int,
    repeats: int,
    baseline: bool,
    json_out: Path | None,
) -> None:
    if target is not None:
        from etspec.artifact import open_artifact

        data = open_artifact(target, "target").tokenizer_json()
        if data is None:
            raise click.ClickException(f"{target} carries no tokenizer")
        source = str(target)
    else:
        path = tokenizer_path or BUNDLED
        data, source = path.read_bytes(), str(path)
    tok = Tokenizer(data)
    ids = corpus_ids(tok, tokens)

    t0 = time.perf_counter()
    reference = tok.decode(ids)
    one_shot_s = time.perf_counter() - t0
    runs = [stream_text(tok, ids, chunk) for _ in range(repeats)]
    result: dict[str, Any] = {
        "tokenizer": source,
        "tokens": len(ids),
        "chunk": chunk,
        "pushes": -(-len(ids) // chunk),
        "one_shot_decode_s": one_shot_s,
        "stream_total_s": min(s for _, s in runs),
        "stream_per_token_us": min(s for _, s in runs) / len(ids) * 1e6,
        "identical": all(text == reference for text, _ in runs),
    }
    if baseline:
        text, seconds = quadratic_text(tok, ids, chunk)
        result["quadratic_total_s"] = seconds
        result["quadratic_identical"] = text == reference
    click.echo(json.dumps(result, indent=2))
    if json_out is not None:
        json_out.write_text(json.dumps(result, indent=2) + "\n")
    if not result["identical"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
