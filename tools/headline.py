"""README's headline table and docs/results.md's headline section, written from the files
``scripts/reproduce.sh`` leaves in ``docs/results/headline/`` and from nothing else.

    python -m etspec.tools.headline           # rewrite both, between their markers
    python -m etspec.tools.headline --check   # exit 1 if either differs from the files, or a
                                              # file measured code other than HEAD's

A figure is a ratio timed side by side in one run, over the runs the folder holds: each
run's mean per-prompt speedup against the same runtime's target-only, then the mean over
runs; "least prompt" is the slowest prompt of every run. Every file is a full report (every
prompt's record and the manifest: revision, CPU, artifact hashes and recipes).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import click

from etspec.tools.tasks_table import against_alone, markdown, table

HEADLINE_DIR = Path("docs/results/headline")
BEGIN = "<!-- headline: python -m etspec.tools.headline writes this from docs/results/headline/ -->"
END = "<!-- /headline -->"
#: What a figure depends on (the code that builds and runs the artifacts, and the shipped
#: checkpoints they are exported from): a file measured at a revision whose copy of these
#: differs from HEAD's describes code or weights that no longer exist.
CODE_PATHS = ("runtime", "export", "models", "etspec/contract.py", "checkpoints")


def load(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """The folder's reports by kind (the file name without ``-runN``), runs in order."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for path in sorted(folder.glob("*.json")):
        report = json.loads(path.read_text())
        report["file"] = path.name
        groups[path.stem.rsplit("-run", 1)[0]].append(report)
    return dict(groups)


def _x(v: float) -> str:
    return f"{v:.2f}x"


def _mb(b: float) -> str:
    return f"{b / 1e6:,.0f} MB"


def _pair(t: dict[str, Any], name: str, key: str = "mean") -> str:
    py, cpp = t["systems"][name], t["systems"]["cpp " + name]
    if key == "mean":
        return f"{_x(py['mean']['all'])} / {_x(cpp['mean']['all'])}"
    return f"{_x(py['least_prompt'])} / {_x(cpp['least_prompt'])}"


def _identical(runs: list[dict[str, Any]], name: str) -> tuple[int, int, int]:
    """Bit-identical outputs, near-tie divergences and prompts, over every run."""
    s = [r["summary"][name] for r in runs]
    return (
        sum(x["identical"] for x in s),
        sum(x["near_ties"] for x in s),
        sum(x["prompts"] for x in s),
    )


def _shares(t: dict[str, Any], name: str) -> str:
    tok = t["systems"][name]["token_shares"] or {}
    return f"{tok.get('lookup', 0):.0%} / {tok.get('model', 0):.0%}"


