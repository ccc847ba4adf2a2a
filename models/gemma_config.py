"""Gemma 3 and Gemma 4 text configurations read from a Hugging Face ``config.json``.

Both families interleave sliding-window and full-attention layers, each type with its own
RoPE; Gemma 4 also gives full layers their own head size and KV heads, lets the last layers
read another layer's KV (``num_kv_shared_layers``), takes values from the key projection
(``attention_k_eq_v``), and adds per-layer input embeddings. One layer list describes it all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from etspec.errors import UnsupportedModelError
from etspec.models.checkpoint import eos_token_ids
from etspec.models.rope import RopeConfig

GEMMA_MODEL_TYPES = ("gemma3_text", "gemma4_text")
SLIDING, FULL = "sliding_attention", "full_attention"
# Multimodal wrappers: refused with the text model to export instead.
MULTIMODAL_MODEL_TYPES = {"gemma3": "gemma3_text", "gemma4": "gemma4_text"}
_ACTIVATIONS = ("gelu_pytorch_tanh", "gelu_tanh")


@dataclass(frozen=True)
class GemmaLayer:
    """One decoder layer's attention shape and where its keys and values live."""

    sliding: bool
    head_dim: int
    num_kv_heads: int
    kv_source: int  # the layer whose cache this layer reads (itself unless KV-shared)
    k_eq_v: bool  # values are the (un-normed) key projection
    intermediate_size: int

    @property
    def type_name(self) -> str:
        return "sliding" if self.sliding else "full"


