"""GGUF (llama.cpp) files as checkpoints: config, weights and tokenizer, read with ``gguf``.

A GGUF carries no ``config.json`` and no ``tokenizer.json``: the hyperparameters, the
vocabulary and the special tokens are metadata under llama.cpp's key names, and its tensors
are named and laid out as llama.cpp's converter wrote them (``blk.N.attn_q.weight``, Gemma's
norm weights with the +1 its RMSNorm folds in). ``read_gguf`` turns one into what a Hugging
Face folder holds, so export takes a ``.gguf`` like a checkpoint folder, and
``convert_gguf`` writes that folder (``etspec convert gguf``). Quantized tensors (Q4_K, Q6_K,
Q8_0, ...) are dequantized to fp32 by ``gguf``; export then quantizes as it is told.

Supported: ``gemma3`` (Gemma 3 text models). Other architectures are refused by name. The
tests hold every tensor and the tokenizer to transformers' own GGUF loader on the real
Gemma 3 270M file (``-m real``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from etspec.errors import CheckpointError
from etspec.files import check_free_space, check_output_folder

SUPPORTED_ARCHITECTURES = ("gemma3",)
TOKEN_MAX_CHARS = 1024
# What ``convert_gguf`` writes, and all ``--force`` may replace in its output folder.
CONVERTED_FILES = frozenset({"config.json", "model.safetensors", "tokenizer.json"})
# llama.cpp's token types (tokenizer.ggml.token_type).
_CONTROL, _USER_DEFINED = 3, 4


@dataclass
class GGUFCheckpoint:
    """What a Hugging Face folder would hold: ``config.json``, the state dict (fp32, HF
    names) and ``tokenizer.json``."""

    config: dict[str, Any]
    tensors: dict[str, torch.Tensor]
    tokenizer_json: bytes


def is_gguf(path: str | Path) -> bool:
    p = Path(path)
    if not p.is_file():
        return False
    with p.open("rb") as f:
        return f.read(4) == b"GGUF"


def _reader(path: str | Path) -> Any:
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


def _field(reader: Any, key: str, default: Any = None) -> Any:
    f = reader.fields.get(key)
    return default if f is None else f.contents()


# What a metadata value must be, by kind: (test, wording). Upper bounds are far beyond any
# released model; they stop a damaged file from allocating terabytes before the shape checks.
_KINDS: dict[str, tuple[Any, str]] = {
    "count": (lambda v: _is_int(v) and 1 <= v <= 1 << 24, "an integer from 1 to 2^24"),
    "positive": (lambda v: _is_number(v) and math.isfinite(v) and v > 0, "a finite number > 0"),
    "text": (lambda v: isinstance(v, str), "a string"),
    "flag": (lambda v: isinstance(v, bool), "true or false"),
    # Merges are found by splitting each token at every point (quadratic in its length):
    # real vocabularies stop near 32 characters, Gemma 3's at 31.
    "tokens": (
        lambda v: (
            isinstance(v, list)
            and 0 < len(v) <= 1 << 22
            and all(isinstance(t, str) and len(t) <= TOKEN_MAX_CHARS for t in v)
        ),
        f"a non-empty list of strings of at most {TOKEN_MAX_CHARS} characters",
    ),
    "types": (lambda v: isinstance(v, list) and all(_is_int(t) for t in v), "a list of integers"),
}
_REQUIRED = object()


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _Metadata:
    """A GGUF file's metadata, each value checked for its kind as it is read: a damaged or
    incomplete file is refused in GGUF's own terms before anything is converted."""

    def __init__(self, reader: Any, path: str | Path) -> None:
        self.reader, self.path = reader, path

    def bad(self, what: str) -> CheckpointError:
        return CheckpointError(
            f"{self.path}: {what}; the GGUF file is damaged or incomplete: download it or "
            "convert the model again (llama.cpp's convert_hf_to_gguf.py)"
        )

    def raw(self, key: str) -> Any:
        """The value under ``key`` (None when absent), unchecked."""
        try:
            return _field(self.reader, key)
        except Exception:  # a value gguf cannot decode (bad string bytes, wrong array parts)
            raise self.bad(f"GGUF metadata {key} cannot be read") from None

    def __call__(self, key: str, kind: str, default: Any = _REQUIRED) -> Any:
        """The value under ``key``, which must be of ``kind`` (``_KINDS``); ``default`` when
        absent, or refused when no default is given."""
        value = self.raw(key)
        if value is None:
            if default is _REQUIRED:
                raise self.bad(f"GGUF metadata {key} is missing")
            return default
        test, wording = _KINDS[kind]
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


