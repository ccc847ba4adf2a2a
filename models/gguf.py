"""GGUF (llama.cpp) files as checkpoints: config, weights and tokenizer, read with ``gguf``.

A GGUF carries no ``config.json`` and no ``tokenizer.json``: the hyperparameters, the
vocabulary and the special tokens are metadata under llama.cpp's key names, and its tensors
are named and laid out as llama.cpp's converter wrote them (``blk.N.attn_q.weight``, the
query and key rows of Llama files interleaved, Gemma's norm weights with the +1 its RMSNorm
folds in). ``read_gguf`` turns one into what a Hugging Face folder holds, so export takes a
``.gguf`` like a checkpoint folder, and ``convert_gguf`` writes that folder (``etspec convert
gguf``). Quantized tensors (Q4_K, Q6_K, Q8_0, ...) are dequantized to fp32 by ``gguf``;
export then quantizes as it is told.

Supported: ``gemma3`` (Gemma 3 text models, here), ``llama`` (Llama 2/3, Mistral 7B, SmolLM,
TinyLlama) and ``qwen2`` (``gguf_llama.py``); tokenizers in ``gguf_tokenizer.py``. Other
architectures are refused by name. The tests hold every tensor and the tokenizer to
transformers' own GGUF loader (random models of each family, and the real Gemma 3 270M file
with ``-m real``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from etspec.errors import CheckpointError
from etspec.files import check_free_space, check_output_folder
from etspec.models.gguf_llama import LLAMA_ARCHITECTURES, llama_config, llama_tensors
from etspec.models.gguf_read import GGUFMetadata, check_gguf_layout, decode_tensors, open_gguf
from etspec.models.gguf_tokenizer import (
    build_tokenizer,
    gemma_tokenizer,
    read_tokenizer_spec,
    tokenizer_config,
)

SUPPORTED_ARCHITECTURES = ("gemma3", *LLAMA_ARCHITECTURES)
# What ``convert_gguf`` writes, and all ``--force`` may replace in its output folder.
CONVERTED_FILES = frozenset(
    {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}
)


@dataclass
class GGUFCheckpoint:
    """What a Hugging Face folder would hold: ``config.json``, the state dict (fp32, HF
    names), ``tokenizer.json`` and ``tokenizer_config.json``."""

    config: dict[str, Any]
    tensors: dict[str, torch.Tensor]
    tokenizer_json: bytes
    tokenizer_config: dict[str, Any] = field(default_factory=dict)


def is_gguf(path: str | Path) -> bool:
    """Whether ``path`` is a file that starts as a GGUF does."""
    p = Path(path)
    if not p.is_file():
        return False
    with p.open("rb") as f:
        return f.read(4) == b"GGUF"


def read_gguf(path: str | Path) -> GGUFCheckpoint:
    """Config, fp32 tensors under Hugging Face names and tokenizer of a GGUF file: every
    metadata value the conversion reads and every tensor's name and shape checked, the
    tokenizer built before any tensor is decoded."""
    meta = GGUFMetadata(open_gguf(path, SUPPORTED_ARCHITECTURES), path)
    arch = meta("general.architecture", "text")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise CheckpointError(
            f"{path}: GGUF architecture {arch[:40]!r} is not supported; supported: "
            f"{', '.join(SUPPORTED_ARCHITECTURES)}"
        )
    if arch in LLAMA_ARCHITECTURES:
        spec = read_tokenizer_spec(meta, arch)
        config = llama_config(meta, arch, spec)
        tok = build_tokenizer(meta, spec)
        return GGUFCheckpoint(
            config, llama_tensors(meta, config), tok.tokenizer_json, tok.tokenizer_config
        )
    config = _gemma3_config(meta)
    try:
        tokenizer = gemma_tokenizer(meta)
    except CheckpointError:
        raise
    except Exception as e:  # what `tokenizers` refuses in a vocabulary the checks let by
        raise meta.bad(f"its tokenizer cannot be built ({str(e)[:80]})") from None
    tokens = meta("tokenizer.ggml.tokens", "tokens")
    ids = {name: config[f"{name}_token_id"] for name in ("bos", "eos", "pad")}
    ids["unk"] = meta.token_id("tokenizer.ggml.unknown_token_id", len(tokens))
    add_bos = meta("tokenizer.ggml.add_bos_token", "flag", False) and ids["bos"] is not None
    return GGUFCheckpoint(
        config,
        _gemma3_tensors(meta, config),
        tokenizer,
        tokenizer_config(meta, tokens, ids, add_bos, False),
    )


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
        for name in sorted(CONVERTED_FILES):
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
    """What the converted weights take (fp32), from the tensor records alone (the layout
    walk; ``gguf``'s reader took 8 s over Gemma 3 270M's 262k-token vocabulary)."""
    if not Path(path).is_file():
        raise CheckpointError(f"{path}: no such file")
    return 4 * check_gguf_layout(Path(path))[2]


def convert_gguf(
    path: str | Path, out: str | Path, force: bool = False, option: str = "-o"
) -> Path:
    """Write ``out/`` (``CONVERTED_FILES``: config.json, model.safetensors, tokenizer.json,
    tokenizer_config.json) from a GGUF file. Written aside and moved into place, so a
    failure leaves nothing behind."""
    from safetensors.torch import save_file

    dest = check_output_folder(out, force, CONVERTED_FILES, option)
    check_free_space(dest.parent, fp32_bytes(path), str(dest), option)
    ckpt = read_gguf(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        (tmp / "config.json").write_text(json.dumps(ckpt.config, indent=2) + "\n")
        (tmp / "tokenizer.json").write_bytes(ckpt.tokenizer_json)
        (tmp / "tokenizer_config.json").write_text(
            json.dumps(ckpt.tokenizer_config, indent=2, ensure_ascii=False) + "\n"
        )
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


def _gemma3_config(m: GGUFMetadata) -> dict[str, Any]:
    a = "gemma3"
    layers = m(f"{a}.block_count", "count")
    heads, kv_heads = m.attention_heads(a)
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


def _gemma3_tensors(m: GGUFMetadata, config: dict[str, Any]) -> dict[str, torch.Tensor]:
    want = _gemma3_shapes(config)
    model = f"a gemma3 model with {config['num_hidden_layers']} blocks"
    out: dict[str, torch.Tensor] = {}
    for name, value in decode_tensors(m, want, model).items():
        base, _, suffix = name.rpartition(".")
        if base.startswith("blk."):
            _, index, kind = base.split(".", 2)
            hf = f"model.layers.{index}.{GEMMA3_LAYER[kind]}"
        else:
            hf = GEMMA3_TOP[base]
        if base.endswith("norm"):
            # llama.cpp's RMSNorm multiplies by w; Gemma's by (1 + w): its converter stored
            # w + 1, and Hugging Face checkpoints hold w.
            value = value - 1.0
        out[f"{hf}.{suffix}"] = value
    return out
