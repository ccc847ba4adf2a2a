"""Benchmark harness: the same prompts through several systems, side by side, in one run.

A *system* is a ``TextLLMRunner`` under a name (target-only, speculative with some tree
mode, ...) or an outside peer (``transformers`` generate, ``tools/peers/transformers.py``).
Every system sees the same prompts in the same order on the same machine; one warm-up
generation per system is excluded. Greedy outputs of every system are compared with the
target-only system's, token for token (a benchmark that changes the output measures
nothing). Results are per-prompt records plus summaries; ``summarize`` is pure so tests can
check the metrics on synthetic records.

This is the machinery; ``bench_run.py`` is one ``etspec bench`` run over it (a
``BenchRequest``: which systems and prompts, loading them, sharding, what is written).
"""

from __future__ import annotations

import dataclasses
import json
import math
import platform
import subprocess
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from etspec.contract import TargetMetadata
from etspec.errors import EtspecError
from etspec.runtime.runner import GenerationResult, TextLLMRunner
from etspec.runtime.sampling import SamplingConfig
from etspec.runtime.speculative.dynamic_tree import DynamicTree
from etspec.runtime.speculative.settings import parse_shape
from etspec.tools import attribution
from etspec.tools.prompts import Prompt

BASELINE = "target-only"
# ``etspec bench --control``: the same target-only runner timed a second time, prompt by
# prompt beside the others, so its speedup over BASELINE (1 but for timing) shows how far a
# per-prompt ratio scatters on this machine.
CONTROL = "target-only again"


# Between one turn's answer and the next turn: the bundled tokenizer has no chat template, so
# a conversation is plain text, each turn a new paragraph.
TURN_SEPARATOR = "\n\n"


class BenchSystem(Protocol):
    """What the harness needs of a system: ``TextLLMRunner`` and the outside peers."""

    meta: TargetMetadata

    def encode(self, prompt: str | Sequence[int]) -> list[int]: ...

    def describe(self) -> dict[str, Any]: ...

    def generate(
        self,
        prompt: str | Sequence[int],
        max_new_tokens: int = ...,
        sampling: SamplingConfig | None = ...,
        *,
        trace: bool = ...,
        ignore_eos: bool = ...,
    ) -> GenerationResult: ...


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), ``q`` in [0, 100]."""
    if not values:
        return math.nan
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _dist(values: Sequence[float]) -> dict[str, float]:
    return {
        "mean": sum(values) / len(values) if values else math.nan,
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
    }


class BenchFailure(EtspecError):
    """A system raised on a prompt; ``dump`` holds what reproduces it."""

    def __init__(self, message: str, dump: dict[str, Any]) -> None:
        super().__init__(message)
        self.dump = dump


def failure_dump(
    system: str,
    runner: BenchSystem,
    prompt: Prompt,
    prompt_ids: Sequence[int],
    max_new_tokens: int,
    sampling: SamplingConfig,
    *,
    error: BaseException | None = None,
    expected: Sequence[int] | None = None,
    got: Sequence[int] | None = None,
    reference: str = BASELINE,
) -> dict[str, Any]:
    """A compact, self-contained report of one failed generation: the inputs that reproduce
    it (prompt id, text and the exact ids generated from, settings), the system and, for a
    wrong output, where it diverged from its ``reference`` system's output."""
    dump: dict[str, Any] = {
        "system": system,
        "reference": reference,
        "prompt_id": prompt.id,
        "prompt": prompt.text,
        "prompt_ids": list(prompt_ids),
        "max_new_tokens": max_new_tokens,
        "sampling": dataclasses.asdict(sampling),
        "runner": runner.describe(),
    }
    if error is not None:
        dump["error"] = f"{type(error).__name__}: {error}"
        dump["traceback"] = traceback.format_exception(error)[-8:]
    if expected is not None and got is not None:
        at = next(
            (i for i, (a, b) in enumerate(zip(expected, got, strict=False)) if a != b),
            min(len(expected), len(got)),
        )
        dump["divergence"] = {
            "index": at,
            "expected": list(expected[at : at + 8]),
            "got": list(got[at : at + 8]),
        }
    return dump


