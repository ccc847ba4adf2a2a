"""``etspec draft train``: an EAGLE-3 draft for a target, from nothing, in one command.

Every stage keeps its output in OUT and is skipped when that output is there, so the same
command run again after an interruption goes on where it stopped (the training resumes
from its last saved state):

``checkpoint``  a GGUF target converted to OUT/target-hf/ (a Hugging Face folder is read
                where it is)
``corpus``      text tokenized with the target's tokenizer into windows that start as
                requests do (OUT/data/corpus.npy): this machine's manual pages,
                /usr/share/doc and Python's standard library, or the files of ``--texts DIR``
``target``      the target exported with the deployment recipe (OUT/target.pte), unless
                ``--target-pte`` names an export already made
``generate``    self-distillation: the target's own continuations, half greedy, half
                sampled at T=0.8 top-p 0.95, of prompts made from the corpus, of English
                prose openings and of chat-style task prompts filled from the corpus
                (translate, summarize, answer, word problems, code, follow-ups): through
                the export on a CPU, batched over the eager model on CUDA
``features``    on a CPU, the target's tapped states and top-k log-probabilities over every
                window, stored once so that training runs the draft alone; on CUDA the
                target runs on each batch instead (``windows``)
``train``       EAGLE-3's training-time test (OUT/draft/, ``training.json``); within
                ``--budget-hours`` when given
``export``      the draft exported against the target export (OUT/draft.pte)
``report``      OUT/report.json: on held-out corpus windows (never trained on), greedy
                speculation's tokens against target-only's, tokens per verify call and the
                share of drafted tokens accepted, greedy and sampled
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from etspec.contract import DEPLOYMENT_DTYPE
from etspec.errors import EtspecError
from etspec.progress import Progress

REPORT = "report.json"
REPORT_PROMPT_TOKENS = 32  # tokens of a held-out window that prompt the report's requests


@dataclass(frozen=True)
class DraftTrainOptions:
    """The pipeline's choices; the defaults are the Gemma 3 270M CPU recipe's."""

    device: str | None = None  # default: cuda when present
    budget_hours: float | None = None  # the training stops (and ships) when it is spent
    texts: Path | None = None  # the corpus: this folder's files instead of the machine's
    target_pte: Path | None = None  # an export of the target to use instead of making one
    dtype: str = DEPLOYMENT_DTYPE  # the exports' weight recipe
    max_windows: int = 2500  # corpus windows per source
    prompts: int = 1000  # corpus prompts the target continues
    prose: int | None = None  # English prose openings it continues (None: all)
    tasks: int = 600  # chat-style task prompts it continues (= data.TASK_PROMPTS, tested)
    new_tokens: int = 160  # per continuation
    feature_shards: int | None = None  # stored feature shards (None: all)
    draft_vocab: int = 8192
    ttt_steps: int | None = None  # default: 3 on a CPU, 7 (EAGLE-3's) on CUDA
    steps: int = 4000
    batch: int = 4
    lr: float = 1e-3
    warmup: int = 100
    save_every: int = 50
    seed: int = 0
    report_prompts: int = 8
    report_tokens: int = 48


def train_draft_pipeline(target: Path, out: Path, opts: DraftTrainOptions) -> dict[str, Any]:
    """Run (or resume) every stage for ``target`` (HF folder or ``.gguf``) into ``out``;
    returns the report."""
    import torch

    from etspec.training import data
    from etspec.training.train_draft import train

    if not target.exists():
        raise EtspecError(f"{target} does not exist: give a Hugging Face folder or a .gguf")
    device = opts.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise EtspecError("--device cuda: this torch sees no CUDA device; use --device cpu")
    cuda = device.startswith("cuda")
    ttt_steps = opts.ttt_steps or (7 if cuda else 3)
    if out.exists() and not out.is_dir():
        raise EtspecError(f"{out} is a file: --out names the folder every stage writes into")
    for name in ("config.json", "tokenizer.json") if target.is_dir() else ():
        if not (target / name).is_file():
            raise EtspecError(f"{target} has no {name}: give a Hugging Face folder with "
                              "its tokenizer.json, or a .gguf")  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    (out / "options.json").write_text(json.dumps(_jsonable(asdict(opts)), indent=2))
    start = time.time()
    data_dir, draft_dir = out / "data", out / "draft"
    with Progress(f"draft train -> {out}") as progress:
        progress.stage("checkpoint")
        hf = _checkpoint(target, out / "target-hf")
        progress.stage("corpus")
        data.build_corpus(hf, data_dir, opts.max_windows, opts.texts)
        progress.stage("target")
        target_pte = opts.target_pte or _target_export(target, out / "target.pte", opts.dtype)
        progress.stage("generate")
        # On CUDA the eager model's batches; on a CPU the export users run.
        by = (
            {"target": hf, "device": device}
            if cuda
            else {"target_pte": target_pte, "tokenizer": hf}
        )
        data.self_distill(data_dir, count=opts.prompts, prose=opts.prose, tasks=opts.tasks,
                          new_tokens=opts.new_tokens, seed=opts.seed, **by)  # fmt: skip
        progress.stage("features")
        source: dict[str, Path] = {}
        if cuda:
            data.write_windows(data_dir)
            source["windows"] = data_dir
        else:
            data.store_features(hf, data_dir, limit=opts.feature_shards)
            source["features"] = data_dir
        progress.stage("train")
        draft_pte = out / "draft.pte"
        if not _trained(draft_dir, opts.steps):
            # A draft exported (and reported) from an earlier, shorter run is redone.
            for stale in (draft_pte, out / REPORT):
                stale.unlink(missing_ok=True)
            spent = (time.time() - start) / 60
            minutes = (
                None if opts.budget_hours is None else max(0.0, opts.budget_hours * 60 - spent)
            )
            train(hf, draft_dir, **source, draft_vocab=opts.draft_vocab, ttt_steps=ttt_steps,
                  batch=opts.batch, steps=opts.steps, lr=opts.lr, warmup=opts.warmup,
                  seed=opts.seed, save_every=opts.save_every, max_minutes=minutes,
                  resume=True, device=device)  # fmt: skip
        progress.stage("export")
        if not draft_pte.is_file():
            from etspec.export.export_draft import DraftExportOptions, export_draft

            export_draft(draft_dir, target_pte, draft_pte, DraftExportOptions(dtype=opts.dtype), hf)
        progress.stage("report")
        if not (out / REPORT).is_file():
            report = acceptance_report(target_pte, draft_pte, data_dir, opts)
            report["training"] = json.loads((draft_dir / "training.json").read_text())
            (out / REPORT).write_text(json.dumps(report, indent=2))
    return json.loads((out / REPORT).read_text())


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return str(value) if isinstance(value, Path) else value


def _checkpoint(target: Path, folder: Path) -> Path:
    """The target's Hugging Face folder: ``target`` itself, or a GGUF converted once."""
    if target.is_dir():
        return target
    if not (folder / "model.safetensors").is_file():
        from etspec.models.gguf import convert_gguf

        convert_gguf(target, folder, force=True)
    return folder


