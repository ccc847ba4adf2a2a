"""PNG plots of an ``etspec bench --json`` report (matplotlib, headless).

Each plot is a pure function of the report, so a result can be re-plotted on any machine
from the JSON alone:

- ``speedup_vs_accept.png``: per prompt, speedup over target-only against accepted draft
  tokens per verify (the seeds' accept_L), one colour per system;
- ``accept_pos.png``: the acceptance curve, share of verifies that accepted draft position
  i among those that proposed it;
- ``stages.png``: where a step's time goes, stage milliseconds per target call (decode for
  target-only, verify steps for the speculative systems);
- ``sweep.png`` (reports of ``etspec bench --sweep``): TPC and speedup against the swept
  parameter, as in EAGLE-Pangu's Table 2;
- ``window.png`` (reports of ``etspec bench --draft-windows``): accept_L and speedup per
  drafter window, as in EAGLE-Pangu's Table 3 and Figure 6.
"""

from __future__ import annotations

import io
import re
from typing import Any

from etspec.contract import STAGES
from etspec.errors import EtspecError
from etspec.tools.bench_harness import BASELINE, SWEEPS, percentile, sweep_value

PLOTS = ("speedup_vs_accept.png", "accept_pos.png", "stages.png")
SWEEP_PLOT = "sweep.png"
WINDOW_PLOT = "window.png"
WINDOWED = re.compile(r"(.+) w(\d+)")


def _pyplot():  # type: ignore[no-untyped-def]
    try:
        import matplotlib
    except ImportError:
        raise EtspecError(
            "plotting needs matplotlib: pip install 'etspec[bench]' (or matplotlib)"
        ) from None
    matplotlib.use("Agg")  # no display on a headless benchmark machine
    import matplotlib.pyplot as plt

    return plt


def check_report(report: Any) -> None:
    """A bench report has per-system records and a summary with target-only in it."""
    if (
        not isinstance(report, dict)
        or not isinstance(report.get("records"), dict)
        or not isinstance(report.get("summary"), dict)
        or BASELINE not in report["records"]
    ):
        raise EtspecError(
            "not an etspec bench report with per-prompt records: write one with "
            "`etspec bench ... --json OUT.json`"
        )


def speedup_points(report: dict[str, Any]) -> dict[str, list[tuple[float, float]]]:
    """Per speculative system: (accept_length, speedup over target-only) per prompt."""
    base = {r["prompt_id"]: r for r in report["records"][BASELINE]}
    out: dict[str, list[tuple[float, float]]] = {}
    for name, records in report["records"].items():
        if name == BASELINE:
            continue
        out[name] = [
            (r["accept_length"], r["tokens_per_s"] / base[r["prompt_id"]]["tokens_per_s"])
            for r in records
            if r["prompt_id"] in base and base[r["prompt_id"]]["tokens_per_s"] > 0
        ]
    return out


def stage_ms_per_call(report: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per system: milliseconds per target call in each stage (prefill excluded)."""
    out: dict[str, dict[str, float]] = {}
    for name, records in report["records"].items():
        calls = sum(r["verify_calls"] or r.get("decode_calls", 0) for r in records)
        totals = {s: sum(r["stage_s"].get(s, 0.0) for r in records) for s in STAGES}
        out[name] = {s: 1e3 * v / calls for s, v in totals.items() if s != "prefill" and calls}
    return out


def sweep_points(report: dict[str, Any]) -> tuple[str, list[tuple[int, float, float]]] | None:
    """(swept parameter, [(value, mean TPC, mean speedup)] sorted by value) of a sweep run."""
    kind = report.get("manifest", {}).get("settings", {}).get("sweep")
    if kind not in SWEEPS:
        return None
    points = []
    for name, s in report["summary"].items():
        value = sweep_value(kind, name)
        if value is not None and "tpc" in s and "speedup" in s:
            points.append((value, s["tpc"]["mean"], s["speedup"]["mean"]))
    return SWEEPS[kind][0], sorted(points)


def window_points(report: dict[str, Any]) -> list[tuple[str, float, float, float]]:
    """EAGLE-Pangu Table 3 rows of a ``--draft-windows`` run: (window, accept_L mean,
    accept_L p90, mean speedup), the unwindowed system first as ``none``, then by window."""
    records, summary = report["records"], report["summary"]
    windowed = []
    for name in records:
        m = WINDOWED.fullmatch(name)
        if m and m.group(1) in records:
            windowed.append((int(m.group(2)), m.group(1), name))
    if not windowed:
        return []
    base = windowed[0][1]
    rows = []
    for label, name in [("none", base)] + [(str(w), n) for w, _, n in sorted(windowed)]:
        accept = [r["accept_length"] for r in records[name]]
        speed = summary.get(name, {}).get("speedup", {}).get("mean", float("nan"))
        rows.append((label, sum(accept) / len(accept), percentile(accept, 90), speed))
    return rows


def render_report(report: dict[str, Any]) -> dict[str, bytes]:
    """The plots of ``report`` as PNG bytes by file name (the caller writes them)."""
    check_report(report)
    plt = _pyplot()
    pngs: dict[str, bytes] = {}

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, points in speedup_points(report).items():
        if points:
            xs, ys = zip(*points, strict=True)
            ax.scatter(xs, ys, s=10, alpha=0.6, label=name)
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set(xlabel="accepted draft tokens per verify (accept_L)", ylabel="speedup over target-only")
    ax.legend(fontsize=7)
    pngs[PLOTS[0]] = _png(plt, fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, s in report["summary"].items():
        curve = s.get("accept_pos") or []
        if curve:
            ax.plot(range(1, len(curve) + 1), curve, marker="o", label=name)
    ax.set(xlabel="draft position", ylabel="accepted / proposed", ylim=(0, 1.02))
    ax.legend(fontsize=7)
    pngs[PLOTS[1]] = _png(plt, fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    stages = stage_ms_per_call(report)
    names = list(stages)
    bottom = [0.0] * len(names)
    for stage in (s for s in STAGES if s != "prefill"):
        heights = [stages[n].get(stage, 0.0) for n in names]
        if any(heights):
            ax.bar(names, heights, bottom=bottom, label=stage)
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    ax.set(ylabel="ms per target call")
    ax.tick_params(axis="x", labelrotation=30, labelsize=7)
    ax.legend(fontsize=7)
    pngs[PLOTS[2]] = _png(plt, fig)

    sweep = sweep_points(report)
    if sweep is not None and sweep[1]:
        param, points = sweep
        xs, tpc, speed = zip(*points, strict=True)
        fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.5))
        left.plot(xs, tpc, marker="o")
        left.set(xlabel=param, ylabel="TPC (tokens per target call)")
        right.plot(xs, speed, marker="o", color="tab:orange")
        right.axhline(1.0, color="grey", lw=0.8, ls="--")
        right.set(xlabel=param, ylabel="speedup over target-only")
        pngs[SWEEP_PLOT] = _png(plt, fig)

    rows = window_points(report)
    if rows:
        labels, mean, p90, speed = zip(*rows, strict=True)
        fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.5))
        left.plot(labels, mean, marker="o", label="mean")
        left.plot(labels, p90, marker="s", ls="--", label="p90")
        left.set(xlabel="draft window W (tokens)", ylabel="accept_L")
        left.legend(fontsize=7)
        right.bar(labels, speed, color="tab:orange")
        right.axhline(1.0, color="grey", lw=0.8, ls="--")
        right.set(xlabel="draft window W (tokens)", ylabel="speedup over target-only")
        pngs[WINDOW_PLOT] = _png(plt, fig)
    return pngs


def _png(plt: Any, fig: Any) -> bytes:
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()