def read_gguf(path: str | Path) -> GGUFCheckpoint:
    """Config, fp32 tensors under Hugging Face names and tokenizer of a GGUF file, every
    metadata value and tensor shape checked first."""
    reader = _reader(path)
    meta = _Metadata(reader, path)
    arch = meta.raw("general.architecture")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise CheckpointError(
            f"{path}: GGUF architecture {arch!r} is not supported; supported: "
            f"{', '.join(SUPPORTED_ARCHITECTURES)}"
        )
    config = _gemma3_config(meta)
    tensors = _gemma3_tensors(meta, config)
    try:
        tokenizer = _sentencepiece_tokenizer(meta)
    except CheckpointError:
        raise
    except Exception as e:  # what `tokenizers` refuses in a vocabulary the checks let by
        raise meta.bad(f"its tokenizer cannot be built ({str(e)[:80]})") from None
    return GGUFCheckpoint(config, tensors, tokenizer)


@contextlib.contextmanager
def checkpoint_folder(path: str | Path) -> Iterator[Path]:
    """``path`` itself for a checkpoint folder; for a ``.gguf`` file, a temporary folder
    holding its conversion, removed afterwards."""
    if not is_gguf(path):
        yield Path(path)
        return
    tmp = Path(tempfile.mkdtemp(prefix="etspec-gguf-"))
    try:
        yield convert_gguf(path, tmp / "checkpoint", option="TMPDIR")
    except CheckpointError as e:
        # A check on the converted folder names a temporary file the user never had.
        text = str(e)
        for name in ("config.json", "model.safetensors", "tokenizer.json"):
            text = text.replace(str(tmp / "checkpoint" / name), f"{path} (as {name})")
        raise CheckpointError(text.replace(str(tmp / "checkpoint"), str(path))) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _usual_modes(folder: Path) -> None:
    """The modes a plain mkdir/open would give under the user's umask (``mkdtemp`` and
    ``save_file`` leave the folder and the weights private to the owner)."""
    umask = os.umask(0)
    os.umask(umask)
    folder.chmod(0o777 & ~umask)
    for f in folder.iterdir():
        f.chmod(0o666 & ~umask)


def fp32_bytes(path: str | Path) -> int:
    """What the converted weights take (fp32), from the tensor shapes alone."""
    reader = _reader(path)
    return sum(4 * math.prod(int(n) for n in t.shape) for t in reader.tensors)


