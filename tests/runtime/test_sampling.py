"""Speculative sampling is distributed exactly as target-only sampling (DESIGN invariant 4).

Chi-square goodness-of-fit at significance 0.001 against the target's exact distribution,
computed independently from the transformers model by enumerating every prefix (16-token
vocabulary). A verifier with a deliberately wrong correction must fail the same test.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from helpers import pair_programs, runners

from etspec.contract import LOOKUP_LABEL
from etspec.runtime import sampling as sampling_module
from etspec.runtime.sampling import (
    RepetitionPenalty,
    Sampler,
    SamplingConfig,
    SamplingError,
    TokenDist,
)
from etspec.runtime.spec import TreeSettings
from etspec.runtime.speculative.combined import CombinedDraftRunner
from etspec.runtime.speculative.dispatcher import Dispatcher
from etspec.runtime.speculative.dynamic_tree import DynamicTree
from etspec.runtime.speculative.eagle3 import Eagle3DraftRunner
from etspec.runtime.speculative.prompt_lookup import PromptLookupDraftRunner
from etspec.runtime.speculative.settings import tree_policy
from etspec.runtime.speculative.shapes import ChainShape
from etspec.runtime.speculative.static_tree import StaticTree
from etspec.runtime.speculative.tree import DraftTree
from etspec.runtime.speculative.verifier import Verifier

ALPHA = 0.001
V = 16


def chi_square_pvalue(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """Pearson goodness of fit; cells expected < 5 are pooled into one."""
    n = counts.sum()
    expected = probs.double() * n
    small = expected < 5
    obs = torch.cat([counts[~small].double(), counts[small].double().sum().reshape(1)])
    exp = torch.cat([expected[~small], expected[small].sum().reshape(1)])
    keep = exp > 0
    obs, exp = obs[keep], exp[keep]
    stat = ((obs - exp) ** 2 / exp).sum()
    df = obs.numel() - 1
    return float(torch.special.gammaincc(torch.tensor(df / 2.0), stat / 2.0))


class WrongCorrection(Verifier):
    """Resamples from p itself after a rejection: the classic mistake, biased toward q's picks."""

    def residual(self, p: TokenDist, q: TokenDist | None, x: int) -> TokenDist:
        return p


# --- processing ---------------------------------------------------------------------------


def test_top_k_top_p_match_an_independent_implementation() -> None:
    logits = torch.randn(5, 50, generator=torch.Generator().manual_seed(0)) * 3
    for t, k, p in [(1.0, 0, 1.0), (0.7, 10, 1.0), (1.3, 0, 0.8), (0.9, 7, 0.5), (1.0, 0, 1e-6)]:
        got = Sampler(SamplingConfig(t, k, p)).probs(logits)
        for row, probs in zip(logits, got, strict=True):
            z = row.double() / t
            order = z.argsort(descending=True).tolist()
            keep = order[:k] if k else order
            w = torch.softmax(z[keep], 0)
            kept, mass = [], 0.0
            for idx, pw in zip(keep, w.tolist(), strict=True):
                if mass >= p:
                    break
                kept.append(idx)
                mass += pw
            want = torch.zeros_like(z)
            want[kept] = torch.softmax(z[kept], 0)
            torch.testing.assert_close(probs.double(), want, atol=1e-6, rtol=0)


SETTINGS = [
    (1.0, 0, 1.0), (0.8, 0, 0.95), (0.7, 40, 1.0), (0.9, 7, 0.5), (1.3, 0, 0.8),
    (1.0, 0, 1e-6), (2.0, 0, 0.99), (0.6, 40, 0.9),
]  # fmt: skip


def _float64_reference(row: torch.Tensor, t: float, k: int, p: float) -> torch.Tensor:
    """The sampler's definition computed independently in float64: temperature, the top-k
    logits (ties kept), softmax, then the smallest prefix by probability (ties in index
    order) whose mass reaches p, renormalized."""
    z = row.double() / t
    if k and k < len(z):
        z = z.masked_fill(z < z.topk(k).values[-1], float("-inf"))
    probs = torch.softmax(z, 0)
    if p >= 1.0:
        return probs
    sorted_p, order = probs.sort(descending=True, stable=True)
    drop = (sorted_p.cumsum(0) - sorted_p) >= p
    want = torch.zeros_like(probs).scatter(0, order, sorted_p.masked_fill(drop, 0.0))
    return want / want.sum()


