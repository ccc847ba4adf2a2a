"""`etspec quality`'s three measures for llama.cpp on a GGUF, against an etspec reference.

    python scripts/quality_llama_cpp.py REFERENCE.pte MODEL.gguf [--json OUT.json]

The recipe table in docs/results.md sets each etspec recipe beside the file a llama.cpp user runs
(Gemma 3 270M's Q4_K_M). The reference (the fp32 ``.pte``) writes the same greedy
continuations ``etspec quality`` uses; llama.cpp (``pip install llama-cpp-python``) is fed
those token ids directly (no second tokenization) and scored position by position, as
``tools/quality.py`` scores an artifact; the held-out perplexity and copy test likewise.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click
import numpy as np


def _scores(llm: Any, ids: list[int], start: int) -> tuple[list[int], list[float]]:
    """Argmax and log-probability of the next token at every position from ``start``."""
    llm.reset()
    llm.eval(ids[:-1])
    logits = np.asarray(llm.scores[: len(ids) - 1], dtype=np.float64)[start - 1 :]
    logp = logits - logits.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    nxt = np.asarray(ids[start:])
    return logits.argmax(-1).tolist(), logp[np.arange(len(nxt)), nxt].tolist()


@click.command()
@click.argument("reference", type=click.Path(exists=True, path_type=Path))
@click.argument("gguf", type=click.Path(exists=True, path_type=Path))
@click.option("--threads", default=2, show_default=True)
@click.option("--new-tokens", default=96, show_default=True)
@click.option("--json", "json_out", type=click.Path(path_type=Path), default=None)
def main(reference: Path, gguf: Path, threads: int, new_tokens: int, json_out: Path | None) -> None:
    from llama_cpp import Llama

    from etspec.runtime.runner import load_runners
    from etspec.runtime.spec import RunnerSpec
    from etspec.tools import quality

    ref = load_runners(RunnerSpec(reference))[0]
    llm = Llama(model_path=str(gguf), n_ctx=2048, n_threads=threads, n_threads_batch=threads,
                logits_all=True, verbose=False)  # fmt: skip
    per_prompt, agree, total = [], 0, 0
    for prompt in quality.AGREEMENT_PROMPTS:
        gen = ref.generate(prompt, new_tokens, ignore_eos=True)
        ids = [*gen.prompt_ids, *gen.token_ids]
        argmax, _ = _scores(llm, ids, len(gen.prompt_ids))
        hits = sum(a == b for a, b in zip(argmax, gen.token_ids, strict=True))
        per_prompt.append(hits / len(gen.token_ids))
        agree, total = agree + hits, total + len(gen.token_ids)
    held_out = ref.encode(quality.HELD_OUT)
    ppl_ref = math.exp(-sum(quality.teacher_forced(ref.target, held_out, 1).logprob)
                       / (len(held_out) - 1))  # fmt: skip
    _, logp = _scores(llm, held_out, 1)
    ppl = math.exp(-sum(logp) / len(logp))
    assert ref.tokenizer is not None
    words = quality.COPY_PARAGRAPH.split(" ")
    head = " ".join(words[: quality.COPY_PREFIX_WORDS])
    rest = " " + " ".join(words[quality.COPY_PREFIX_WORDS :])
    prompt = f"{quality.COPY_PARAGRAPH}\n\nThe same paragraph again, word for word:\n\n{head}"
    want = ref.tokenizer.encode(head + rest)[len(ref.tokenizer.encode(head)) :]
    llm.reset()
    got: list[int] = []
    for tok in llm.generate(ref.encode(prompt), top_k=1, temp=0.0, repeat_penalty=1.0):
        got.append(int(tok))
        if len(got) >= len(want):
            break
    matched = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
                   len(want))  # fmt: skip
    result = {
        "reference": str(reference),
        "candidate": f"llama.cpp {gguf.name}",
        "agreement": agree / total,
        "agreement_per_prompt": per_prompt,
        "positions": total,
        "perplexity_reference": ppl_ref,
        "perplexity_candidate": ppl,
        "perplexity_ratio": ppl / ppl_ref,
        "copy_candidate": matched == len(want),
        "copy_matched_tokens": matched,
        "copy_needed_tokens": len(want),
    }
    click.echo(json.dumps(result, indent=1))
    if json_out is not None:
        json_out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