# EAGLE-Pangu's Table 2 protocol on EAGLE-2 dynamic trees: vary one of node budget (rows
# verified, incl. the root), depth (expansion passes) and top-k, hold the others.
SWEEPS: dict[str, tuple[str, Callable[[int], list[tuple[int, int, int]]]]] = {
    "nodes": ("total_tokens", lambda w: [(3, 4, t) for t in (4, 6, 8, 12, 16, 24, 32) if t <= w]),
    "depth": ("depth", lambda w: [(d, 4, w) for d in (1, 2, 3, 4, 5, 6)]),
    "topk": ("topk", lambda w: [(3, k, w) for k in (1, 2, 3, 4, 6, 8)]),
}


def sweep_trees(kind: str, max_width: int) -> list[DynamicTree]:
    """The shapes of one sweep for a target whose widest verify is ``max_width`` rows."""
    if kind not in SWEEPS:
        raise EtspecError(f"unknown sweep {kind!r}; choose {', '.join(SWEEPS)}")
    return [DynamicTree(d, k, t) for d, k, t in SWEEPS[kind][1](max_width)]


def sweep_value(kind: str, name: str) -> int | None:
    """The swept parameter of a system named like a sweep's shape (``parse_shape``), else
    None."""
    try:
        shape = parse_shape(name)
    except EtspecError:
        return None
    return getattr(shape, SWEEPS[kind][0]) if isinstance(shape, DynamicTree) else None


def run_systems(
    systems: dict[str, BenchSystem],
    prompts: Sequence[Prompt],
    max_new_tokens: int,
    sampling: SamplingConfig,
    on_prompt: Callable[[], None] | None = None,
    *,
    trace: bool = False,
    on_mismatch: Callable[[dict[str, Any]], None] | None = None,
    baselines: dict[str, str | None] | None = None,
    ignore_eos: bool = False,
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, dict[str, float]]]:
    """Per-prompt records of every system. Prompt by prompt, every system in turn (after
    one excluded warm-up each): a machine whose speed drifts during the run (shared or
    throttled cores) then slows every system alike instead of whichever ran last.

    A conversation (a prompt with follow-up turns) gives one record per turn, ``prompt_id``
    ``ID/turnN``: turn N sees the earlier turns with target-only's answers to them, so every
    system gets the same tokens (under greedy every lossless system's answers are those
    anyway). A conversation longer than the context keeps its latest tokens, leaving room
    for ``max_new_tokens``.

    ``trace`` adds every speculative step to the records (``steps``); ``ignore_eos`` runs
    every generation to its budget (sampled speed: every system then times as many
    tokens). A system that raises
    stops the run with a ``BenchFailure`` carrying a failure dump; under greedy sampling, an
    output that differs from target-only's goes to ``on_mismatch`` as a dump and the run
    goes on (the summary counts it). ``baselines`` names, per system, the system whose
    greedy output it must equal (default ``target-only``; None: no check), e.g. an outside
    peer's speculation is held to that peer's own target-only decoding.

    Returns the records and, per system, the timing of its first (cold) call: the warm-up
    on the first prompt, which the records leave out.
    """
    any_runner = next(iter(systems.values()))
    limit = any_runner.meta.max_context
    first: dict[str, dict[str, float]] = {}
    # The warm-up gets the budget its prompt would get in the run (a small-context target
    # cannot fit the default 128 new tokens after every prompt).
    warm = prompts[0].text
    warm_budget = max(1, min(max_new_tokens, limit - len(any_runner.encode(warm))))
    for name, runner in systems.items():
        cold = runner.generate(warm, warm_budget, sampling, ignore_eos=ignore_eos).stats
        first[name] = {"ttft_ms": 1e3 * cold.ttft_s, "total_s": cold.total_s}
    records: dict[str, list[dict[str, Any]]] = {name: [] for name in systems}
    greedy_check = on_mismatch is not None and sampling.greedy
    for p in prompts:
        history = ""
        for n, ask in enumerate(p.turns, start=1):
            text = ask if isinstance(ask, tuple) else history + ask  # ids: one turn only
            ids = any_runner.encode(text)
            if n > 1 and len(ids) + max_new_tokens > limit:
                ids = ids[-max(1, limit - max_new_tokens) :]
            turn = Prompt(p.id if not p.followups else f"{p.id}/turn{n}", text)
            budget = max(1, min(max_new_tokens, limit - len(ids)))
            answers = _run_turn(systems, turn, ids, budget, sampling, trace, records, ignore_eos)
            if p.followups:
                for name in systems:
                    records[name][-1].update(source_id=p.id, turn=n)
            expected = answers.get(BASELINE)
            if greedy_check:
                for name, got in answers.items():
                    ref = answers.get(baseline_of(name, baselines) or name)
                    if ref is not None and got.token_ids != ref.token_ids:
                        records[name][-1].update(
                            divergence(systems.get(BASELINE), ids, budget, ref, got, ignore_eos)
                        )
                        on_mismatch(  # type: ignore[misc]
                            failure_dump(
                                name,
                                systems[name],
                                turn,
                                ids,
                                budget,
                                sampling,
                                expected=ref.token_ids,
                                reference=baseline_of(name, baselines) or name,
                                got=got.token_ids,
                            )
                        )
            if isinstance(text, str):  # ids prompts have one turn and no history
                reply = expected or next(iter(answers.values()))
                history = text + reply.text + TURN_SEPARATOR
        if on_prompt is not None:
            on_prompt()
    return records, first


