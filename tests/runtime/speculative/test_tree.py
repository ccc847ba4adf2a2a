"""Tree tensorization, static and dynamic tree growth, tree verification: no model needed.

Property tests (hypothesis) build arbitrary trees, padded single trees and padded batches,
and degenerate shapes (empty, single node, chain, star); malformed trees must be rejected
with a clear ``TreeError``. EAGLE-2 growth is compared with a line-by-line port of the
EAGLE repository's ``topK_genrate`` over the same (fake) draft model.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from helpers import tree_path
from hypothesis import given, settings
from hypothesis import strategies as st

from etspec.errors import EtspecError
from etspec.runtime.sampling import Sampler, SamplingConfig
from etspec.runtime.speculative.dynamic_tree import DynamicTree, rerank
from etspec.runtime.speculative.shapes import ChainShape
from etspec.runtime.speculative.static_tree import StaticTree
from etspec.runtime.speculative.tree import DraftTree, TreeError
from etspec.runtime.speculative.verifier import Verifier

GREEDY = Sampler(SamplingConfig())


# --- strategies ---------------------------------------------------------------------------


@st.composite
def bfs_trees(draw, max_nodes: int = 40) -> tuple[list[int], list[int]]:  # type: ignore[no-untyped-def]
    """(tokens, parents) of an arbitrary tree, relabelled into BFS order."""
    m = draw(st.integers(0, max_nodes))
    raw = [draw(st.integers(0, i)) for i in range(m)]  # node i+1's parent in [0, i]
    depth = [0]
    for p in raw:
        depth.append(depth[p] + 1)
    order = sorted(range(1, m + 1), key=lambda i: (depth[i], i))
    new = {0: 0, **{old: k + 1 for k, old in enumerate(order)}}
    parents = [new[raw[old - 1]] for old in order]
    tokens = [draw(st.integers(0, 99)) for _ in range(m)]
    return tokens, parents


def brute_ancestors(parents: list[int]) -> torch.Tensor:
    """anc[k, j]: j is k or an ancestor of k, by walking parent pointers."""
    par = [0, *parents]
    n = len(par)
    anc = torch.zeros(n, n, dtype=torch.bool)
    for k in range(n):
        j = k
        while True:
            anc[k, j] = True
            if j == 0:
                break
            j = par[j]
    return anc


# --- tensorization properties -------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(bfs_trees(), st.integers(0, 20))
def test_any_tree_satisfies_the_invariants(tree_spec, extra: int) -> None:  # type: ignore[no-untyped-def]
    tokens, parents = tree_spec
    tree = DraftTree.build(7, tokens, parents)
    tree.check(vocab_size=100)
    m = len(tokens)
    assert tree.size == m and tree.capacity == m
    assert torch.equal(tree.mask, brute_ancestors(parents))
    table = tree.ancestor_table
    assert table.shape == (tree.max_depth + 1, m + 1)
    assert int(table.min()) >= 0 and int(table.max()) <= m  # every gather index in range
    assert bool((tree.depth[1:] >= 1).all()) and bool((tree.depth[1:].diff() >= 0).all())
    for k in range(1, m + 1):
        path = tree_path(tree, k)
        assert path[0] == 0 and path[-1] == k and len(path) == int(tree.depth[k]) + 1
        assert all(int(tree.parents[b]) == a for a, b in itertools.pairwise(path))
    # Padding: same real rows, padded rows invisible both ways, still every index in range.
    padded = tree.padded(m + extra, tree.max_depth + 1 + extra % 3)
    padded.check(vocab_size=100)
    assert padded.size == m and padded.capacity == m + extra
    assert torch.equal(padded.mask[: m + 1, : m + 1], tree.mask)
    assert not padded.mask[m + 1 :].any() and not padded.mask[:, m + 1 :].any()
    assert int(padded.ancestor_table.max()) <= m + extra


@pytest.mark.parametrize(
    "tokens, parents, depth",
    [
        ([], [], 0),  # root only: nothing drafted
        ([5], [0], 1),  # single node
        ([1, 2, 3, 4], [0, 1, 2, 3], 4),  # chain
        ([1, 2, 3, 4, 5], [0, 0, 0, 0, 0], 1),  # star
    ],
)
def test_degenerate_trees(tokens: list[int], parents: list[int], depth: int) -> None:
    tree = DraftTree.build(0, tokens, parents)
    tree.check()
    assert tree.max_depth == depth
    assert torch.equal(tree.mask, brute_ancestors(parents))


# --- malformed trees are rejected ---------------------------------------------------------


@pytest.mark.parametrize(
    "parents, message",
    [
        ([0, 5], "node 2 has parent 5"),  # out of range
        ([0, 2], "node 2 has parent 2"),  # its own parent: a cycle
        ([0, -1], "node 2 has parent -1"),  # a -1 sentinel never gets in
        ([0, 1, 0], "not BFS order"),
    ],
)
def test_build_rejects_malformed_parents(parents: list[int], message: str) -> None:
    with pytest.raises(TreeError, match=message):
        DraftTree.build(0, list(range(len(parents))), parents)


def _arrays(parents, depth, valid=None):  # type: ignore[no-untyped-def]
    n = len(parents)
    valid = torch.ones(n, dtype=torch.bool) if valid is None else torch.tensor(valid)
    return DraftTree.from_arrays(
        torch.zeros(n, dtype=torch.long),
        torch.tensor(parents),
        torch.tensor(depth),
        valid,
    )


@pytest.mark.parametrize(
    "tree, message",
    [
        (_arrays([0, 0, 3, 2], [0, 1, 2, 2]), "cycle or an inconsistent depth"),  # 2 <-> 3
        (_arrays([0, 0, 9], [0, 1, 2]), "outside"),
        (_arrays([0, 0, 1], [0, 1, 3]), "inconsistent depth"),
        (_arrays([0, 0, 1], [0, 1, 2], [True, False, True]), "parent 1 is padding"),
        (_arrays([1, 0], [0, 1]), "row 0 must be the valid root"),
    ],
)
def test_check_rejects_corrupted_arrays(tree: DraftTree, message: str) -> None:
    with pytest.raises(TreeError, match=message):
        tree.check()


def test_check_rejects_a_tampered_mask_and_table() -> None:
    tree = DraftTree.build(0, [1, 2, 3], [0, 0, 1])
    mask = tree.mask.clone()
    mask[3, 2] = True  # a leak across branches
    with pytest.raises(TreeError, match="mask differs"):
        DraftTree(
            *(tree.tokens, tree.parents, tree.depth, tree.valid, tree.ancestor_table), mask
        ).check()
    table = tree.ancestor_table.clone()
    table[1, 3] = 2
    with pytest.raises(TreeError, match="ancestor table"):
        DraftTree(tree.tokens, tree.parents, tree.depth, tree.valid, table, tree.mask).check()
    with pytest.raises(TreeError, match="tokens must be ids"):
        DraftTree.build(0, [1, 200], [0, 0]).check(vocab_size=100)


def test_rerank_rejects_nan_and_selected_minus_inf() -> None:
    parent = torch.tensor([-1, -1, 0, 0])
    with pytest.raises(TreeError, match="NaN"):
        rerank(torch.tensor([-0.1, float("nan"), -0.5, -0.7]), parent, 3)
    with pytest.raises(TreeError, match="-inf"):
        rerank(torch.tensor([-0.1, -0.2, -float("inf"), -float("inf")]), parent, 3)
    chosen, rows = rerank(torch.tensor([-0.1, -0.2, -0.3, -float("inf")]), parent, 3)
    assert chosen.tolist() == [0, 1, 2] and rows == [0, 0, 1]


# --- a fake draft model --------------------------------------------------------------------


class FakeExpander:
    """Draft logits as a fixed random function of each node's path (no ties)."""

    def __init__(self, vocab: int = 30, draft_vocab: int | None = None, seed: int = 0) -> None:
        vd = draft_vocab or vocab
        g = torch.Generator().manual_seed(seed)
        self.target_ids = torch.sort(torch.randperm(vocab, generator=g)[:vd]).values
        self.target_id_of = self.target_ids.tolist()
        self.vocab_size = vocab
        self.vd = vd
        self.seed = seed
        self.calls = 0
        self.paths: list[tuple[int, ...]] = [()]
        self.fed_per_call: list[int] = []

    def logits(self, path: tuple[int, ...]) -> torch.Tensor:
        g = torch.Generator().manual_seed(hash((self.seed, *path)) % (2**31))
        return torch.randn(self.vd, generator=g) * 2

    def root(self) -> torch.Tensor:
        return self.logits(())

    def expand(self, parents, tokens) -> torch.Tensor:  # type: ignore[no-untyped-def]
        self.calls += 1
        self.fed_per_call.append(len(parents))
        out = []
        for p, t in zip(parents, tokens, strict=True):
            path = (*self.paths[p], int(t))
            self.paths.append(path)
            out.append(self.logits(path))
        return torch.stack(out)


