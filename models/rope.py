"""Rotary position embeddings: frequency schedules of the supported ``rope_type`` values.

Tables are computed in float32 the way Hugging Face computes them, so that exported logits
match ``transformers`` to float32 round-off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from etspec.errors import UnsupportedModelError

SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3", "proportional")


@dataclass(frozen=True)
class RopeConfig:
    theta: float = 10000.0
    rope_type: str = "default"
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192
    partial_rotary_factor: float = 1.0  # "proportional": the rotated share of head_dim

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> RopeConfig:
        # transformers >= 5 writes "rope_parameters" (theta inside); older configs write
        # "rope_theta" and an optional "rope_scaling".
        params = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})
        return cls.from_params(params, float(config.get("rope_theta", 10000.0)))

    @classmethod
    def from_params(cls, params: dict[str, Any], default_theta: float) -> RopeConfig:
        """From one ``rope_parameters`` entry (Gemma keeps one per attention layer type)."""
        theta = float(params.get("rope_theta", default_theta))
        rope_type = params.get("rope_type", params.get("type", "default"))
        if rope_type not in SUPPORTED_ROPE_TYPES:
            raise UnsupportedModelError(
                f"rope_type {rope_type!r} is not supported; supported: "
                f"{', '.join(SUPPORTED_ROPE_TYPES)}"
            )
        return cls(
            theta=theta,
            rope_type=rope_type,
            factor=float(params.get("factor", 1.0)),
            low_freq_factor=float(params.get("low_freq_factor", 1.0)),
            high_freq_factor=float(params.get("high_freq_factor", 4.0)),
            original_max_position_embeddings=int(
                params.get("original_max_position_embeddings", 8192)
            ),
            partial_rotary_factor=float(params.get("partial_rotary_factor", 1.0)),
        )


def inv_freq(rope: RopeConfig, head_dim: int) -> torch.Tensor:
    base = 1.0 / (
        rope.theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim)
    )
    if rope.rope_type == "linear":
        return base / rope.factor
    if rope.rope_type == "proportional":
        # Gemma 4 full attention: only the first share of frequencies rotates; the rest get
        # frequency 0 (cos 1, sin 0), so the head keeps its full size with a no-op tail.
        rotated = int(rope.partial_rotary_factor * head_dim // 2)
        freqs = torch.zeros(head_dim // 2)
        freqs[:rotated] = 1.0 / (
            rope.theta ** (torch.arange(0, 2 * rotated, 2, dtype=torch.int64).float() / head_dim)
        )
        return freqs / rope.factor
    if rope.rope_type == "llama3":
        low_wavelen = rope.original_max_position_embeddings / rope.low_freq_factor
        high_wavelen = rope.original_max_position_embeddings / rope.high_freq_factor
        wavelen = 2 * math.pi / base
        scaled = torch.where(wavelen > low_wavelen, base / rope.factor, base)
        smooth = (rope.original_max_position_embeddings / wavelen - rope.low_freq_factor) / (
            rope.high_freq_factor - rope.low_freq_factor
        )
        smoothed = (1 - smooth) * scaled / rope.factor + smooth * scaled
        is_medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        return torch.where(is_medium, smoothed, scaled)
    return base


def rope_tables(
    rope: RopeConfig, head_dim: int, n_positions: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin tables of shape [n_positions, head_dim] (halves repeated, HF layout)."""
    freqs = torch.arange(n_positions, dtype=torch.float32)[:, None] * inv_freq(rope, head_dim)[None]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` [heads, Q, D] with per-query tables ``cos``/``sin`` [Q, D]."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin
