"""``etspec draft train``: a draft from nothing for small random Llama and Qwen2 targets
(minutes), every stage resumed on a second run; the Gemma 3 270M recipe through the same
command (``-m "real and slow"``, a few steps)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_training import _markov_corpus
from tiny import TARGET_CONFIGS, make_hf_target, write_tokenizer

from etspec.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _args(target: Path, out: Path, texts: Path, target_pte: Path) -> list[str]:
    return ["draft", "train", "--target", str(target), "--out", str(out), "--texts", str(texts),
            "--target-pte", str(target_pte), "--device", "cpu", "--dtype", "fp32",
            "--prompts", "8", "--prose", "0", "--tasks", "4", "--new-tokens", "40",
            "--draft-vocab", "64",
            "--steps", "30", "--lr", "3e-3", "--warmup", "5"]  # fmt: skip


@pytest.mark.parametrize("family", ["llama_gqa_rope3", "qwen2_bias"])
def test_draft_train_makes_a_draft_from_nothing(artifacts, tmp_path: Path, family: str) -> None:  # type: ignore[no-untyped-def]
    """Corpus, the target's own continuations, stored features, training, the draft's export
    and the held-out report, in one command; the draft pairs with the target, speculation
    with it is target-only's greedy output, and training lowered the held-out loss of an
    untrained draft over the same data. Run again, nothing is redone."""
    from etspec.training.train_draft import train

    vocab = TARGET_CONFIGS[family]["vocab_size"]
    target = tmp_path / "target"  # the session's export's weights (same seed), a tokenizer
    make_hf_target(family, target)
    write_tokenizer(target, vocab)
    texts = tmp_path / "texts"  # a sparse random Markov chain over the tokenizer's words
    _markov_corpus(texts, vocab)
    out = tmp_path / "out"
    args = _args(target, out, texts, artifacts.target(family).pte)
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert "identical to target-only" in res.output
    report = json.loads((out / "report.json").read_text())
    assert report["prompts"] >= 2
    assert report["greedy"]["identical"] == report["prompts"]
    assert report["greedy"]["drafted"] > 0 and report["sampled"]["drafted"] > 0
    generated = (out / "data" / "generated.jsonl").read_text().splitlines()
    rows = [json.loads(r) for r in generated]  # 8 corpus prompts, 4 task prompts twice
    assert len(rows) == 8 + 2 * 4 and {r["sampled"] for r in rows} == {False, True}
    assert [r["sampled"] for r in rows[8:]] == [False, True] * 4
    card = report["training"]
    assert card["steps"] == 30 and card["settings"]["features"] == str(out / "data")
    untrained = train(target, tmp_path / "untrained", features=out / "data", draft_vocab=64,
                      ttt_steps=3, steps=0, device="cpu")  # fmt: skip
    assert untrained is not None
    assert card["held_out_loss"] < untrained["held_out_loss"] - 0.1

    weights = out / "draft" / "model.safetensors"
    stamps = {p: p.stat().st_mtime_ns for p in (weights, out / "draft.pte", out / "report.json")}
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0, again.output
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps
    if family != "llama_gqa_rope3":
        return  # the resume path is the same for every family
    # Asked for 40 steps within a budget already spent: training stops where it is (30) and
    # ships; without the budget, it resumes there and the draft and report are redone.
    longer = [*args[: args.index("--steps")], "--steps", "40", *args[args.index("--lr") :]]
    stopped = CliRunner().invoke(main, [*longer, "--budget-hours", "1e-9"])
    assert stopped.exit_code == 0, stopped.output
    assert "stopped at step 30 of 40" in stopped.output
    assert json.loads((out / "report.json").read_text())["training"]["steps"] == 30
    done = CliRunner().invoke(main, longer)
    assert done.exit_code == 0, done.output
    card = json.loads((out / "report.json").read_text())["training"]
    assert card["steps"] == card["schedule_steps"] == 40
    assert (out / "draft.pte").stat().st_mtime_ns != stamps[out / "draft.pte"]


def test_draft_train_refuses_what_it_cannot_use_in_one_line(tmp_path: Path) -> None:
    """No CUDA for --device cuda, a folder without a tokenizer, --out a file: one line each,
    before any stage writes."""
    import torch

    folder = tmp_path / "target"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (tmp_path / "file").write_text("mine")
    cases = [
        (["--device", "cpu"], f"error: {folder} has no tokenizer.json: give a Hugging Face "
         "folder with its tokenizer.json, or a .gguf"),
        (["--device", "cpu", "--out", str(tmp_path / "file")],
         f"error: {tmp_path / 'file'} is a file: --out names the folder every stage writes into"),
    ]  # fmt: skip
    if not torch.cuda.is_available():
        no_cuda = "error: --device cuda: this torch sees no CUDA device; use --device cpu"
        cases.append((["--device", "cuda"], no_cuda))
    for extra, line in cases:
        args = ["draft", "train", "--target", str(folder), "--out", str(tmp_path / "out"), *extra]
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 1 and res.output.strip().splitlines() == [line], res.output
    assert (tmp_path / "file").read_text() == "mine" and not (tmp_path / "out").exists()


@pytest.mark.real
@pytest.mark.slow
def test_draft_train_runs_the_gemma_recipe(tmp_path: Path) -> None:
    """The Gemma 3 270M recipe (scripts/train_gemma_draft.sh) through the same command, cut to
    a few prompts, one feature shard and five steps: the 262k vocabulary, the GGUF converted,
    the default recipe's export, and a report whose greedy speculation is exact."""
    import os

    model = Path(os.environ.get("ETSPEC_GEMMA3_270M", ROOT / ".etspec-cache" / "gemma-3-270m"))
    gguf = model / "gemma-3-270m-q4_k_m.gguf"
    target_pte = model / "exports" / "target-default.pte"
    if not gguf.is_file() or not target_pte.is_file():
        pytest.skip(f"no {gguf} or {target_pte}: run bash scripts/main_job.sh")
    texts = tmp_path / "texts"
    texts.mkdir()
    for name in ("README.md", "docs/models.md", "docs/runtime.md"):
        (texts / Path(name).name).write_text((ROOT / name).read_text())
    out = tmp_path / "out"
    args = ["draft", "train", "--target", str(gguf), "--out", str(out), "--texts", str(texts),
            "--target-pte", str(target_pte), "--device", "cpu", "--prompts", "4",
            "--prose", "2", "--tasks", "2", "--new-tokens", "32", "--feature-shards", "1",
            "--steps", "5", "--warmup", "2"]  # fmt: skip
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    report = json.loads((out / "report.json").read_text())
    assert report["prompts"] >= 1 and report["greedy"]["identical"] == report["prompts"]
    assert report["training"]["draft_vocab"] == 8192