@pytest.mark.parametrize("vocab", [50, 262_144])
@pytest.mark.parametrize("t, k, p", SETTINGS)
def test_sparse_dist_is_the_sampler_distribution(vocab: int, t: float, k: int, p: float) -> None:
    """``Sampler.dist`` (what the decode loop draws from) is the sampler's distribution on
    peaked, flat and tied rows at a small and a Gemma-sized vocabulary, against float64
    arithmetic: rounding may move at most one token across the top-p boundary (one of
    probability < 1e-3), and every other probability agrees to 1e-4 relative."""
    sampler = Sampler(SamplingConfig(t, k, p))
    g = torch.Generator().manual_seed(vocab)
    rows = [torch.randn(vocab, generator=g) * scale for scale in (0.5, 4.0, 20.0)]
    rows.append(torch.randn(vocab, generator=g).round())  # many exact ties
    tail = torch.full((vocab,), -30.0)
    tail[:3] = torch.tensor([5.0, 4.0, float("-inf")])
    rows.append(tail)  # two tokens and a long, light tail
    for row in rows:
        got = sampler.dist(row)
        assert len(set(got.ids.tolist())) == len(got.ids)
        assert abs(got.probs.sum() - 1) < 1e-9
        dense = got.dense(vocab)
        want = _float64_reference(row, t, k, p)
        moved = (dense > 1e-30) != (want > 1e-30)
        assert int(moved.sum()) <= 1 and float(torch.maximum(dense, want)[moved].sum()) < 1e-3
        both = ~moved
        torch.testing.assert_close(
            dense[both] / dense[both].sum(), want[both] / want[both].sum(), atol=1e-12, rtol=1e-4
        )


def test_sparse_dist_refuses_rows_nothing_can_be_drawn_from() -> None:
    sampler = Sampler(SamplingConfig(0.8, 0, 0.95))
    for bad in (float("nan"), float("inf")):
        row = torch.zeros(100)
        row[17] = bad
        with pytest.raises(SamplingError, match="target logits"):
            sampler.dist(row)
    with pytest.raises(SamplingError, match="target logits"):
        sampler.dist(torch.full((100,), float("-inf")))


def test_token_dist_operations_equal_dense_arithmetic() -> None:
    g = torch.Generator().manual_seed(3)
    p_dense = torch.softmax(torch.randn(30, generator=g).double(), 0)
    q_dense = torch.softmax(torch.randn(30, generator=g).double() * 2, 0)
    p_dense[[4, 9]] = 0  # p's support is smaller than q's
    p_dense /= p_dense.sum()
    keep = torch.nonzero(p_dense > 0).flatten()
    order = keep[torch.randperm(len(keep), generator=g)]  # ids in no particular order
    p = TokenDist(order.numpy(), p_dense[order].numpy())
    q = TokenDist(np.arange(30)[::-1].copy(), q_dense.flip(0).numpy())
    assert p.prob(4) == 0.0 and p.prob(7) == pytest.approx(float(p_dense[7]))
    residual = (p_dense - q_dense).clamp_min(0)
    torch.testing.assert_close(p.minus(q).dense(30), residual / residual.sum())
    without = p_dense.clone()
    without[7] = 0
    torch.testing.assert_close(p.without(7).dense(30), without / without.sum())
    assert p.minus(p) is None and TokenDist(np.array([3]), np.array([1.0])).without(3) is None
    # Quantiles on an even grid draw each token in proportion to its probability.
    n = 20_000
    counts = torch.zeros(30, dtype=torch.float64)
    for i in range(n):
        counts[p.draw((i + 0.5) / n)] += 1
    torch.testing.assert_close(counts / n, p_dense, atol=1.0 / n, rtol=0)


@pytest.mark.parametrize(
    "cfg, message",
    [
        (SamplingConfig(temperature=-1.0), "temperature"),
        (SamplingConfig(temperature=float("nan")), "temperature"),
        (SamplingConfig(temperature=1.0, top_p=0.0), "top-p"),
        (SamplingConfig(temperature=1.0, top_p=1.5), "top-p"),
        (SamplingConfig(temperature=1.0, top_k=-2), "top-k"),
    ],
)
def test_invalid_settings_are_refused(cfg: SamplingConfig, message: str) -> None:
    with pytest.raises(SamplingError, match=message):
        Sampler(cfg)


# --- the verifier alone -------------------------------------------------------------------