def chain_figures(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per task type (and ``all``): the draft's tokens per verify call and per-token
    acceptance (accepted over drafted tokens that reached verification), pooled over runs."""
    pools: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for run in runs:
        for r in next(iter(v for k, v in run["records"].items() if k != "target-only")):
            for key in ("all", r["prompt_id"].split("/")[0]):
                p = pools[key]
                acc, prop = r["accept_pos"], r["proposed_pos"]
                p[0] += sum(acc)
                p[1] += (prop[0] if prop else 0) + sum(acc[:-1])
                p[2] += r["accepted_tokens"] + r["verify_calls"]
                p[3] += r["verify_calls"]
    return {
        k: {"acceptance": a / max(reached, 1), "tpc": e / max(calls, 1)}
        for k, (a, reached, e, calls) in pools.items()
    }


def _prompts_desc(runs: list[dict[str, Any]]) -> str:
    settings = runs[0]["manifest"]["settings"]
    n = runs[0]["summary"]["target-only"]["prompts"]
    return f"`--prompts {settings['prompts']}`, {n} prompts, {len(runs)} run{'s' * (len(runs) > 1)}"


def rows(data: dict[str, list[dict[str, Any]]]) -> list[tuple[str, str, str]]:
    """(what was measured, the figure, its section) for README's table."""
    out = []
    for mode in ("sampled", "greedy"):
        runs = data.get(f"gemma-tasks-{mode}")
        if not runs:
            continue
        t = table(runs)
        how = "T=0.8, top-p 0.95, no seed" if mode == "sampled" else "greedy"
        what = (
            "Gemma 3 270M, the default (`--draft`: the shipped EAGLE-3 draft and prompt lookup "
            "combined, `--tree auto`) against target-only, chat-style task prompts (translate, "
            f"summarize, answer, word problems, answer from a passage, MT-Bench-style; "
            f"{_prompts_desc(runs)}), 128 tokens, {how}, Python / C++ runner"
        )
        sysd = t["systems"]
        below = f"{sysd['combined auto']['below_0.95']} / {sysd['cpp combined auto']['below_0.95']}"
        fig = (
            f"{_pair(t, 'combined auto')} (least prompt {_pair(t, 'combined auto', 'least')}; "
            f"{below} of {sysd['combined auto']['prompts']} prompt runs below 0.95x); prompt "
            "lookup alone "
            f"{_pair(t, 'prompt-lookup auto')}, the draft alone {_pair(t, 'eagle3 auto')}; "
            f"tokens from lookup / the draft {_shares(t, 'combined auto')}"
        )
        if mode == "greedy":
            same, ties, n = _identical(runs, "combined auto")
            fig += f"; {same} of {n} outputs bit-identical to target-only's ({ties} near-ties)"
        out.append((what, fig, "what-chat-users-send-headline"))
    greedy, sampled = data.get("gemma-draft-chain5-greedy"), data.get("gemma-draft-chain5-sampled")
    if greedy and sampled:
        g, s = chain_figures(greedy), chain_figures(sampled)
        sets = [k for k in g if k != "all"]
        out.append(
            (
                "The shipped draft alone (`--draft-method eagle3 --trees chain5`), the same "
                "prompts, "
                "greedy / sampled",
                f"tokens per verify call {g['all']['tpc']:.2f} (task types "
                f"{min(g[k]['tpc'] for k in sets):.2f}-{max(g[k]['tpc'] for k in sets):.2f}) / "
                f"per-token acceptance {s['all']['acceptance']:.3f} "
                f"({min(s[k]['acceptance'] for k in sets):.3f}-"
                f"{max(s[k]['acceptance'] for k in sets):.3f})",
                "the-draft-alone",
            )
        )
    runs = data.get("bundled-humaneval40")
    if runs:
        t = table(runs)
        sysd = t["systems"]
        best = {
            rt: max(
                (n for n in sysd if n.startswith("cpp ") == bool(rt) and "auto" not in n),
                key=lambda n: sysd[n]["mean"]["all"],
            )
            for rt in ("", "cpp ")
        }
        ratio = " / ".join(
            f"{sysd[rt + 'auto']['mean']['all'] / sysd[best[rt]]['mean']['all']:.2f}"
            f" ({best[rt].removeprefix('cpp ')})"
            for rt in ("", "cpp ")
        )
        same, ties, n = _identical(runs, "auto")
        out.append(
            (
                "Bundled 14M code pair, 40 HumanEval prompts, greedy, the default (`--tree auto`, "
                f"the draft and prompt lookup combined) against target-only, {len(runs)} "
                f"run{'s' * (len(runs) > 1)}, Python / C++ runner",
                f"{_pair(t, 'auto')}; `auto` against the best fixed shape {ratio}; {same} of {n} "
                f"outputs bit-identical ({ties} near-ties)",
                "bundled-pair-auto",
            )
        )
    mem = data.get("gemma-memory")
    if mem:
        m = mem[0]
        tgt, dft = m["artifacts"]["target"], m["artifacts"]["draft"]
        files = tgt["file_bytes"] + dft["file_bytes"]
        kv = tgt["kv_cache_bytes"] + dft["kv_cache_bytes"]
        out.append(
            (
                "Gemma 3 270M default export (4,096-token context) and the shipped draft, resident "
                "memory",
                f"{_mb(tgt['python_resident_bytes'] + dft['python_resident_bytes'])} in Python "
                f"after loading every method (files {_mb(files)}, KV caches {_mb(kv)}); "
                f"{_mb(m['cpp_max_rss_bytes'])} peak in the C++ runner generating 128 tokens",
                "memory-headline",
            )
        )
    samp = data.get("gemma-sampling")
    if samp:
        s0 = samp[0]
        row = next(
            r
            for r in s0["settings"]
            if r["temperature"] == 0.8 and r["top_p"] == 0.95 and r["top_k"] == 0
        )
        out.append(
            (
                "Host work per sampled token at a 262k vocabulary (T=0.8, top-p 0.95), Python",
                f"{row['sparse_ms']:.2f} ms (a dense softmax, sort and draw over the "
                f"vocabulary: {row['dense_ms']:.1f} ms)",
                "sampling-headline",
            )
        )
    return out


def readme_block(data: dict[str, list[dict[str, Any]]]) -> str:
    lines = ["| measured | figure | source |", "|---|---|---|"]
    lines += [
        f"| {w} | {f} | [{a.replace('-', ' ')}](docs/results.md#{a}) |" for w, f, a in rows(data)
    ]
    return "\n".join(lines)


def _machine(runs: list[dict[str, Any]]) -> str:
    m = runs[0]["manifest"]
    revs = sorted({r["manifest"]["git_revision"][:7] for r in runs})
    return (
        f"**Revision** {', '.join(revs)}; **machine** {m['cpu']['model']}, {m['cpu_count']} "
        f"cores, {m['torch_threads']} threads; files: "
        + ", ".join(f"[{r['file']}](results/headline/{r['file']})" for r in runs)
    )


def results_block(data: dict[str, list[dict[str, Any]]]) -> str:
    """docs/results.md's headline section: the tables behind README's rows."""
    parts = [
        "Written by `python -m etspec.tools.headline` from the reports `bash "
        "scripts/reproduce.sh [--quick]` leaves in [results/headline/](results/headline/); "
        "rerun both to refresh them. Speedups are each run's mean per-prompt speedup against "
        "the same runtime's target-only, averaged over runs; step and token shares say which "
        "drafter produced each step (none: a plain decode). Under each task table, set by "
        "set: the default's per-prompt means over the runs against the faster drafter "
        "alone, and the paired t over the set's prompts."
    ]
    for mode in ("sampled", "greedy"):
        runs = data.get(f"gemma-tasks-{mode}")
        if runs:
            parts += [
                '<a id="what-chat-users-send-headline"></a>\n\n'
                f"### Gemma 3 270M on task prompts, {mode}"
                if mode == "sampled"
                else f"### Gemma 3 270M on task prompts, {mode}",
                _machine(runs),
                markdown({**table(runs), "against_alone": against_alone(runs)}),
            ]
    greedy, sampled = data.get("gemma-draft-chain5-greedy"), data.get("gemma-draft-chain5-sampled")
    if greedy and sampled:
        g, s = chain_figures(greedy), chain_figures(sampled)
        head = "| | " + " | ".join(g) + " |\n|---|" + "---|" * len(g)
        parts += [
            '<a id="the-draft-alone"></a>\n\n### The shipped draft alone, chain5',
            _machine(greedy + sampled),
            head
            + "\n| greedy tokens per verify call | "
            + " | ".join(f"{g[k]['tpc']:.2f}" for k in g)
            + " |\n| sampled per-token acceptance | "
            + " | ".join(f"{s[k]['acceptance']:.3f}" for k in g)
            + " |",
        ]
    runs = data.get("bundled-humaneval40")
    if runs:
        parts += [
            '<a id="bundled-pair-auto"></a>\n\n### Bundled pair, 40 HumanEval prompts, greedy',
            _machine(runs),
            markdown(table(runs)),
        ]
    mem = data.get("gemma-memory")
    if mem:
        lines = [
            "| artifact | file | KV cache | resident after loading every method, Python |",
            "|---|---|---|---|",
        ]
        for kind, a in mem[0]["artifacts"].items():
            lines.append(
                f"| {kind} | {_mb(a['file_bytes'])} | {_mb(a['kv_cache_bytes'])} | "
                f"{_mb(a['python_resident_bytes'])} |"
            )
        lines.append(
            f"| C++ runner, both, 128 tokens: peak RSS | | | {_mb(mem[0]['cpp_max_rss_bytes'])} |"
        )
        parts += ['<a id="memory-headline"></a>\n\n### Memory', _machine(mem), "\n".join(lines)]
    samp = data.get("gemma-sampling")
    if samp:
        lines = [
            "| T | top-k | top-p | etspec's sampler | dense softmax, sort, draw "
            "| tokens kept (median) |",
            "|---|---|---|---|---|---|",
        ]
        for r in samp[0]["settings"]:
            lines.append(
                f"| {r['temperature']} | {r['top_k']} | {r['top_p']} | {r['sparse_ms']:.2f} ms | "
                f"{r['dense_ms']:.1f} ms | {r['kept_median']:,.0f} |"
            )
        parts += [
            '<a id="sampling-headline"></a>\n\n### Sampling host work, per token',
            _machine(samp),
            "\n".join(lines),
        ]
    return "\n\n".join(parts)


def replace_block(text: str, block: str, where: str) -> str:
    if BEGIN not in text or END not in text:
        raise click.ClickException(f"{where} has no {BEGIN!r} ... {END!r} markers")
    head, rest = text.split(BEGIN, 1)
    return head + BEGIN + "\n" + block + "\n" + END + rest.split(END, 1)[1]


def stale(data: dict[str, list[dict[str, Any]]], root: Path) -> list[str]:
    """Files whose revision's ``CODE_PATHS`` differ from HEAD's (or that were measured with
    uncommitted changes, or whose revision this clone does not have)."""
    problems = []
    for runs in data.values():
        for r in runs:
            m = r["manifest"]
            rev = m.get("git_revision")
            if not rev or m.get("git_dirty"):
                problems.append(f"{r['file']}: measured with uncommitted changes or outside git")
                continue
            rc = subprocess.run(
                ["git", "diff", "--quiet", rev, "HEAD", "--", *CODE_PATHS],
                cwd=root,
                capture_output=True,
            ).returncode
            if rc == 1:
                problems.append(
                    f"{r['file']}: measured at {rev[:7]}; {', '.join(CODE_PATHS)} changed since"
                )
            elif rc:
                problems.append(f"{r['file']}: revision {rev[:7]} is not in this clone's history")
    return problems


@click.command()
@click.option("--check", is_flag=True, help="Change nothing; exit 1 on any difference.")
@click.option("--root", type=click.Path(file_okay=False, path_type=Path), default=Path("."))
def main(check: bool, root: Path) -> None:
    data = load(root / HEADLINE_DIR)
    problems = []
    for name, block in (
        ("README.md", readme_block(data)),
        ("docs/results.md", results_block(data)),
    ):
        path = root / name
        text = path.read_text()
        new = replace_block(text, block, name)
        if new != text:
            if check:
                problems.append(
                    f"{name}: its headline differs from {HEADLINE_DIR}/; "
                    "run python -m etspec.tools.headline"
                )
            else:
                path.write_text(new)
    if check:
        problems += stale(data, root)
        for p in problems:
            click.echo(f"error: {p}", err=True)
        sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