def _target_export(checkpoint: Path, out: Path, dtype: str) -> Path:
    if not out.is_file():
        from etspec.export.export_target import TargetExportOptions, export_target

        export_target(checkpoint, out, TargetExportOptions(dtype=dtype))
    return out


def _trained(draft_dir: Path, steps: int) -> bool:
    """Whether a training run of ``steps`` steps finished writing the draft."""
    card = draft_dir / "training.json"
    return card.is_file() and json.loads(card.read_text()).get("steps") == steps


def held_out_prompts(
    data_dir: Path, count: int, tokens: int = REPORT_PROMPT_TOKENS
) -> list[list[int]]:
    """The first ``tokens`` ids of up to ``count`` held-out corpus windows (those the trainer
    never reads: ``Windows.held``), spread over the corpus."""
    from etspec.training.train_draft import Windows

    windows = Windows(data_dir)
    held = windows.held[~windows.generated[windows.held]]
    held = held[windows.lengths[held] > tokens]
    pick = (
        held[np.linspace(0, len(held) - 1, min(count, len(held))).astype(int)]
        if len(held)
        else held
    )
    return [windows.windows[i, :tokens].tolist() for i in pick]


def acceptance_report(
    target_pte: Path, draft_pte: Path, data_dir: Path, opts: DraftTrainOptions
) -> dict[str, Any]:
    """The draft on held-out prompts: greedy (its tokens against target-only's, the share of
    drafted tokens accepted, tokens per verify call) and sampled (T=0.8, top-p 0.95)."""
    from etspec.runtime.runner import load_runners
    from etspec.runtime.sampling import SamplingConfig
    from etspec.runtime.spec import RunnerSpec, TreeSettings

    prompts = held_out_prompts(data_dir, opts.report_prompts)
    base, speculative = load_runners(
        RunnerSpec(target_pte, draft_pte, "eagle3", tree=TreeSettings("chain", 3))
    )
    assert speculative is not None
    report: dict[str, Any] = {"prompts": len(prompts), "new_tokens": opts.report_tokens,
                              "tree": "chain3"}  # fmt: skip
    sampled = SamplingConfig(temperature=0.8, top_p=0.95, seed=opts.seed)
    for mode, sampling in (("greedy", SamplingConfig()), ("sampled", sampled)):
        drafted = accepted = calls = emitted = identical = 0
        for ids in prompts:
            got = speculative.generate(ids, opts.report_tokens, sampling, ignore_eos=True)
            drafted += got.stats.drafted_tokens
            accepted += got.stats.accepted_tokens
            calls += got.stats.verify_calls
            emitted += len(got.token_ids)
            if mode == "greedy":
                want = base.generate(ids, opts.report_tokens, ignore_eos=True).token_ids
                identical += got.token_ids == want
        report[mode] = {
            "acceptance": round(accepted / max(1, drafted), 4),
            "tokens_per_verify": round((accepted + calls) / max(1, calls), 3),
            "drafted": drafted, "accepted": accepted, "verify_calls": calls,
            "emitted": emitted,
        }  # fmt: skip
        if mode == "greedy":
            report[mode]["identical"] = identical
    return report
