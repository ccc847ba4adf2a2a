"""The training corpus of the bundled pair: Python sources of the local standard library.

Every machine with Python has it, so the pair can be retrained anywhere without a network.
The file order is deterministic (sorted relative paths) and the held-out split is fixed by a
hash of the relative path, so it does not depend on how many files a Python version ships.
"""

from __future__ import annotations

import json
import sysconfig
import zlib
from pathlib import Path

import numpy as np

EOT = "<|endoftext|>"
HELD_OUT_EVERY = 20  # about 5% of the files, chosen by crc32(relative path)


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def source_files(root: Path) -> list[Path]:
    """Sorted ``.py`` files under ``root``, without installed third-party packages."""
    skip = {"site-packages", "dist-packages", "__pycache__"}
    return sorted(
        (p for p in root.rglob("*.py") if not skip.intersection(p.relative_to(root).parts)),
        key=lambda p: p.relative_to(root).as_posix(),
    )


def is_held_out(root: Path, path: Path) -> bool:
    rel = path.relative_to(root).as_posix().encode()
    return zlib.crc32(rel) % HELD_OUT_EVERY == 0


def read_texts(root: Path) -> tuple[list[str], list[str]]:
    """(train texts, held-out texts); undecodable files are skipped."""
    train, held = [], []
    for p in source_files(root):
        try:
            text = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        (held if is_held_out(root, p) else train).append(text)
    return train, held


def train_tokenizer(texts: list[str], vocab_size: int):  # type: ignore[no-untyped-def]
    """A byte-level BPE (GPT-2 style) trained on ``texts``; id 0 is ``<|endoftext|>``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def encode(tok, texts: list[str], separator: int | None) -> np.ndarray:  # type: ignore[no-untyped-def]
    """One token stream: the texts, each followed by ``separator`` (the EOS id) if given."""
    ids: list[int] = []
    for enc in tok.encode_batch(texts, add_special_tokens=False):
        ids.extend(enc.ids)
        if separator is not None:
            ids.append(separator)
    return np.asarray(ids, dtype=np.int32)


def write_tokenizer_files(tok, out: Path, max_length: int) -> None:  # type: ignore[no-untyped-def]
    """``tokenizer.json`` plus the config ``transformers`` needs to load it."""
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "eos_token": EOT,
                "bos_token": EOT,
                "unk_token": EOT,
                "model_max_length": max_length,
                "add_prefix_space": False,
            },
            indent=2,
        )
    )