def divergence(
    base: BenchSystem | None,
    ids: list[int],
    budget: int,
    ref: GenerationResult,
    got: GenerationResult,
    ignore_eos: bool,
) -> dict[str, Any]:
    """Where a greedy output left its reference's (``diverged_at``) and whether it is a
    near-tie: the target's top-2 logit gap there under ``validate.TIE_GAP``
    (``top2_gap``, ``near_tie``), read from target-only run again with its logits (outside
    any timing). Counted apart from identical outputs; no gap where the rerun is not the
    reference's output."""
    import torch

    from etspec.tools.validate import compare

    logits = torch.empty(0, 0)  # no row: no gap
    if isinstance(base, TextLLMRunner):
        again = base.generate(ids, budget, record_logits=True, ignore_eos=ignore_eos)
        if again.token_ids == ref.token_ids and again.logits is not None:
            logits = again.logits
    verdict = compare(0, ref.token_ids, got.token_ids, logits)
    return {"diverged_at": verdict.diverge_at, "top2_gap": verdict.gap, "near_tie": verdict.tie}


def _run_turn(
    systems: dict[str, BenchSystem],
    prompt: Prompt,
    ids: list[int],
    budget: int,
    sampling: SamplingConfig,
    trace: bool,
    records: dict[str, list[dict[str, Any]]],
    ignore_eos: bool = False,
) -> dict[str, GenerationResult]:
    """Every system on one prompt's ids; appends a record per system."""
    results = {}
    for name, runner in systems.items():
        try:
            result = runner.generate(ids, budget, sampling, trace=trace, ignore_eos=ignore_eos)
        except Exception as e:
            dump = failure_dump(name, runner, prompt, ids, budget, sampling, error=e)
            raise BenchFailure(f"{name} failed on prompt {prompt.id}: {e}", dump) from e
        st = result.stats
        records[name].append(
            {
                "prompt_id": prompt.id,
                "prompt_tokens": st.prompt_tokens,
                "token_ids": result.token_ids,
                "text": result.text,
                "stop_reason": result.stop_reason,
                "repeated_4grams": repeated_share(ids, result.token_ids),
                **{k: v for k, v in st.to_dict().items() if k not in ("memory",)},
                "peak_rss_bytes": st.memory.get("peak_rss_bytes", 0),
            }
        )
        results[name] = result
    return results


def repeated_share(prompt: Sequence[int], new: Sequence[int], n: int = 4) -> float:
    """How repetitive an output is: the share of its n-grams (each ending at a generated
    token) that already occurred earlier in the prompt or the output. A base model's greedy
    loop scores near 1 and so does a copy of the prompt: what prompt lookup predicts. Text
    that does not repeat itself scores near 0."""
    seq = [*prompt, *new]
    seen = {tuple(seq[i : i + n]) for i in range(max(len(prompt) - n + 1, 0))}
    repeated = total = 0
    for end in range(max(len(prompt), n - 1) + 1, len(seq) + 1):
        gram = tuple(seq[end - n : end])
        total += 1
        repeated += gram in seen
        seen.add(gram)
    return repeated / total if total else 0.0


def shard(prompts: Sequence[Prompt], rank: int, world: int) -> list[Prompt]:
    """The prompts of one rank: index % world == rank (the index in the full prompt list)."""
    return [p for i, p in enumerate(prompts) if i % world == rank]


