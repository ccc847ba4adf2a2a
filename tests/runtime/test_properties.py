"""Property tests (hypothesis) over what a model can hand the runtime: trees grown from
arbitrary draft scores (ties, -inf, NaN), verification of arbitrary target logits, and the
KV manager under arbitrary accept/reject sequences against a reference model of the
committed sequence. No model needed; each example is a few tensor ops."""

from __future__ import annotations

import itertools
import math

import torch
from helpers import tree_children, tree_path
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_tree import bfs_trees, brute_ancestors

from etspec.contract import MASK_MIN, TARGET_COMMIT, TARGET_DECODE, TargetMetadata
from etspec.runtime.masks import MaskLayout
from etspec.runtime.sampling import Sampler, SamplingConfig, SamplingError, greedy_id, greedy_ids
from etspec.runtime.speculative.dynamic_tree import DynamicTree
from etspec.runtime.speculative.kv_cache import SpecKVCacheManager
from etspec.runtime.speculative.shapes import ChainShape
from etspec.runtime.speculative.static_tree import StaticTree
from etspec.runtime.speculative.tree import DraftTree, TreeError
from etspec.runtime.speculative.verifier import Verifier

NEG_INF = -math.inf
# Few distinct values, so ties are the rule rather than the exception.
SCORE = st.sampled_from([NEG_INF, -2.0, -1.0, 0.0, 0.0, 1.0, 1.0, 3.0])
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _rows(draw, n: int, vocab: int, nan: bool) -> torch.Tensor:  # type: ignore[no-untyped-def]
    """[n, vocab] logits: a drawn base value per row (ties everywhere) with a few entries
    overridden, so each example costs a few draws however large the vocabulary."""
    values = st.one_of(SCORE, st.just(math.nan)) if nan else SCORE
    entry = st.tuples(st.integers(0, vocab - 1), values)
    rows = torch.empty(n, vocab)
    for r in range(n):
        rows[r] = draw(values)
        for i, v in draw(st.lists(entry, max_size=6)):
            rows[r, i] = v
    return rows


