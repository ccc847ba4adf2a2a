"""llama.cpp as an outside peer in the benchmark: its own decoding of a GGUF file, target-only
and with its prompt-lookup speculation, through ``llama-cpp-python`` (optional; imported only
here, only when a bench names ``--llama-cpp``).

This answers "how does etspec compare with what a user runs on a laptop today": the GGUF a
``.pte`` was exported from, on the same prompt ids and cores. A llama.cpp output is held to
llama.cpp's own target-only output, not to etspec's: the two quantize the weights differently
(Q4_K_M against etspec's recipes), so their greedy tokens may part ways, and that is a
difference between models, not a speculation error. llama-cpp-python's lookup decoding
(``LlamaPromptLookupDecoding``) keeps logits for every evaluated token on the host
(``logits_all``): that cost is part of what a user of it gets.

llama.cpp's worker threads busy-wait, so its timings on a machine with other load mean
nothing; ``check_idle`` refuses such a machine before anything loads.
"""

from __future__ import annotations

import atexit
import os
import time
from pathlib import Path
from typing import Any

from etspec.errors import EtspecError
from etspec.logs import quiet
from etspec.runtime.runner import GenerationResult, TextLLMRunner
from etspec.runtime.sampling import SamplingConfig
from etspec.runtime.stats import GenerationStats
from etspec.tools.bench_harness import cpu_count as cores
from etspec.tools.peers.base import OutsidePeer

TARGET_ONLY = "llama.cpp target-only"
# llama.cpp's lookup examples draft up to 7-10 tokens from 2-grams; the table used 7.
LOOKUP_TOKENS = 7
LOOKUP = f"llama.cpp lookup{LOOKUP_TOKENS}"


def check_idle(load: float | None = None, n_cores: int | None = None) -> float:
    """The one-minute load average; refuses a machine busier than its core count, where
    llama.cpp's busy-waiting threads would publish a contended figure."""
    load = os.getloadavg()[0] if load is None else load
    n_cores = cores() if n_cores is None else n_cores
    if load > n_cores:
        raise EtspecError(
            f"load average {load:.1f} on {n_cores} cores: llama.cpp's busy-waiting threads "
            "make a run on a busy machine meaningless; rerun --llama-cpp when it is idle"
        )
    return load


def _llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError:
        raise EtspecError(
            "--llama-cpp needs llama-cpp-python: pip install 'etspec[llama-cpp]' (it builds "
            "llama.cpp from source, several minutes)"
        ) from None
    atexit.register(_close_null_files)
    return llama_cpp


def _close_null_files() -> None:
    """llama-cpp-python opens two /dev/null files at import and never closes them; in a
    process that loaded ExecuTorch they are collected after the warnings machinery, which
    prints two ResourceWarnings at exit. They serve only model loading, over by then."""
    from llama_cpp import _utils

    for f in (_utils.outnull_file, _utils.errnull_file):
        f.close()


class LlamaCppPeer(OutsidePeer):
    """One llama.cpp context on ``gguf`` as a bench system (``run_systems``' surface:
    ``meta``, ``encode``, ``generate``). ``base`` is etspec's target-only runner of the same
    model: the peer takes its prompt ids, context and EOS ids, so every system sees the same
    tokens and stops alike."""

    def __init__(self, llm: Any, base: TextLLMRunner, threads: int) -> None:
        super().__init__(base)
        self.llm = llm
        self.threads = threads
        self.build: dict[str, Any] = {}  # build_info(): version and CPU features

    def close(self) -> None:
        """Free the llama.cpp context now (left to interpreter exit, its teardown prints
        ResourceWarnings)."""
        self.llm.close()

    def run(
        self,
        ids: list[int],
        max_new_tokens: int,
        sampling: SamplingConfig,
        ignore_eos: bool = False,
    ) -> GenerationResult:
        """One generation by llama.cpp."""
        room = self.meta.max_context - len(ids)
        if room < 1:
            raise EtspecError(
                f"prompt of {len(ids)} tokens leaves no room in the {self.meta.max_context}-"
                "token context"
            )
        eos = set() if ignore_eos else set(self.meta.eos_token_ids)
        if sampling.greedy:
            kw: dict[str, Any] = {"top_k": 1, "top_p": 1.0, "min_p": 0.0, "temp": 0.0}
        else:
            kw = {"top_k": sampling.top_k, "top_p": sampling.top_p, "min_p": 0.0,
                  "temp": sampling.temperature}  # fmt: skip
            self.llm.set_seed(0 if sampling.seed is None else sampling.seed)
        # A fresh context per request: llama-cpp-python would otherwise reuse the previous
        # prompt's matching prefix, which no other system gets.
        self.llm.reset()
        stats = GenerationStats(prompt_tokens=len(ids))
        new: list[int] = []
        t0 = time.perf_counter()
        for token in self.llm.generate(ids, repeat_penalty=1.0, **kw):
            if not new:
                stats.ttft_s = time.perf_counter() - t0
            new.append(int(token))
            if new[-1] in eos or len(new) >= min(max_new_tokens, room):
                break
        stats.total_s = time.perf_counter() - t0
        return self.result(new, stats)


