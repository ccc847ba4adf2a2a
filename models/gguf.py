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
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from etspec.errors import CheckpointError, OutputExistsError

SUPPORTED_ARCHITECTURES = ("gemma3",)
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


def read_gguf(path: str | Path) -> GGUFCheckpoint:
    """Config, fp32 tensors under Hugging Face names and tokenizer of a GGUF file."""
    reader = _reader(path)
    arch = _field(reader, "general.architecture")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise CheckpointError(
            f"{path}: GGUF architecture {arch!r} is not supported; supported: "
            f"{', '.join(SUPPORTED_ARCHITECTURES)}"
        )
    config = _gemma3_config(reader)
    return GGUFCheckpoint(config, _gemma3_tensors(reader, config), _sentencepiece_tokenizer(reader))


@contextlib.contextmanager
def checkpoint_folder(path: str | Path) -> Iterator[Path]:
    """``path`` itself for a checkpoint folder; for a ``.gguf`` file, a temporary folder
    holding its conversion, removed afterwards."""
    if not is_gguf(path):
        yield Path(path)
        return
    tmp = Path(tempfile.mkdtemp(prefix="etspec-gguf-"))
    try:
        yield convert_gguf(path, tmp / "checkpoint")
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


def convert_gguf(path: str | Path, out: str | Path, force: bool = False) -> Path:
    """Write ``out/`` (config.json, model.safetensors, tokenizer.json) from a GGUF file.
    Written aside and moved into place, so a failure leaves nothing behind."""
    from safetensors.torch import save_file

    dest = Path(out)
    if dest.exists() and not force:
        raise OutputExistsError(f"{dest} exists; pass --force to overwrite it")
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
        if dest.exists():
            shutil.rmtree(dest) if dest.is_dir() else dest.unlink()
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


# --- Gemma 3 ---------------------------------------------------------------------------------


def _gemma3_config(r: Any) -> dict[str, Any]:
    a = "gemma3"
    layers = int(_field(r, f"{a}.block_count"))
    heads = int(_field(r, f"{a}.attention.head_count"))
    head_dim = int(_field(r, f"{a}.attention.key_length"))
    window = _field(r, f"{a}.attention.sliding_window")
    # llama.cpp fixes what the GGUF does not store for Gemma 3: every 6th layer attends to
    # the full context, sliding layers use RoPE base 10,000, and queries are scaled by
    # 1/sqrt(head_dim).
    pattern = 6
    layer_types = [
        "full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(layers)
    ]
    full_rope: dict[str, Any] = {"rope_type": "default", "rope_theta": float(
        _field(r, f"{a}.rope.freq_base", 1_000_000.0)
    )}  # fmt: skip
    scaling = _field(r, f"{a}.rope.scaling.type")
    if scaling == "linear":
        full_rope = {**full_rope, "rope_type": "linear",
                     "factor": float(_field(r, f"{a}.rope.scaling.factor"))}  # fmt: skip
    elif scaling not in (None, "none"):
        raise CheckpointError(f"GGUF rope scaling {scaling!r} is not supported for gemma3")
    vocab = len(_field(r, "tokenizer.ggml.tokens"))
    tied = not any(t.name == "output.weight" for t in r.tensors)
    return {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "vocab_size": vocab,
        "hidden_size": int(_field(r, f"{a}.embedding_length")),
        "intermediate_size": int(_field(r, f"{a}.feed_forward_length")),
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": int(_field(r, f"{a}.attention.head_count_kv", heads)),
        "head_dim": head_dim,
        "hidden_activation": "gelu_pytorch_tanh",
        "max_position_embeddings": int(_field(r, f"{a}.context_length")),
        "rms_norm_eps": float(_field(r, f"{a}.attention.layer_norm_rms_epsilon")),
        "pad_token_id": _field(r, "tokenizer.ggml.padding_token_id"),
        "eos_token_id": _field(r, "tokenizer.ggml.eos_token_id"),
        "bos_token_id": _field(r, "tokenizer.ggml.bos_token_id"),
        "tie_word_embeddings": tied,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
            "full_attention": full_rope,
        },
        "query_pre_attn_scalar": head_dim,
        "sliding_window": int(window) if window else None,
        "layer_types": layer_types,
        "final_logit_softcapping": _field(r, f"{a}.final_logit_softcapping"),
        "attn_logit_softcapping": _field(r, f"{a}.attn_logit_softcapping"),
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


def _gemma3_tensors(r: Any, config: dict[str, Any]) -> dict[str, torch.Tensor]:
    from gguf.quants import dequantize

    out: dict[str, torch.Tensor] = {}
    for t in r.tensors:
        base, _, suffix = t.name.rpartition(".")
        if base.startswith("blk."):
            _, index, name = base.split(".", 2)
            hf = f"model.layers.{index}.{GEMMA3_LAYER.get(name, '')}"
            known = name in GEMMA3_LAYER
        else:
            hf, known = GEMMA3_TOP.get(base, ""), base in GEMMA3_TOP
        if not known:
            raise CheckpointError(f"GGUF tensor {t.name!r} is not part of a gemma3 model")
        value = torch.from_numpy(dequantize(t.data, t.tensor_type).copy()).float()
        if base.endswith("norm"):
            # llama.cpp's RMSNorm multiplies by w; Gemma's by (1 + w): its converter stored
            # w + 1, and Hugging Face checkpoints hold w.
            value = value - 1.0
        out[f"{hf}.{suffix}"] = value
    if config["tie_word_embeddings"]:
        out.pop("lm_head.weight", None)
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


def _sentencepiece_tokenizer(r: Any) -> bytes:
    """Gemma's tokenizer.json: BPE with byte fallback over the file's vocabulary, spaces as
    '▁', control tokens special, user-defined tokens matched whole, and <bos> added in front
    when the file says so (tokenizer.ggml.add_bos_token), as Gemma needs."""
    from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import BPE

    # A token of spaces only is stored as spaces; the vocabulary spells spaces as '▁'.
    tokens = [
        "▁" * len(t) if " " in t and not t.strip() else t
        for t in _field(r, "tokenizer.ggml.tokens")
    ]
    types = _field(r, "tokenizer.ggml.token_type") or [1] * len(tokens)
    unk = tokens[int(_field(r, "tokenizer.ggml.unknown_token_id", 3))]
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
    bos_id = _field(r, "tokenizer.ggml.bos_token_id")
    if _field(r, "tokenizer.ggml.add_bos_token", False) and bos_id is not None:
        bos = tokens[int(bos_id)]
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, int(bos_id))]
        )
    return tok.to_str().encode("utf-8")
