"""Training code: the sequence forwards equal the exported methods, the EAGLE-3 unroll equals
the runtime's drafting, and both training scripts produce checkpoints the loaders accept."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from helpers import causal
from tiny import Eagle3Spec, make_eagle3_checkpoint, make_hf_target, write_tokenizer

from etspec.models.families import load_target
from etspec.models.training import draft_ttt_forward, target_forward
from etspec.runtime.eager import eager_draft, eager_target
from etspec.runtime.speculative.eagle3 import Eagle3DraftRunner

ATOL = 1e-4
TARGET = "llama_gqa_rope3"  # 6 layers, vocab 256, GQA, llama3 RoPE scaling


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("training_pair")
    make_hf_target(TARGET, root / "target")
    write_tokenizer(root / "target", 256)
    make_eagle3_checkpoint(root / "draft", Eagle3Spec(aux_layer_ids=(2, 3, 3)))
    target = eager_target(root / "target", max_seq=64, prefill_chunk=64, verify_width=4)
    draft = eager_draft(root / "draft", target, step_width=1)
    return root, target, draft


@pytest.mark.parametrize("family", ["pair", "gemma_target", "gemma3_target"])
def test_target_forward_matches_prefill_method(request, family: str) -> None:  # type: ignore[no-untyped-def]
    """Llama's and Gemma 3's batched forwards (sliding layers of window 12 over 64 tokens)
    and other families' forward through ``body`` (Gemma 4 with KV-shared layers and
    per-layer inputs) equal the prefill method row for row."""
    target = request.getfixturevalue(family)[1]
    vocab = target.metadata.vocab_size
    tokens = torch.randint(0, vocab, (2, 64), generator=torch.Generator().manual_seed(0))
    logits, hidden = target_forward(target.model, tokens)
    for b in range(2):
        target.run("target_reset")
        pos = torch.arange(64)
        last, rows = target.run(
            "target_prefill", tokens[b], pos, torch.tensor([63]), causal(target, pos)
        )
        torch.testing.assert_close(hidden[b], rows, atol=ATOL, rtol=0)
        torch.testing.assert_close(logits[b, 63:], last, atol=ATOL, rtol=0)


def test_ttt_unroll_matches_runtime_chain_drafting(pair) -> None:  # type: ignore[no-untyped-def]
    """Step k, row j of the unroll == the depth-k chain node the runner feeds after
    committing j + 1 rows, with the data's tokens as the chain."""
    _, target, draft = pair
    steps, t = 3, 40
    tokens = torch.randint(0, 256, (1, t), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        _, hidden = target_forward(target.model, tokens)
        unrolled = draft_ttt_forward(draft.model, tokens, hidden, steps)
    runner = Eagle3DraftRunner(draft)
    ids = tokens[0].tolist()
    for j in (0, 7, 30):
        runner.reset()
        runner.prefill(ids[: j + 1], ids[j + 1], hidden[0, : j + 1])
        grow = runner.expansion()
        torch.testing.assert_close(grow.root(), unrolled[0][0, j], atol=ATOL, rtol=0)
        for k in range(1, steps):
            logits = grow.expand([k - 1], [ids[j + k + 1]])
            torch.testing.assert_close(logits[0], unrolled[k][0, j], atol=ATOL, rtol=0)


def _markov_corpus(root: Path, vocab: int, files: int = 24, words: int = 600) -> None:
    """Word-level text the tiny tokenizer maps to ids: a sparse random Markov chain."""
    rng = random.Random(0)
    succ = {i: rng.sample(range(1, vocab), 3) for i in range(1, vocab)}
    root.mkdir()
    for f in range(files):
        w = rng.randrange(1, vocab)
        out = []
        for _ in range(words):
            out.append(f"w{w}")
            w = rng.choice(succ[w])
        (root / f"m{f:02d}.py").write_text(" ".join(out))


def _train_draft(target_dir: Path, data: Path, out: Path, steps: int) -> dict:  # type: ignore[type-arg]
    from etspec.training.train_draft import main

    args = [
        "--target",
        str(target_dir),
        "--out",
        str(out),
        "--data-root",
        str(data),
        "--draft-vocab",
        "128",
        "--seq-len",
        "64",
        "--batch",
        "4",
        "--ttt-steps",
        "3",
        "--steps",
        str(steps),
        "--lr",
        "3e-3",
        "--warmup",
        "5",
        "--device",
        "cpu",
    ]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads((out / "training.json").read_text())


def test_train_draft_on_tiny_target(pair, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Acceptance: a short run on a tiny random target writes an official-layout draft that
    the loader pairs with the target, and training moves the draft towards the target."""
    root, target, _ = pair
    data = tmp_path / "corpus"
    _markov_corpus(data, 256)
    before = _train_draft(root / "target", data, tmp_path / "d0", steps=0)
    after = _train_draft(root / "target", data, tmp_path / "d1", steps=30)
    assert after["held_out_loss"] < before["held_out_loss"] - 0.1
    draft = eager_draft(tmp_path / "d1", target, step_width=1)  # validates the pair
    cfg = json.loads((tmp_path / "d1" / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"]
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [2, 3, 3]
    # d2t maps the 128 most frequent corpus ids; every mapped id is a real target id.
    ids = torch.arange(128) + draft.model.d2t
    assert ids.unique().numel() == 128 and int(ids.max()) < 256
    assert draft.model.t2d.sum() == 128 and bool(draft.model.t2d[ids].all())


@pytest.fixture(scope="module")
def gemma_target(tmp_path_factory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("gemma_training")
    make_hf_target("gemma4_shared_ple", root / "target")
    # Gemma reads <bos> (id 2) first; the builders refuse a tokenizer that drops it.
    write_tokenizer(root / "target", 32, bos=2)
    return root, eager_target(root / "target", max_seq=64, prefill_chunk=64, verify_width=4)


@pytest.fixture(scope="module")
def gemma3_target(tmp_path_factory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("gemma3_training")
    make_hf_target("gemma3_sliding", root / "target")
    write_tokenizer(root / "target", 32, bos=2)
    return root, eager_target(root / "target", max_seq=64, prefill_chunk=64, verify_width=4)


def test_train_draft_on_a_gemma_target(gemma_target, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """EAGLE-3 drafts train against Gemma targets too, and pair with them."""
    root, target = gemma_target
    data = tmp_path / "corpus"
    _markov_corpus(data, 32)
    before = _train_draft(root / "target", data, tmp_path / "d0", steps=0)
    after = _train_draft(root / "target", data, tmp_path / "d1", steps=30)
    assert after["held_out_loss"] < before["held_out_loss"] - 0.1
    eager_draft(tmp_path / "d1", target, step_width=1)  # validates the pair


def test_train_target_writes_a_transformers_checkpoint(tmp_path: Path) -> None:
    """A few steps on a small stdlib folder; transformers loads the folder and agrees."""
    import email

    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    from etspec.models.llama import LlamaTarget
    from etspec.training.train_target import main

    data = Path(email.__file__).parent
    out = tmp_path / "t"
    args = [
        "--out",
        str(out),
        "--data-root",
        str(data),
        "--vocab",
        "400",
        "--hidden",
        "32",
        "--layers",
        "4",
        "--heads",
        "2",
        "--kv-heads",
        "1",
        "--intermediate",
        "64",
        "--seq-len",
        "64",
        "--batch",
        "2",
        "--steps",
        "6",
        "--save-every",
        "3",
        "--device",
        "cpu",
    ]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    card = json.loads((out / "training.json").read_text())
    assert card["steps"] == 6 and card["held_out_loss"] > 0
    hf = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    ours = LlamaTarget.from_checkpoint(out, max_context=64, scratch=0)
    tok = PreTrainedTokenizerFast.from_pretrained(out)
    ids = torch.tensor([tok("def f(x):\n    return x + 1\n")["input_ids"]])
    with torch.no_grad():
        ref = hf(ids).logits
        got, _ = target_forward(ours, ids)
    torch.testing.assert_close(got, ref, atol=ATOL, rtol=0)
    # Resuming a finished run changes nothing but reloads the saved state.
    result = CliRunner().invoke(main, [*args, "--resume"], catch_exceptions=False)
    assert "resumed at step 6" in result.output


def test_the_shipped_draft_reads_raw_taps(pair) -> None:  # type: ignore[no-untyped-def]
    """Training divides the taps by their per-channel RMS; the checkpoint it writes takes
    the raw taps into ``fc`` and gives the same loss as the draft trained."""
    import copy

    from etspec.training.train_draft import TTTObjective, input_scale

    _, _, draft = pair
    model = copy.deepcopy(draft.model)
    width, size = model.target_hidden_width, len(model.d2t)
    gen = torch.Generator().manual_seed(3)
    # Channels from 1 to 10^4 in size, as Gemma 3's residual stream has them.
    spread = 10 ** torch.linspace(0, 4, width)
    hidden = torch.randn(2, 24, width, generator=gen) * spread
    valid = torch.ones(2, 24, dtype=torch.bool)
    valid[1, 20:] = False
    scale = input_scale([(hidden[:1], valid[:1]), (hidden[1:], valid[1:])])
    rows = hidden[valid]
    torch.testing.assert_close(scale, rows.pow(2).mean(0).sqrt(), rtol=1e-5, atol=0)
    used = torch.arange(size) + model.d2t
    trained = TTTObjective(model, used, 3, scale)
    shipped = copy.deepcopy(model)
    shipped.load_state_dict(trained.shipped())
    tokens = torch.randint(0, 256, (2, 24), generator=gen)
    slots = torch.randint(0, size + 1, (2, 24, 5), generator=gen)
    probs = torch.softmax(torch.randn(2, 24, 5, generator=gen), -1)
    top = torch.randint(0, 256, (2, 24), generator=gen)
    with torch.no_grad():
        want = trained(tokens, hidden, slots, probs, top, valid)
        got = TTTObjective(shipped, used, 3)(tokens, hidden, slots, probs, top, valid)
        torch.testing.assert_close(shipped.fuse(hidden), model.fuse(hidden / scale))
    torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)
    assert torch.equal(got[1], want[1])


def test_training_forwards_stay_on_the_model_device(pair) -> None:  # type: ignore[no-untyped-def]
    """Every tensor the forwards build lives on the tokens' device: on the meta device a
    stray CPU mask or index raises, as it would on CUDA (where the bundled pair trains)."""
    import copy

    _, target, draft = pair
    tmodel = copy.deepcopy(target.model).to("meta")
    dmodel = copy.deepcopy(draft.model).to("meta")
    tokens = torch.zeros(2, 16, dtype=torch.long, device="meta")
    with torch.no_grad():
        logits, hidden = target_forward(tmodel, tokens)
        outs = draft_ttt_forward(dmodel, tokens, hidden, 3)
    assert logits.device.type == "meta" and logits.shape == (2, 16, 256)
    assert [o.device.type for o in outs] == ["meta"] * 3


def test_shard_order_puts_generated_first_and_spreads_the_corpus() -> None:
    """Any prefix of the features order: the target's own continuations, then corpus shards
    from every part of the (source-by-source) corpus."""
    import numpy as np

    from etspec.training.data import SHARD_ROWS, shard_order

    generated = np.zeros(30 * SHARD_ROWS, bool)
    generated[27 * SHARD_ROWS + 5 :] = True  # shard 27 mixed, 28 and 29 generated
    order = shard_order(30, generated)
    assert sorted(order) == list(range(30)) and order[:3] == [27, 28, 29]
    first = order[3:12]  # 9 of 27 corpus shards: 3 from each third
    assert [sum(a <= s < a + 9 for s in first) for a in (0, 9, 18)] == [3, 3, 3]


def test_prose_openings_are_not_benchmark_prompts() -> None:
    """The self-distillation's prose openings: distinct, every form in any prefix, and none is
    (or holds, or is held by) a benchmark prompt of any set."""
    from etspec.tools.prompts import SETS
    from etspec.training.prose_prompts import _forms, prose_prompts

    every = prose_prompts(10**6)
    assert len(every) == len(set(every)) == sum(len(s) for _, s in _forms())
    first = prose_prompts(len(_forms()))  # one of each form
    assert all(p in {f.format(x) for x in s} for p, (f, s) in zip(first, _forms(), strict=True))
    bench = [p.strip().lower() for prompts in SETS.values() for p in prompts]
    for p in every:
        q = p.strip().lower()
        assert not any(q in b or b in q for b in bench), p


def test_precision_is_bf16_where_asked_or_where_the_cpu_has_bf16_units(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """--precision auto means bf16 on CUDA and on a CPU with AMX or AVX512-BF16 only: an
    AVX-512 CPU without them emulates bf16 at a fraction of fp32's rate."""
    from etspec.training import state as train_state

    class Cpuinfo:
        def __init__(self, flags: str) -> None:
            self.flags = flags

        def read_text(self) -> str:
            return f"processor : 0\nflags : {self.flags}\n"

    for flags, want in (("avx512f avx512_vnni", False), ("avx512f avx512_bf16", True),
                        ("avx512f amx_tile amx_bf16", True)):  # fmt: skip
        monkeypatch.setattr(train_state, "Path", lambda _, f=flags: Cpuinfo(f))
        assert train_state.use_bf16("auto", "cpu") is want
        assert train_state.use_bf16("fp32", "cpu") is False
        assert train_state.use_bf16("bf16", "cpu") is True
        assert train_state.use_bf16("auto", "cuda:0") is True


def test_draft_trains_over_stored_target_features(  # type: ignore[no-untyped-def]
    gemma3_target, tmp_path: Path, monkeypatch
) -> None:
    """draft_data.py stores the target's taps and top-k log-probabilities (bf16 compute, or
    fp32 as asked), redoes only a missing shard, and train_draft.py --features learns from
    them alone."""
    import numpy as np

    from etspec.training.data import SHARD_ROWS, TOP_K, cli
    from etspec.training.train_draft import main

    root, target = gemma3_target
    rng = np.random.default_rng(0)
    rows = 70  # two shards, the second partial
    windows = np.zeros((rows, 64), np.int32)
    lengths = rng.integers(40, 65, rows).astype(np.int32)
    succ = rng.integers(3, 32, (32, 2))
    for r in range(rows):
        windows[r, 0], windows[r, 1] = 2, rng.integers(3, 32)
        for j in range(2, lengths[r]):
            windows[r, j] = succ[windows[r, j - 1], rng.integers(0, 2)]
    data = tmp_path / "data"
    data.mkdir()
    np.save(data / "corpus.npy", windows)
    np.save(data / "corpus_lengths.npy", lengths)
    # fp32 where asked: the stored top-k is the sequence forward's to fp32 rounding.
    fp32 = tmp_path / "fp32"
    fp32.mkdir()
    for name in ("corpus.npy", "corpus_lengths.npy"):
        (fp32 / name).write_bytes((data / name).read_bytes())
    args = ["features", "--target", str(root / "target"), "--out", str(fp32), "--shards", "1"]
    result = CliRunner().invoke(cli, [*args, "--precision", "fp32"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert json.loads((fp32 / "features.json").read_text())["bf16"] is False
    logits, _ = target_forward(target.model, torch.from_numpy(windows[:4].astype(np.int64)))
    want = torch.log_softmax(logits, -1).topk(TOP_K, -1)
    ids = torch.from_numpy(np.load(fp32 / "shards" / "00000.topk_ids.npy")[:4]).long()
    logp = torch.from_numpy(np.load(fp32 / "shards" / "00000.topk_logp.npy")[:4]).float()
    assert torch.equal(ids[..., 0], want.indices[..., 0])
    torch.testing.assert_close(logp, want.values, atol=2e-3, rtol=1e-3)  # stored as fp16

    args = ["features", "--target", str(root / "target"), "--out", str(data),
            "--precision", "bf16"]  # fmt: skip
    result = CliRunner().invoke(cli, [*args, "--shards", "1"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    meta = json.loads((data / "features.json").read_text())
    assert meta["complete"] == [0] and meta["bf16"] is True
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert json.loads((data / "features.json").read_text())["complete"] == [0, 1]
    shards = sorted((data / "shards").glob("*.topk_ids.npy"))
    assert len(shards) == 2
    ids, logp = np.load(shards[0]), np.load(data / "shards" / "00000.topk_logp.npy")
    assert ids.shape == (SHARD_ROWS, 64, TOP_K)
    # bf16 matmuls: the top entry and its log-probability within bf16's reach.
    assert (torch.from_numpy(ids[:4, :, 0]).long() == want.indices[..., 0]).float().mean() > 0.97
    torch.testing.assert_close(
        torch.from_numpy(logp[:4, :, 0]).float(), want.values[..., 0], atol=0.05, rtol=0
    )
    second = data / "shards" / "00001.hidden.npy"
    stamp = second.stat().st_mtime_ns
    (data / "shards" / "00000.topk_ids.npy").unlink()
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert (data / "shards" / "00000.topk_ids.npy").exists()
    assert second.stat().st_mtime_ns == stamp  # the finished shard was not redone

    def train(out: Path, steps: int) -> dict:  # type: ignore[type-arg]
        args = ["--target", str(root / "target"), "--features", str(data), "--out", str(out),
                "--draft-vocab", "24", "--ttt-steps", "3", "--batch", "4", "--steps",
                str(steps), "--lr", "3e-3", "--warmup", "5", "--device", "cpu"]  # fmt: skip
        result = CliRunner().invoke(main, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return json.loads((out / "training.json").read_text())

    before = train(tmp_path / "d0", 0)
    after = train(tmp_path / "d1", 40)
    assert after["held_out_loss"] < before["held_out_loss"] - 0.1
    assert set(after["held_out"]) == {"corpus"}
    # The same seed over the same features writes the same checkpoint, byte for byte.
    train(tmp_path / "d1b", 40)
    weights = [(tmp_path / d / "model.safetensors").read_bytes() for d in ("d1", "d1b", "d0")]
    assert weights[0] == weights[1] != weights[2]
    # Resuming restores the taps' scale with the weights: another seed samples other windows
    # to measure it from, yet the finished run writes the same checkpoint again.
    again = ["--target", str(root / "target"), "--features", str(data), "--out",
            str(tmp_path / "d1"), "--draft-vocab", "24", "--ttt-steps", "3", "--batch", "4",
            "--steps", "40", "--seed", "5", "--resume", "--device", "cpu"]  # fmt: skip
    result = CliRunner().invoke(main, again, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "d1" / "model.safetensors").read_bytes() == weights[0]
    # A state saved before the scale was (the draft's tensors alone) is refused in one line.
    path = tmp_path / "d1" / "train_state.pt"
    state = torch.load(path, weights_only=False)
    state["model"] = {k[len("draft.") :]: v for k, v in state["model"].items() if k != "scale"}
    torch.save(state, path)
    result = CliRunner().invoke(main, again)
    assert result.exit_code == 1 and "remove it to train afresh" in result.output
    assert "Traceback" not in result.output
    eager_draft(tmp_path / "d1", target, step_width=1)  # validates the pair

    # --windows runs the target on each batch instead: the inputs the features store.
    from etspec.training.train_draft import FeatureStore, LiveWindows

    stored, live = FeatureStore(data), LiveWindows(data, target.model, "cpu", bf16=True)
    np.testing.assert_array_equal(live.train, stored.train)
    t2d = torch.full((target.model.cfg.vocab_size,), -1, dtype=torch.long)
    t2d[:24] = torch.arange(24)
    index = stored.train[:4]
    a, b = stored.batch(index, t2d, 24), live.batch(index, t2d, 24)
    assert torch.equal(a[0], b[0]) and torch.equal(a[5], b[5])  # tokens, valid
    assert (a[4] == b[4])[a[5]].float().mean() > 0.97  # top-1 ids
    torch.testing.assert_close(b[1], a[1], atol=0.05, rtol=0.02)  # taps (stored as bf16)
    torch.testing.assert_close(b[3][..., 0], a[3][..., 0], atol=0.02, rtol=0)

    def train_live(out: Path, steps: int, *extra: str) -> tuple[dict, str]:  # type: ignore[type-arg]
        args = ["--target", str(root / "target"), "--windows", str(data), "--out", str(out),
                "--draft-vocab", "24", "--ttt-steps", "3", "--batch", "4", "--steps",
                str(steps), "--lr", "3e-3", "--warmup", "5", "--device", "cpu", *extra]  # fmt: skip
        result = CliRunner().invoke(main, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return json.loads((out / "training.json").read_text()), result.output

    live_after, _ = train_live(tmp_path / "l1", 40)
    assert live_after["held_out_loss"] < before["held_out_loss"] - 0.1
    stopped, output = train_live(tmp_path / "l2", 40, "--max-minutes", "0")
    assert "stopped at step 0 of 40" in output
    assert (stopped["steps"], stopped["schedule_steps"]) == (0, 40)

    # Continuations generated later append windows: the full shard is kept, the partial one
    # (6 rows, now 16) is made again, and windows that changed otherwise are refused.
    from etspec.training import data as draft_data

    monkeypatch.setattr(draft_data, "WINDOW", 64)
    with open(data / "generated.jsonl", "w") as f:
        for i in range(10):
            row = {"i": i, "sampled": False, "prompt_ids": [2, 5 + i], "ids": [7, 8, 9]}
            f.write(json.dumps(row) + "\n")
    first = data / "shards" / "00000.hidden.npy"
    stamp = first.stat().st_mtime_ns
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    meta = json.loads((data / "features.json").read_text())
    assert (meta["windows"], meta["generated"], meta["complete"]) == (80, 10, [0, 1])
    assert np.load(data / "shards" / "00001.topk_ids.npy").shape[0] == 16
    assert first.stat().st_mtime_ns == stamp
    np.save(data / "corpus.npy", windows[::-1])
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "the windows changed since" in result.output


def test_self_distillation_is_the_target_alone_s_output(artifacts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """draft_data.py generate: greedy continuations (drafted by prompt lookup) are the
    target-only runner's tokens, sampled ones are fixed by the seed, and a rerun redoes
    nothing already written."""
    from etspec.runtime.runner import TextLLMRunner
    from etspec.runtime.sampling import SamplingConfig
    from etspec.training.data import cli

    case = artifacts.target("gemma3_text")
    data = tmp_path / "data"
    data.mkdir()
    text = "the cat sat on the mat and the cat sat on the mat again. " * 3
    with open(data / "openings.jsonl", "w") as f:
        for i in range(6):
            f.write(json.dumps({"source": "doc", "text": f"{i} {text}"}) + "\n")

    def run(count: int, out: Path, prose: int = 0, tasks: int = 0) -> list[dict]:  # type: ignore[type-arg]
        args = ["generate", "--target-pte", str(case.pte), "--out", str(out),
                "--count", str(count), "--prose", str(prose), "--tasks", str(tasks),
                "--new-tokens", "24"]  # fmt: skip
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        with open(out / "generated.jsonl") as f:
            return [json.loads(line) for line in f]

    rows = run(4, data)
    assert [r["i"] for r in rows] == [0, 1, 2, 3]
    assert [r["sampled"] for r in rows] == [False, True, False, True]
    alone = TextLLMRunner.from_pte(case.pte)
    for r in rows:
        assert len(r["prompt_ids"]) <= 96 - 24 and len(r["ids"]) > 0
        if not r["sampled"]:
            want = alone.generate(r["prompt_ids"], 24, SamplingConfig()).token_ids
            assert r["ids"] == list(want)
    again = tmp_path / "again"
    again.mkdir()
    (again / "openings.jsonl").write_bytes((data / "openings.jsonl").read_bytes())
    assert run(4, again) == rows  # same seed, same continuations, sampled ones included
    more = run(6, data)
    assert len(more) == 6 and more[:4] == rows  # resumed: four kept, two added
    # A prose opening after the corpus prompts, continued twice: greedy, then sampled.
    from etspec.training.prose_prompts import prose_prompts

    prose = run(6, data, prose=1)
    assert prose[:6] == more and [r["i"] for r in prose[6:]] == [6, 7]
    assert prose[6]["prompt_ids"] == prose[7]["prompt_ids"] == alone.encode(prose_prompts(1)[0])
    assert [r["sampled"] for r in prose[6:]] == [False, True]
    # A chat-style task prompt after both, filled from the openings, continued both ways.
    from etspec.training.data import _task_prompts

    tasked = run(6, data, prose=1, tasks=1)
    assert tasked[:8] == prose and [r["sampled"] for r in tasked[8:]] == [False, True]
    task = _task_prompts(data, 1)[0]
    assert re.search(r"\d", task) and "?" in task  # a word problem: the openings have no prose
    head = alone.encode(task)[: 96 - 24]  # cut to leave the context room for 24 new tokens
    assert tasked[8]["prompt_ids"] == tasked[9]["prompt_ids"] == head
    args = ["generate", "--target-pte", str(case.pte), "--out", str(again), "--new-tokens", "96"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "leaves no room for a prompt" in result.output


def test_batched_self_distillation_from_the_checkpoint(artifacts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """draft_data.py generate --target (the eager checkpoint, rows batched over a KV cache):
    greedy continuations are the exported target-only runner's tokens, sampled ones are
    fixed by the seed, and ``windows`` stores what train_draft.py --windows reads."""
    import numpy as np

    from etspec.runtime.runner import TextLLMRunner
    from etspec.runtime.sampling import SamplingConfig
    from etspec.training.data import cli

    case = artifacts.target("gemma3_text")
    text = "the cat sat on the mat and the cat sat on the mat again. " * 3

    def run(out: Path, batch: int) -> list[dict]:  # type: ignore[type-arg]
        out.mkdir()
        with open(out / "openings.jsonl", "w") as f:
            for i in range(8):
                f.write(json.dumps({"source": "doc", "text": f"{i} {text}"}) + "\n")
        args = ["generate", "--target", str(case.checkpoint), "--out", str(out),
                "--count", "8", "--prose", "1", "--tasks", "0", "--new-tokens", "24",
                "--batch", str(batch),
                "--device", "cpu"]  # fmt: skip
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        with open(out / "generated.jsonl") as f:
            return [json.loads(line) for line in f]

    rows = run(tmp_path / "a", batch=3)
    assert [r["i"] for r in rows] == list(range(10))
    assert [r["sampled"] for r in rows] == [False, True] * 5
    assert len({len(r["prompt_ids"]) for r in rows}) > 2  # several batches of one length
    alone = TextLLMRunner.from_pte(case.pte)
    model = load_target(case.checkpoint, max_context=256, scratch=0).eval()
    checked = 0
    for r in rows:
        assert 0 < len(r["ids"]) <= 24
        if r["sampled"]:
            continue
        # The KV-cached batch equals the full forward re-run per token.
        ids = list(r["prompt_ids"])
        with torch.no_grad():
            for _ in r["ids"]:
                ids.append(int(target_forward(model, torch.tensor([ids]))[0][0, -1].argmax()))
        assert ids[len(r["prompt_ids"]) :] == r["ids"]
        # And the export's target-only runner, where its 96-token context holds the prompt.
        if len(r["prompt_ids"]) + 24 <= alone.meta.max_context:
            want = alone.generate(r["prompt_ids"], 24, SamplingConfig()).token_ids
            assert r["ids"] == list(want)
            checked += 1
    assert checked >= 1
    sampled = [r for r in rows if r["sampled"]]
    assert len({tuple(r["ids"]) for r in sampled}) == len(sampled)  # drawn, not argmax
    assert run(tmp_path / "b", batch=3) == rows
    corpus = np.zeros((2, 256), np.int32)
    corpus[:, :5] = [2, 7, 8, 9, 10]
    np.save(tmp_path / "a" / "corpus.npy", corpus)
    np.save(tmp_path / "a" / "corpus_lengths.npy", np.asarray([5, 5], np.int32))
    result = CliRunner().invoke(cli, ["windows", "--out", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    windows = np.load(tmp_path / "a" / "windows.npy")
    assert windows.shape == (12, 256) and (windows[:2] == corpus).all()
    assert np.load(tmp_path / "a" / "generated.npy").tolist() == [False] * 2 + [True] * 10
    lengths = np.load(tmp_path / "a" / "lengths.npy")
    assert lengths.tolist() == [5, 5] + [len(r["prompt_ids"]) + len(r["ids"]) for r in rows]
    assert windows[2, : lengths[2]].tolist() == rows[0]["prompt_ids"] + rows[0]["ids"]


def test_offline_sampled_acceptance_of_a_draft(pair, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``draft_sampled_acceptance.py`` scores sum_x min(p, q) at each generated token, p the
    target's distribution after the tokens before it and q the draft's first-step one, both
    as the runtime's sampler processes them; at the traced steps' first tokens it averages
    those positions, and it reports the share of steps that accepted a token."""
    import click

    from etspec.models.build import target_embedding
    from etspec.models.eagle3 import Eagle3Draft
    from etspec.runtime.sampling import Sampler, SamplingConfig
    from etspec.training.acceptance import score, step_starts

    assert step_starts([0, 2, 1, 0], 10) == [1, 2, 5, 7]
    assert step_starts([3, 3, 3], 6) == [1, 5]
    root = pair[0]
    prompt = [5, 17, 42, 8]
    generated = torch.randint(0, 256, (12,), generator=torch.Generator().manual_seed(3)).tolist()
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"id": "p0", "prompt_ids": prompt}) + "\n")
    settings = {"prompts": str(prompts), "temperature": 0.7, "top_p": 0.9}
    run = {
        "manifest": {"settings": settings},
        "records": {"chain5": [{"prompt_id": "p0", "prompt_tokens": 4, "token_ids": generated}]},
    }
    accepted = [0, 2, 1, 3]
    out = score(root / "target", root / "draft", run, "chain5", [1.0, 1.5], {"p0": accepted})

    # The same from dense probabilities (``Sampler.probs``), the target run on each prefix.
    target = load_target(root / "target", 64, 8).eval()
    draft = Eagle3Draft.from_checkpoint(
        root / "draft", 64, 8, target_embedding(root / "target")
    ).eval()
    used = torch.arange(draft.cfg.draft_vocab_size) + draft.d2t
    seq = torch.tensor([prompt + generated])
    expected = {1.0: [], 1.5: []}
    with torch.no_grad():
        for g in range(1, len(generated)):
            prefix = seq[:, : len(prompt) + g]
            logits, hidden = target_forward(target, prefix)
            p = Sampler(SamplingConfig(temperature=0.7, top_p=0.9)).probs(logits[0, -1:])[0]
            # The first unroll step's row that was fed the prefix's last token.
            row = draft_ttt_forward(draft, prefix, hidden, 1)[0][0, -2:-1]
            for scale, values in expected.items():
                small = Sampler(SamplingConfig(temperature=0.7 * scale, top_p=0.9)).probs(row)[0]
                q = torch.zeros_like(p).index_add_(0, used, small)
                values.append(float(torch.minimum(p, q).sum()))
    assert out["positions"] == len(generated) - 1
    for scale, values in expected.items():
        assert out["every_position"][f"{scale:g}"] == pytest.approx(
            sum(values) / len(values), abs=1e-5
        )
    starts = [expected[1.0][g - 1] for g in (1, 2, 5, 7)]
    assert out["step_starts"]["expected"] == pytest.approx(sum(starts) / 4, abs=1e-5)
    assert out["step_starts"]["observed"] == pytest.approx(3 / 4)
    with pytest.raises(click.UsageError, match="the run is greedy"):
        score(
            root / "target",
            root / "draft",
            {**run, "manifest": {"settings": {**settings, "temperature": 0}}},
            "chain5",
            [1.0],
        )