def merge_shards(
    parts: Sequence[dict[str, list[dict[str, Any]]]], prompts: Sequence[Prompt]
) -> dict[str, list[dict[str, Any]]]:
    """Records of all ranks as one run's: every system's records in prompt-list order (a
    conversation's turns in turn order)."""
    order = {p.id: i for i, p in enumerate(prompts)}
    merged: dict[str, list[dict[str, Any]]] = {}
    for part in parts:
        for name, records in part.items():
            merged.setdefault(name, []).extend(records)
    for records in merged.values():
        records.sort(key=lambda r: (order[r.get("source_id", r["prompt_id"])], r.get("turn", 0)))
    return merged


def trace_lines(records: dict[str, list[dict[str, Any]]]) -> Iterator[str]:
    """One JSON line per (system, prompt): ids, acceptance and the per-step trace."""
    keep = (
        "prompt_id",
        "prompt_tokens",
        "token_ids",
        "stop_reason",
        "tpc",
        "accept_length",
        "verify_calls",
        "stage_s",
        "ttft_s",
        "total_s",
        "steps",
    )
    for name, recs in records.items():
        for r in recs:
            yield json.dumps({"system": name, **{k: r[k] for k in keep if k in r}})


def baseline_of(name: str, baselines: dict[str, str | None] | None) -> str | None:
    """The system whose greedy output ``name``'s must equal (see ``run_systems``)."""
    return (baselines or {}).get(name, BASELINE)


def summarize(
    systems: dict[str, list[dict[str, Any]]], baselines: dict[str, str | None] | None = None
) -> dict[str, dict[str, Any]]:
    """Per-system metrics; speedups are against ``target-only``, output identity against
    each system's baseline (``baseline_of``; ``identical_to`` names it)."""
    base = {r["prompt_id"]: r for r in systems.get(BASELINE, [])}
    out: dict[str, dict[str, Any]] = {}
    for name, records in systems.items():
        tps = [r["tokens_per_s"] for r in records]
        s: dict[str, Any] = {
            "prompts": len(records),
            "generated_tokens": sum(r["generated_tokens"] for r in records),
            "tokens_per_s": _dist(tps),
            "ttft_ms": _dist([1e3 * r["ttft_s"] for r in records]),
            "tpot_ms": _dist([1e3 * r["tpot_s"] for r in records]),
            "repeated_4grams": _dist([r.get("repeated_4grams", 0.0) for r in records]),
        }
        if any(r["verify_calls"] for r in records):
            s["tpc"] = _dist([r["tpc"] for r in records])
            proposed = _sum_lists([r["proposed_pos"] for r in records])
            accepted = _sum_lists([r["accept_pos"] for r in records])
            s["accept_pos"] = [a / p if p else 0.0 for a, p in zip(accepted, proposed, strict=True)]
            s["stage_s"] = _sum_dicts([r["stage_s"] for r in records])
            s["drafters"] = attribution.pooled(records)
        if base and name != BASELINE:
            pairs = [(r, base[r["prompt_id"]]) for r in records if r["prompt_id"] in base]
            speed = [r["tokens_per_s"] / b["tokens_per_s"] for r, b in pairs if b["tokens_per_s"]]
            e2e = [b["total_s"] / r["total_s"] for r, b in pairs if r["total_s"]]
            s["speedup"] = _dist(speed)
            s["speedup_e2e"] = _dist(e2e)
        ref_name = baseline_of(name, baselines)
        if ref_name is not None and ref_name != name and systems.get(ref_name):
            ref = {r["prompt_id"]: r for r in systems[ref_name]}
            s["identical"] = sum(
                r["token_ids"] == ref[r["prompt_id"]]["token_ids"]
                for r in records
                if r["prompt_id"] in ref
            )
            s["identical_to"] = ref_name
            # Bit-identical only; a near-tie divergence is counted apart (``divergence``).
            s["near_ties"] = sum(bool(r.get("near_tie")) for r in records)
        if base and name != BASELINE and "tpc" in s:
            s["cost_model"] = cost_model(records, systems[BASELINE], s["speedup"]["mean"])
        out[name] = s
    return out