def convert_gguf(
    path: str | Path, out: str | Path, force: bool = False, option: str = "-o"
) -> Path:
    """Write ``out/`` (config.json, model.safetensors, tokenizer.json) from a GGUF file.
    Written aside and moved into place, so a failure leaves nothing behind."""
    from safetensors.torch import save_file

    dest = check_output_folder(out, force, CONVERTED_FILES, option)
    check_free_space(dest.parent, fp32_bytes(path), str(dest), option)
    ckpt = read_gguf(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        (tmp / "config.json").write_text(json.dumps(ckpt.config, indent=2) + "\n")
        (tmp / "tokenizer.json").write_bytes(ckpt.tokenizer_json)
        # Tied embeddings are one tensor: safetensors refuses shared storage, and HF
        # checkpoints of tied models store the embedding alone.
        save_file(ckpt.tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        _usual_modes(tmp)
        if dest.exists():  # checked: a folder of CONVERTED_FILES only
            shutil.rmtree(dest)
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


# --- Gemma 3 ---------------------------------------------------------------------------------


def _gemma3_config(m: _Metadata) -> dict[str, Any]:
    a = "gemma3"
    layers = m(f"{a}.block_count", "count")
    heads = m(f"{a}.attention.head_count", "count")
    kv_heads = m(f"{a}.attention.head_count_kv", "count", heads)
    if heads % kv_heads:
        raise m.bad(f"GGUF metadata {a}.attention.head_count_kv ({kv_heads}) must divide "
                    f"{a}.attention.head_count ({heads})")  # fmt: skip
    head_dim = m(f"{a}.attention.key_length", "count")
    window = m(f"{a}.attention.sliding_window", "count", None)
    # llama.cpp fixes what the GGUF does not store for Gemma 3: every 6th layer attends to
    # the full context, sliding layers use RoPE base 10,000, and queries are scaled by
    # 1/sqrt(head_dim).
    pattern = 6
    layer_types = [
        "full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(layers)
    ]
    full_rope: dict[str, Any] = {"rope_type": "default", "rope_theta": float(
        m(f"{a}.rope.freq_base", "positive", 1_000_000.0)
    )}  # fmt: skip
    scaling = m(f"{a}.rope.scaling.type", "text", None)
    if scaling == "linear":
        full_rope = {**full_rope, "rope_type": "linear",
                     "factor": float(m(f"{a}.rope.scaling.factor", "positive"))}  # fmt: skip
    elif scaling not in (None, "none"):
        raise CheckpointError(
            f"{m.path}: GGUF rope scaling {scaling[:40]!r} is not supported for gemma3 "
            "(supported: none, linear)"
        )
    vocab = len(m("tokenizer.ggml.tokens", "tokens"))
    tied = not any(t.name == "output.weight" for t in m.reader.tensors)
    softcaps = {
        key: m(f"{a}.{key}", "positive", None)
        for key in ("final_logit_softcapping", "attn_logit_softcapping")
    }
    return {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "vocab_size": vocab,
        "hidden_size": m(f"{a}.embedding_length", "count"),
        "intermediate_size": m(f"{a}.feed_forward_length", "count"),
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "hidden_activation": "gelu_pytorch_tanh",
        "max_position_embeddings": m(f"{a}.context_length", "count"),
        "rms_norm_eps": float(m(f"{a}.attention.layer_norm_rms_epsilon", "positive")),
        "pad_token_id": m.token_id("tokenizer.ggml.padding_token_id", vocab),
        "eos_token_id": m.token_id("tokenizer.ggml.eos_token_id", vocab),
        "bos_token_id": m.token_id("tokenizer.ggml.bos_token_id", vocab),
        "tie_word_embeddings": tied,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
            "full_attention": full_rope,
        },
        "query_pre_attn_scalar": head_dim,
        "sliding_window": window,
        "layer_types": layer_types,
        **softcaps,
        "attention_bias": False,
    }


# llama.cpp tensor name -> Hugging Face name (per layer: blk.N.X -> model.layers.N.Y).
GEMMA3_LAYER = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "attn_norm": "input_layernorm",
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
GEMMA3_TOP = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
}


