"""Reading a GGUF file in its own terms: the reader, metadata values checked for their kind,
and tensors decoded and checked against the shapes the metadata imply.

What every architecture's conversion shares (``gguf.py`` holds the entry points and Gemma 3,
``gguf_llama.py`` the Llama family, ``gguf_tokenizer.py`` the tokenizers). A damaged or
incomplete file is refused here in one line naming the GGUF key or tensor, before anything
is converted.
"""

from __future__ import annotations

import math
import mmap
import re
import struct
from pathlib import Path
from typing import Any

import torch

from etspec.errors import CheckpointError

# Merges are found by splitting each token at every point (quadratic in its length): real
# vocabularies stop near 32 characters (Gemma 3's at 31), byte-level ones' control tokens a
# little above.
TOKEN_MAX_CHARS = 1024


def open_gguf(path: str | Path, architectures: tuple[str, ...] = ()) -> Any:
    """A ``gguf.GGUFReader`` over ``path``; one line when gguf is absent or the file is not
    a GGUF it can read. With ``architectures``, a file of another architecture, or whose
    block count is not the blocks its tensors name, is refused before the reader runs (the
    real Gemma GGUF renamed took 20 s and 920 MB to refuse, a wrong block count 3 GB)."""
    try:
        import gguf
    except ImportError:
        raise CheckpointError(
            "reading GGUF files needs the gguf package: pip install 'etspec[gguf]'"
        ) from None
    p = Path(path)
    if not p.is_file():
        raise CheckpointError(f"{p}: no such file")
    scalars, blocks, _ = check_gguf_layout(p)
    if architectures:
        arch = scalars.get("general.architecture")
        if arch not in architectures:
            raise CheckpointError(
                f"{p}: GGUF architecture {str(arch)[:40]!r} is not supported; supported: "
                f"{', '.join(architectures)}"
            )
        declared = scalars.get(f"{arch}.block_count")
        if declared is not None and blocks and declared != blocks:
            raise CheckpointError(
                f"{p}: {arch}.block_count is {declared} but its tensors name {blocks} blocks; "
                "the file is damaged"
            )
    try:
        return gguf.GGUFReader(str(p))
    except Exception as e:  # gguf raises ValueError/struct errors on damaged files
        raise CheckpointError(f"{p}: not a readable GGUF file ({e})") from None


# GGUF value types (ggml's gguf.h) by their size in bytes; 8 is a string, 9 an array.
_GGUF_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_GGUF_STRING, _GGUF_ARRAY = 8, 9
_GGUF_INTS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 10: "<Q", 11: "<q"}


def check_gguf_layout(path: Path) -> tuple[dict[str, Any], int, int]:
    """Walk the header, every metadata value and every tensor record, checking each count and
    length against the bytes the file has left, before the ``gguf`` package allocates for
    them: a 120 KB file whose token-type count claimed 2^62 grew ~180 MB/s inside its reader.
    One line naming what is out of bounds. Returns the short scalar metadata (strings,
    integers), the number of blocks its tensors name (``blk.N.``) and the values its
    tensors hold, for the checks a conversion can make before the reader runs."""
    with open(path, "rb") as f:
        try:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file cannot be mapped
            raise CheckpointError(f"{path}: not a readable GGUF file (empty)") from None
    with data:
        return _walk_gguf(path, data)


def _walk_gguf(path: Path, data: mmap.mmap) -> tuple[dict[str, Any], int, int]:
    end = len(data)
    pos = 0
    scalars: dict[str, Any] = {}
    blocks = values = 0

    def take(n: int, what: str) -> int:
        nonlocal pos
        if n < 0 or n > end - pos:
            raise CheckpointError(
                f"{path}: not a readable GGUF file ({what} claims {n} bytes at offset {pos}, "
                f"past the file's {end})"
            )
        at, pos = pos, pos + n
        return at

    def number(fmt: str, what: str) -> int:
        return struct.unpack_from(fmt, data, take(struct.calcsize(fmt), what))[0]

    if end < 4 or data[:4] != b"GGUF":
        raise CheckpointError(f"{path}: not a readable GGUF file (no GGUF magic)")
    take(4, "the magic")
    version = number("<I", "the version")
    count = "<I" if version == 1 else "<Q"  # version 1 counted in 32 bits

    def string(what: str) -> None:
        take(number(count, what), what)

    def value(kind: int, what: str, depth: int = 0) -> None:
        if kind in _GGUF_SIZES:
            take(_GGUF_SIZES[kind], what)
        elif kind == _GGUF_STRING:
            string(what)
        elif kind == _GGUF_ARRAY and depth == 0:
            inner, n = number("<I", what), number(count, what)
            if inner in _GGUF_SIZES:
                # Fixed-size elements: one bound for all of them.
                take(n * _GGUF_SIZES[inner], f"{what} ({n} elements)")
            else:
                if n > end - pos:  # each element takes at least a byte
                    raise CheckpointError(
                        f"{path}: not a readable GGUF file ({what} claims {n} elements, more than "
                        "the file's bytes left)"
                    )
                for _ in range(n):
                    value(inner, what, depth + 1)
        else:
            raise CheckpointError(f"{path}: not a readable GGUF file ({what}: value type {kind})")

    tensors, kvs = number(count, "the tensor count"), number(count, "the metadata count")
    if kvs > end - pos or tensors > end - pos:
        raise CheckpointError(
            f"{path}: not a readable GGUF file (it claims {kvs} metadata values and "
            f"{tensors} tensors, more than its bytes)"
        )

    def text(what: str) -> str:
        length = number(count, what)
        return bytes(data[take(length, what) : pos]).decode("utf-8", "replace")

    for i in range(kvs):
        key = text(f"metadata key {i}")
        kind, start = number("<I", key), pos
        value(kind, key)
        if kind == _GGUF_STRING and pos - start <= 1024:
            scalars[key] = bytes(data[start + struct.calcsize(count) : pos]).decode(
                "utf-8", "replace"
            )
        elif kind in _GGUF_INTS:
            scalars[key] = struct.unpack_from(_GGUF_INTS[kind], data, start)[0]
    for i in range(tensors):
        what = f"tensor record {i}"
        name = text(what)
        block = re.match(r"blk\.(\d+)\.", name)
        if block:
            blocks = max(blocks, int(block.group(1)) + 1)
        dims = number("<I", what)
        if dims > 8:  # ggml has at most 4
            raise CheckpointError(f"{path}: not a readable GGUF file ({what}: {dims} dimensions)")
        values += math.prod(number("<Q", what) for _ in range(dims))
        take(4 + 8, what)
    return scalars, blocks, values


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