class ScriptedExpander:
    """Draft logits drawn by hypothesis, one fresh row per node expanded."""

    def __init__(self, draw, vocab: int, draft_vocab: int, nan: bool) -> None:  # type: ignore[no-untyped-def]
        self.draw, self.vd, self.nan = draw, draft_vocab, nan
        # An injective draft -> target map, as a real d2t is.
        self.target_ids = torch.arange(draft_vocab) * (vocab // draft_vocab)
        self.target_id_of = self.target_ids.tolist()
        self.vocab_size = vocab
        self.calls = 0

    def root(self) -> torch.Tensor:
        return _rows(self.draw, 1, self.vd, self.nan)[0]

    def expand(self, parents, tokens) -> torch.Tensor:  # type: ignore[no-untyped-def]
        self.calls += 1
        return _rows(self.draw, len(parents), self.vd, self.nan)


SHAPES = [ChainShape(4), StaticTree.parse("D2xBF2"), StaticTree.parse("N7"), DynamicTree(3, 3, 10)]


@SETTINGS
@given(st.data(), st.sampled_from(SHAPES), st.booleans(), st.integers(1, 5))
def test_trees_from_arbitrary_draft_scores(data, shape, nan: bool, height: int) -> None:  # type: ignore[no-untyped-def]
    """A valid tree (distinct sibling tokens, within the budget) or a clear TreeError."""
    vocab, vd = 24, 6
    expander = ScriptedExpander(data.draw, vocab, vd, nan)
    try:
        proposal = shape.grow(expander, height, Sampler(SamplingConfig()))
    except TreeError as e:
        assert str(e) and "\n" not in str(e)
        assert "NaN" in str(e) or "-inf" in str(e)
        return
    tree = DraftTree.build(0, proposal.tokens, proposal.parents)
    tree.check(vocab_size=vocab)
    assert tree.size <= shape.cost.max_nodes and tree.max_depth <= height
    assert set(proposal.tokens) <= set(expander.target_ids.tolist())
    for node in range(tree.size + 1):
        kids = [proposal.tokens[c - 1] for c in tree_children(tree, node)]
        assert len(kids) == len(set(kids)), "siblings must be distinct tokens"
    padded = tree.padded(tree.capacity + data.draw(st.integers(0, 5)))
    padded.check(vocab_size=vocab)
    anc = brute_ancestors(proposal.parents)
    assert torch.equal(padded.mask[: tree.size + 1, : tree.size + 1], anc)


def _logits_for(data, tree: DraftTree, vocab: int, nan: bool) -> torch.Tensor:  # type: ignore[no-untyped-def]
    logits = _rows(data.draw, tree.capacity + 1, vocab, nan)
    # Aim some rows at the draft's tokens so that paths get accepted, not only rejected.
    tokens = tree.tokens.tolist()
    for child in range(1, tree.size + 1):
        if data.draw(st.booleans()):
            logits[int(tree.parents[child]), tokens[child]] = 9.0
    return logits


@SETTINGS
@given(st.data(), bfs_trees(max_nodes=12), st.booleans())
def test_greedy_verify_emits_what_target_only_decoding_would(data, spec, nan: bool) -> None:  # type: ignore[no-untyped-def]
    """Every emitted token is the target-only pick of its row: lossless on any logits."""
    tokens, parents = spec
    vocab = 100
    tree = DraftTree.build(data.draw(st.integers(0, vocab - 1)), tokens, parents)
    logits = _logits_for(data, tree, vocab, nan)
    sampler = Sampler(SamplingConfig())
    verdict = Verifier().verify(tree, logits, sampler, None)
    path = verdict.nodes
    assert path[0] == 0 and verdict.row == path[-1]
    emitted = [int(tree.tokens[n]) for n in path[1:]] + [verdict.next_token]
    picks = [sampler.pick(logits[n : n + 1]) for n in path]
    assert emitted == picks
    for a, b in itertools.pairwise(path):
        assert int(tree.parents[b]) == a
    # Not accepting further: no child of the last node carries the target's pick.
    kids = [int(tree.tokens[c]) for c in tree_children(tree, path[-1])]
    assert verdict.next_token not in kids


@SETTINGS
@given(st.data(), bfs_trees(max_nodes=12), st.booleans())
def test_sampling_verify_never_emits_a_token_the_target_cannot(data, spec, nan: bool) -> None:  # type: ignore[no-untyped-def]
    tokens, parents = spec
    vocab = 100
    tree = DraftTree.build(0, tokens, parents)
    logits = _logits_for(data, tree, vocab, nan)
    assume(bool(torch.isfinite(logits).any(-1).all()) or nan)
    cfg = SamplingConfig(
        temperature=data.draw(st.sampled_from([0.5, 1.0, 2.0])),
        top_k=data.draw(st.sampled_from([0, 1, 3])),
        top_p=data.draw(st.sampled_from([0.3, 0.9, 1.0])),
        seed=data.draw(st.integers(0, 2**16)),
    )
    sampler = Sampler(cfg)
    # A row nothing can be drawn from: a NaN, or no finite logit.
    bad = torch.isnan(logits).any(-1) | ~torch.isfinite(logits).any(-1)
    try:
        verdict = Verifier().verify(tree, logits, sampler, None)
    except SamplingError as e:
        # Refused with the clear error, and only because a bad row was there; the verifier
        # reads the rows along its walk only, so a bad row past it is never an error.
        assert "target logits" in str(e) and bool(bad.any())
        return
    assert not bool(bad[verdict.nodes].any())  # every row it used could be drawn from
    probs = Sampler(cfg).probs(logits)
    emitted = [int(tree.tokens[n]) for n in verdict.nodes[1:]] + [verdict.next_token]
    for row, token in zip(verdict.nodes, emitted, strict=True):
        assert float(probs[row, token]) > 0, (row, token)


# --- KV manager against a reference model ---------------------------------------------------


def _meta(strategies: str, max_context: int = 40, width: int = 8) -> TargetMetadata:
    return TargetMetadata(
        format_version=3, model_family="llama", vocab_size=100, hidden_size=4, num_layers=2,
        layer_types="full", sliding_window=0,
        max_context=max_context, cache_size=max_context + width, prefill_chunk=8,
        verify_width=width, verify_widths=(4, width), hidden_state_point="layer_input",
        hidden_state_layers=(1,), bos_token_id=1, eos_token_ids=(2,),
        kv_strategies=strategies, kv_cache_bytes=0, dtype="fp32", backend="xnnpack",
        tokenizer_sha256="", assistant="", assistant_step_width=0,
    )  # fmt: skip


class SlotCache:
    """A target whose KV cache is one label per slot: what verify wrote there."""

    reference = False  # nothing to inspect: the test reads ``slots``

    def __init__(self, meta: TargetMetadata) -> None:
        self.metadata = meta
        self.slots = torch.full((meta.cache_size,), -1, dtype=torch.long)
        self.commits = 0

    def run(self, method: str, *args: torch.Tensor) -> None:
        assert method == TARGET_COMMIT
        src, dst = args
        self.slots[dst] = self.slots[src].clone()  # gather then scatter, as the .pte does
        self.commits += 1


@SETTINGS
@given(
    st.sampled_from(["position-overwrite", "scratch-commit"]),
    st.lists(st.tuples(bfs_trees(max_nodes=7), st.integers(0, 99), st.integers(0, 3)), max_size=12),
    st.integers(1, 5),
)
def test_kv_manager_keeps_committed_state_under_any_accept_sequence(  # type: ignore[no-untyped-def]
    strategy: str, steps, prompt: int
) -> None:
    meta = _meta("position-overwrite,scratch-commit")
    cache = SlotCache(meta)
    committed = list(range(1000, 1000 + prompt))  # labels of the committed sequence
    cache.slots[:prompt] = torch.tensor(committed)
    kv = SpecKVCacheManager(cache, strategy, committed=prompt)  # type: ignore[arg-type]
    for step, ((tokens, parents), pick, pad) in enumerate(steps):
        tree = DraftTree.build(0, tokens, parents)
        tree = tree.padded(min(tree.capacity + pad, meta.verify_width - 1))
        c = kv.committed
        if c + tree.capacity + 1 > meta.max_context:
            break
        method, inputs = kv.verify_inputs(tree)
        columns = MaskLayout(meta.max_context, meta.cache_size).columns(inputs[-1].shape[1])
        if tree.capacity == 0:  # nothing proposed: the one-row decode writes slot c
            assert method == TARGET_DECODE and inputs[1].tolist() == [c]
            assert columns[(inputs[2][0] == 0)].tolist() == list(range(c + 1))
            cache.slots[c] = label = 10_000 * (step + 1)
            kv.commit([0])
            committed.append(label)
            assert cache.slots[: kv.committed].tolist() == committed
            continue
        _, positions, slots, mask = inputs
        mask = torch.full((mask.shape[0], meta.cache_size), MASK_MIN).index_copy_(1, columns, mask)
        k = slots.numel()
        assert method == meta.verify_method(k) and k >= tree.capacity + 1
        # Verify writes every row; nothing committed may be overwritten.
        assert bool((slots >= c).all())
        labels = torch.arange(k) + 10_000 * (step + 1)
        cache.slots[slots] = labels
        anc = brute_ancestors(parents)
        for i in range(tree.size + 1):
            seen = (mask[i] == 0).nonzero().flatten().tolist()
            want = list(range(c)) + [int(slots[j]) for j in range(tree.size + 1) if anc[i, j]]
            assert sorted(seen) == sorted(want), (i, seen, want)
            assert int(positions[i]) == c + int(tree.depth[i])
            assert cache.slots[:c].tolist() == committed  # what row i reads is the sequence
        for i in range(tree.size + 1, k):  # padding and spare rows see only themselves
            assert (mask[i] == 0).nonzero().flatten().tolist() == [int(slots[i])]
        assert bool((mask[mask != 0] == MASK_MIN).all())
        node = pick % (tree.size + 1)
        path = tree_path(tree, node)
        kv.commit(path)
        committed += [int(labels[n]) for n in path]
        assert kv.committed == len(committed)
        assert cache.slots[: kv.committed].tolist() == committed


@given(st.integers(0, 9000), st.integers(2, 9000), st.integers(1, 5000), st.integers(1, 33))
def test_the_sliding_band_holds_every_key_the_lowest_row_sees(
    lowest: int, committed: int, window: int, scratch: int
) -> None:
    """``MaskLayout.band``: committed slots from at or below the lowest query's window start
    up to the mask's committed columns, then every scratch slot; its start moves once per
    granule (the XNNPACK re-plan rate), and at least two committed slots remain (the
    exported dimension's minimum)."""
    from etspec.contract import MASK_GRANULE, band_start

    assume(lowest < committed)
    max_context = max(committed, 16)
    layout = MaskLayout(max_context, max_context + scratch, window)
    width = committed + scratch
    (band,) = layout.band(lowest, width)
    start = band_start(lowest, committed, window)
    assert band.tolist() == [*range(start, committed), *range(max_context, max_context + scratch)]
    assert start <= max(0, lowest - window + 1) and committed - start >= 2
    assert start % MASK_GRANULE == 0 or start == committed - 2
    assert MaskLayout(max_context, max_context + scratch).band(lowest, width) == ()


@given(st.integers(1, 600), st.integers(0, 64), st.integers(0, 700), st.integers(1, 16))
def test_causal_rows_is_the_causal_mask_of_those_positions(
    max_context: int, scratch: int, start: int, rows: int
) -> None:
    """``MaskLayout.causal_rows`` (the draft extend's few-op mask) equals ``causal`` of the
    same positions, including pad rows past the context."""
    assume(start < max_context and start + rows <= max_context + scratch)
    layout = MaskLayout(max_context, max_context + scratch)
    want = layout.causal(torch.arange(start, start + rows))
    assert torch.equal(layout.causal_rows(start, rows), want)


@given(st.integers(1, 600), st.integers(0, 64), st.integers(0, 700))
def test_decode_row_is_the_causal_mask_of_its_position(
    max_context: int, scratch: int, position: int
) -> None:
    """``MaskLayout.decode_row`` (the decode loop's mask, built directly) equals ``causal``
    of the one position, including a pad row past the context."""
    assume(position < max_context + scratch)
    layout = MaskLayout(max_context, max_context + scratch)
    got_position, got = layout.decode_row(position)
    assert got_position.tolist() == [position] and got_position.dtype == torch.long
    assert torch.equal(got, layout.causal(torch.tensor([position])))


@given(st.integers(1, 600), st.integers(0, 64), st.lists(st.integers(0, 663), min_size=1))
def test_the_runtime_builds_the_masks_the_model_reads(
    max_context: int, scratch: int, positions: list[int]
) -> None:
    """The runtime's masks (``MaskLayout``, built from the contract alone) are the ones
    ``models/layers`` builds for export and training: the same column slots, the same
    causal mask."""
    from etspec.models.layers import causal_mask, column_slots

    assume(max(positions) < max_context + scratch)
    layout = MaskLayout(max_context, max_context + scratch)
    rows = torch.tensor(positions)
    width = layout.width(max(positions) + 1)
    columns = column_slots(width, max_context, max_context + scratch)
    assert torch.equal(layout.columns(width), columns)
    assert torch.equal(layout.causal(rows), causal_mask(rows, columns, MASK_MIN))


@SETTINGS
@given(
    st.lists(
        st.lists(
            st.sampled_from([0.0, 1.0, -1.0, 2.5, float("inf"), float("-inf"), float("nan")]),
            min_size=5,
            max_size=5,
        ),
        min_size=1,
        max_size=4,
    ),
    st.sampled_from([torch.float32, torch.float16, torch.bfloat16]),
)
def test_greedy_ids_answer_what_torch_argmax_does(rows: list[list[float]], dtype) -> None:  # type: ignore[no-untyped-def]
    """The hot path's argmax (numpy for CPU float32/16, torch otherwise) gives torch.argmax's
    index on ties (the first), with NaN counted as the largest and all -inf rows."""
    logits = torch.tensor(rows, dtype=dtype)
    assert greedy_ids(logits) == logits.argmax(-1).tolist()
    assert greedy_id(logits[0]) == int(logits[0].argmax())
    assert greedy_id(logits[:1]) == int(logits[0].argmax())
