"""The Llama family's decoder configuration, read from a Hugging Face ``config.json``
(Gemma's is ``gemma_config.py``).

One dataclass covers the Llama family (Llama 2/3, Mistral, Qwen2/2.5): the differences are
attention biases, RoPE scaling, tied embeddings and an optional sliding window.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from etspec.errors import UnsupportedModelError
from etspec.models.checkpoint import eos_token_ids
from etspec.models.rope import RopeConfig

# The model_types this config reads (models/families.py registers them with LlamaTarget).
LLAMA_MODEL_TYPES = ("llama", "mistral", "qwen2")


@dataclass(frozen=True)
class DecoderConfig:
    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope: RopeConfig = field(default_factory=RopeConfig)
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    tie_word_embeddings: bool = False
    sliding_window: int | None = None
    max_position_embeddings: int = 4096
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> DecoderConfig:
        model_type = config.get("model_type")
        if model_type not in LLAMA_MODEL_TYPES:
            raise UnsupportedModelError(
                f"model_type {model_type!r} is not supported; supported: "
                f"{', '.join(LLAMA_MODEL_TYPES)}"
            )
        act = config.get("hidden_act", "silu")
        if act != "silu":
            raise UnsupportedModelError(f"hidden_act {act!r} is not supported (only 'silu')")
        hidden = int(config["hidden_size"])
        heads = int(config["num_attention_heads"])
        head_dim = config.get("head_dim") or hidden // heads
        if model_type == "qwen2":
            # Qwen2 biases q/k/v only; its "attention_bias" key does not exist.
            qkv_bias, o_bias = True, False
        else:
            qkv_bias = o_bias = bool(config.get("attention_bias", False))
        window = config.get("sliding_window")
        if model_type == "qwen2" and not config.get("use_sliding_window", False):
            window = None
        return cls(
            model_type=model_type,
            vocab_size=int(config["vocab_size"]),
            hidden_size=hidden,
            intermediate_size=int(config["intermediate_size"]),
            num_layers=int(config["num_hidden_layers"]),
            num_heads=heads,
            num_kv_heads=int(config.get("num_key_value_heads") or heads),
            head_dim=int(head_dim),
            rms_norm_eps=float(config.get("rms_norm_eps", 1e-6)),
            rope=RopeConfig.from_hf(config),
            qkv_bias=qkv_bias,
            o_bias=o_bias,
            mlp_bias=bool(config.get("mlp_bias", False)),
            tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
            sliding_window=int(window) if window else None,
            max_position_embeddings=int(config.get("max_position_embeddings", 4096)),
            bos_token_id=config.get("bos_token_id"),
            eos_token_ids=eos_token_ids(config),
        )

    def check_context(self, max_context: int) -> None:
        """Refuse a context the model cannot serve exactly."""
        if self.sliding_window is not None and self.sliding_window < max_context:
            raise UnsupportedModelError(
                f"sliding_window={self.sliding_window} is smaller than --max-seq {max_context}; "
                f"export with --max-seq {self.sliding_window} or less"
            )
