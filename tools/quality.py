"""How much of a model a (quantized) artifact keeps: ``etspec quality REFERENCE CANDIDATE``.

Three measures, each computed the same way for any two target programs that share a
tokenizer (``.pte`` files, or eager programs):

- **Top-1 agreement**: the reference writes greedy continuations of a fixed prompt set; both
  programs are then fed exactly those tokens (teacher forcing) and, position by position,
  the candidate's argmax is compared with the token the reference chose. Errors do not
  compound, so this measures the model rather than where one early flip leads.
- **Held-out perplexity**: exp(mean negative log-likelihood) of a text neither model can have
  seen (written for this project in 2026, after the models' training data), for each.
- **Copy test**: a paragraph, then the start of it again; greedy decoding must reproduce
  the rest verbatim. A model that paraphrases or loops here breaks prompt lookup, which
  feeds on exactly this behaviour.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from etspec.contract import TARGET_DECODE, TARGET_RESET
from etspec.errors import EtspecError
from etspec.runtime.masks import MaskLayout
from etspec.runtime.prefill import prefill_target
from etspec.runtime.program import Program
from etspec.runtime.runner import TextLLMRunner

AGREEMENT_PROMPTS = (
    "The history of the printing press begins",
    'def merge_sorted(a, b):\n    """Merge two sorted lists into one sorted list."""\n',
    "-- Table orders(id, customer_id, total, created_at)\n"
    "-- Total revenue per customer in 2024, highest first\nSELECT",
    "Question: Why is the sky blue during the day but red at sunset?\nAnswer:",
    "Ingredients for a simple pancake batter:\n1.",
    "Dear Ms. Alvarez,\n\nThank you for your letter of March 3rd. Regarding the delayed",
)
COPY_PARAGRAPH = (
    "The lighthouse keeper wrote the weather into his ledger every morning at six: wind "
    "from the north-west, a falling glass, and a grey swell that broke white on the outer "
    "rocks. In forty years he had missed the entry only twice, once for a wedding and once "
    "for a storm that took the roof off the oil store."
)
COPY_PREFIX_WORDS = 6
HELD_OUT = (
    "Speculative decoding lets a small draft model guess several tokens ahead while the "
    "large model checks all of the guesses in a single pass. When the guesses are right, the "
    "large model has produced several tokens for the price of one; when they are wrong, it "
    "throws the rest away and keeps its own choice, so the output never changes. On a phone "
    "the difference matters more than on a server, because memory bandwidth rather than "
    "arithmetic sets the pace: reading every weight once per token is the real cost, and a "
    "check of eight tokens reads them no more often than a check of one.\n\n"
    "The catch is that everything around the models has to be cheap as well. Building the "
    "tree of guesses, masking the attention so that each guess sees only its own ancestors, "
    "copying the accepted entries of the cache into place and throwing away the rest all "
    "happen on the host between calls, and at a few milliseconds per call even a fraction of "
    "a millisecond shows. A runtime written for this keeps the shapes fixed, so that the "
    "compiled program never has to be rebuilt, and keeps its bookkeeping in small integer "
    "arrays rather than in objects.\n\n"
    "Quantization is the other lever. Storing weights in four or eight bits instead of "
    "thirty-two cuts the bytes read per token by four to eight times, and the arithmetic "
    "units of a modern phone are happy to work on small integers. The risk is quality: a "
    "model that has been squeezed too hard starts to repeat itself, loses facts it knew, "
    "and cannot copy a paragraph word for word. Measuring that takes more than one prompt, "
    "which is why a report compares the squeezed model with the original on the same tokens."
)


@dataclass
class Scores:
    """Per position of a teacher-forced sequence: the argmax and the log-probability of
    the token that actually came next."""

    argmax: list[int] = field(default_factory=list)
    logprob: list[float] = field(default_factory=list)


def teacher_forced(program: Program, ids: Sequence[int], start: int) -> Scores:
    """Feed ``ids`` to ``program`` (prefill of ``ids[:start]``, then one decode per token)
    and score every position from ``start`` on: what the program would have chosen there,
    and the log-probability it gave ``ids[i]``."""
    if not 1 <= start < len(ids):
        raise EtspecError(f"teacher forcing needs 1 <= start < {len(ids)}, got {start}")
    if len(ids) > program.metadata.max_context:  # type: ignore[union-attr]
        raise EtspecError(
            f"{len(ids)} tokens exceed the context of {program.metadata.max_context}"  # type: ignore[union-attr]
        )
    program.run(TARGET_RESET)
    logits = prefill_target(program, torch.tensor(ids[:start], dtype=torch.long)).logits
    out = Scores()
    token, position = torch.empty(1, dtype=torch.long), torch.empty(1, dtype=torch.long)
    layout = MaskLayout.of(program.metadata)  # type: ignore[arg-type]
    for i in range(start, len(ids)):
        row = logits.reshape(-1).float()
        out.argmax.append(int(row.argmax()))
        out.logprob.append(float(torch.log_softmax(row, -1)[ids[i]]))
        if i + 1 < len(ids):
            token[0], position[0] = ids[i], i
            mask = layout.causal(position)
            band = layout.band(i, mask.shape[-1])
            logits, _ = program.run(TARGET_DECODE, token, position, mask, *band)
    return out


@dataclass
class QualityReport:
    reference: str
    candidate: str
    agreement: float  # share of teacher-forced positions where the candidate's argmax agrees
    agreement_per_prompt: list[float]
    positions: int
    perplexity_reference: float
    perplexity_candidate: float
    copy_reference: bool
    copy_candidate: bool
    copy_matched_tokens: dict[str, int]
    copy_needed_tokens: int

    @property
    def perplexity_ratio(self) -> float:
        return self.perplexity_candidate / self.perplexity_reference

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "perplexity_ratio": self.perplexity_ratio}


def copy_test(runner: TextLLMRunner) -> tuple[int, int]:
    """(tokens of the paragraph's rest reproduced before the first difference, tokens
    needed): the paragraph, a request for it again, its first words; then greedy."""
    assert runner.tokenizer is not None
    words = COPY_PARAGRAPH.split(" ")
    head, rest = " ".join(words[:COPY_PREFIX_WORDS]), " " + " ".join(words[COPY_PREFIX_WORDS:])
    prompt = f"{COPY_PARAGRAPH}\n\nThe same paragraph again, word for word:\n\n{head}"
    want = runner.tokenizer.encode(head + rest)[len(runner.tokenizer.encode(head)) :]
    got = runner.generate(prompt, len(want), ignore_eos=True).token_ids
    matched = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), None)
    return (len(want) if matched is None else matched), len(want)


def compare(
    reference: TextLLMRunner,
    candidate: TextLLMRunner,
    names: tuple[str, str] = ("reference", "candidate"),
    new_tokens: int = 96,
) -> QualityReport:
    """The three measures for ``candidate`` against ``reference`` (target-only runners over
    programs with the same tokenizer)."""
    for r in (reference, candidate):
        if r.tokenizer is None:
            raise EtspecError("the quality report needs artifacts that carry a tokenizer")
    if reference.meta.tokenizer_sha256 != candidate.meta.tokenizer_sha256:
        raise EtspecError(
            "the two artifacts have different tokenizers; compare exports of one model"
        )
    per_prompt, agree, total = [], 0, 0
    for prompt in AGREEMENT_PROMPTS:
        gen = reference.generate(prompt, new_tokens, ignore_eos=True)
        ids = [*gen.prompt_ids, *gen.token_ids]
        cand = teacher_forced(candidate.target, ids, len(gen.prompt_ids))
        hits = sum(a == b for a, b in zip(cand.argmax, gen.token_ids, strict=True))
        per_prompt.append(hits / len(gen.token_ids))
        agree, total = agree + hits, total + len(gen.token_ids)
    held_out = reference.encode(HELD_OUT)
    ppl = [
        math.exp(-sum(s.logprob) / len(s.logprob))
        for s in (teacher_forced(r.target, held_out, 1) for r in (reference, candidate))
    ]
    copies = [copy_test(r) for r in (reference, candidate)]
    return QualityReport(
        reference=names[0],
        candidate=names[1],
        agreement=agree / total,
        agreement_per_prompt=per_prompt,
        positions=total,
        perplexity_reference=ppl[0],
        perplexity_candidate=ppl[1],
        copy_reference=copies[0][0] == copies[0][1],
        copy_candidate=copies[1][0] == copies[1][1],
        copy_matched_tokens={"reference": copies[0][0], "candidate": copies[1][0]},
        copy_needed_tokens=copies[0][1],
    )