def _rejection(config: SamplingConfig) -> Sampler:
    """A sampler verifying by rejection sampling (an unseeded request's) that repeats: its
    generator seeded, its draws not coupled."""
    sampler = Sampler(config)
    sampler.coupled = False
    return sampler


def _verifier_samples(
    verifier: Verifier, n: int, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """First emitted token of a 2-token chain, many times, over fixed p and q."""
    g = torch.Generator().manual_seed(42)
    p_logits = torch.randn(3, V, generator=g) * 1.5
    q_dense = torch.softmax(torch.randn(2, V, generator=g).double() * 1.5, -1)
    q = [TokenDist(np.arange(V), row.numpy()) for row in q_dense]
    sampler = _rejection(SamplingConfig(temperature=1.0, seed=seed))
    p0 = sampler.probs(p_logits)[0]
    counts = torch.zeros(V)
    for _ in range(n):
        d = [qi.draw(sampler.uniform()) for qi in q]
        tree = DraftTree.chain(0, d)
        verdict = verifier.verify(tree, p_logits, sampler, q)
        first = int(tree.tokens[verdict.nodes[1]]) if verdict.accepted else verdict.next_token
        counts[first] += 1
    return counts, p0


def _tree_verifier_samples(verifier: Verifier, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """First emitted token after a tree whose root has three siblings (the draft's
    deterministic top-3: point masses, ``probs=None``), each with a child of its own."""
    g = torch.Generator().manual_seed(7)
    p_logits = torch.randn(7, V, generator=g) * 1.5
    sampler = _rejection(SamplingConfig(temperature=1.0, seed=0))
    p0 = sampler.probs(p_logits)[0]
    siblings = p0.argsort(descending=True)[[1, 0, 3]].tolist()  # likely tokens, odd order
    tree = DraftTree.build(0, [*siblings, 5, 6, 7], [0, 0, 0, 1, 2, 3])
    counts = torch.zeros(V)
    for _ in range(n):
        verdict = verifier.verify(tree, p_logits, sampler, None)
        first = int(tree.tokens[verdict.nodes[1]]) if verdict.accepted else verdict.next_token
        counts[first] += 1
    return counts, p0


@pytest.mark.parametrize("draw", [_verifier_samples, _tree_verifier_samples])
def test_verifier_first_token_matches_target_distribution(draw) -> None:  # type: ignore[no-untyped-def]
    counts, p0 = draw(Verifier(), 20_000)
    assert chi_square_pvalue(counts, p0) > ALPHA


@pytest.mark.parametrize("draw", [_verifier_samples, _tree_verifier_samples])
def test_verifier_with_wrong_correction_fails_the_test(draw) -> None:  # type: ignore[no-untyped-def]
    counts, p0 = draw(WrongCorrection(), 20_000)
    assert chi_square_pvalue(counts, p0) < ALPHA


# --- end to end on the .pte pair ----------------------------------------------------------

PROMPT = [1, 5, 3, 7]
TEMPERATURE = 0.9
SAMPLES = 20_000


TOP_P = 0.8


def _marginals(artifacts, top_p: float = 1.0):  # type: ignore[no-untyped-def]
    """Exact distribution of generated tokens 2 and 3 from transformers, by enumeration, at
    TEMPERATURE and ``top_p``."""
    hf = artifacts.small_draft().target.hf
    sampler = Sampler(SamplingConfig(TEMPERATURE, top_p=top_p))

    @torch.no_grad()
    def next_probs(prefixes: list[list[int]]) -> torch.Tensor:
        ids = torch.tensor([[*PROMPT, *p] for p in prefixes])
        return sampler.probs(hf(ids).logits[:, -1]).double()

    p1 = next_probs([[]])[0]
    p2_given = next_probs([[a] for a in range(V)])  # [V, V]
    pairs = list(itertools.product(range(V), repeat=2))
    p3_given = next_probs([list(ab) for ab in pairs]).view(V, V, V)
    joint12 = p1[:, None] * p2_given
    return joint12.sum(0), (joint12[:, :, None] * p3_given).sum((0, 1))


@pytest.fixture(scope="module")
def exact_marginals(artifacts):  # type: ignore[no-untyped-def]
    return _marginals(artifacts)


@pytest.fixture(scope="module")
def top_p_marginals(artifacts):  # type: ignore[no-untyped-def]
    p2, p3 = _marginals(artifacts, TOP_P)
    assert int((p2 == 0).sum())  # top-p cuts tokens that temperature alone would keep
    return p2, p3


# Chain (sampled draft tokens, q = the draft's distribution) and trees (deterministic top-k
# children, q = point masses, siblings tried in turn).
TREES = {
    "chain2": lambda: 2,
    "D2xBF2": lambda: StaticTree.full(2, 2),
    "dynamic": lambda: DynamicTree(depth=1, topk=3, total_tokens=7),
}


@pytest.fixture
def rejection(monkeypatch):  # type: ignore[no-untyped-def]
    """Seeded requests verified by rejection sampling, as unseeded ones are (the seed then
    only makes the test repeat): what the rejection verifier does is held here; coupled
    sampling (a seeded request's) has tests of its own below."""
    monkeypatch.setattr(sampling_module, "coupled", lambda config: False)


def _speculative_counts(  # type: ignore[no-untyped-def]
    artifacts,
    verifier: Verifier,
    n: int,
    tree: str = "chain2",
    combined: bool = False,
    top_p: float = 1.0,
):
    target, draft = pair_programs(artifacts.small_draft(), "pte")
    kv = "scratch-commit" if tree == "D2xBF2" else "position-overwrite"
    drafter = Eagle3DraftRunner(draft)
    shape = TREES[tree]()
    policy = ChainShape(shape) if isinstance(shape, int) else shape
    if combined:  # the shape weighed against the lookup's offers, as --tree sets it up
        drafter = CombinedDraftRunner(drafter, PromptLookupDraftRunner(V))
        policy = Dispatcher([policy], target.metadata.verify_widths, decode=False, lookup=True)
    _, spec = runners(target, drafter, policy, kv, verifier)
    c2, c3 = torch.zeros(V), torch.zeros(V)
    accepted = looked_up = 0
    for seed in range(n):
        sampling = SamplingConfig(TEMPERATURE, top_p=top_p, seed=seed)
        out = spec.generate(PROMPT, 3, sampling, ignore_eos=True)
        c2[out.token_ids[1]] += 1
        c3[out.token_ids[2]] += 1
        accepted += out.stats.accepted_tokens
        looked_up += out.stats.shape_steps.get(LOOKUP_LABEL, 0)
    assert accepted > n // 10  # the draft is right often enough for acceptance to matter
    if combined:  # both drafters' tokens went through the verifier
        assert looked_up > n // 10
    return c2, c3


@pytest.mark.parametrize("tree", list(TREES))
def test_speculative_sampling_matches_target_distribution(
    artifacts, rejection, exact_marginals, tree
) -> None:  # type: ignore[no-untyped-def]
    p2, p3 = exact_marginals
    c2, c3 = _speculative_counts(artifacts, Verifier(), SAMPLES, tree)
    assert chi_square_pvalue(c2, p2) > ALPHA
    assert chi_square_pvalue(c3, p3) > ALPHA


def test_combined_drafter_sampling_matches_target_distribution(
    artifacts, rejection, exact_marginals
) -> None:  # type: ignore[no-untyped-def]
    """Steps drafted by prompt lookup (point masses) and by EAGLE-3 (its distribution),
    chosen from what earlier steps of the request taught: still the target's distribution."""
    p2, p3 = exact_marginals
    c2, c3 = _speculative_counts(artifacts, Verifier(), SAMPLES // 2, combined=True)
    assert chi_square_pvalue(c2, p2) > ALPHA
    assert chi_square_pvalue(c3, p3) > ALPHA


@pytest.mark.parametrize("combined", [False, True], ids=["eagle3", "combined"])
def test_speculative_sampling_with_top_p_matches_target_distribution(  # type: ignore[no-untyped-def]
    artifacts, rejection, top_p_marginals, combined: bool
) -> None:
    """Top-p truncates the target's p and the draft's q alike (the real-model figures sample
    at top-p 0.95): the emitted tokens still follow the truncated target distribution."""
    p2, p3 = top_p_marginals
    c2, c3 = _speculative_counts(
        artifacts, Verifier(), SAMPLES // 4, combined=combined, top_p=TOP_P
    )
    assert not c2[p2 == 0].any() and not c3[p3 == 0].any()  # nothing top-p cut is emitted
    assert chi_square_pvalue(c2, p2) > ALPHA
    assert chi_square_pvalue(c3, p3) > ALPHA


@pytest.mark.parametrize("tree", list(TREES))
def test_wrong_correction_fails_end_to_end(artifacts, rejection, exact_marginals, tree) -> None:  # type: ignore[no-untyped-def]
    p2, _ = exact_marginals
    c2, _ = _speculative_counts(artifacts, WrongCorrection(), 5_000, tree)
    assert chi_square_pvalue(c2, p2) < ALPHA


@pytest.mark.parametrize("tree", ["chain2", "dynamic"])
def test_coupled_sampling_matches_target_distribution(artifacts, exact_marginals, tree) -> None:  # type: ignore[no-untyped-def]
    """A seeded request samples by coupling: over seeds, the emitted tokens follow the
    target's distribution (each seed's text is target-only's, test below)."""
    p2, p3 = exact_marginals
    c2, c3 = _speculative_counts(artifacts, Verifier(), SAMPLES // 4, tree, combined=True)
    assert chi_square_pvalue(c2, p2) > ALPHA
    assert chi_square_pvalue(c3, p3) > ALPHA


@pytest.mark.parametrize("kv", ["position-overwrite", "scratch-commit"])
@pytest.mark.parametrize("tree", ["chain", "static", "dynamic", "auto"])
def test_coupled_sampling_gives_target_only_text(artifacts, tree: str, kv: str) -> None:  # type: ignore[no-untyped-def]
    """Drafter-invariant sampling: for every seed, the speculative text in every tree mode
    and KV strategy, with the draft and prompt lookup combined, is target-only decoding's
    text for that seed, token for token."""
    target, draft = pair_programs(artifacts.small_draft(), "pte")
    combined = CombinedDraftRunner(Eagle3DraftRunner(draft), PromptLookupDraftRunner(V))
    policy = tree_policy(TreeSettings(tree), target.metadata, combined)
    base, spec = runners(target, combined, policy, kv)
    looked_up = 0
    for seed in range(12):
        cfg = SamplingConfig(0.9, top_p=0.95, seed=seed)
        prompt = [1, 5, 3, 7, 1, 5, 3][: 3 + seed % 5]
        want = base.generate(prompt, 40, cfg, ignore_eos=True).token_ids
        got = spec.generate(prompt, 40, cfg, ignore_eos=True)
        assert got.token_ids == want, seed
        looked_up += got.stats.shape_steps.get(LOOKUP_LABEL, 0)
    assert looked_up > 0


def test_target_only_sampling_matches_target_distribution(artifacts, exact_marginals) -> None:  # type: ignore[no-untyped-def]
    """The baseline the speculative path is held to, on the same test (fewer samples)."""
    p2, _ = exact_marginals
    target, _ = pair_programs(artifacts.small_draft(), "pte")
    base, _ = runners(target)
    c2 = torch.zeros(V)
    for seed in range(5_000):
        out = base.generate(PROMPT, 2, SamplingConfig(TEMPERATURE, seed=seed), ignore_eos=True)
        c2[out.token_ids[1]] += 1
    assert chi_square_pvalue(c2, p2) > ALPHA


def test_same_seed_same_tokens(artifacts) -> None:  # type: ignore[no-untyped-def]
    target, draft = pair_programs(artifacts.small_draft(), "pte")
    _, spec = runners(target, Eagle3DraftRunner(draft), 3)
    cfg = SamplingConfig(1.0, top_k=8, top_p=0.9, seed=7)
    a = spec.generate(PROMPT, 20, cfg, ignore_eos=True).token_ids
    b = spec.generate(PROMPT, 20, cfg, ignore_eos=True).token_ids
    c = spec.generate(PROMPT, 20, SamplingConfig(1.0, 8, 0.9, seed=8), ignore_eos=True).token_ids
    assert a == b and a != c


def test_unreplayable_processor_is_refused_by_speculation_only(artifacts) -> None:  # type: ignore[no-untyped-def]
    target, draft = pair_programs(artifacts.small_draft(), "pte")
    base, spec = runners(target, Eagle3DraftRunner(draft), 3)
    before = spec.generate(PROMPT, 10).token_ids
    with pytest.raises(SamplingError, match="cannot be replayed across a speculative window"):
        spec.generate(PROMPT, 10, processors=[RepetitionPenalty(1.3)])
    assert spec.generate(PROMPT, 10).token_ids == before  # still usable, nothing corrupted
    plain = base.generate(PROMPT, 10, ignore_eos=True).token_ids
    penalized = base.generate(PROMPT, 10, processors=[RepetitionPenalty(5.0)], ignore_eos=True)
    assert penalized.token_ids != plain
