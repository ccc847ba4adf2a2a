"""Outside peers for the benchmark: ``transformers`` greedy ``generate`` and assisted
generation (``assistant_model``) on the target's own Hugging Face checkpoint.

They answer "how does etspec compare with what a user would run without it": the same
weights in eager PyTorch through the most common generation API, on the same prompts and
cores. ``transformers`` is optional and imported only here, only when a bench asks for
peers; the runtime never needs it.

A peer presents the surface ``run_systems`` uses (``meta``, ``encode``, ``generate``), so the
harness times it, checks its ids against target-only and reports it like any other system.
Its prompts are etspec's ids (the checkpoint's ``tokenizer.json``), so every system sees the
same tokens. It makes no verify calls: TPC and stage columns stay empty for it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from etspec.errors import EtspecError
from etspec.runtime.runner import GenerationResult, TextLLMRunner
from etspec.runtime.sampling import SamplingConfig
from etspec.runtime.stats import GenerationStats
from etspec.tools.peers.base import OutsidePeer

GREEDY = "transformers greedy"
ASSISTED = "transformers assisted"


def _transformers() -> Any:
    try:
        import transformers
    except ImportError:
        raise EtspecError(
            "transformers peers need transformers: pip install transformers (or drop --hf-target)"
        ) from None
    # Its deprecation notes on generate's arguments are about its API, not the benchmark.
    transformers.logging.set_verbosity_error()
    return transformers


def _load(path: Path, what: str, vocab_size: int) -> Any:
    tf = _transformers()
    try:
        model = tf.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    except (OSError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise EtspecError(
            f"{path}: transformers cannot load this {what} checkpoint ({first}); give a "
            "Hugging Face causal-LM folder"
        ) from None
    got = model.get_output_embeddings().weight.shape[0]
    if got != vocab_size:
        raise EtspecError(
            f"{path}: the {what} predicts {got} tokens, the target .pte {vocab_size}; "
            "give a checkpoint with the target's tokenizer"
        )
    return model.eval()


class TransformersPeer(OutsidePeer):
    """``model.generate`` (greedy, sampled, or assisted by ``assistant``) as a bench system.

    ``base`` is the etspec target-only runner of the same target: the peer borrows its
    metadata (context, EOS) and tokenizer so prompts and stop rules match.
    """

    def __init__(self, model: Any, base: TextLLMRunner, assistant: Any | None = None) -> None:
        super().__init__(base)
        self.model = model
        self.assistant = assistant
        self._streamer = _first_token_streamer()

    def run(
        self,
        ids: list[int],
        max_new_tokens: int,
        sampling: SamplingConfig,
        ignore_eos: bool = False,
    ) -> GenerationResult:
        """One generation through ``transformers``."""
        eos = list(self.meta.eos_token_ids)
        kw: dict[str, Any] = {
            "max_new_tokens": max_new_tokens,
            "eos_token_id": eos or None,
            "pad_token_id": eos[0] if eos else 0,
        }
        if ignore_eos:
            kw["min_new_tokens"] = max_new_tokens
        if sampling.temperature > 0:
            kw.update(do_sample=True, temperature=sampling.temperature, top_k=0, top_p=1.0)
            if sampling.top_k:
                kw["top_k"] = sampling.top_k
            if sampling.top_p < 1.0:
                kw["top_p"] = sampling.top_p
            if sampling.seed is not None:
                torch.manual_seed(sampling.seed)
        else:
            kw["do_sample"] = False
        if self.assistant is not None:
            kw["assistant_model"] = self.assistant
        streamer = self._streamer()
        stats = GenerationStats(prompt_tokens=len(ids))
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = self.model.generate(torch.tensor([ids]), streamer=streamer, **kw)
        stats.total_s = time.perf_counter() - t0
        new = out[0, len(ids) :].tolist()
        stats.ttft_s = (streamer.first_at or time.perf_counter()) - t0
        return self.result(new, stats)


def _first_token_streamer() -> type:
    """A ``transformers`` streamer class that notes when the first new token arrives
    (``generate`` puts the prompt first, then new tokens), for TTFT."""
    base = _transformers().generation.streamers.BaseStreamer

    class FirstToken(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            self.puts = 0
            self.first_at: float | None = None

        def put(self, value: torch.Tensor) -> None:
            self.puts += 1
            if self.puts == 2:
                self.first_at = time.perf_counter()

        def end(self) -> None:
            pass

    return FirstToken


def transformers_peers(
    target: Path, assistant: Path | None, base: TextLLMRunner
) -> dict[str, TransformersPeer]:
    """``transformers greedy`` on ``target`` (the HF checkpoint the target .pte came from)
    and, with ``assistant`` (a small causal LM with the same tokenizer), ``transformers
    assisted``."""
    vocab = base.meta.vocab_size
    model = _load(target, "target", vocab)
    peers = {GREEDY: TransformersPeer(model, base)}
    if assistant is not None:
        helper = _load(assistant, "assistant", vocab)
        peers[ASSISTED] = TransformersPeer(model, base, helper)
    return peers
