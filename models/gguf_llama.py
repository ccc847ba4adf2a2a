"""The Llama family in GGUF: ``llama`` (Llama 2/3, Mistral 7B, SmolLM, TinyLlama: llama.cpp
converts them all to this architecture) and ``qwen2`` (Qwen2/2.5), as the config and the
tensors of a Hugging Face checkpoint (``model_type`` ``llama`` or ``qwen2``).

What llama.cpp's converter changes is undone here: the query and key rows of ``llama``
files are interleaved for its rotary kernel (``LlamaModel.permute``) and are put back in
Hugging Face's order; Llama 3's RoPE scaling is stored as per-frequency factors
(``rope_freqs.weight``), from which ``rope_scaling`` is rebuilt and checked to give the same
frequencies back.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from etspec.errors import CheckpointError
from etspec.models.gguf_read import GGUFMetadata, decode_tensor, decode_tensors
from etspec.models.gguf_tokenizer import TokenizerSpec

LLAMA_ARCHITECTURES = ("llama", "qwen2")
# llama.cpp tensor name -> Hugging Face name (per layer: blk.N.X -> model.layers.N.Y).
LAYER = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
TOP = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
ROPE_FREQS = "rope_freqs.weight"
_BIASES = ("attn_q", "attn_k", "attn_v", "attn_output")


def llama_config(m: GGUFMetadata, arch: str, tok: TokenizerSpec) -> dict[str, Any]:
    """``config.json`` of a ``llama``/``qwen2`` GGUF, every value it reads checked in GGUF's
    terms (and ``rope_freqs.weight``, which holds Llama 3's RoPE scaling)."""
    a = arch
    experts = m.raw(f"{a}.expert_count")
    if experts:
        raise CheckpointError(
            f"{m.path}: GGUF {a}.expert_count is {experts!r}: mixture-of-experts models "
            "(Mixtral, Qwen MoE) are not supported"
        )
    hidden = m(f"{a}.embedding_length", "count")
    heads, kv_heads = m.attention_heads(a)
    if m.raw(f"{a}.attention.key_length") is None and hidden % heads:
        raise m.bad(f"GGUF metadata {a}.embedding_length ({hidden}) must be a multiple of "
                    f"{a}.attention.head_count ({heads})")  # fmt: skip
    head_dim = m(f"{a}.attention.key_length", "count", hidden // heads)
    for key in (f"{a}.attention.value_length", f"{a}.rope.dimension_count"):
        value = m(key, "count", head_dim)
        if value != head_dim:
            raise CheckpointError(
                f"{m.path}: GGUF {key} ({value}) differs from the head size ({head_dim}); "
                "partial rotary embeddings and value heads of another size are not supported"
            )
    if head_dim % 2:
        raise m.bad(f"GGUF head size {head_dim} must be even (rotary embeddings rotate pairs)")
    vocab = len(tok.tokens)
    declared = m(f"{a}.vocab_size", "count", vocab)
    if declared != vocab:
        raise m.bad(f"GGUF metadata {a}.vocab_size ({declared}) differs from the "
                    f"{vocab} tokens of tokenizer.ggml.tokens")  # fmt: skip
    theta = _f32(m(f"{a}.rope.freq_base", "positive", 10_000.0))
    names = m.tensor_names()
    bias = any(f"blk.0.{b}.bias" in names for b in _BIASES)
    eos = tok.eos_token_ids
    config: dict[str, Any] = {
        "architectures": ["Qwen2ForCausalLM" if a == "qwen2" else "LlamaForCausalLM"],
        "model_type": a,
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": m(f"{a}.feed_forward_length", "count"),
        "num_hidden_layers": m(f"{a}.block_count", "count"),
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": m(f"{a}.context_length", "count"),
        "rms_norm_eps": _f32(m(f"{a}.attention.layer_norm_rms_epsilon", "positive")),
        "rope_theta": theta,
        "rope_scaling": None,  # below: it may decode a tensor, after every metadata check
        "tie_word_embeddings": "output.weight" not in names,
        "bos_token_id": tok.ids["bos"],
        "eos_token_id": eos[0] if len(eos) == 1 else (eos or None),
        "pad_token_id": tok.ids["pad"],
    }
    if a == "qwen2":  # q/k/v biases always; llama.cpp runs every layer on the full context
        config.update(use_sliding_window=False, sliding_window=None)
    else:
        config.update(attention_bias=bias, mlp_bias=False)
    config["rope_scaling"] = _rope_scaling(m, a, theta, head_dim)
    return config


def _f32(value: float) -> float:
    """The shortest decimal that is the same float32: GGUF stores floats in 32 bits, and
    an epsilon of 1e-5 would otherwise read back as 9.99999974e-06."""
    import numpy as np

    return float(np.format_float_positional(np.float32(value), unique=True, trim="0"))


def _rope_scaling(m: GGUFMetadata, a: str, theta: float, head_dim: int) -> dict[str, Any] | None:
    """``rope_scaling`` from {arch}.rope.scaling.* (none, linear) or, for Llama 3, from the
    frequency factors llama.cpp stores as ``rope_freqs.weight``."""
    kind = m(f"{a}.rope.scaling.type", "text", None)
    has_factors = a == "llama" and ROPE_FREQS in m.tensor_names()
    if kind not in (None, "none", "linear"):
        raise CheckpointError(
            f"{m.path}: GGUF rope scaling {kind[:40]!r} ({a}.rope.scaling.type) is not "
            f"supported for {a} (supported: none, linear, and Llama 3's frequency factors "
            f"in {ROPE_FREQS})"
        )
    if kind == "linear":
        if has_factors:
            raise m.bad(f"GGUF file has both linear rope scaling and {ROPE_FREQS}")
        return {"rope_type": "linear", "factor": _f32(m(f"{a}.rope.scaling.factor", "positive"))}
    if not has_factors:
        return None
    factors = decode_tensor(m, ROPE_FREQS, (head_dim // 2,))
    return llama3_rope_scaling(m, factors, theta, head_dim)


def _llama3_factors(
    params: tuple[float, float, float, float], wavelen: torch.Tensor
) -> torch.Tensor:
    """llama.cpp's rope_freqs for (factor, low_freq_factor, high_freq_factor,
    original_max_position_embeddings): 1 for short wavelengths, ``factor`` for long ones,
    a smooth step between (convert_hf_to_gguf.py, LlamaModel.generate_extra_tensors)."""
    factor, low, high, context = params
    smooth = (context / wavelen - low) / (high - low)
    mid = 1 / ((1 - smooth) / factor + smooth)
    out = torch.where(wavelen > context / low, torch.full_like(wavelen, factor), mid)
    return torch.where(wavelen < context / high, torch.ones_like(wavelen), out)


def llama3_rope_scaling(
    m: GGUFMetadata, factors: torch.Tensor, theta: float, head_dim: int
) -> dict[str, Any] | None:
    """Llama 3's ``rope_scaling`` from llama.cpp's per-frequency factors.

    The factors depend only on the two wavelengths where the smooth step starts and ends
    (``original_max_position_embeddings / low_freq_factor`` and ``/ high_freq_factor``);
    two or more factors inside the step give both, one gives one when the step spans a
    factor of 4 in wavelength (every Llama 3 release: 1 to 4), none leaves any boundaries in
    the gaps. Values are then rounded as configs write them and kept only if they give the
    file's factors back (to float32 round-off); otherwise the file is refused."""
    f = factors.double()
    if bool((f == 1).all()):
        return None
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    wavelen = 2 * math.pi / inv
    factor = float(f.max())
    one, top = torch.isclose(f, torch.ones_like(f)), torch.isclose(f, torch.full_like(f, factor))
    mid = ~one & ~top
    candidates: list[tuple[float, float]] = []  # (long, short) step boundaries
    if factor > 1 and bool((f >= 1 - 1e-6).all()):
        step = (1 / f[mid] - 1 / factor) / (1 - 1 / factor)  # 0 at the long end, 1 at the short
        x = 1 / wavelen[mid]
        if len(x) >= 2:  # step = (x - 1/long) / (1/short - 1/long): a line through the points
            slope = float((step[-1] - step[0]) / (x[-1] - x[0]))
            start = float(x[0] - step[0] / slope)
            candidates.append((1 / start, 1 / (start + 1 / slope)))
        elif len(x) == 1:
            long = float(wavelen[mid][0] * (1 + 3 * step[0]))
            candidates.append((long, long / 4))
        else:
            below = float(wavelen[one].max()) if bool(one.any()) else 0.0
            above = float(wavelen[top].min())
            for long in (8192.0, math.sqrt(4 * below * above)):
                candidates.append((long, long / 4))
    for long, short in candidates:
        if not (math.isfinite(long) and math.isfinite(short) and 0 < short < long):
            continue
        context = max(1, round(long))
        exact = (factor, context / long, context / short, float(context))
        for params in (tuple(float(f"{v:.6g}") for v in exact), exact):
            if torch.allclose(_llama3_factors(params, wavelen), f, rtol=1e-5, atol=0):
                factor_, low, high, context_ = params
                return {
                    "rope_type": "llama3",
                    "factor": factor_,
                    "low_freq_factor": low,
                    "high_freq_factor": high,
                    "original_max_position_embeddings": int(context_),
                }
    raise CheckpointError(
        f"{m.path}: GGUF tensor {ROPE_FREQS} does not follow Llama 3's RoPE scaling (factors "
        f"from {float(f.min()):.4g} to {factor:.4g}); only that form of {ROPE_FREQS} is supported"
    )


def llama_shapes(c: dict[str, Any], names: set[str]) -> dict[str, tuple[int, ...]]:
    """Every tensor a ``llama``/``qwen2`` GGUF with config ``c`` holds, by its GGUF name,
    with its shape in PyTorch order."""
    h, f, d = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    q, kv = c["num_attention_heads"] * d, c["num_key_value_heads"] * d
    layer = {
        "attn_norm": (h,), "attn_q": (q, h), "attn_k": (kv, h), "attn_v": (kv, h),
        "attn_output": (h, q), "ffn_norm": (h,), "ffn_gate": (f, h), "ffn_up": (f, h),
        "ffn_down": (h, f),
    }  # fmt: skip
    biases = {"attn_q": (q,), "attn_k": (kv,), "attn_v": (kv,)}
    if c["model_type"] == "llama":
        biases = {**biases, "attn_output": (h,)} if c["attention_bias"] else {}
    shapes = {"token_embd.weight": (c["vocab_size"], h), "output_norm.weight": (h,)}
    if not c["tie_word_embeddings"]:
        shapes["output.weight"] = (c["vocab_size"], h)
    if c["model_type"] == "llama" and ROPE_FREQS in names:
        shapes[ROPE_FREQS] = (d // 2,)
    for i in range(c["num_hidden_layers"]):
        shapes.update({f"blk.{i}.{name}.weight": shape for name, shape in layer.items()})
        shapes.update({f"blk.{i}.{name}.bias": shape for name, shape in biases.items()})
    return shapes


def _unpermute(w: torch.Tensor, heads: int) -> torch.Tensor:
    """Undo llama.cpp's ``LlamaModel.permute``: each head's rows go from interleaved pairs
    back to Hugging Face's two halves."""
    half = w.shape[0] // heads // 2
    return w.reshape(heads, half, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape).contiguous()


def llama_tensors(m: GGUFMetadata, config: dict[str, Any]) -> dict[str, torch.Tensor]:
    """fp32 tensors of a ``llama``/``qwen2`` GGUF under Hugging Face names (the query and
    key rows of ``llama`` files back in Hugging Face's order)."""
    a = config["model_type"]
    want = llama_shapes(config, m.tensor_names())
    model = f"a {a} model with {config['num_hidden_layers']} blocks"
    out: dict[str, torch.Tensor] = {}
    for name, value in decode_tensors(m, want, model).items():
        if name == ROPE_FREQS:  # read into the config's rope_scaling
            continue
        base, _, suffix = name.rpartition(".")
        if base.startswith("blk."):
            _, index, kind = base.split(".", 2)
            if a == "llama" and kind in ("attn_q", "attn_k"):
                heads = config["num_attention_heads" if kind == "attn_q" else "num_key_value_heads"]
                value = _unpermute(value, heads)
            hf = f"model.layers.{index}.{LAYER[kind]}"
        else:
            hf = TOP[base]
        out[f"{hf}.{suffix}"] = value
    return out
