"""Target-compatible sampling: temperature, top-k, top-p, a seeded generator, processors.

One ``Sampler`` turns raw logits into the distribution tokens are drawn from. Target-only
decoding, the draft's proposals and the speculative verifier all go through it, so the
distribution speculative sampling must reproduce is defined in exactly one place.

``Sampler.probs`` states that distribution densely (the reference); the decode loop uses
``Sampler.dist``, the same distribution as a ``TokenDist`` over only the tokens it can draw.
At a 262k vocabulary every host pass over a row costs 0.05-0.2 ms and a full sort ~20 ms, so
``dist`` makes a few vectorized passes (max, exp, sum, one threshold) into a reused buffer
and sorts only the tokens top-p can keep; the verifier's rejections then work on those few
hundred entries instead of the vocabulary (``scripts/bench_sampling.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import torch

from etspec.contract import (
    COUPLING_GAMMA,
    COUPLING_MIX,
    EXP_UNDERFLOW,
    SAMPLING_EPS,
    SEED_MAX,
    TOP_P_BISECTIONS,
    TOP_P_CUTOFFS,
    TOP_P_SORT_SIZE,
    coupling_base,
    message,
)
from etspec.errors import EtspecError

# exp(EXP_UNDERFLOW) in float32: an exp at or below it is a gap the C++ runner zeroes.
_EXP_FLOOR = np.float32(math.exp(EXP_UNDERFLOW))


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


_GAMMA = np.uint64(COUPLING_GAMMA)
_MIX = tuple(np.uint64(m) for m in COUPLING_MIX)
_U30, _U27, _U31, _U11, _ONE = (np.uint64(n) for n in (30, 27, 31, 11, 1))


def coupling_uniforms(key: int, index: int, ids: np.ndarray) -> np.ndarray:
    """``u(key, index, x)`` in (0, 1) for each token of ``ids`` (``contract.coupling_base``,
    vectorized: numpy's uint64 arithmetic wraps as C++'s does)."""
    z = (ids.astype(np.uint64) + _ONE) * _GAMMA + np.uint64(coupling_base(key, index))
    z = (z ^ (z >> _U30)) * _MIX[0]
    z = (z ^ (z >> _U27)) * _MIX[1]
    z ^= z >> _U31
    return ((z >> _U11).astype(np.float64) + 0.5) * 2.0**-53


def _host_row(logits: torch.Tensor) -> np.ndarray:
    """One row of logits as a float32 numpy array (a view for a CPU float32 row)."""
    row = logits.detach().reshape(-1)
    if row.device.type != "cpu" or row.dtype != torch.float32:
        row = row.to("cpu", torch.float32)
    return row.numpy()


@dataclass(frozen=True)
class TokenDist:
    """A distribution over token ids held sparsely: the tokens that have mass and their
    probabilities (``ids`` distinct, ``probs`` summing to 1, both ordered as made). Every
    operation speculative sampling needs (a token's probability, the residual after a
    rejection, a draw) costs O(len(ids)), not O(vocabulary)."""

    ids: np.ndarray  # int64 [n]
    probs: np.ndarray  # float64 [n]

    def prob(self, token: int) -> float:
        hit = np.flatnonzero(self.ids == token)
        return float(self.probs[hit[0]]) if hit.size else 0.0

    def at(self, ids: np.ndarray) -> np.ndarray:
        """The probability of each of ``ids`` (0 where absent)."""
        order = np.argsort(self.ids)
        sorted_ids = self.ids[order]
        pos = np.minimum(np.searchsorted(sorted_ids, ids), len(sorted_ids) - 1)
        hit = sorted_ids[pos] == ids
        return np.where(hit, self.probs[order[pos]], 0.0)

    def without(self, token: int) -> TokenDist | None:
        """Renormalized without ``token``; None when nothing else has mass."""
        keep = self.ids != token
        return TokenDist._normalized(self.ids[keep], self.probs[keep])

    def minus(self, q: TokenDist) -> TokenDist | None:
        """Renormalized ``max(self - q, 0)``; None when nothing is left (self == q). Its
        support is within this one's, so only these entries are visited."""
        return TokenDist._normalized(self.ids, np.maximum(self.probs - q.at(self.ids), 0.0))

    def race(self, key: int, index: int) -> int:
        """The token whose exponential clock ``-ln u / p`` rings first for ``key`` at
        sequence ``index`` (``coupling_uniforms``): a draw from this distribution that any
        other distribution raced with the same key and index agrees with as often as the
        two overlap (ties, of probability zero, go to the lower id)."""
        clocks = -np.log(coupling_uniforms(key, index, self.ids)) / self.probs
        first = clocks.min()
        return int(self.ids[clocks == first].min())

    def draw(self, u: float) -> int:
        """The token at quantile ``u`` in [0, 1) of the cumulative distribution."""
        cum = np.cumsum(self.probs)
        i = int(np.searchsorted(cum, u * cum[-1], side="right"))
        return int(self.ids[min(i, len(self.ids) - 1)])

    def dense(self, vocab: int) -> torch.Tensor:
        """The distribution as a [vocab] tensor (for tests and reports)."""
        out = torch.zeros(vocab, dtype=torch.float64)
        out[torch.from_numpy(self.ids)] = torch.from_numpy(self.probs)
        return out

    def mapped(self, ids: np.ndarray) -> TokenDist:
        """The same distribution with each id ``i`` renamed ``ids[i]`` (draft -> target)."""
        return TokenDist(ids[self.ids], self.probs)

    @staticmethod
    def _normalized(ids: np.ndarray, weights: np.ndarray) -> TokenDist | None:
        total = float(weights.sum())
        if not total > 0:
            return None
        return TokenDist(ids, weights / total)


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


