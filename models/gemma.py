"""Exportable Gemma 3 / Gemma 4 text targets with hidden-state taps.

Sliding-window layers keep a full-length cache like full layers (slot == position) and
attend only a band of it: the slots a method's ``band`` input lists (the committed run
their window can reach, then scratch), under the full-attention mask's columns for those
slots narrowed by the window (``layers.band_mask``). Verify, commit and rollback therefore
work exactly as for Llama, with no ring buffer whose overwritten entries a rejected draft
could not restore; the price is ``max_context`` instead of ``sliding_window`` entries per
sliding layer in memory (``kv_cache_bytes`` in the metadata states it), not in time.
KV-shared layers (Gemma 4) own no cache: they attend over their source layer's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from etspec.contract import MASK_MIN, HiddenStateSpec
from etspec.models.checkpoint import load_state_dict, read_config
from etspec.models.gemma_config import GemmaConfig, GemmaLayer
from etspec.models.layers import (
    MLP,
    KVCache,
    RMSNorm,
    attend,
    band_mask,
    column_slots,
    gelu_tanh,
    window_mask,
)
from etspec.models.rope import apply_rope, rope_tables
from etspec.models.target import TargetModel, load_weights


class LayerTypeRope(nn.Module):
    """RoPE tables per (layer type, head size): Gemma's sliding and full layers each have
    their own schedule, and Gemma 4's full layers their own head size."""

    def __init__(self, cfg: GemmaConfig, n_positions: int) -> None:
        super().__init__()
        for kind, rope in (("sliding", cfg.rope_sliding), ("full", cfg.rope_full)):
            for d in {layer.head_dim for layer in cfg.layers if layer.type_name == kind}:
                cos, sin = rope_tables(rope, d, n_positions)
                self.register_buffer(f"cos_{kind}_{d}", cos, persistent=False)
                self.register_buffer(f"sin_{kind}_{d}", sin, persistent=False)

    def at(
        self, sliding: bool, head_dim: int, positions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [Q, head_dim] of ``positions`` for a layer of that type and head size."""
        key = f"{'sliding' if sliding else 'full'}_{head_dim}"
        return getattr(self, f"cos_{key}")[positions], getattr(self, f"sin_{key}")[positions]


class GemmaAttention(nn.Module):
    """Attention with q/k (and Gemma 4's weightless v) norms; a KV-shared layer has no
    key/value projections and no cache of its own."""

    def __init__(
        self, cfg: GemmaConfig, spec: GemmaLayer, owns_kv: bool, cache_size: int, max_context: int
    ) -> None:
        super().__init__()
        self.num_heads, self.num_kv_heads = cfg.num_heads, spec.num_kv_heads
        self.head_dim = spec.head_dim
        self.scale = cfg.attn_scale
        d, eps = spec.head_dim, cfg.rms_norm_eps
        self.q_proj = nn.Linear(cfg.hidden_size, cfg.num_heads * d, bias=False)
        self.q_norm = RMSNorm(d, eps)
        self.o_proj = nn.Linear(cfg.num_heads * d, cfg.hidden_size, bias=False)
        self.k_proj: nn.Linear | None = None
        self.v_proj: nn.Linear | None = None
        self.cache: KVCache | None = None
        if owns_kv:
            self.k_proj = nn.Linear(cfg.hidden_size, spec.num_kv_heads * d, bias=False)
            self.k_norm = RMSNorm(d, eps)
            if not spec.k_eq_v:
                self.v_proj = nn.Linear(cfg.hidden_size, spec.num_kv_heads * d, bias=False)
            # Gemma 4 normalizes values without a scale; Gemma 3 leaves them as projected.
            self.v_norm = RMSNorm(d, eps, scale=False) if cfg.layer_scalar else None
            self.cache = KVCache(spec.num_kv_heads, cache_size, d, max_context)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        slots: torch.Tensor,
        mask: torch.Tensor,
        cache: KVCache,
        band: torch.Tensor | None = None,
    ) -> torch.Tensor:
        q_len, d = x.shape[0], self.head_dim
        q = self.q_norm(self.q_proj(x).view(q_len, self.num_heads, d)).transpose(0, 1)
        q = apply_rope(q, cos, sin)
        if self.k_proj is not None:
            k_raw = self.k_proj(x).view(q_len, self.num_kv_heads, d)
            v = k_raw if self.v_proj is None else self.v_proj(x).view(q_len, self.num_kv_heads, d)
            if self.v_norm is not None:
                v = self.v_norm(v)
            k = apply_rope(self.k_norm(k_raw).transpose(0, 1), cos, sin)
            cache.write(slots, k, v.transpose(0, 1))
        return self.o_proj(attend(q, cache, mask, self.scale, band))


class GemmaLayerModule(nn.Module):
    """Sandwich-normed decoder layer; Gemma 4 adds the per-layer input and a layer scalar."""

    def __init__(self, cfg: GemmaConfig, index: int, cache_size: int, max_context: int) -> None:
        super().__init__()
        spec = cfg.layers[index]
        h, eps = cfg.hidden_size, cfg.rms_norm_eps
        self.sliding = spec.sliding
        self.kv_source = spec.kv_source
        self.self_attn = GemmaAttention(cfg, spec, spec.kv_source == index, cache_size, max_context)
        self.mlp = MLP(h, spec.intermediate_size, gelu=True)
        self.input_layernorm = RMSNorm(h, eps)
        self.post_attention_layernorm = RMSNorm(h, eps)
        self.pre_feedforward_layernorm = RMSNorm(h, eps)
        self.post_feedforward_layernorm = RMSNorm(h, eps)
        self.per_layer = cfg.per_layer_input_size > 0
        if self.per_layer:
            p = cfg.per_layer_input_size
            self.per_layer_input_gate = nn.Linear(h, p, bias=False)
            self.per_layer_projection = nn.Linear(p, h, bias=False)
            self.post_per_layer_input_norm = RMSNorm(h, eps)
        if cfg.layer_scalar:
            self.register_buffer("layer_scalar", torch.ones(1))
        else:
            self.layer_scalar = None

    def forward(  # type: ignore[no-untyped-def]
        self, x, cos, sin, slots, mask, cache, per_layer_input, band=None
    ):
        attn = self.self_attn(self.input_layernorm(x), cos, sin, slots, mask, cache, band)
        x = x + self.post_attention_layernorm(attn)
        x = x + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(x)))
        if self.per_layer:
            gate = gelu_tanh(self.per_layer_input_gate(x)) * per_layer_input
            x = x + self.post_per_layer_input_norm(self.per_layer_projection(gate))
        if self.layer_scalar is not None:
            x = x * self.layer_scalar
        return x


class GemmaTarget(TargetModel):
    """Gemma 3 / Gemma 4 text decoder over static caches of ``cache_size`` slots."""

    requires_bos = True

    def __init__(
        self,
        cfg: GemmaConfig,
        max_context: int,
        scratch: int,
        hidden_spec: HiddenStateSpec | None = None,
    ) -> None:
        super().__init__(cfg.num_layers, max_context, scratch, hidden_spec)
        self.cfg = cfg
        h = cfg.hidden_size
        self.embed_tokens = nn.Embedding(cfg.vocab_size, h)
        # transformers multiplies by sqrt(H) rounded to the weight dtype (fp32 here).
        self.embed_scale = h**0.5
        self.layers = nn.ModuleList(
            GemmaLayerModule(cfg, i, self.cache_size, max_context) for i in range(cfg.num_layers)
        )
        self.norm = RMSNorm(h, cfg.rms_norm_eps)
        self.lm_head = nn.Linear(h, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        p = cfg.per_layer_input_size
        if p:
            self.embed_tokens_per_layer = nn.Embedding(cfg.per_layer_vocab_size, cfg.num_layers * p)
            self.per_layer_model_projection = nn.Linear(h, cfg.num_layers * p, bias=False)
            self.per_layer_projection_norm = RMSNorm(p, cfg.rms_norm_eps)
        self.rope = LayerTypeRope(cfg, self.cache_size)
        # The last cache-owning layer of each type: what an assistant drafter reads.
        self._kv_sources = {
            layer.type_name: i for i, layer in enumerate(cfg.layers) if layer.kv_source == i
        }

    @property
    def layer_types(self) -> tuple[str, ...]:
        return self.cfg.layer_types

    @property
    def sliding_window(self) -> int:
        return self.cfg.sliding_window

    def kv_sources(self) -> dict[str, int]:
        """The last cache-owning layer of each type: what an assistant drafter reads."""
        return self._kv_sources

    def check_shapes(self, verify_width: int) -> None:
        self.cfg.check_verify_width(verify_width)

    @classmethod
    def verify_width_limit(cls, config: dict[str, Any]) -> int | None:
        return GemmaConfig.from_hf(config).sliding_window or None

    def per_layer_inputs(self, tokens: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Gemma 4's per-layer inputs [Q, L, P]: token identity plus a projection of ``x``."""
        cfg, q_len = self.cfg, tokens.shape[0]
        shape = (q_len, cfg.num_layers, cfg.per_layer_input_size)
        identity = self.embed_tokens_per_layer(tokens) * cfg.per_layer_input_size**0.5
        context = self.per_layer_model_projection(x) * cfg.hidden_size**-0.5
        context = self.per_layer_projection_norm(context.view(shape))
        return (context + identity.view(shape)) * 2.0**-0.5

    def body(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor,
        slots: torch.Tensor,
        mask: torch.Tensor,
        band: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.embed_tokens(tokens) * self.embed_scale
        per_layer = self.per_layer_inputs(tokens, x) if self.cfg.per_layer_input_size else None
        sliding_mask, window = mask, self.cfg.sliding_window
        if window and band is not None:
            sliding_mask = band_mask(mask, band, positions, window, self.max_context,
                                     self.cache_size, MASK_MIN)  # fmt: skip
        elif window:
            columns = column_slots(mask.shape[-1], self.max_context, self.cache_size)
            sliding_mask = mask + window_mask(positions, columns, window, MASK_MIN)
        tables: dict[tuple[bool, int], tuple[torch.Tensor, torch.Tensor]] = {}
        taps: dict[int, torch.Tensor] = {}
        wanted = set(self.hidden_spec.layers)
        for i, layer in enumerate(self.layers):
            if i in wanted:
                taps[i] = x
            key = (layer.sliding, layer.self_attn.head_dim)
            if key not in tables:  # gathered once per layer type, not per layer
                tables[key] = self.rope.at(*key, positions)
            cos, sin = tables[key]
            cache = self.layers[layer.kv_source].self_attn.cache
            x = layer(
                x,
                cos,
                sin,
                slots,
                sliding_mask if layer.sliding else mask,
                cache,
                None if per_layer is None else per_layer[:, i],
                band if layer.sliding else None,
            )
        taps[len(self.layers)] = x
        normed = self.norm(x)
        return normed, self.hidden_output(taps, normed)

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        logits = self.project(h)
        cap = self.cfg.final_logit_softcapping
        if cap is not None:
            logits = torch.tanh(logits / cap) * cap
        return logits

    def caches(self) -> list[nn.Module]:
        return [layer.self_attn.cache for layer in self.layers if layer.self_attn.cache is not None]

    @classmethod
    def from_checkpoint(
        cls,
        path: str | Path,
        max_context: int,
        scratch: int,
        hidden_spec: HiddenStateSpec | None = None,
    ) -> GemmaTarget:
        cfg = GemmaConfig.from_hf(read_config(path))
        model = cls(cfg, max_context, scratch, hidden_spec)
        state = load_state_dict(path)
        if cfg.norm_unit_offset:
            # Gemma 3 norms scale by (1 + w); folding the 1 in here lets every norm share one
            # kernel (the sum is what transformers computes in fp32 on every call).
            state = {k: (v.float() + 1.0 if _is_norm(k) else v) for k, v in state.items()}
        shared = {i for i, layer in enumerate(cfg.layers) if layer.kv_source != i}

        def unused(name: str) -> bool:
            # Hub checkpoints may still carry the k/v weights of KV-shared layers.
            parts = name.split(".")
            return (
                len(parts) > 3
                and parts[0] == "layers"
                and int(parts[1]) in shared
                and parts[3] in ("k_proj", "v_proj", "k_norm", "v_norm")
            )

        load_weights(model, state, path, tied=cfg.tie_word_embeddings, ignore=unused)
        return model.eval()


def _is_norm(name: str) -> bool:
    return name.endswith("norm.weight")
