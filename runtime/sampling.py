"""Target-compatible sampling: temperature, top-k, top-p, a seeded generator, processors.

One ``Sampler`` turns raw logits into the distribution tokens are drawn from. Target-only
decoding, the draft's proposals and the speculative verifier all go through it, so the
distribution speculative sampling must reproduce is defined in exactly one place.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from etspec.contract import SAMPLING_EPS, SEED_MAX, message
from etspec.errors import EtspecError


def _host_array(logits: torch.Tensor) -> bool:
    return logits.device.type == "cpu" and logits.dtype in (torch.float32, torch.float16)


def greedy_ids(logits: torch.Tensor) -> list[int]:
    """The argmax of each row of ``logits`` [Q, V] (the first index on ties, NaN counting
    as the largest: ``torch.argmax``'s answer). A CPU array goes through numpy: the hot
    path's argmax costs ~2 us there against ~14 us as a torch op straight after a program
    call (``scripts/profile_step.py``)."""
    if _host_array(logits):
        return logits.detach().numpy().argmax(-1).tolist()  # type: ignore[no-any-return]
    return logits.argmax(-1).tolist()  # type: ignore[no-any-return]


def greedy_id(logits: torch.Tensor) -> int:
    """The argmax of one row of logits ([V] or [1, V]), as ``greedy_ids``."""
    if _host_array(logits):
        return int(logits.detach().numpy().argmax())
    return int(logits.argmax())


class SamplingError(EtspecError):
    """Invalid sampling settings, a logits processor speculation cannot replay, or target
    logits nothing can be sampled from."""


@dataclass(frozen=True)
class SamplingConfig:
    """A temperature below ``SAMPLING_EPS`` (0 included) is greedy (argmax); otherwise
    sample after top-k then top-p."""

    temperature: float = 0.0
    top_k: int = 0  # 0 keeps the whole vocabulary
    top_p: float = 1.0
    seed: int | None = None

    def check(self) -> None:
        t = self.temperature
        if not isinstance(t, (int, float)) or math.isnan(t) or t < 0 or math.isinf(t):
            raise SamplingError(message("temperature", value=t))
        if not isinstance(self.top_k, int) or self.top_k < 0:
            raise SamplingError(message("top_k", value=self.top_k))
        p = self.top_p
        if not isinstance(p, (int, float)) or math.isnan(p) or not 0 < p <= 1:
            raise SamplingError(message("top_p", value=p))
        seed = self.seed
        if seed is not None and (not isinstance(seed, int) or not 0 <= seed <= SEED_MAX):
            raise SamplingError(message("seed", max=SEED_MAX, value=seed))

    @property
    def greedy(self) -> bool:
        return self.temperature < SAMPLING_EPS


@runtime_checkable
class LogitsProcessor(Protocol):
    """Rewrites logits [Q, V] given the token history that precedes each row.

    ``replayable`` declares that the result does not depend on the history, so speculation
    can apply it to every verify row at once. Processors that read the history (repetition
    penalties, no-repeat n-grams) are not replayable and only run in target-only decoding.
    """

    replayable: bool

    def __call__(self, logits: torch.Tensor, history: Sequence[int]) -> torch.Tensor: ...


@dataclass(frozen=True)
class RepetitionPenalty:
    """CTRL-style penalty on every token already in the history (not replayable)."""

    penalty: float
    replayable: bool = False

    def __post_init__(self) -> None:
        # 0 divides by zero, a negative one flips signs, NaN/inf poison every logit.
        if not (math.isfinite(self.penalty) and self.penalty > 0):
            raise SamplingError(message("repetition_penalty", value=self.penalty))

    def __call__(self, logits: torch.Tensor, history: Sequence[int]) -> torch.Tensor:
        if not history:
            return logits
        idx = torch.tensor(sorted(set(history)), dtype=torch.long)
        picked = logits[..., idx]
        picked = torch.where(picked > 0, picked / self.penalty, picked * self.penalty)
        out = logits.clone()
        out[..., idx] = picked
        return out


def check_replayable(processors: Sequence[LogitsProcessor]) -> None:
    """Raise if a processor cannot be applied across a speculative window."""
    for proc in processors:
        if not getattr(proc, "replayable", False):
            raise SamplingError(
                f"logits processor {type(proc).__name__} depends on the tokens before each "
                "position and cannot be replayed across a speculative window; drop it or "
                "generate without a draft"
            )


class Sampler:
    """Processes logits and draws tokens with one seeded generator."""

    def __init__(self, config: SamplingConfig, processors: Sequence[LogitsProcessor] = ()) -> None:
        config.check()
        self.config = config
        self.processors = tuple(processors)
        self.generator = torch.Generator()
        if config.seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(config.seed)

    @property
    def greedy(self) -> bool:
        return self.config.greedy

    def process(self, logits: torch.Tensor, history: Sequence[int] = ()) -> torch.Tensor:
        for proc in self.processors:
            logits = proc(logits, history)
        return logits

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        """[Q, V] logits -> [Q, V] probabilities after temperature, top-k and top-p."""
        cfg = self.config
        scaled = logits.float() / cfg.temperature
        if cfg.top_k and cfg.top_k < scaled.shape[-1]:
            kth = scaled.topk(cfg.top_k, dim=-1).values[..., -1:]
            scaled = scaled.masked_fill(scaled < kth, float("-inf"))
        probs = torch.softmax(scaled, dim=-1)
        if cfg.top_p < 1.0:
            sorted_p, order = probs.sort(dim=-1, descending=True)
            # Keep the smallest prefix whose mass reaches top_p (always at least one token).
            drop = (sorted_p.cumsum(-1) - sorted_p) >= cfg.top_p
            sorted_p = sorted_p.masked_fill(drop, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
            probs = probs / probs.sum(-1, keepdim=True)
        return probs

    def target_probs(self, logits: torch.Tensor) -> torch.Tensor:
        """``probs`` of target logits, refusing rows nothing can be drawn from (NaN, or no
        finite logit) with a clear error instead of a failure inside ``multinomial``."""
        probs = self.probs(logits)
        if not bool(torch.isfinite(probs).all()):
            raise SamplingError(message("target_logits_nan"))
        return probs

    def draw(self, probs: torch.Tensor) -> torch.Tensor:
        """One token per row of ``probs`` [Q, V] -> [Q]."""
        return torch.multinomial(probs, 1, generator=self.generator).squeeze(-1)

    def uniform(self) -> float:
        return float(torch.rand((), generator=self.generator))

    def pick(self, logits: torch.Tensor, history: Sequence[int] = ()) -> int:
        """The next token from one row of raw logits [1, V] (target-only decoding)."""
        logits = self.process(logits, history)
        if self.greedy:
            return greedy_id(logits)
        return int(self.draw(self.target_probs(logits).reshape(1, -1))[0])