def cost_model(
    records: Sequence[dict[str, Any]], baseline: Sequence[dict[str, Any]], speedup: float
) -> dict[str, float]:
    """The speedup a system's acceptance allows if nothing but its draft and verify calls
    cost time (Meta's section 3.5: TPC x t_decode / (t_verify + t_draft)), and the share of
    that ceiling the measured mean speedup reaches; the gap is per-step host overhead.

    Times are pooled per call over all prompts; TPC is pooled over all verify calls.
    """
    decode_calls = sum(r.get("decode_calls", 0) for r in baseline)
    calls = sum(r["verify_calls"] for r in records)
    if not decode_calls or not calls:
        return {}
    t_decode = sum(r["stage_s"].get("decode", 0.0) for r in baseline) / decode_calls
    t_verify = sum(r["stage_s"].get("verify", 0.0) for r in records) / calls
    t_draft = sum(r["stage_s"].get("draft", 0.0) for r in records) / calls
    tpc = (sum(r["accepted_tokens"] for r in records) + calls) / calls
    ceiling = tpc * t_decode / (t_verify + t_draft) if t_verify + t_draft > 0 else math.nan
    return {
        "t_decode_ms": 1e3 * t_decode,
        "t_verify_ms": 1e3 * t_verify,
        "t_draft_ms": 1e3 * t_draft,
        "tpc": tpc,
        "ceiling_speedup": ceiling,
        "achieved": speedup / ceiling if ceiling and not math.isnan(ceiling) else math.nan,
    }


def _sum_lists(lists: Sequence[Sequence[int]]) -> list[int]:
    n = max((len(x) for x in lists), default=0)
    return [sum(x[i] for x in lists if i < len(x)) for i in range(n)]


def _sum_dicts(dicts: Sequence[dict[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0.0) + v
    return out


# CPU flags a figure depends on (the kernels XNNPACK and llama.cpp pick), as /proc/cpuinfo
# names them (x86 "flags", arm64 "Features").
_SIMD_FLAGS = ("avx", "amx", "fma", "f16c", "sse4", "asimd", "sve", "i8mm", "dotprod", "bf16")


def cpu() -> dict[str, Any]:
    """The CPU's model and the SIMD flags it reports (Linux /proc/cpuinfo; empty elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {"model": platform.processor() or platform.machine(), "flags": []}
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = (fields.get("flags") or fields.get("Features") or "").split()
    model = fields.get("model name") or fields.get("CPU part") or platform.machine()
    return {"model": model, "flags": sorted(f for f in flags if f.startswith(_SIMD_FLAGS))}


def artifact_record(path: Path, kind: str) -> dict[str, Any]:
    """An artifact as a result names it: path, size, SHA-256 and the recipe its metadata
    records (what was exported: dtype, context, verify widths, ...)."""
    from etspec.artifact import open_artifact
    from etspec.files import file_sha256

    return {
        "path": str(path),
        "bytes": path.stat().st_size,
        "sha256": file_sha256(path),
        "recipe": open_artifact(path, kind).metadata.constant_methods(),
    }


def manifest(settings: dict[str, Any], artifacts: dict[str, Path] | None = None) -> dict[str, Any]:
    """What a result needs to be reproduced: versions, revision (and a hash of any
    uncommitted diff), machine (CPU model and SIMD flags), settings, and each artifact's
    SHA-256 and recipe (``artifacts``: kind -> path)."""
    from importlib.metadata import PackageNotFoundError, version

    import torch

    try:  # a machine running only the eager reference program need not have ExecuTorch
        executorch_version: str | None = version("executorch")
    except PackageNotFoundError:
        executorch_version = None

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], capture_output=True, text=True, cwd=Path(__file__).parent, timeout=5
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    rev = git("rev-parse", "HEAD")
    # Uncommitted changes to tracked files outside docs/ (where results land, and nothing
    # that runs): the revision alone does not reproduce the run, the diff's hash names it.
    code = ("--", ":/", ":(top,exclude)docs")
    dirty = bool(rev) and bool(git("status", "--porcelain", "--untracked-files=no", *code))
    diff = None
    if dirty:
        import hashlib

        diff = hashlib.sha256(git("diff", "HEAD", *code).encode()).hexdigest()
    return {
        "etspec": version("etspec"),
        "git_revision": rev or None,
        "git_dirty": dirty,
        "git_diff_sha256": diff,
        "torch": torch.__version__,
        "executorch": executorch_version,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "cpu": cpu(),
        "cpu_count": cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "artifacts": {k: artifact_record(p, k) for k, p in (artifacts or {}).items()},
        "settings": settings,
    }


def cpu_count() -> int:
    """The cores this process may run on (its affinity), not the machine's count."""
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0