@dataclass(frozen=True)
class GemmaConfig:
    model_type: str
    vocab_size: int
    hidden_size: int
    num_heads: int
    layers: tuple[GemmaLayer, ...]
    rms_norm_eps: float
    sliding_window: int
    rope_sliding: RopeConfig
    rope_full: RopeConfig
    attn_scale: float
    norm_unit_offset: bool  # Gemma 3 norms scale by (1 + w), Gemma 4 by w
    final_logit_softcapping: float | None
    tie_word_embeddings: bool
    per_layer_input_size: int  # 0: no per-layer input embeddings
    per_layer_vocab_size: int
    layer_scalar: bool
    max_position_embeddings: int
    bos_token_id: int | None
    eos_token_ids: tuple[int, ...]

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def layer_types(self) -> tuple[str, ...]:
        return tuple(layer.type_name for layer in self.layers)

    @classmethod
    def from_hf(cls, config: dict[str, Any], external_kv: bool = False) -> GemmaConfig:
        """``external_kv``: every layer reads KV it does not own (an assistant drafter's
        layers read the target's); ``kv_source`` is then -1."""
        model_type = config.get("model_type")
        if model_type in MULTIMODAL_MODEL_TYPES:
            towers = [k for k in ("vision_config", "audio_config") if config.get(k)]
            towers_note = f" ({', '.join(towers)}: vision/audio towers)" if towers else ""
            raise UnsupportedModelError(
                f"model_type {model_type!r} is the multimodal model{towers_note}, which is not "
                f"supported; export its text model ({MULTIMODAL_MODEL_TYPES[model_type]!r})"
            )
        if model_type not in GEMMA_MODEL_TYPES:
            raise UnsupportedModelError(f"model_type {model_type!r} is not a Gemma text model")
        gemma4 = model_type == "gemma4_text"
        _refuse(config, "enable_moe_block", "MoE blocks are not supported")
        _refuse(config, "use_bidirectional_attention", "only causal attention is supported")
        act = config.get("hidden_activation") or config.get("hidden_act") or "gelu_pytorch_tanh"
        if act not in _ACTIVATIONS:
            raise UnsupportedModelError(
                f"hidden_activation {act!r} is not supported (only 'gelu_pytorch_tanh')"
            )
        hidden = int(config["hidden_size"])
        heads = int(config["num_attention_heads"])
        n = int(config["num_hidden_layers"])
        types = list(config.get("layer_types") or _default_layer_types(n))
        if len(types) != n or any(t not in (SLIDING, FULL) for t in types):
            raise UnsupportedModelError(
                f"layer_types must list {n} of {SLIDING!r}/{FULL!r}, got {types}"
            )
        window = int(config.get("sliding_window") or 0)
        if SLIDING in types and window < 1:
            raise UnsupportedModelError("sliding_window must be set for sliding_attention layers")
        head_dim = int(config.get("head_dim") or hidden // heads)
        kv_heads = int(config.get("num_key_value_heads") or heads)
        inter = int(config["intermediate_size"])
        shared = int(config.get("num_kv_shared_layers") or 0) if gemma4 else 0
        first_shared = n - shared
        per_layer = _per_layer_overrides(config, types, gemma4)
        k_eq_v = bool(config.get("attention_k_eq_v", False)) if gemma4 else False
        double_mlp = bool(config.get("use_double_wide_mlp", False)) if gemma4 else False
        layers = []
        for i, t in enumerate(types):
            over = per_layer.get(i, {})
            source = -1 if external_kv else i
            if i >= first_shared and not external_kv:
                earlier = [j for j in range(first_shared) if types[j] == t]
                if not earlier:
                    raise UnsupportedModelError(
                        f"num_kv_shared_layers={shared}: layer {i} ({t}) has no earlier "
                        "layer of its type to share KV with"
                    )
                source = earlier[-1]
            layers.append(
                GemmaLayer(
                    sliding=t == SLIDING,
                    head_dim=int(over.get("head_dim", head_dim)),
                    num_kv_heads=int(over.get("num_key_value_heads", kv_heads)),
                    kv_source=source,
                    k_eq_v=k_eq_v and t == FULL,
                    intermediate_size=inter * (2 if double_mlp and i >= first_shared > 0 else 1),
                )
            )
        for i, layer in enumerate(layers):
            src = layers[layer.kv_source] if layer.kv_source >= 0 else layer
            if (layer.head_dim, layer.num_kv_heads) != (src.head_dim, src.num_kv_heads):
                raise UnsupportedModelError(
                    f"per_layer_config: KV-shared layer {i} and its source layer "
                    f"{layer.kv_source} differ in head_dim/num_key_value_heads"
                )
            if heads % layer.num_kv_heads:
                raise UnsupportedModelError(
                    f"num_attention_heads={heads} is not a multiple of layer {i}'s "
                    f"{layer.num_kv_heads} KV heads"
                )
        rope_sliding, rope_full = _rope_per_type(config, gemma4)
        ple = int(config.get("hidden_size_per_layer_input") or 0) if gemma4 else 0
        softcap = config.get("final_logit_softcapping")
        return cls(
            model_type=model_type,
            vocab_size=int(config["vocab_size"]),
            hidden_size=hidden,
            num_heads=heads,
            layers=tuple(layers),
            rms_norm_eps=float(config.get("rms_norm_eps", 1e-6)),
            sliding_window=window if SLIDING in types else 0,
            rope_sliding=rope_sliding,
            rope_full=rope_full,
            # Gemma 3 scales scores by query_pre_attn_scalar**-0.5; Gemma 4's q/k norms make
            # the scale 1.
            attn_scale=1.0 if gemma4 else float(config.get("query_pre_attn_scalar", 256)) ** -0.5,
            norm_unit_offset=not gemma4,
            final_logit_softcapping=None if softcap is None else float(softcap),
            tie_word_embeddings=bool(config.get("tie_word_embeddings", True)),
            per_layer_input_size=ple,
            per_layer_vocab_size=int(config.get("vocab_size_per_layer_input") or 0) if ple else 0,
            layer_scalar=gemma4,
            max_position_embeddings=int(config.get("max_position_embeddings", 131072)),
            bos_token_id=config.get("bos_token_id"),
            eos_token_ids=eos_token_ids(config),
        )

    def check_verify_width(self, verify_width: int) -> None:
        """Refuse compiled shapes under which the sliding window would not be exact.

        The sliding mask reads a speculative row's slot as its position, which is exact
        while every tree is shallower than the window.
        """
        if self.sliding_window and verify_width > self.sliding_window:
            raise UnsupportedModelError(
                f"--verify-width {verify_width} exceeds sliding_window={self.sliding_window}; "
                f"export with --verify-width {self.sliding_window} or less"
            )


def _refuse(config: dict[str, Any], key: str, why: str) -> None:
    value = config.get(key)
    if value not in (None, False, 0):
        raise UnsupportedModelError(f"{key}={value!r}: {why}")


def _default_layer_types(n: int) -> list[str]:
    # transformers' default: every sixth layer is full attention.
    return [SLIDING if (i + 1) % 6 else FULL for i in range(n)]


def _per_layer_overrides(
    config: dict[str, Any], types: list[str], gemma4: bool
) -> dict[int, dict[str, Any]]:
    """Gemma 4 full layers' own head_dim/num_key_value_heads: ``per_layer_config`` as
    transformers 5.22 saves it, or the older ``global_head_dim`` /
    ``num_global_key_value_heads`` keys."""
    if not gemma4:
        return {}
    raw = config.get("per_layer_config")
    if raw:
        return {int(k): dict(v) for k, v in raw.items() if str(k).isdigit()}
    over: dict[str, Any] = {"head_dim": config.get("global_head_dim", 512)}
    if config.get("attention_k_eq_v", True) and config.get("num_global_key_value_heads"):
        over["num_key_value_heads"] = config["num_global_key_value_heads"]
    return {i: over for i, t in enumerate(types) if t == FULL}


def _rope_per_type(config: dict[str, Any], gemma4: bool) -> tuple[RopeConfig, RopeConfig]:
    """(sliding, full) RoPE. Per-type ``rope_parameters`` when present; else Gemma 3's older
    keys: ``rope_local_base_freq`` for sliding layers, ``rope_theta`` and ``rope_scaling``
    (full layers only) for full ones."""
    params = config.get("rope_parameters") or {}
    if SLIDING in params or FULL in params:
        sliding = params.get(SLIDING) or {}
        full = params.get(FULL) or {}
        return RopeConfig.from_params(sliding, 10_000.0), RopeConfig.from_params(full, 1e6)
    if gemma4:
        return (
            RopeConfig(theta=10_000.0),
            RopeConfig(theta=1e6, rope_type="proportional", partial_rotary_factor=0.25),
        )
    full = dict(config.get("rope_scaling") or {})
    full.setdefault("rope_theta", config.get("rope_theta", 1e6))
    sliding = {"rope_theta": config.get("rope_local_base_freq", 10_000.0)}
    return RopeConfig.from_params(sliding, 10_000.0), RopeConfig.from_params(full, 1e6)
