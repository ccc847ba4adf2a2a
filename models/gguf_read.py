"""Reading a GGUF file in its own terms: the reader, metadata values checked for their kind,
and tensors decoded and checked against the shapes the metadata imply.

What every architecture's conversion shares (``gguf.py`` holds the entry points and Gemma 3,
``gguf_llama.py`` the Llama family, ``gguf_tokenizer.py`` the tokenizers). A damaged or
incomplete file is refused here in one line naming the GGUF key or tensor, before anything
is converted.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from etspec.errors import CheckpointError

# Merges are found by splitting each token at every point (quadratic in its length): real
# vocabularies stop near 32 characters (Gemma 3's at 31), byte-level ones' control tokens a
# little above.
TOKEN_MAX_CHARS = 1024


def open_gguf(path: str | Path) -> Any:
    """A ``gguf.GGUFReader`` over ``path``; one line when gguf is absent or the file is not
    a GGUF it can read."""
    try:
        import gguf
    except ImportError:
        raise CheckpointError(
            "reading GGUF files needs the gguf package: pip install 'etspec[gguf]'"
        ) from None
    p = Path(path)
    if not p.is_file():
        raise CheckpointError(f"{p}: no such file")
    try:
        return gguf.GGUFReader(str(p))
    except Exception as e:  # gguf raises ValueError/struct errors on damaged files
        raise CheckpointError(f"{p}: not a readable GGUF file ({e})") from None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_text_list(value: Any, longest: int) -> bool:
    return (
        isinstance(value, list)
        and 0 < len(value) <= 1 << 22
        and all(isinstance(t, str) and len(t) <= longest for t in value)
    )


# What a metadata value must be, by kind: (test, wording). Upper bounds are far beyond any
# released model; they stop a damaged file from allocating terabytes before the shape checks.
KINDS: dict[str, tuple[Any, str]] = {
    "count": (lambda v: _is_int(v) and 1 <= v <= 1 << 24, "an integer from 1 to 2^24"),
    "positive": (lambda v: _is_number(v) and math.isfinite(v) and v > 0, "a finite number > 0"),
    "text": (lambda v: isinstance(v, str), "a string"),
    "flag": (lambda v: isinstance(v, bool), "true or false"),
    "tokens": (
        lambda v: _is_text_list(v, TOKEN_MAX_CHARS),
        f"a non-empty list of strings of at most {TOKEN_MAX_CHARS} characters",
    ),
    # A merge is two tokens and a space.
    "merges": (
        lambda v: _is_text_list(v, 2 * TOKEN_MAX_CHARS + 1),
        "a non-empty list of strings 'LEFT RIGHT'",
    ),
    "types": (lambda v: isinstance(v, list) and all(_is_int(t) for t in v), "a list of integers"),
    "numbers": (
        lambda v: isinstance(v, list) and all(_is_number(t) and math.isfinite(t) for t in v),
        "a list of finite numbers",
    ),
}
_REQUIRED = object()


class GGUFMetadata:
    """A GGUF file's metadata, each value checked for its kind as it is read: a damaged or
    incomplete file is refused in GGUF's own terms before anything is converted."""

    def __init__(self, reader: Any, path: str | Path) -> None:
        self.reader, self.path = reader, path

    def bad(self, what: str) -> CheckpointError:
        """The error for a file that is damaged or lacks what its architecture needs."""
        return CheckpointError(
            f"{self.path}: {what}; the GGUF file is damaged or incomplete: download it or "
            "convert the model again (llama.cpp's convert_hf_to_gguf.py)"
        )

    def raw(self, key: str) -> Any:
        """The value under ``key`` (None when absent), unchecked."""
        try:
            f = self.reader.fields.get(key)
            return None if f is None else f.contents()
        except Exception:  # a value gguf cannot decode (bad string bytes, wrong array parts)
            raise self.bad(f"GGUF metadata {key} cannot be read") from None

    def __call__(self, key: str, kind: str, default: Any = _REQUIRED) -> Any:
        """The value under ``key``, which must be of ``kind`` (``KINDS``); ``default`` when
        absent, or refused when no default is given."""
        value = self.raw(key)
        if value is None:
            if default is _REQUIRED:
                raise self.bad(f"GGUF metadata {key} is missing")
            return default
        test, wording = KINDS[kind]
        if not test(value):
            shown = f"a list of {len(value)}" if isinstance(value, list) else repr(value)[:60]
            raise self.bad(f"GGUF metadata {key} must be {wording}, got {shown}")
        return value

    def token_id(self, key: str, vocab: int, default: int | None = None) -> int | None:
        """A special token's id: absent (``default``) or inside the vocabulary."""
        value = self.raw(key)
        if value is None:
            return default
        if not _is_int(value) or not 0 <= value < vocab:
            raise self.bad(f"GGUF metadata {key} must be a token id below {vocab}, got {value!r}")
        return value

    def attention_heads(self, arch: str) -> tuple[int, int]:
        """``arch``'s (query heads, key/value heads), the second dividing the first."""
        heads = self(f"{arch}.attention.head_count", "count")
        kv_heads = self(f"{arch}.attention.head_count_kv", "count", heads)
        if heads % kv_heads:
            raise self.bad(f"GGUF metadata {arch}.attention.head_count_kv ({kv_heads}) must "
                           f"divide {arch}.attention.head_count ({heads})")  # fmt: skip
        return heads, kv_heads

    def tensor_names(self) -> set[str]:
        """The names of the tensors the file holds."""
        return {t.name for t in self.reader.tensors}


