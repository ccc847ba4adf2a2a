"""The EAGLE-3 draft head and its loader for the official EAGLE-3 / SpecForge layout.

Checkpoint keys: ``fc.weight`` (fuses the concatenated target states), ``midlayer.*`` (one
decoder layer whose attention reads ``[input_layernorm(embed) ++ hidden_norm(fused)]``, the
order of the EAGLE repo, vLLM and SGLang), ``norm.weight``, ``lm_head.weight`` over the
draft vocabulary, ``d2t`` (draft id ``i`` is target id ``i + d2t[i]``), ``t2d``, and an
optional ``embed_tokens.weight`` (else the target's embedding is used).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from etspec.contract import FORMAT_VERSION, DraftMetadata, TargetMetadata, default_eagle3_layers
from etspec.errors import CheckpointError, UnsupportedModelError
from etspec.models.checkpoint import load_state_dict, read_config
from etspec.models.layers import MLP, Attention, RMSNorm, kv_cache_bytes
from etspec.models.rope import RopeConfig, rope_tables
from etspec.models.validation import check_shape


@dataclass(frozen=True)
class Eagle3Config:
    vocab_size: int
    draft_vocab_size: int
    hidden_size: int
    target_hidden_size: int
    intermediate_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope: RopeConfig
    attention_bias: bool = False
    aux_layer_ids: tuple[int, ...] | None = None
    num_aux: int = 3

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> Eagle3Config:
        archs = config.get("architectures") or []
        if archs and not any("eagle3" in a.lower() for a in archs):
            raise UnsupportedModelError(
                f"draft architectures {archs} are not EAGLE-3 (expected e.g. "
                "'LlamaForCausalLMEagle3')"
            )
        if int(config.get("num_hidden_layers", 1)) != 1:
            raise UnsupportedModelError(
                f"num_hidden_layers={config['num_hidden_layers']}: only single-layer EAGLE-3 "
                "drafts are supported"
            )
        hidden = int(config["hidden_size"])
        heads = int(config["num_attention_heads"])
        eagle = config.get("eagle_config") or {}
        ids = eagle.get("eagle_aux_hidden_state_layer_ids")
        vocab = int(config["vocab_size"])
        return cls(
            vocab_size=vocab,
            draft_vocab_size=int(config.get("draft_vocab_size") or vocab),
            hidden_size=hidden,
            target_hidden_size=int(config.get("target_hidden_size") or hidden),
            intermediate_size=int(config["intermediate_size"]),
            num_heads=heads,
            num_kv_heads=int(config.get("num_key_value_heads") or heads),
            head_dim=int(config.get("head_dim") or hidden // heads),
            rms_norm_eps=float(config.get("rms_norm_eps", 1e-6)),
            rope=RopeConfig.from_hf(config),
            attention_bias=bool(config.get("attention_bias", False)),
            aux_layer_ids=tuple(int(i) for i in ids) if ids else None,
            num_aux=len(ids) if ids else 3,
        )


class Eagle3Layer(nn.Module):
    def __init__(self, cfg: Eagle3Config, cache_size: int, max_context: int) -> None:
        super().__init__()
        h = cfg.hidden_size
        self.input_layernorm = RMSNorm(h, cfg.rms_norm_eps)
        self.hidden_norm = RMSNorm(h, cfg.rms_norm_eps)
        self.self_attn = Attention(
            2 * h,
            h,
            cfg.num_heads,
            cfg.num_kv_heads,
            cfg.head_dim,
            cache_size,
            max_context,
            qkv_bias=cfg.attention_bias,
            o_bias=cfg.attention_bias,
        )
        self.post_attention_layernorm = RMSNorm(h, cfg.rms_norm_eps)
        self.mlp = MLP(h, cfg.intermediate_size)


class Eagle3Draft(nn.Module):
    """EAGLE-3 head with its own static KV cache (``cache_size`` slots, explicit writes)."""

    # Linears no quantization recipe touches. ``fc`` reads the target's raw residual states,
    # where a few channels reach ~10^4 beside ones near 1 (Gemma 3 270M): int8 activations
    # with one scale per row round the small ones to zero. fp32 costs Gemma 3 270M's draft
    # 3.7 MB more than int8 (1.2M weights).
    FULL_PRECISION = ("fc",)

    def __init__(self, cfg: Eagle3Config, max_context: int, scratch: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.max_context = max_context
        self.cache_size = max_context + scratch
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.fc = nn.Linear(cfg.num_aux * cfg.target_hidden_size, cfg.hidden_size, bias=False)
        self.midlayer = Eagle3Layer(cfg, self.cache_size, max_context)
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.draft_vocab_size, bias=False)
        self.register_buffer("d2t", torch.zeros(cfg.draft_vocab_size, dtype=torch.long))
        self.register_buffer("t2d", torch.ones(cfg.vocab_size, dtype=torch.bool))
        cos, sin = rope_tables(cfg.rope, cfg.head_dim, self.cache_size)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    @property
    def target_hidden_width(self) -> int:
        return self.cfg.num_aux * self.cfg.target_hidden_size

    def fuse(self, target_hidden: torch.Tensor) -> torch.Tensor:
        """[Q, T*Ht] concatenated target states -> [Q, H] draft input state."""
        return self.fc(target_hidden)

    def body(
        self,
        tokens: torch.Tensor,
        hidden: torch.Tensor,
        positions: torch.Tensor,
        slots: torch.Tensor,
        mask: torch.Tensor,
    ) -> torch.Tensor:
        """One draft step for Q rows; returns the pre-norm state fed to the next step."""
        layer = self.midlayer
        cos = self.rope_cos[positions]
        sin = self.rope_sin[positions]
        x = torch.cat(
            (layer.input_layernorm(self.embed_tokens(tokens)), layer.hidden_norm(hidden)), -1
        )
        h = hidden + layer.self_attn(x, cos, sin, slots, mask)
        return h + layer.mlp(layer.post_attention_layernorm(h))

    def logits(self, out: torch.Tensor) -> torch.Tensor:
        """Draft-vocabulary logits [Q, Vd] of a step's output state."""
        return self.lm_head(self.norm(out))

    def to_target_ids(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return draft_ids + self.d2t[draft_ids]

    def caches(self) -> list[nn.Module]:
        return [self.midlayer.self_attn.cache]

    def metadata(
        self, target: TargetMetadata, *, step_width: int, dtype: str, backend: str
    ) -> DraftMetadata:
        """The draft artifact metadata for this model paired with ``target``."""
        cfg = self.cfg
        # A draft config without explicit aux ids means the EAGLE-3 default taps of its target.
        layers = cfg.aux_layer_ids or default_eagle3_layers(target.num_layers)
        return DraftMetadata(
            format_version=FORMAT_VERSION,
            draft_method="eagle3",
            draft_vocab_size=cfg.draft_vocab_size,
            hidden_size=cfg.hidden_size,
            max_context=target.max_context,
            cache_size=self.cache_size,
            prefill_chunk=target.prefill_chunk,
            extend_width=target.verify_width,
            extend_widths=target.verify_widths,  # one verify's accepted rows fit one extend
            step_width=step_width,
            target_vocab_size=cfg.vocab_size,
            target_hidden_size=cfg.target_hidden_size,
            hidden_state_point="layer_input",
            hidden_state_layers=tuple(layers),
            target_tokenizer_sha256=target.tokenizer_sha256,
            kv_cache_bytes=kv_cache_bytes(self.caches()),
            dtype=dtype,
            backend=backend,
        )

    @classmethod
    def from_checkpoint(
        cls,
        path: str | Path,
        max_context: int,
        scratch: int,
        target_embedding: torch.Tensor | None = None,
    ) -> Eagle3Draft:
        cfg = Eagle3Config.from_hf(read_config(path))
        model = cls(cfg, max_context, scratch)
        state = {
            (k[len("model.") :] if k.startswith("model.") else k): v
            for k, v in load_state_dict(path).items()
        }
        if "embed_tokens.weight" not in state:
            if target_embedding is None:
                raise CheckpointError(
                    f"{path}: draft has no embed_tokens.weight; pass the target checkpoint "
                    "(--target-checkpoint) so its embedding can be used"
                )
            state["embed_tokens.weight"] = target_embedding
        if "d2t" not in state:
            if cfg.draft_vocab_size != cfg.vocab_size:
                raise CheckpointError(f"{path}: draft vocabulary is reduced but d2t is missing")
            state["d2t"] = torch.zeros(cfg.draft_vocab_size, dtype=torch.long)
        state.setdefault("t2d", torch.ones(cfg.vocab_size, dtype=torch.bool))
        expected = set(model.state_dict())
        missing = sorted(expected - state.keys())
        if missing:
            raise CheckpointError(
                f"{path}: not an EAGLE-3 checkpoint: {len(missing)} weights missing, "
                f"e.g. {missing[0]!r}"
            )
        with torch.no_grad():
            for name, tensor in model.state_dict().items():
                src = state[name]
                check_shape(name, src.shape, tensor.shape, path)
                tensor.copy_(src.to(tensor.dtype))
        return model.eval()