def llama_cpp_peers(gguf: Path, base: TextLLMRunner, threads: int) -> dict[str, LlamaCppPeer]:
    """llama.cpp target-only and its prompt lookup (``LOOKUP_TOKENS`` draft tokens) on
    ``gguf``, each with ``threads`` threads and the target ``.pte``'s context."""
    lib = _llama_cpp()
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    if not gguf.is_file():
        raise EtspecError(f"{gguf}: no such GGUF file; give the file the target was exported from")

    def context(draft: Any = None) -> Any:
        try:
            # verbose=False still leaves llama.cpp's cache notes on stderr: --verbose shows them.
            # A draft needs logits_all=True said explicitly: llama-cpp-python sets it for a
            # draft but sizes its host logits buffer from the argument (n_batch rows), and a
            # prompt longer than n_batch then fails to store its logits.
            with quiet(native=True):
                return lib.Llama(
                    model_path=str(gguf), n_ctx=base.meta.max_context, n_threads=threads,
                    n_threads_batch=threads, draft_model=draft, logits_all=draft is not None,
                    verbose=False, seed=0,
                )  # fmt: skip
        except ValueError as e:
            raise EtspecError(f"{gguf}: llama.cpp cannot load it ({e})") from None

    llm = context()
    if llm.n_vocab() != base.meta.vocab_size:
        raise EtspecError(
            f"{gguf}: its vocabulary has {llm.n_vocab()} tokens, the target .pte's "
            f"{base.meta.vocab_size}; give the GGUF the target was exported from"
        )
    lookup = context(LlamaPromptLookupDecoding(num_pred_tokens=LOOKUP_TOKENS))
    peers = {
        TARGET_ONLY: LlamaCppPeer(llm, base, threads),
        LOOKUP: LlamaCppPeer(lookup, base, threads),
    }
    for peer in peers.values():
        peer.build = build_info(lib)
    return peers


# How to build llama-cpp-python for an x86 CPU with AVX-512 without its native build (which
# crashed in llama_decode on an AVX-512 + AMX VM): AVX-512, VNNI and BF16 on, AMX off. An
# AVX2-only build understates llama.cpp on such a CPU; the bench names the build it ran.
AVX512_CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
    "-DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AVX512_VBMI=ON "
    "-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
)


def build_info(lib: Any) -> dict[str, Any]:
    """The llama.cpp build a run used: llama-cpp-python's version and the CPU features it was
    compiled with (``llama_print_system_info``), and whether it leaves out AVX-512 on a CPU
    that has it (then its figures understate llama.cpp: rebuild with ``AVX512_CMAKE_ARGS``)."""
    info = lib.llama_print_system_info().decode(errors="replace").strip()
    features = dict(
        (k.strip(), v.strip()) for k, _, v in (f.partition("=") for f in info.split("|")) if v
    )
    return {
        "llama_cpp_python": getattr(lib, "__version__", "?"),
        "system_info": info,
        "understates_this_cpu": _cpu_has_avx512() and features.get("AVX512") != "1",
    }


def _cpu_has_avx512() -> bool:
    try:
        return " avx512f " in Path("/proc/cpuinfo").read_text() + " "
    except OSError:
        return False


# Each llama.cpp system's output is held to llama.cpp's own target-only output.
BASELINES: dict[str, str | None] = {TARGET_ONLY: None, LOOKUP: TARGET_ONLY}
