"""Target-only and prompt-lookup speed of real-model artifacts, beside llama.cpp on the GGUF.

    python scripts/bench_real.py --pte NAME=FILE.pte [--pte ...] [--gguf FILE.gguf]
        [--cpp-runner build/cpp/etspec_runner] [--threads 2] [--max-new-tokens 128]
        [--repeats 2] [--long 3000] [--json OUT.json]

Every system runs every prompt in turn (prompt by prompt, systems interleaved, so a drift
in machine speed hits them alike), greedy, after one warm-up generation each: etspec
target-only and etspec with prompt lookup (``--tree auto``) per artifact, with
``--cpp-runner`` the C++ runner's target-only decoding of each artifact (one process per
generation, fed the same ids; its own timings, which exclude loading), and, with
``--gguf`` (``pip install llama-cpp-python``), llama.cpp's own target-only decoding with
``n_threads = --threads``. Reports decode tokens/s (new tokens after the first, over the
time after the first) per system and prompt kind, and whether each output is identical to
its own target-only output. ``--long N`` adds a long-prompt case (a document of about N
tokens and a question; time to first token is then mostly its prefill). llama.cpp's
threads busy-wait: a run on a machine whose load average exceeds half its cores is
refused, since its figures would not mean anything. For one artifact, `etspec bench
--llama-cpp FILE.gguf --prompts copy|open|long` runs the same comparison (llama.cpp's own
prompt lookup included) with the bench's records and summaries.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import click

from etspec.tools.prompts import SETS, long_document

# Copy-heavy prompts (the answer quotes the prompt) and open-ended ones: `etspec bench
# --prompts copy|open|long` uses the same sets.
PROMPTS = {"copy": list(SETS["copy"]), "open": list(SETS["open"])}


def _cpp_generate(
    binary: Path, pte: Path, ids: list[int], n: int
) -> tuple[list[int], float, float]:
    """(ids, seconds to the first token, total seconds) from the C++ runner, greedy."""
    cmd = [str(binary), "--target", str(pte), "--json", "--ignore-eos", "--max-new-tokens",
           str(n), "--prompt-ids", ",".join(map(str, ids))]  # fmt: skip
    out = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
                     .strip().splitlines()[-1])  # fmt: skip
    return out["token_ids"], out["stats"]["ttft_s"], out["stats"]["total_s"]


def _llama_cpp(gguf: Path, threads: int, n_ctx: int) -> Any:
    from llama_cpp import Llama

    return Llama(model_path=str(gguf), n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
                 verbose=False, seed=0)  # fmt: skip


def _llama_generate(llm: Any, prompt: str, n: int) -> tuple[list[int], float, float]:
    """(ids, seconds to the first token, total seconds), greedy."""
    tokens = llm.tokenize(prompt.encode(), add_bos=True)
    llm.reset()
    out: list[int] = []
    t0 = time.perf_counter()
    first = 0.0
    for tok in llm.generate(tokens, top_k=1, top_p=1.0, temp=0.0, repeat_penalty=1.0):
        if not out:
            first = time.perf_counter() - t0
        out.append(int(tok))
        if len(out) >= n:
            break
    return out, first, time.perf_counter() - t0


@click.command()
@click.option("--pte", "ptes", multiple=True, required=True, help="NAME=FILE.pte")
@click.option("--gguf", type=click.Path(path_type=Path), default=None)
@click.option("--cpp-runner", type=click.Path(path_type=Path), default=None)
@click.option("--threads", default=2, show_default=True)
@click.option("--max-new-tokens", default=128, show_default=True)
@click.option("--repeats", default=2, show_default=True, help="Full sweeps over every prompt.")
@click.option("--json", "json_out", type=click.Path(path_type=Path), default=None)
@click.option("--force", is_flag=True, help="Run even on a busy machine.")
@click.option(
    "--long", "long_tokens", type=int, default=0,
    help="Add a long-prompt case: a document of about this many tokens and a question "
    "(needs artifacts exported with --max-seq above it; 0: none).",
)  # fmt: skip
def main(
    ptes: tuple[str, ...],
    gguf: Path | None,
    cpp_runner: Path | None,
    threads: int,
    max_new_tokens: int,
    repeats: int,
    json_out: Path | None,
    force: bool,
    long_tokens: int,
) -> None:
    load = os.getloadavg()[0]
    if load > (os.cpu_count() or 1) / 2 and not force:
        raise click.ClickException(
            f"load average {load:.1f} on {os.cpu_count()} cores: the machine is busy, and "
            "llama.cpp's busy-waiting threads make a contended run meaningless"
        )
    import torch

    from etspec.runtime.runner import load_runners
    from etspec.runtime.spec import RunnerSpec

    torch.set_num_threads(threads)
    systems: dict[str, Any] = {}
    for item in ptes:
        name, _, path = item.partition("=")
        base, lookup = load_runners(RunnerSpec(Path(path), draft_method="prompt-lookup"))
        systems[f"{name} target-only"] = ("etspec", base)
        systems[f"{name} prompt lookup"] = ("etspec", lookup)
        if cpp_runner is not None:
            systems[f"{name} C++ target-only"] = ("cpp", (cpp_runner, Path(path), base))
    prompts = dict(PROMPTS)
    if long_tokens:
        prompts["long"] = [long_document(long_tokens)]
    if gguf is not None:
        n_ctx = 1024 if not long_tokens else long_tokens + max_new_tokens + 1024
        systems["llama.cpp target-only"] = ("llama.cpp", _llama_cpp(gguf, threads, n_ctx))
    records: dict[str, list[dict[str, Any]]] = {name: [] for name in systems}
    for kind, sys_ in systems.values():  # warm-up
        if kind == "etspec":
            sys_.generate(PROMPTS["open"][0], 8, ignore_eos=True)
        elif kind == "llama.cpp":
            _llama_generate(sys_, PROMPTS["open"][0], 8)
    sweeps = [(r, g, p) for r in range(repeats) for g, ps in prompts.items() for p in ps]
    for repeat, group, prompt in sweeps:
        for name, (kind, sys_) in systems.items():
            if kind == "etspec":
                res = sys_.generate(prompt, max_new_tokens, ignore_eos=True)
                ids, first, total = res.token_ids, res.stats.ttft_s, res.stats.total_s
            elif kind == "cpp":
                binary, pte, base = sys_
                ids, first, total = _cpp_generate(binary, pte, base.encode(prompt), max_new_tokens)
            else:
                ids, first, total = _llama_generate(sys_, prompt, max_new_tokens)
            tok_s = (len(ids) - 1) / (total - first)
            records[name].append({"repeat": repeat, "group": group, "ids": ids,
                                  "ttft_s": first, "decode_tok_s": tok_s})  # fmt: skip
    summary: dict[str, Any] = {}
    for name, recs in records.items():
        ref = records[name.replace("prompt lookup", "target-only").replace("C++ ", "")]
        row = {}
        for group in prompts:
            mine = [r for r in recs if r["group"] == group]
            row[group] = statistics.mean(r["decode_tok_s"] for r in mine)
            row[f"{group}_ttft_ms"] = 1e3 * statistics.mean(r["ttft_s"] for r in mine)
            row[f"{group}_per_repeat"] = [
                statistics.mean(r["decode_tok_s"] for r in mine if r["repeat"] == i)
                for i in range(repeats)
            ]
        row["ttft_ms"] = 1e3 * statistics.mean(r["ttft_s"] for r in recs)
        row["identical_to_target_only"] = sum(
            a["ids"] == b["ids"] for a, b in zip(recs, ref, strict=True)
        )
        summary[name] = row
    result = {"threads": threads, "max_new_tokens": max_new_tokens, "repeats": repeats,
              "load_before": load,
              "summary": summary, "records": records}  # fmt: skip
    click.echo(json.dumps(summary, indent=2))
    if json_out is not None:
        json_out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
