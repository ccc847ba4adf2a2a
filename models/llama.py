"""Exportable Llama-family target (Llama 2/3, Mistral, Qwen2/2.5) with hidden-state taps."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from etspec.contract import HiddenStateSpec
from etspec.models.checkpoint import load_state_dict, read_config
from etspec.models.layers import MLP, Attention, RMSNorm
from etspec.models.llama_config import DecoderConfig
from etspec.models.rope import rope_tables
from etspec.models.target import TargetModel, load_weights


class DecoderLayer(nn.Module):
    def __init__(self, cfg: DecoderConfig, cache_size: int, max_context: int) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(
            cfg.hidden_size,
            cfg.hidden_size,
            cfg.num_heads,
            cfg.num_kv_heads,
            cfg.head_dim,
            cache_size,
            max_context,
            qkv_bias=cfg.qkv_bias,
            o_bias=cfg.o_bias,
        )
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg.hidden_size, cfg.intermediate_size, bias=cfg.mlp_bias)

    def forward(self, x, cos, sin, slots, mask):  # type: ignore[no-untyped-def]
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, slots, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaTarget(TargetModel):
    """The Llama-family target decoder over a static KV cache of ``cache_size`` slots."""

    def __init__(
        self,
        cfg: DecoderConfig,
        max_context: int,
        scratch: int,
        hidden_spec: HiddenStateSpec | None = None,
    ) -> None:
        super().__init__(cfg.num_layers, max_context, scratch, hidden_spec)
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(
            DecoderLayer(cfg, self.cache_size, max_context) for _ in range(cfg.num_layers)
        )
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        cos, sin = rope_tables(cfg.rope, cfg.head_dim, self.cache_size)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def body(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor,
        slots: torch.Tensor,
        mask: torch.Tensor,
        band: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.embed_tokens(tokens)
        cos = self.rope_cos[positions]
        sin = self.rope_sin[positions]
        taps: dict[int, torch.Tensor] = {}
        wanted = set(self.hidden_spec.layers)
        for i, layer in enumerate(self.layers):
            if i in wanted:
                taps[i] = x
            x = layer(x, cos, sin, slots, mask)
        taps[len(self.layers)] = x
        normed = self.norm(x)
        return normed, self.hidden_output(taps, normed)

    def caches(self) -> list[nn.Module]:
        return [layer.self_attn.cache for layer in self.layers]

    @classmethod
    def from_checkpoint(
        cls,
        path: str | Path,
        max_context: int,
        scratch: int,
        hidden_spec: HiddenStateSpec | None = None,
    ) -> LlamaTarget:
        cfg = DecoderConfig.from_hf(read_config(path))
        cfg.check_context(max_context)
        model = cls(cfg, max_context, scratch, hidden_spec)
        load_weights(model, load_state_dict(path), path, tied=cfg.tie_word_embeddings)
        return model.eval()
