"""``etspec draft train``: an EAGLE-3 draft for the user's own target (``etspec.training``)."""

from __future__ import annotations

from pathlib import Path

import click

from etspec.cli.app import main, user_errors, verbose_option
from etspec.contract import DEPLOYMENT_DTYPE, DTYPES
from etspec.training.pipeline import DraftTrainOptions, train_draft_pipeline


@main.group()
def draft() -> None:
    """Make an EAGLE-3 draft for a target."""


@draft.command("train")
@click.option(
    "--target",
    type=click.Path(path_type=Path, exists=True),
    required=True,
    help="The target: a Hugging Face folder or a .gguf file.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    required=True,
    help="Folder for every stage's output; run again to resume.",
)
@click.option(
    "--device",
    type=click.Choice(["cpu", "cuda"]),
    default=None,
    help="[default: cuda when present]",
)
@click.option(
    "--budget-hours",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Stop training when this much time has passed since the command started, and ship "
    "the draft as it is then.",
)
@click.option(
    "--texts",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    default=None,
    help="A folder of text files to learn from [default: this machine's manual pages, "
    "/usr/share/doc and Python's standard library].",
)
@click.option(
    "--target-pte",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    default=None,
    help="An export of the target to use [default: export one into OUT].",
)
@click.option(
    "--dtype",
    type=click.Choice(DTYPES),
    default=DEPLOYMENT_DTYPE,
    show_default=True,
    help="Weight recipe of the exports.",
)
@click.option("--prompts", default=1000, show_default=True, help="Corpus prompts continued.")
@click.option(
    "--prose", type=int, default=None, help="English openings continued [default: all 620]."
)
@click.option(
    "--tasks",
    default=DraftTrainOptions.tasks,
    show_default=True,
    help="Chat-style task prompts continued (translate, summarize, answer, word problems, code, "
    "follow-ups; filled from the corpus).",
)
@click.option("--feature-shards", type=click.IntRange(min=1), default=None, help="[default: all]")
@click.option("--draft-vocab", default=8192, show_default=True)
@click.option(
    "--ttt-steps", type=click.IntRange(min=1), default=None, help="[default: 3 on cpu, 7 on cuda]"
)
@click.option("--new-tokens", default=160, show_default=True, help="Tokens per continuation.")
@click.option("--steps", default=4000, show_default=True, help="Training steps.")
@click.option("--lr", default=1e-3, show_default=True, help="Peak learning rate.")
@click.option("--warmup", default=100, show_default=True, help="Warm-up steps.")
@click.option(
    "--train-seed",
    "seed",
    default=0,
    show_default=True,
    help="Seeds every stage: the sampled continuations, the batches, the draft's start.",
)
@verbose_option
@user_errors
def draft_train_cmd(
    target: Path,
    out: Path,
    device: str | None,
    budget_hours: float | None,
    texts: Path | None,
    target_pte: Path | None,
    dtype: str,
    prompts: int,
    prose: int | None,
    tasks: int,
    feature_shards: int | None,
    draft_vocab: int,
    ttt_steps: int | None,
    new_tokens: int,
    steps: int,
    lr: float,
    warmup: int,
    seed: int,
) -> None:
    """Train an EAGLE-3 draft for TARGET from nothing: a corpus, the target's own
    continuations, its features, training-time-test training, the draft's export and an
    acceptance report on held-out prompts (OUT/report.json). Every stage resumes."""
    opts = DraftTrainOptions(device=device, budget_hours=budget_hours, texts=texts,
                             target_pte=target_pte, dtype=dtype, prompts=prompts, prose=prose,
                             tasks=tasks,
                             feature_shards=feature_shards, draft_vocab=draft_vocab,
                             ttt_steps=ttt_steps, new_tokens=new_tokens, steps=steps,
                             lr=lr, warmup=warmup, seed=seed)  # fmt: skip
    report = train_draft_pipeline(target, out, opts)
    greedy, sampled = report["greedy"], report["sampled"]
    click.echo(
        f"draft: {out / 'draft.pte'} ({out / 'draft'}); on {report['prompts']} held-out prompts: "
        f"greedy acceptance {greedy['acceptance']:.2f}, {greedy['tokens_per_verify']:.2f} "
        f"tokens per verify, {greedy['identical']}/{report['prompts']} identical to "
        f"target-only; sampled acceptance {sampled['acceptance']:.2f} ({out / 'report.json'})"
    )