def eagle_repo_reference(fake: FakeExpander, depth: int, top_k: int, total_token: int):  # type: ignore[no-untyped-def]
    """``topK_genrate`` of the EAGLE repo (ea_model/cnets.py), the draft model replaced by
    ``fake``: same index arithmetic (bias, parents_list, searchsorted mask_index)."""
    total_tokens = total_token - 1
    d2t = fake.target_ids
    last_p = torch.log_softmax(fake.root(), -1)
    top = torch.topk(last_p, top_k)
    topk_index, topk_p = top.indices, top.values
    scores = topk_p
    scores_list = [scores[None]]
    parents_list = [torch.zeros(1, dtype=torch.long)]
    ss_token = [d2t[topk_index][None]]
    input_paths = [(int(d2t[i]),) for i in topk_index]
    topk_cs_index = torch.arange(top_k)
    for i in range(depth):
        bias1 = top_k if i > 0 else 0
        bias2 = max(0, i - 1)
        bias = 1 + top_k**2 * bias2 + bias1
        parents_list.append(topk_cs_index + bias)
        last_p = torch.log_softmax(torch.stack([fake.logits(p) for p in input_paths]), -1)
        top = torch.topk(last_p, top_k)
        topk_index, topk_p = top.indices, top.values
        cu_scores = topk_p + scores[:, None]
        topk_cs = torch.topk(cu_scores.view(-1), top_k)
        topk_cs_index, scores = topk_cs.indices, topk_cs.values
        out_ids = topk_cs_index // top_k
        ids = d2t[topk_index.view(-1)[topk_cs_index]]
        input_paths = [(*input_paths[o], int(t)) for o, t in zip(out_ids, ids, strict=True)]
        ss_token.append(d2t[topk_index])
        scores_list.append(cu_scores)
    flat_scores = torch.cat(scores_list, 0).view(-1)
    ss_token_list = torch.cat(ss_token, 0).view(-1)
    top_scores_index = torch.sort(torch.topk(flat_scores, total_tokens).indices).values
    draft_tokens = ss_token_list[top_scores_index]
    draft_parents = torch.cat(parents_list, 0)[top_scores_index // top_k].long()
    mask_index = torch.searchsorted(top_scores_index, draft_parents - 1, right=False)
    mask_index[draft_parents == 0] = -1
    mask_index = mask_index + 1
    return draft_tokens.tolist(), mask_index.tolist()


@pytest.mark.parametrize(
    "depth, topk, total, seed",
    [(1, 2, 4, 0), (3, 3, 12, 1), (5, 4, 32, 2), (5, 8, 60, 3), (2, 10, 64, 4), (0, 5, 4, 5)],
)
def test_dynamic_tree_matches_the_eagle_repo(depth: int, topk: int, total: int, seed: int) -> None:
    fake = FakeExpander(vocab=200, draft_vocab=80, seed=seed)
    want_tokens, want_parents = eagle_repo_reference(
        FakeExpander(200, 80, seed), depth, topk, total
    )
    got = DynamicTree(depth, topk, total).grow(fake, max_height=99, sampler=GREEDY)
    assert got.tokens == want_tokens
    assert got.parents == want_parents
    assert fake.calls == depth and all(n == topk for n in fake.fed_per_call)
    tree = DraftTree.build(0, got.tokens, got.parents)  # BFS, closed under parents
    tree.check()
    assert tree.size == min(total - 1, topk + depth * topk * topk)


def test_dynamic_tree_config_names() -> None:
    eagle = DynamicTree.from_config({"depth": 5, "top_k": 8, "total_token": 60})
    sglang = DynamicTree.from_config({"num_steps": 6, "topk": 8, "num_draft_tokens": 60})
    vllm = DynamicTree.from_config(
        {"spec_tree_depth": 6, "num_spec_expand": 8, "num_spec_tokens": 59}
    )
    assert eagle.name == sglang.name == vllm.name == "dynamic-d5k8t60"
    with pytest.raises(EtspecError, match="--tree auto"):
        DynamicTree.from_config({"total_token": -1})
    with pytest.raises(EtspecError, match="unknown dynamic tree setting"):
        DynamicTree.from_config({"width": 3})


def test_dynamic_tree_respects_the_height_budget() -> None:
    got = DynamicTree(5, 3, 30).grow(FakeExpander(), max_height=2, sampler=GREEDY)
    assert DraftTree.build(0, got.tokens, got.parents).max_depth <= 2
    assert got.calls == 1


def test_nan_draft_logits_are_rejected() -> None:
    class NaNExpander(FakeExpander):
        def expand(self, parents, tokens):  # type: ignore[no-untyped-def]
            return torch.full((len(parents), self.vd), float("nan"))

    with pytest.raises(TreeError, match="NaN"):
        DynamicTree(2, 2, 6).grow(NaNExpander(), 9, GREEDY)


# --- static trees ---------------------------------------------------------------------------


def test_static_tree_forms() -> None:
    full = StaticTree.parse("D3xBF2")
    assert len(full.choices) == 2 + 4 + 8 and full.cost.max_height == 3
    n8 = StaticTree.parse("N8")
    assert len(n8.choices) == 8 and n8.choices[0] == (0,)
    assert all(c[:-1] in set(n8.choices) | {()} for c in n8.choices)  # closed under parents
    wide = StaticTree.pruned(12, rank_accept=(0.5, 0.4, 0.3))
    assert len({c for c in wide.choices if len(c) == 1}) == 3
    explicit = StaticTree.parse("[[0], [1], [0, 0], [0, 1], [1, 0]]")
    assert explicit.cost.max_nodes == 5 and explicit.cost.fed_nodes == 2
    for bad, message in [
        ("[[0], [0, 1, 2]]", "has no parent"),
        ("[[-1]]", "ranks >= 0"),
        ("X7", "cannot read static tree"),
        ("[]", "at least one node"),
    ]:
        with pytest.raises(EtspecError, match=message):
            StaticTree.parse(bad)


def test_static_tree_places_the_ranked_tokens() -> None:
    fake = FakeExpander(vocab=50, draft_vocab=20, seed=9)
    tree_shape = StaticTree.parse("[[0], [1], [2], [0, 0], [0, 1], [2, 0], [0, 0, 0]]")
    got = tree_shape.grow(fake, 9, GREEDY)
    tree = DraftTree.build(0, got.tokens, got.parents)
    tree.check()
    ref = FakeExpander(vocab=50, draft_vocab=20, seed=9)
    for row in range(1, tree.size + 1):
        path = tree_path(tree, row)
        prefix = tuple(int(tree.tokens[r]) for r in path[1:-1])
        ranked = ref.target_ids[ref.logits(prefix).argsort(descending=True)].tolist()
        rank = tree_shape.choices[row - 1][-1]
        assert int(tree.tokens[row]) == ranked[rank]
    # Only nodes with children are fed: [0] and [2] at level 2, [0, 0] at level 3.
    assert fake.fed_per_call == [2, 1]


def test_chain_shape_is_the_draft_argmax_path() -> None:
    fake = FakeExpander(seed=4)
    got = ChainShape(4).grow(fake, 9, GREEDY)
    assert got.parents == [0, 1, 2, 3] and fake.calls == 3
    prefix: tuple[int, ...] = ()
    for t in got.tokens:
        assert t == int(fake.target_ids[int(fake.logits(prefix).argmax())])
        prefix = (*prefix, t)


# --- tree verification ---------------------------------------------------------------------


def _logits_choosing(best: list[int], vocab: int = 10) -> torch.Tensor:
    out = torch.zeros(len(best), vocab)
    out[torch.arange(len(best)), torch.tensor(best)] = 5.0
    return out


#          root
#        /   |   \
#      1:a  2:b  3:c
#      /  \       |
#   4:d  5:e     6:f
#    |
#   7:g
TREE = DraftTree.build(0, [1, 2, 3, 4, 5, 6, 7], [0, 0, 0, 1, 1, 3, 4])


@pytest.mark.parametrize(
    "best, nodes, next_token",
    [
        ([3, 0, 0, 6, 0, 0, 9, 0], [0, 3, 6], 9),  # not the first branch; bonus after leaf 6
        ([9, 0, 0, 0, 0, 0, 0, 0], [0], 9),  # nothing accepted: only the root's token
        ([1, 4, 0, 0, 7, 0, 0, 8], [0, 1, 4, 7], 8),  # deepest level, then the bonus
        ([1, 5, 0, 0, 0, 2, 0, 0], [0, 1, 5], 2),  # second child of an accepted node
    ],
)
def test_greedy_tree_walk(best: list[int], nodes: list[int], next_token: int) -> None:
    verdict = Verifier().verify(TREE, _logits_choosing(best), GREEDY, None)
    assert verdict.nodes == nodes and verdict.next_token == next_token
    assert verdict.row == nodes[-1]


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("D12xBF12", "has up to 9726655034460 draft tokens and needs a verify width of"),
        ("D1000000000xBF12", "has up to over 2^1000000000 draft tokens"),
        ("N100000000", "tree N100000000 has up to 100000000 draft tokens"),
        ("[" + "[0]," * 16 + "[1]]", "tree static17 has up to 17 draft tokens"),
        ("[[1e400]]", "tree choice [inf] must be a non-empty list of ranks >= 0"),
        ("[[0.5]]", "tree choice [0.5] must be"),
        ('[["0"]]', "tree choice ['0'] must be"),
        ("[[true]]", "tree choice [True] must be"),
        ("[0, 1]", "tree choice 0 must be"),
        ("[" * 100000, "cannot read static tree"),
    ],
)
def test_static_tree_specs_are_bounded_and_typed_before_building(spec: str, words: str) -> None:
    """A tree too wide for the verify is refused from its description (building D12xBF12
    would take 9.7 trillion paths, so the test would not finish); ranks are plain integers;
    JSON nested past the stack is unreadable, not a RecursionError."""
    with pytest.raises(EtspecError) as e:
        StaticTree.parse(spec, width=16)
    assert words in str(e.value) and "\n" not in str(e.value) and len(str(e.value)) < 400
    assert StaticTree.parse("D2xBF3", width=16).cost.max_nodes == 12  # 12 + 1 fits 16
