"""Eagle3DraftRunner: drafting with an EAGLE-3 head exported as a draft ``.pte``.

Draft row j pairs the target's state at position j with the token at position j + 1 and
predicts the token at j + 2 (the EAGLE alignment). Rows up to the committed target length
are "committed" draft KV, computed from real target states; drafting writes rows after
them from the draft's own states, and the next ``accept`` overwrites those rows with the
target's states of what was actually accepted (position-overwrite inside the draft cache,
so a rejected draft row is never visible: the mask only shows slots up to a row's own).
"""

from __future__ import annotations

import torch

from etspec.contract import (
    DRAFT_D2T,
    DRAFT_EXTEND,
    DRAFT_PREFILL,
    DRAFT_RESET,
    DRAFT_STEP,
    MASK_MIN,
    DraftMetadata,
    TargetMetadata,
)
from etspec.errors import EtspecError
from etspec.models.layers import causal_mask
from etspec.runtime.program import Program
from etspec.runtime.sampling import Sampler
from etspec.runtime.speculative.draft_runner import Acceptance, Proposal, SpeculativeDraftRunner


class Eagle3DraftRunner(SpeculativeDraftRunner):
    def __init__(self, program: Program) -> None:
        meta = program.metadata
        if not isinstance(meta, DraftMetadata) or meta.draft_method != "eagle3":
            raise EtspecError("Eagle3DraftRunner needs an EAGLE-3 draft artifact")
        self.program = program
        self.meta = meta
        self.hidden_spec = meta.hidden_spec()
        (d2t,) = program.constant(DRAFT_D2T)
        d2t = torch.as_tensor(d2t, dtype=torch.long)
        # Draft id i is target id i + d2t[i].
        self.target_ids = torch.arange(meta.draft_vocab_size) + d2t
        self._step_rows = torch.arange(meta.step_width)
        self._extend_rows = torch.arange(meta.extend_width)
        self._logits = torch.empty(0)
        self._hidden = torch.empty(0)
        self._pos = 0

    def check_target(self, target: TargetMetadata) -> None:
        if target.vocab_size != self.meta.target_vocab_size:
            raise EtspecError(
                f"the draft predicts a {self.meta.target_vocab_size}-token vocabulary, the "
                f"target has {target.vocab_size}; export the draft against this target"
            )

    def memory(self) -> dict[str, int]:
        return {
            "draft_weights_bytes": self.program.weights_bytes(),
            "draft_kv_bytes": self.meta.kv_cache_bytes,
        }

    def reset(self) -> None:
        self.program.run(DRAFT_RESET)
        self._pos = 0

    def _causal(self, positions: torch.Tensor) -> torch.Tensor:
        return causal_mask(positions, self.meta.cache_size, MASK_MIN)

    def prefill(self, prompt: list[int], first_token: int, hidden: torch.Tensor | None) -> int:
        assert hidden is not None
        tokens = torch.tensor([*prompt[1:], first_token], dtype=torch.long)
        n, total = self.meta.prefill_chunk, len(prompt)
        calls = 0
        for lo in range(0, total, n):
            real = min(n, total - lo)
            ids = torch.zeros(n, dtype=torch.long)
            ids[:real] = tokens[lo : lo + real]
            states = torch.zeros(n, hidden.shape[-1])
            states[:real] = hidden[lo : lo + real]
            positions = torch.arange(lo, lo + n)
            logits, out = self.program.run(
                DRAFT_PREFILL, ids, states, positions, torch.tensor([real - 1])
            )
            calls += 1
        self._logits, self._hidden, self._pos = logits, out, total
        return calls

    def _choose(self, logits: torch.Tensor, sampler: Sampler) -> tuple[int, torch.Tensor | None]:
        if sampler.greedy:
            return int(self.target_ids[int(logits.argmax())]), None
        q_draft = sampler.probs(logits.reshape(1, -1))
        pick = int(sampler.draw(q_draft)[0])
        q = torch.zeros(self.meta.target_vocab_size)
        q[self.target_ids] = q_draft[0]
        return int(self.target_ids[pick]), q

    def propose(self, max_tokens: int, sampler: Sampler) -> Proposal:
        w = self.meta.step_width
        tokens: list[int] = []
        probs: list[torch.Tensor] = []
        logits, hidden, calls = self._logits, self._hidden, 0
        for i in range(max_tokens):
            if i:
                # One chain level: row 0 is real; pad rows write the slots after it, which
                # the next level rewrites before anything reads them.
                positions = self._pos + i - 1 + self._step_rows
                ids = torch.zeros(w, dtype=torch.long)
                ids[0] = tokens[-1]
                states = torch.zeros(w, hidden.shape[-1])
                states[0] = hidden[0]
                logits, hidden = self.program.run(
                    DRAFT_STEP, ids, states, positions, positions, self._causal(positions)
                )
                calls += 1
            token, q = self._choose(logits[0], sampler)
            tokens.append(token)
            if q is not None:
                probs.append(q)
        return Proposal.chain(tokens, torch.stack(probs) if probs else None, calls)

    def accept(self, acceptance: Acceptance) -> int:
        hidden = acceptance.hidden
        assert hidden is not None
        e, rows = self.meta.extend_width, len(acceptance.tokens)
        ids = torch.zeros(e, dtype=torch.long)
        ids[:rows] = torch.tensor([*acceptance.tokens[1:], acceptance.next_token])
        states = torch.zeros(e, hidden.shape[-1])
        states[:rows] = hidden
        positions = acceptance.position + self._extend_rows
        logits, out = self.program.run(
            DRAFT_EXTEND, ids, states, positions, positions, self._causal(positions)
        )
        self._logits, self._hidden = logits[rows - 1 : rows], out[rows - 1 : rows]
        self._pos = acceptance.position + rows
        return 1
