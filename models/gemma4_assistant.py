"""Gemma 4's assistant drafter (``gemma4_assistant``): a small Gemma 4 stack with no KV of its
own that attends to its target's caches.

One draft step at committed length ``c`` (the next token ``t`` is emitted, not yet in the
target's KV) is ``x = pre_projection([target_embedding(t) ; state])`` at RoPE position
``c``; each assistant layer attends, with its own queries, to the target's last
full-attention or last sliding-attention cache (whichever its type is) over the committed
slots; the output is the logits of the next token and ``post_projection`` of the final
state, which is the ``state`` of the following step. The first step's state is the target's
final normed state at position ``c - 1``. Every step of a proposal sits at the same position
and reads the same committed KV, so a tree level is one call of independent rows.

``use_ordered_embeddings`` heads score only the tokens of the ``centroid_intermediate_top_k``
best centroids (the vocabulary is partitioned by ``token_ordering``); every other token gets
the row's smallest scored logit minus one, as transformers does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from etspec.contract import MASK_MIN, HiddenStateSpec
from etspec.errors import UnsupportedModelError
from etspec.models.checkpoint import load_state_dict, read_config
from etspec.models.gemma import GemmaLayerModule, GemmaTarget, LayerTypeRope
from etspec.models.gemma_config import GemmaConfig
from etspec.models.layers import RMSNorm
from etspec.models.target import load_weights


@dataclass(frozen=True)
class AssistantConfig:
    text: GemmaConfig
    backbone_hidden_size: int
    ordered_embeddings: bool
    num_centroids: int
    centroid_top_k: int

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> AssistantConfig:
        if config.get("model_type") != "gemma4_assistant":
            raise UnsupportedModelError(
                f"model_type {config.get('model_type')!r} is not a Gemma 4 assistant "
                "('gemma4_assistant')"
            )
        text = dict(config.get("text_config") or {})
        text["model_type"] = "gemma4_text"
        for key in ("hidden_size_per_layer_input", "enable_moe_block", "use_double_wide_mlp"):
            if text.get(key):
                raise UnsupportedModelError(
                    f"text_config.{key}={text[key]!r}: a Gemma 4 assistant has none"
                )
        ordered = bool(config.get("use_ordered_embeddings", False))
        vocab = int(text["vocab_size"])
        centroids = int(config.get("num_centroids", 2048))
        if ordered and vocab % centroids:
            raise UnsupportedModelError(
                f"num_centroids={centroids} does not divide the vocabulary of {vocab}"
            )
        return cls(
            text=GemmaConfig.from_hf(text, external_kv=True),
            backbone_hidden_size=int(config.get("backbone_hidden_size", 1536)),
            ordered_embeddings=ordered,
            num_centroids=centroids,
            centroid_top_k=int(config.get("centroid_intermediate_top_k", 32)),
        )


class Gemma4Assistant(nn.Module):
    """The assistant's layers and heads; ``step`` runs one drafting call."""

    def __init__(self, cfg: AssistantConfig, cache_size: int) -> None:
        super().__init__()
        self.cfg = cfg
        t = cfg.text
        h, hb = t.hidden_size, cfg.backbone_hidden_size
        self.embed_tokens = nn.Embedding(t.vocab_size, h)  # the tied output head's weights
        self.layers = nn.ModuleList(
            GemmaLayerModule(t, i, cache_size, cache_size) for i in range(t.num_layers)
        )
        self.norm = RMSNorm(h, t.rms_norm_eps)
        self.pre_projection = nn.Linear(2 * hb, h, bias=False)
        self.post_projection = nn.Linear(h, hb, bias=False)
        if cfg.ordered_embeddings:
            self.centroids = nn.Linear(h, cfg.num_centroids, bias=False)
            self.register_buffer("token_ordering", torch.zeros(t.vocab_size, dtype=torch.long))
        self.rope = LayerTypeRope(t, cache_size)

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        if not self.cfg.ordered_embeddings:
            return h @ self.embed_tokens.weight.T
        cfg, vocab = self.cfg, self.cfg.text.vocab_size
        per = vocab // cfg.num_centroids
        top = torch.topk(self.centroids(h), cfg.centroid_top_k, dim=-1).indices  # [W, k]
        ids = self.token_ordering.view(cfg.num_centroids, per)[top].reshape(h.shape[0], -1)
        rows = self.embed_tokens.weight[ids]  # [W, k * per, H]
        scored = torch.bmm(rows, h[:, :, None])[:, :, 0]
        floor = scored.min(dim=-1, keepdim=True).values - 1.0
        out = floor.expand(h.shape[0], vocab).clone()
        return out.scatter(1, ids, scored)

    def step(
        self,
        target: GemmaTarget,
        tokens: torch.Tensor,
        states: torch.Tensor,
        position: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(tokens[W], states[W, Hb], position[1]) -> (logits[W, V], states_out[W, Hb])``
        over ``target``'s committed caches (slots below ``position``)."""
        embed = target.embed_tokens(tokens) * target.embed_scale
        x = self.pre_projection(torch.cat((embed, states), dim=-1))
        slots = torch.arange(target.cache_size, device=position.device)[None, :]
        zero, fill = torch.zeros((), dtype=torch.float32), torch.full((), MASK_MIN)
        full = torch.where(slots < position[:, None], zero, fill)
        # The assistant's sliding layers see window + 1 keys (transformers builds their mask
        # as a bidirectional window over the flipped KV axis); checked against its forward.
        window = target.cfg.sliding_window
        sliding = torch.where(
            (slots < position[:, None]) & (slots >= position[:, None] - window - 1), zero, fill
        )
        sources = target.kv_sources()
        for layer in self.layers:
            cos, sin = self.rope.at(layer.sliding, layer.self_attn.head_dim, position)
            cache = target.layers[sources["sliding" if layer.sliding else "full"]].self_attn.cache
            mask = sliding if layer.sliding else full
            x = layer(x, cos, sin, None, mask, cache, None)
        h = self.norm(x)
        return self.logits(h), self.post_projection(h)

    @classmethod
    def from_checkpoint(cls, path: str | Path, target: nn.Module) -> Gemma4Assistant:
        """The assistant at ``path``, checked against the ``target`` whose caches it reads."""
        if not isinstance(target, GemmaTarget) or target.cfg.model_type != "gemma4_text":
            raise UnsupportedModelError(
                "a Gemma 4 assistant drafts for a gemma4_text target; this target is "
                f"{getattr(getattr(target, 'cfg', None), 'model_type', type(target).__name__)!r}"
            )
        cfg = AssistantConfig.from_hf(read_config(path))
        check_assistant_pair(cfg, target)
        model = cls(cfg, target.cache_size)
        state = load_state_dict(path)
        renamed = {}
        for k, v in state.items():
            k = k.removeprefix("model.").replace("masked_embedding.", "")
            renamed[k] = v
        renamed.pop("lm_head.weight", None)  # tied to embed_tokens
        load_weights(model, renamed, path, tied=False)
        return model.eval()


def assistant_hidden_spec(num_layers: int) -> HiddenStateSpec:
    """What a target serving an assistant exports as ``hidden``: its final normed state."""
    return HiddenStateSpec("final_norm", (num_layers,))


def check_assistant_pair(cfg: AssistantConfig, target: GemmaTarget) -> None:
    """Refuse an assistant whose inputs or attention do not fit ``target``."""
    t = target.cfg
    if cfg.backbone_hidden_size != t.hidden_size:
        raise UnsupportedModelError(
            f"the assistant expects a target of hidden size {cfg.backbone_hidden_size}, the "
            f"target has {t.hidden_size}; use the assistant trained for this target"
        )
    if cfg.text.vocab_size != t.vocab_size:
        raise UnsupportedModelError(
            f"the assistant predicts {cfg.text.vocab_size} tokens, the target has "
            f"{t.vocab_size}; use the assistant trained for this target"
        )
    sources = target.kv_sources()
    for i, layer in enumerate(cfg.text.layers):
        src = t.layers[sources[layer.type_name]]
        if (layer.head_dim, layer.num_kv_heads) != (src.head_dim, src.num_kv_heads):
            raise UnsupportedModelError(
                f"assistant layer {i} ({layer.type_name}) expects KV of head_dim "
                f"{layer.head_dim} x {layer.num_kv_heads} heads, the target's has "
                f"{src.head_dim} x {src.num_kv_heads}"
            )
