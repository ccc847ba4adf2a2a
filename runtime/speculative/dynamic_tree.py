"""EAGLE-2 dynamic draft trees, as the EAGLE repository builds them (``topK_genrate``).

1. The root's children: the ``topk`` best tokens of the draft's log-probabilities; each
   candidate's score is its log-probability.
2. ``depth`` times: feed the ``topk`` frontier nodes in one batched draft call (same
   position, the draft's own tree mask: each sees the committed context and its ancestors);
   each fed node proposes its ``topk`` best children, scored by cumulative log-probability
   (parent score + child log-prob); the next frontier is the ``topk`` best of those
   ``topk x topk`` candidates.
3. Rerank: of all candidates, keep the ``total_tokens - 1`` best scores, in level order.
   A child never outscores its parent (log-probs are <= 0) and ties prefer the earlier,
   shallower candidate, so every kept node's parent is kept too.

``depth`` counts expansion passes as in the EAGLE repo: trees are ``depth + 1`` levels
high. ``total_tokens`` counts the root (the verify width the tree needs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from etspec.contract import message
from etspec.errors import EtspecError
from etspec.runtime.sampling import Sampler
from etspec.runtime.spec import TreeSettings
from etspec.runtime.speculative.shapes import Expander, TreeShape, top
from etspec.runtime.speculative.step import Proposal, ShapeCost
from etspec.runtime.speculative.tree import TreeError

# Config names other projects use for the same three knobs, and how they map onto ours.
_DEPTH_KEYS = {"depth": 0, "num_steps": -1, "speculative_num_steps": -1, "spec_tree_depth": -1}
_TOPK_KEYS = ("topk", "top_k", "speculative_eagle_topk", "num_spec_expand")
_TOTAL_KEYS = {
    "total_tokens": 0,
    "total_token": 0,
    "num_draft_tokens": 0,
    "speculative_num_draft_tokens": 0,
    "num_spec_tokens": 1,
    "num_speculative_tokens": 1,
}


class DynamicTree(TreeShape):
    def __init__(self, depth: int = 5, topk: int = 8, total_tokens: int = 60) -> None:
        if depth < 0 or topk < 1 or total_tokens < 2:
            raise EtspecError(message("dynamic_knobs", depth=depth, topk=topk, total=total_tokens))
        self.depth = depth
        self.topk = topk
        self.total_tokens = total_tokens
        self.name = f"dynamic-d{depth}k{topk}t{total_tokens}"

    def settings(self) -> TreeSettings | None:
        return TreeSettings(
            "dynamic", depth=self.depth, topk=self.topk, total_tokens=self.total_tokens
        )

    @staticmethod
    def knobs(config: Mapping[str, Any]) -> dict[str, int]:
        """``depth``, ``topk`` and ``total_tokens`` from EAGLE (``depth``, ``top_k``,
        ``total_token``), SGLang (``num_steps``, ``topk``, ``num_draft_tokens``) or
        vLLM-style (``num_spec_tokens``) names; two names for one knob are refused."""
        kw: dict[str, int] = {}
        given: dict[str, str] = {}
        for key, value in config.items():
            if key in _DEPTH_KEYS:
                knob, v = "depth", int(value) + _DEPTH_KEYS[key]
            elif key in _TOPK_KEYS:
                knob, v = "topk", int(value)
            elif key in _TOTAL_KEYS:
                if int(value) < 0:
                    raise EtspecError(
                        f"{key}={value} asks for a tuned budget: use --tree auto instead"
                    )
                knob, v = "total_tokens", int(value) + _TOTAL_KEYS[key]
            else:
                raise EtspecError(f"unknown dynamic tree setting {key!r}")
            if knob in given:
                raise EtspecError(message("knob_twice", first=given[knob], second=key, knob=knob))
            given[knob], kw[knob] = key, v
        return kw

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> DynamicTree:
        """A dynamic tree from other projects' setting names (``knobs``)."""
        return cls(**cls.knobs(config))

    @property
    def cost(self) -> ShapeCost:
        candidates = self.topk + self.depth * self.topk * self.topk
        nodes = min(self.total_tokens - 1, candidates)
        return ShapeCost(nodes, self.depth + 1, self.depth * self.topk, self.depth)

    def grow(self, expander: Expander, max_height: int, sampler: Sampler) -> Proposal:
        if max_height < 1:
            return Proposal([], [], None, expander.calls)
        k = self.topk
        logp = _log_probs(expander.root().reshape(1, -1))[0]
        first = top(logp, k)
        scores = [logp[first]]
        tokens = [expander.target_ids[first]]
        parent = [torch.full((first.numel(),), -1)]  # candidate index of each parent
        handle = torch.zeros(first.numel(), dtype=torch.long)  # expander handle per candidate
        frontier, front_scores, fed, base = torch.arange(first.numel()), scores[0], 0, 0
        for _ in range(min(self.depth, max_height - 1)):
            par = _parent_handles(frontier, parent, handle)
            logits = expander.expand(par, torch.cat(tokens)[frontier].tolist())
            n = frontier.numel()
            handle = torch.cat([handle, torch.zeros(n * k, dtype=torch.long)])
            handle[frontier] = torch.arange(fed + 1, fed + n + 1)
            fed += n
            lp = _log_probs(logits)
            child = torch.stack([top(row, k) for row in lp])  # [n, k]
            cum = lp.gather(1, child) + front_scores[:, None]
            base += scores[-1].numel()
            scores.append(cum.flatten())
            tokens.append(expander.target_ids[child.flatten()])
            parent.append(frontier.repeat_interleave(child.shape[1]))
            pick = top(scores[-1], k)
            frontier, front_scores = base + pick, scores[-1][pick]
        chosen, parents = rerank(torch.cat(scores), torch.cat(parent), self.total_tokens - 1)
        # Greedy drafts: every node is the draft's deterministic pick (probs=None).
        return Proposal(torch.cat(tokens)[chosen].tolist(), parents, None, expander.calls)


def _parent_handles(
    frontier: torch.Tensor, parent: list[torch.Tensor], handle: torch.Tensor
) -> list[int]:
    parents = torch.cat(parent)[frontier]
    return torch.where(parents < 0, 0, handle[parents.clamp_min(0)]).tolist()


def _log_probs(logits: torch.Tensor) -> torch.Tensor:
    if bool(torch.isnan(logits).any()):
        raise TreeError(message("draft_nan"))
    return torch.log_softmax(logits.float(), dim=-1)


def rerank(
    scores: torch.Tensor, parent: torch.Tensor, nodes: int
) -> tuple[torch.Tensor, list[int]]:
    """The ``nodes`` best candidates in level order, and their parents as tree rows (0 is
    the root). ``parent`` holds each candidate's parent candidate, -1 for the root."""
    if bool(torch.isnan(scores).any()):
        raise TreeError("a tree candidate has a NaN score")
    chosen = torch.sort(top(scores, nodes)).values  # level order: parents before children
    if not bool(torch.isfinite(scores[chosen]).all()):
        raise TreeError(message("tree_neg_inf"))
    row = torch.full((scores.numel(),), -1, dtype=torch.long)
    row[chosen] = torch.arange(1, chosen.numel() + 1)
    par = parent[chosen]
    rows = torch.where(par < 0, 0, row[par.clamp_min(0)])
    if bool((rows < 0).any()):
        raise TreeError(message("rerank_orphan"))
    return chosen, rows.tolist()