def _decode(m: GGUFMetadata, t: Any, shape: tuple[int, ...]) -> torch.Tensor:
    """One tensor dequantized to fp32 and checked: its shape, its data, finite values."""
    from gguf.quants import dequantize

    stored = tuple(int(n) for n in reversed(t.shape))
    if stored != shape:
        raise m.bad(f"GGUF tensor {t.name} has shape {list(stored)}, its metadata make it "
                    f"{list(shape)}")  # fmt: skip
    try:
        value = torch.from_numpy(dequantize(t.data, t.tensor_type).copy()).float()
    except Exception as e:  # a type gguf cannot decode, data cut short
        raise m.bad(f"GGUF tensor {t.name} cannot be decoded ({str(e)[:80]})") from None
    if value.shape != shape:
        raise m.bad(f"GGUF tensor {t.name} holds {value.numel()} values, not {list(shape)}")
    if not bool(torch.isfinite(value).all()):
        raise m.bad(f"GGUF tensor {t.name} holds NaN or infinite values")
    return value


def decode_tensor(m: GGUFMetadata, name: str, shape: tuple[int, ...]) -> torch.Tensor:
    """The tensor ``name`` alone (one the metadata depend on), checked as ``decode_tensors``
    checks every tensor."""
    found = [t for t in m.reader.tensors if t.name == name]
    if not found:
        raise m.bad(f"GGUF tensor {name} missing")
    return _decode(m, found[0], shape)


def decode_tensors(
    m: GGUFMetadata, want: dict[str, tuple[int, ...]], model: str
) -> dict[str, torch.Tensor]:
    """Every tensor of the file by its GGUF name, dequantized to fp32 by ``gguf`` (every
    type llama.cpp writes), in PyTorch's dimension order. ``want`` is what the metadata
    imply (name -> shape); a tensor missing from it, one the model does not have (``model``
    names it: "a llama model with 16 blocks"), a wrong shape, data cut short and NaN or
    infinite values are refused."""
    missing = sorted(set(want) - m.tensor_names())
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise m.bad(f"GGUF tensor {missing[0]}{more} missing")
    out: dict[str, torch.Tensor] = {}
    for t in m.reader.tensors:
        if t.name not in want:
            raise CheckpointError(f"{m.path}: GGUF tensor {t.name[:80]!r} is not part of {model}")
        out[t.name] = _decode(m, t, want[t.name])
    return out
