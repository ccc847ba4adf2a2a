"""What every exportable target model provides.

A target is a decoder over static KV caches whose ``body`` takes every piece of step state
explicitly (tokens, RoPE positions, cache slots, additive mask over all slots); the method
wrappers in ``methods.py`` are written against this base only, so a new family is a new
subclass plus one line in ``families.py``'s registry (which imports the families; this
module imports none of them).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

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
from etspec.models.layers import kv_cache_bytes
from etspec.models.validation import check_shape


class TargetModel(nn.Module):
    """Base of the exportable targets: static cache geometry, hidden-state taps, metadata.

    ``cache_size = max_context + scratch``: slots ``[0, max_context)`` hold committed
    positions (slot == position); the tail is scratch space for speculative entries
    (scratch-commit KV) and for padded rows, which therefore never touch a committed slot.
    """

    cfg: Any  # the family's config dataclass (model_type, vocab_size, hidden_size, ...)
    embed_tokens: nn.Embedding
    #: Set by an export that keeps a tied lm_head out of the XNNPACK delegate (``project``).
    head_reads_table: bool = False
    #: The family was trained with <bos> in front of every sequence and writes garbage
    #: without it (Gemma): export refuses a tokenizer that does not add it.
    requires_bos: bool = False

    def __init__(
        self, num_layers: int, max_context: int, scratch: int, hidden_spec: HiddenStateSpec | None
    ) -> None:
        super().__init__()
        self.max_context = max_context
        self.cache_size = max_context + scratch
        self.hidden_spec = hidden_spec or HiddenStateSpec(
            "layer_input", default_eagle3_layers(num_layers)
        )
        self.hidden_spec.check(num_layers)

    @property
    def hidden_width(self) -> int:
        return self.cfg.hidden_size * len(self.hidden_spec.layers)

    @property
    def layer_types(self) -> tuple[str, ...]:
        """``full`` or ``sliding`` per decoder layer."""
        return ("full",) * self.cfg.num_layers

    @property
    def sliding_window(self) -> int:
        """Keys a sliding layer sees (its own included); 0 when there are none."""
        return 0

    def body(
        self,
        tokens: torch.Tensor,
        positions: torch.Tensor,
        slots: torch.Tensor,
        mask: torch.Tensor,
        band: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run all layers; returns (final normed state [Q, H], tapped states [Q, T*H]).

        ``mask`` [Q, W] is the full-attention mask (``layers.column_slots``). ``band`` [Wb]
        lists the slots sliding layers attend (``layers.band_mask``); a model with sliding
        layers takes it in every attending method, one without ignores it. Without it,
        sliding layers narrow ``mask`` by their window over all its columns.
        """
        raise NotImplementedError

    def hidden_output(self, taps: dict[int, torch.Tensor], normed: torch.Tensor) -> torch.Tensor:
        """The ``hidden`` output of every method: the tapped states of ``hidden_spec``,
        concatenated in its order (``taps[i]``: input of layer i), or the normed final state."""
        if self.hidden_spec.point == "final_norm":
            return normed
        return torch.cat([taps[i] for i in self.hidden_spec.layers], dim=-1)

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """Output logits of final normed states ``h`` [Q, H]."""
        return self.project(h)

    def project(self, h: torch.Tensor) -> torch.Tensor:
        """``lm_head(h)``; with ``head_reads_table``, as ``mm(W, h^T)^T``: the matrix is
        read as stored, so an lm_head kept out of the XNNPACK delegate shares the tied
        embedding's table instead of a transposed copy of it (``aten.linear`` outside a
        delegate decomposes into a transpose of the weight)."""
        if self.head_reads_table:
            return torch.mm(self.lm_head.weight, h.t()).t()
        return self.lm_head(h)

    def caches(self) -> list[nn.Module]:
        """Every KV cache of the model, each once."""
        raise NotImplementedError

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
            layer_types=",".join(self.layer_types),
            sliding_window=self.sliding_window,
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
            assistant="",
            assistant_step_width=0,
        )

    def check_shapes(self, verify_width: int) -> None:
        """Refuse compiled shapes the model cannot serve exactly (default: any will do)."""

    @classmethod
    def verify_width_limit(cls, config: dict[str, Any]) -> int | None:
        """The widest verify a model of ``config`` serves exactly (None: any); the default
        widths are cut to it, an explicit wider one is refused by ``check_shapes``."""
        return None


def load_weights(
    model: nn.Module,
    state: dict[str, torch.Tensor],
    path: str | Path,
    *,
    tied: bool,
    ignore: Callable[[str], bool] = lambda name: False,
) -> None:
    """Copy an HF causal-LM ``state`` into ``model``, naming the first missing/extra weight.

    HF nests the decoder under ``model.``; ``lm_head`` sits at top level and is dropped when
    the embeddings are ``tied``. ``ignore`` names checkpoint weights this model never uses.
    """
    renamed = {(k[len("model.") :] if k.startswith("model.") else k): v for k, v in state.items()}
    if tied:
        renamed.pop("lm_head.weight", None)
    expected = {k for k in model.state_dict() if not (tied and k == "lm_head.weight")}
    missing = sorted(expected - renamed.keys())
    if missing:
        raise CheckpointError(
            f"{path}: checkpoint lacks {len(missing)} weights the config needs, e.g. {missing[0]!r}"
        )
    unexpected = sorted(
        k for k in renamed.keys() - expected if "rotary_emb" not in k and not ignore(k)
    )
    if unexpected:
        raise CheckpointError(
            f"{path}: checkpoint has weights this config does not use, e.g. {unexpected[0]!r}"
        )
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if name in renamed:
                check_shape(name, renamed[name].shape, tensor.shape, path)
                tensor.copy_(renamed[name].to(tensor.dtype))
