"""PromptLookupDraftRunner: model-free drafting by n-gram lookup in the sequence so far.

It proposes the tokens that followed the most recent earlier occurrence of the last n
tokens (longest n first), as in prompt-lookup decoding, as a loop: a continuation that
reaches the end of the text repeats itself. It reads no target state and holds
no KV, which is the point: the speculative loop works unchanged over it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from etspec.contract import DEFAULT_MAX_NGRAM, PROMPT_LOOKUP_METHOD, message
from etspec.errors import EtspecError
from etspec.runtime.program import Program
from etspec.runtime.sampling import Sampler
from etspec.runtime.speculative.draft_method import DraftMethod
from etspec.runtime.speculative.draft_runner import SpeculativeDraftRunner
from etspec.runtime.speculative.shapes import TreeShape
from etspec.runtime.speculative.step import Acceptance, Offer, Proposal

if TYPE_CHECKING:
    from etspec.runtime.spec import RunnerSpec


class PromptLookupDraftRunner(SpeculativeDraftRunner):
    hidden_spec = None
    has_model = False
    offers = True

    def __init__(self, vocab_size: int, max_ngram: int = 3, min_ngram: int = 1) -> None:
        if not 1 <= min_ngram <= max_ngram:
            raise EtspecError(message("ngram_range"))
        self.vocab_size = vocab_size
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        # The sequence so far in a buffer that doubles when full: every step searches it,
        # and numpy ops cost ~1 us where torch ops cost 5-15 us (match: 10-13 us over
        # 128-2,048 tokens, against 37-172 us as torch ops; scripts/bench_lookup.py).
        self._seq = np.zeros(256, dtype=np.int64)
        self._len = 0

    @property
    def history(self) -> list[int]:
        """The prompt and every committed token, in order."""
        return self._seq[: self._len].tolist()  # type: ignore[no-any-return]

    @history.setter
    def history(self, tokens: Sequence[int]) -> None:
        self._len = 0
        self._extend(tokens)

    def _extend(self, tokens: Sequence[int]) -> None:
        end = self._len + len(tokens)
        if end > self._seq.size:
            grown = np.zeros(max(end, 2 * self._seq.size), dtype=np.int64)
            grown[: self._len] = self._seq[: self._len]
            self._seq = grown
        self._seq[self._len : end] = tokens
        self._len = end

    def reset(self) -> None:
        self._len = 0

    def prefill(self, prompt: list[int], first_token: int, hidden: torch.Tensor | None) -> int:
        self.history = [*prompt, first_token]
        return 0

    def accept(self, acceptance: Acceptance) -> int:
        self._extend([*acceptance.tokens[1:], acceptance.next_token])
        return 0

    def match(self, max_tokens: int) -> tuple[int, list[int]]:
        """(n, continuation): the length of the longest n-gram matched and the
        ``max_tokens`` tokens that followed its latest earlier occurrence (repeating those
        up to the end of the text, when fewer followed); (0, []) when nothing matches."""
        seq, total = self._seq, self._len
        for n in range(min(self.max_ngram, total - 1), self.min_ngram - 1, -1):
            # Windows starting before the final n-gram itself (starts 0..total-n-1), each
            # compared token by token with it; the latest match wins.
            starts = total - n
            hit = seq[:starts] == seq[starts]
            for k in range(1, n):
                hit &= seq[k : k + starts] == seq[starts + k]
            found = np.flatnonzero(hit)
            if found.size:
                # Where the continuation runs into the end of the text, it goes on as it
                # went (LZ77's overlapping copy): in a loop the latest match is one period
                # back, and its continuation alone would be only that period long.
                start = int(found[-1]) + n
                return n, seq[start + np.arange(max_tokens) % (total - start)].tolist()
        return 0, []

    def offer(self, max_tokens: int) -> Offer | None:
        # The matched n-gram's length is the evidence: under sampling a 1-gram match rarely
        # pays for its verify, a 3-gram match nearly always does.
        n, tokens = self.match(max_tokens)
        return Offer(tokens, f"ngram{n}") if tokens else None

    def propose(self, shape: TreeShape, max_height: int, sampler: Sampler) -> Proposal:
        # A fixed shape: the deepest chain it allows. The tokens are deterministic picks,
        # which the verifier treats as point masses (probs=None).
        cost = shape.cost
        _, tokens = self.match(min(cost.max_height, cost.max_nodes, max_height))
        return Proposal.chain(tokens)


class PromptLookupMethod(DraftMethod):
    """Drafts by n-gram lookup in the prompt and output so far: no draft file, no model."""

    name = PROMPT_LOOKUP_METHOD
    help = "n-gram lookup in the text so far (vLLM's ngram), no --draft"
    aliases = ("ngram",)
    in_cpp = True

    def check(self, spec: RunnerSpec) -> None:
        if spec.draft is not None:
            raise EtspecError(message("lookup_with_draft"))

    def runner(
        self, spec: RunnerSpec, target: Program, draft: Program | None
    ) -> SpeculativeDraftRunner:
        return PromptLookupDraftRunner(target.metadata.vocab_size, *self.ngram(spec))

    @staticmethod
    def ngram(spec: RunnerSpec) -> tuple[int, int]:
        """(longest, shortest) n-gram: the given ones, else DEFAULT_MAX_NGRAM (or the
        shortest, if larger) and 1."""
        lo, hi = spec.option("min_ngram"), spec.option("max_ngram")
        return hi or max(DEFAULT_MAX_NGRAM, lo or 1), lo or 1