def _gemma3_shapes(c: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """Every tensor a gemma3 GGUF with config ``c`` holds (``output.weight`` only when the
    embedding is not tied), by its GGUF name, with its shape in PyTorch order."""
    h, f, d = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    q, kv = c["num_attention_heads"] * d, c["num_key_value_heads"] * d
    layer = {
        "attn_q": (q, h), "attn_k": (kv, h), "attn_v": (kv, h), "attn_output": (h, q),
        "attn_q_norm": (d,), "attn_k_norm": (d,), "attn_norm": (h,),
        "post_attention_norm": (h,), "ffn_norm": (h,), "post_ffw_norm": (h,),
        "ffn_gate": (f, h), "ffn_up": (f, h), "ffn_down": (h, f),
    }  # fmt: skip
    shapes = {"token_embd.weight": (c["vocab_size"], h), "output_norm.weight": (h,)}
    if not c["tie_word_embeddings"]:
        shapes["output.weight"] = (c["vocab_size"], h)
    for i in range(c["num_hidden_layers"]):
        shapes.update({f"blk.{i}.{name}.weight": shape for name, shape in layer.items()})
    return shapes


def _gemma3_tensors(m: _Metadata, config: dict[str, Any]) -> dict[str, torch.Tensor]:
    from gguf.quants import dequantize

    want = _gemma3_shapes(config)
    missing = sorted(set(want) - {t.name for t in m.reader.tensors})
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise m.bad(f"GGUF tensor {missing[0]}{more} missing")
    out: dict[str, torch.Tensor] = {}
    for t in m.reader.tensors:
        if t.name not in want:
            raise CheckpointError(
                f"{m.path}: GGUF tensor {t.name[:80]!r} is not part of a gemma3 model with "
                f"{config['num_hidden_layers']} blocks"
            )
        shape = tuple(int(n) for n in reversed(t.shape))
        if shape != want[t.name]:
            raise m.bad(f"GGUF tensor {t.name} has shape {list(shape)}, its metadata make it "
                        f"{list(want[t.name])}")  # fmt: skip
        try:
            value = torch.from_numpy(dequantize(t.data, t.tensor_type).copy()).float()
        except Exception as e:  # a type gguf cannot decode, data cut short
            raise m.bad(f"GGUF tensor {t.name} cannot be decoded ({str(e)[:80]})") from None
        if value.shape != want[t.name]:
            raise m.bad(f"GGUF tensor {t.name} holds {value.numel()} values, not "
                        f"{list(want[t.name])}")  # fmt: skip
        if not bool(torch.isfinite(value).all()):
            raise m.bad(f"GGUF tensor {t.name} holds NaN or infinite values")
        base, _, suffix = t.name.rpartition(".")
        if base.startswith("blk."):
            _, index, name = base.split(".", 2)
            hf = f"model.layers.{index}.{GEMMA3_LAYER[name]}"
        else:
            hf = GEMMA3_TOP[base]
        if base.endswith("norm"):
            # llama.cpp's RMSNorm multiplies by w; Gemma's by (1 + w): its converter stored
            # w + 1, and Hugging Face checkpoints hold w.
            value = value - 1.0
        out[f"{hf}.{suffix}"] = value
    return out


# --- tokenizer ---------------------------------------------------------------------------------


def _merges(tokens: list[str]) -> list[tuple[str, str]]:
    """The BPE merges a SentencePiece vocabulary implies: every split of a token into two
    tokens, best-first. Gemma's files list no merges, and their scores do not follow merge
    order: the order of the tokens in the file does (as transformers rebuilds them)."""
    vocab = {t: i for i, t in enumerate(tokens)}  # a repeated spelling keeps its last id
    merges = []
    for token, rank in vocab.items():
        local = [
            (token[:k], token[k:])
            for k in range(1, len(token))
            if token[:k] in vocab and token[k:] in vocab
        ]
        local.sort(key=lambda lr: (vocab[lr[0]], vocab[lr[1]]))
        merges += [(rank, len(lhs), len(rhs), lhs, rhs) for lhs, rhs in local]
    merges.sort(key=lambda m: (m[0], -m[1], -m[2]))
    return [(lhs, rhs) for _, _, _, lhs, rhs in merges]


def _sentencepiece_tokenizer(m: _Metadata) -> bytes:
    """Gemma's tokenizer.json: BPE with byte fallback over the file's vocabulary, spaces as
    '▁', control tokens special, user-defined tokens matched whole, and <bos> added in front
    when the file says so (tokenizer.ggml.add_bos_token), as Gemma needs."""
    from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import BPE

    # A token of spaces only is stored as spaces; the vocabulary spells spaces as '▁'.
    tokens = [
        "▁" * len(t) if " " in t and not t.strip() else t
        for t in m("tokenizer.ggml.tokens", "tokens")
    ]
    types = m("tokenizer.ggml.token_type", "types", None)
    types = [1] * len(tokens) if types is None else types
    if len(types) != len(tokens):
        raise m.bad(f"GGUF metadata tokenizer.ggml.token_type has {len(types)} entries for "
                    f"{len(tokens)} tokens")  # fmt: skip
    if "" in tokens:
        raise m.bad(f"GGUF metadata tokenizer.ggml.tokens holds an empty token (id "
                    f"{tokens.index('')})")  # fmt: skip
    unk_id = m.token_id("tokenizer.ggml.unknown_token_id", len(tokens), min(3, len(tokens) - 1))
    assert unk_id is not None
    unk = tokens[unk_id]
    tok = Tokenizer(
        BPE(
            vocab={t: i for i, t in enumerate(tokens)},
            merges=_merges(tokens),
            unk_token=unk,
            fuse_unk=True,
            byte_fallback=True,
        )
    )
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous", invert=False)
    tok.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    tok.add_special_tokens(
        [AddedToken(t, normalized=False, special=True)
         for t, k in zip(tokens, types, strict=True) if k == _CONTROL]
    )  # fmt: skip
    user = [t for t, k in zip(tokens, types, strict=True) if k == _USER_DEFINED]
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in user])
    bos_id = m.token_id("tokenizer.ggml.bos_token_id", len(tokens))
    if m("tokenizer.ggml.add_bos_token", "flag", False) and bos_id is not None:
        bos = tokens[bos_id]
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, int(bos_id))]
        )
    return tok.to_str().encode("utf-8")
