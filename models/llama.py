"""Exportable Llama-family target (Llama 2/3, Mistral, Qwen2/2.5) with hidden-state taps."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from etspec.contract import (
    FORMAT_VERSION,
    KV_STRATEGIES,
    HiddenStateSpec,
    TargetMetadata,
    default_eagle3_layers,
)
from etspec.errors import CheckpointError
from etspec.models.checkpoint import load_state_dict, read_config
from etspec.models.config import DecoderConfig
from etspec.models.layers import MLP, Attention, RMSNorm, kv_cache_bytes
from etspec.models.rope import rope_tables


class DecoderLayer(nn.Module):
    def __init__(self, cfg: DecoderConfig, cache_size: int) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(
            cfg.hidden_size,
            cfg.hidden_size,
            cfg.num_heads,
            cfg.num_kv_heads,
            cfg.head_dim,
            cache_size,
            qkv_bias=cfg.qkv_bias,
            o_bias=cfg.o_bias,
        )
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg.hidden_size, cfg.intermediate_size, bias=cfg.mlp_bias)

    def forward(self, x, cos, sin, slots, mask):  # type: ignore[no-untyped-def]
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, slots, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaTarget(nn.Module):
    """The target decoder over a static KV cache of ``cache_size`` slots.

    ``cache_size = max_context + scratch``: slots ``[0, max_context)`` hold committed
    positions (slot == position); the tail is scratch space for speculative entries
    (scratch-commit KV) and for padded rows, which therefore never touch a committed slot.
    """

    def __init__(
        self,
        cfg: DecoderConfig,
        max_context: int,
        scratch: int,
        hidden_spec: HiddenStateSpec | None = None,
    ) -> None:
        super().__init__()
        self.cfg = cfg
        self.max_context = max_context
        self.cache_size = max_context + scratch
        self.hidden_spec = hidden_spec or HiddenStateSpec(
            "layer_input", default_eagle3_layers(cfg.num_layers)
        )
        self.hidden_spec.check(cfg.num_layers)
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(
            DecoderLayer(cfg, self.cache_size) for _ in range(cfg.num_layers)
        )
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        cos, sin = rope_tables(cfg.rope, cfg.head_dim, self.cache_size)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    @property
    def hidden_width(self) -> int:
        return self.cfg.hidden_size * len(self.hidden_spec.layers)

    def body(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor,
        slots: torch.Tensor,
        mask: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run all layers; returns (final normed state [Q, H], tapped states [Q, T*H])."""
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
        hidden = torch.cat([taps[i] for i in self.hidden_spec.layers], dim=-1)
        return self.norm(x), hidden

    def caches(self) -> list[nn.Module]:
        return [layer.self_attn.cache for layer in self.layers]

    def metadata(
        self,
        *,
        prefill_chunk: int,
        verify_widths: tuple[int, ...],
        dtype: str,
        backend: str,
        tokenizer_sha256: str,
    ) -> TargetMetadata:
        """The artifact metadata of this model compiled with the given static shapes."""
        cfg = self.cfg
        return TargetMetadata(
            format_version=FORMAT_VERSION,
            model_family=cfg.model_type,
            vocab_size=cfg.vocab_size,
            hidden_size=cfg.hidden_size,
            num_layers=cfg.num_layers,
            max_context=self.max_context,
            cache_size=self.cache_size,
            prefill_chunk=prefill_chunk,
            verify_width=max(verify_widths),
            verify_widths=tuple(sorted(set(verify_widths))),
            hidden_state_point=self.hidden_spec.point,
            hidden_state_layers=self.hidden_spec.layers,
            bos_token_id=-1 if cfg.bos_token_id is None else int(cfg.bos_token_id),
            eos_token_ids=cfg.eos_token_ids,
            kv_strategies=",".join(KV_STRATEGIES),
            kv_cache_bytes=kv_cache_bytes(self.caches()),
            dtype=dtype,
            backend=backend,
            tokenizer_sha256=tokenizer_sha256,
        )

    @classmethod
    def from_checkpoint(
        cls,
        path: str | Path,
        max_context: int,
        scratch: int,
        hidden_spec: HiddenStateSpec | None = None,
    ) -> LlamaTarget:
        cfg = DecoderConfig.from_hf(read_config(path))
        model = cls(cfg, max_context, scratch, hidden_spec)
        state = load_state_dict(path)
        # HF causal-LM checkpoints nest the decoder under "model."; lm_head sits at top level.
        renamed = {
            (k[len("model.") :] if k.startswith("model.") else k): v for k, v in state.items()
        }
        if cfg.tie_word_embeddings:
            renamed.pop("lm_head.weight", None)
        expected = {
            k for k in model.state_dict() if not (cfg.tie_word_embeddings and k == "lm_head.weight")
        }
        missing = sorted(expected - renamed.keys())
        if missing:
            raise CheckpointError(
                f"{path}: checkpoint lacks {len(missing)} weights the config needs, "
                f"e.g. {missing[0]!r}"
            )
        unexpected = sorted(k for k in renamed.keys() - expected if "rotary_emb" not in k)
        if unexpected:
            raise CheckpointError(
                f"{path}: checkpoint has weights this config does not use, e.g. {unexpected[0]!r}"
            )
        with torch.no_grad():
            for name, tensor in model.state_dict().items():
                if name in renamed:
                    tensor.copy_(renamed[name].to(tensor.dtype))
        return model.eval()