def coupled(config: SamplingConfig) -> bool:
    """Whether a request samples by coupling (``Sampler``): a seeded one."""
    return config.seed is not None


class Sampler:
    """Processes logits and draws tokens.

    A seeded request samples by coupling (``TokenDist.race``): the token at sequence index t
    is fixed by the seed, t and the distribution alone, so speculative decoding gives
    target-only decoding's text for the seed whatever was proposed, and the speculative
    loop may choose its shapes by wall time. An unseeded one draws from one generator in
    order and the verifier accepts by rejection sampling (``coupled`` False), which accepts
    a draft token as often as the two distributions overlap, more than a race does.
    """

    def __init__(self, config: SamplingConfig, processors: Sequence[LogitsProcessor] = ()) -> None:
        config.check()
        self.config = config
        self.processors = tuple(processors)
        # numpy's PCG64: a draw costs ~0.3 us, where a torch generator op costs ~5 us.
        self.rng = np.random.default_rng(config.seed)
        self.coupled = coupled(config)
        self.key = config.seed if config.seed is not None else 0
        self._buffer = np.empty(0, dtype=np.float32)  # dist's scratch, reused per row

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
            sorted_p, order = probs.sort(dim=-1, descending=True, stable=True)
            # Keep the smallest prefix whose mass reaches top_p (always at least one token;
            # tied tokens in index order, as ``dist`` and the C++ runner keep them).
            drop = (sorted_p.cumsum(-1) - sorted_p) >= cfg.top_p
            sorted_p = sorted_p.masked_fill(drop, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
            probs = probs / probs.sum(-1, keepdim=True)
        return probs

    def dist(self, logits: torch.Tensor) -> TokenDist:
        """``probs`` of one row of logits ([V] or [1, V]) as a ``TokenDist`` over the tokens
        it gives mass to, computed without a pass over the vocabulary beyond a handful of
        vectorized ones. Refuses a row nothing can be drawn from (a NaN or infinite logit,
        or none finite) with a clear error."""
        cfg = self.config
        x = _host_row(logits)
        # NaN propagates through max and +inf becomes it: one check refuses a NaN, an
        # infinite logit and a row with no finite logit.
        top = x.max()
        if not np.isfinite(top):
            raise SamplingError(message("target_logits_nan"))
        if cfg.top_k and cfg.top_k < x.size:
            # The k-th largest logit; ties with it are kept, as ``probs`` keeps them.
            kth = np.partition(x, x.size - cfg.top_k)[x.size - cfg.top_k]
            ids = np.flatnonzero(x >= kth)
            gaps = (x[ids].astype(np.float64) - float(top)) / cfg.temperature
            ids, gaps = ids[gaps > EXP_UNDERFLOW], gaps[gaps > EXP_UNDERFLOW]
            weights = np.exp(gaps)
            return self._top_p(ids, weights, float(weights.sum()))
        if self._buffer.size != x.size:
            self._buffer = np.empty_like(x)
        # e = exp((logit - max) / temperature) in (0, 1], in place in a reused buffer, as the
        # C++ runner computes it (float32, summed in double). A gap at or below EXP_UNDERFLOW
        # is no mass: such a token is never kept (what it adds to the total, at most 1e-38
        # a token, is below double's resolution of a total of at least 1).
        e = self._buffer
        np.subtract(x, top, out=e)
        e *= np.float32(1.0 / cfg.temperature)
        np.exp(e, out=e)
        total = float(e.sum(dtype=np.float64))
        if cfg.top_p >= 1.0:
            ids = np.flatnonzero(e > _EXP_FLOOR)
            return self._top_p(ids, e[ids].astype(np.float64), total)
        # The kept set is a prefix of the tokens by probability, so it lies within any
        # threshold set {e >= exp(-c)} holding at least top_p of the mass: find the first
        # cutoff whose set does, narrow it by bisection while it is large (a pass over the
        # set each time, far cheaper than sorting it), and sort only what is left.
        need = cfg.top_p * total
        low = 0.0
        for cutoff in (*TOP_P_CUTOFFS, -EXP_UNDERFLOW):
            last = cutoff >= -EXP_UNDERFLOW  # every token with mass
            inside = e > _EXP_FLOOR if last else e >= np.float32(math.exp(-cutoff))
            ids = np.flatnonzero(inside)
            weights = e[ids].astype(np.float64)
            if weights.sum() >= need:
                break
            low = cutoff
        high = min(cutoff, -math.log(float(weights.min())))
        for _ in range(TOP_P_BISECTIONS):
            if ids.size <= TOP_P_SORT_SIZE:
                break
            mid = 0.5 * (low + high)
            inner = weights >= math.exp(-mid)
            if weights[inner].sum() >= need:
                ids, weights, high = ids[inner], weights[inner], mid
            else:
                low = mid
        return self._top_p(ids, weights, total)

    def _top_p(self, ids: np.ndarray, weights: np.ndarray, total: float) -> TokenDist:
        """The smallest prefix of ``ids`` by weight whose mass reaches top_p of ``total``
        (at least one token; ties in index order), normalized."""
        if self.config.top_p < 1.0:
            order = np.argsort(-weights, kind="stable")
            ids, weights = ids[order], weights[order]
            before = np.cumsum(weights) - weights
            n = max(int(np.searchsorted(before, self.config.top_p * total, side="left")), 1)
            ids, weights = ids[:n], weights[:n]
        keep = weights > 0
        ids, weights = ids[keep], weights[keep]
        return TokenDist(ids, weights / weights.sum())

    def uniform(self) -> float:
        return float(self.rng.random())

    def draw(self, dist: TokenDist, index: int) -> int:
        """A token from ``dist`` for sequence position ``index`` (the prompt's first token
        is 0): raced when coupled, else the generator's next draw."""
        if self.coupled:
            return dist.race(self.key, index)
        return dist.draw(self.uniform())

    def pick(self, logits: torch.Tensor, history: Sequence[int] = ()) -> int:
        """The next token from one row of raw logits [1, V] (target-only decoding) after
        ``history``, the whole sequence so far."""
        logits = self.process(logits, history)
        if self.greedy:
            return greedy_id(logits)
        return self.draw(self.dist(logits), len(history))
