"""Damaged checkpoints: every one refused in one line before anything is lowered.

The fuzz below builds a few hundred damaged copies of tiny target and EAGLE-3 draft
checkpoints (config values of the wrong type, out of range or inconsistent with the weights;
weights of the wrong shape, dtype or with non-finite values; missing and extra weights;
damaged, misplaced and duplicated weight files) and asks the builders behind ``etspec
export`` (``models/build.py``, no lowering) for each. Every one must raise an ``EtspecError``
whose message is one line naming the checkpoint; any other exception, or a build that
succeeds, is a checkpoint that would export as a different model. Benign variants (fp16 or
bf16 weights, a longer trained context, an ignored rotary buffer) must still build.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from tiny import Eagle3Spec, make_eagle3_checkpoint, make_hf_target, write_tokenizer

from etspec.errors import EtspecError
from etspec.models.build import (
    DraftExportOptions,
    TargetExportOptions,
    build_target,
    draft_program,
    target_metadata,
)

OPTS = TargetExportOptions(backend="portable", max_seq=64, prefill_chunk=8, verify_width=8)
Mutation = Callable[[Path], None]


def _config(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text())


def _unset(key: str) -> Mutation:
    def mutate(folder: Path) -> None:
        config = _config(folder)
        del config[key]
        (folder / "config.json").write_text(json.dumps(config))

    return mutate


def _set(key: str, value: object) -> Mutation:
    def mutate(folder: Path) -> None:
        config = _config(folder)
        config[key] = value
        (folder / "config.json").write_text(json.dumps(config))

    return mutate


def _write_config_text(text: str) -> Mutation:
    def mutate(folder: Path) -> None:
        (folder / "config.json").write_text(text)

    return mutate


def _tensors(fn: Callable[[dict[str, torch.Tensor]], None]) -> Mutation:
    def mutate(folder: Path) -> None:
        state = load_file(str(folder / "model.safetensors"))
        fn(state)
        save_file({k: v.contiguous() for k, v in state.items()}, str(folder / "model.safetensors"))

    return mutate


def _tensor(name: str, fn: Callable[[torch.Tensor], torch.Tensor]) -> Mutation:
    def apply(state: dict[str, torch.Tensor]) -> None:
        state[name] = fn(state[name])

    return _tensors(apply)


def _poison(value: float) -> Callable[[torch.Tensor], torch.Tensor]:
    def fn(t: torch.Tensor) -> torch.Tensor:
        t = t.clone()
        t.view(-1)[t.numel() // 2] = value
        return t

    return fn


def _file_bytes(fn: Callable[[bytes], bytes]) -> Mutation:
    def mutate(folder: Path) -> None:
        f = folder / "model.safetensors"
        f.write_bytes(fn(f.read_bytes()))

    return mutate


def _sharded(weight_map: Callable[[list[str]], dict[str, str]], split: bool = True) -> Mutation:
    """Two shards (the keys halved) and an index whose weight_map ``weight_map`` writes."""

    def mutate(folder: Path) -> None:
        state = load_file(str(folder / "model.safetensors"))
        (folder / "model.safetensors").unlink()
        keys = sorted(state)
        half = len(keys) // 2
        first = keys[:half] if split else keys
        save_file({k: state[k] for k in first}, str(folder / "a.safetensors"))
        save_file({k: state[k] for k in keys[half:]}, str(folder / "b.safetensors"))
        index = {"metadata": {}, "weight_map": weight_map(keys)}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index))

    return mutate


def _torch_bin(payload: Callable[[dict[str, torch.Tensor]], object]) -> Mutation:
    def mutate(folder: Path) -> None:
        state = load_file(str(folder / "model.safetensors"))
        (folder / "model.safetensors").unlink()
        torch.save(payload(state), folder / "pytorch_model.bin")

    return mutate


def _bad_values(key: str, value: int) -> list[tuple[str, Mutation]]:
    """Wrong types and ranges of one integer key; then well-typed values the weights
    contradict (they change a shape, or the number of layers)."""
    cases = [0, -1, value + 0.7, str(value), True, [value], None if key != "vocab_size" else 0]
    out = [(f"{key}={v!r}", _set(key, v)) for v in cases if v is not None]
    out += [
        (f"{key}={value + 1}", _set(key, value + 1)),
        (f"{key}={value * 2}", _set(key, value * 2)),
    ]
    return out


def _shape_damage(name: str, t: torch.Tensor) -> list[tuple[str, Mutation]]:
    cases: list[tuple[str, Mutation]] = [
        (
            f"{name} as [1]*{t.dim()}",
            _tensor(name, lambda x: x.reshape(-1)[:1].reshape([1] * x.dim())),
        ),
        (f"{name} one row short", _tensor(name, lambda x: x[:-1].clone())),
        (f"{name} int8", _tensor(name, lambda x: x.to(torch.int8))),
        (f"{name} bool", _tensor(name, lambda x: x > 0)),
        (f"{name} NaN", _tensor(name, _poison(float("nan")))),
        (f"{name} inf", _tensor(name, _poison(float("inf")))),
        (f"{name} -inf", _tensor(name, _poison(float("-inf")))),
    ]
    if t.dim() == 2:
        cases.append((f"{name} as [1, in]", _tensor(name, lambda x: x[:1].clone())))
        if t.shape[0] != t.shape[1]:
            cases.append((f"{name} transposed", _tensor(name, lambda x: x.t().contiguous())))
    return cases


def _file_damage(seed: int) -> list[tuple[str, Mutation]]:
    rng = random.Random(seed)
    cases: list[tuple[str, Mutation]] = [
        ("weights empty", _file_bytes(lambda b: b"")),
        ("weights garbage", _file_bytes(lambda b: bytes(rng.randrange(256) for _ in range(512)))),
        (
            "weights header length huge",
            _file_bytes(lambda b: (1 << 62).to_bytes(8, "little") + b[8:]),
        ),
    ]
    for i in range(6):
        cut = rng.randrange(1, 4096)
        cases.append((f"weights truncated #{i}", _file_bytes(lambda b, cut=cut: b[: len(b) - cut])))
    cases += [
        ("config.json not JSON", _write_config_text("{not json")),
        ("config.json a list", _write_config_text("[1, 2]")),
        ("config.json empty", _write_config_text("")),
        ("config.json nested deep", _write_config_text("[" * 100000 + "]" * 100000)),
        ("shard path absolute", _sharded(lambda keys: {k: "/etc/passwd" for k in keys})),
        ("shard path escapes", _sharded(lambda keys: {k: "../a.safetensors" for k in keys})),
        ("shard missing", _sharded(lambda keys: {k: "c.safetensors" for k in keys})),
        ("shard name not a string", _sharded(lambda keys: {k: 7 for k in keys})),
        ("weight_map a list", _sharded(lambda keys: keys)),  # type: ignore[arg-type,return-value]
        (
            "duplicate key in two shards",
            _sharded(
                lambda keys: {k: "a.safetensors" for k in keys[:-1]} | {keys[-1]: "b.safetensors"},
                split=False,
            ),
        ),
        ("torch .bin garbage", _torch_bin(lambda s: None)),  # replaced below
        ("torch .bin a list", _torch_bin(lambda s: list(s.values()))),
        ("torch .bin non-tensor value", _torch_bin(lambda s: {**s, "x.weight": 3})),
    ]

    def garbage_bin(folder: Path) -> None:
        (folder / "model.safetensors").unlink()
        (folder / "pytorch_model.bin").write_bytes(b"PK\x03\x04 not a zip")

    cases[-3] = ("torch .bin garbage", garbage_bin)
    return cases


def target_cases(folder: Path) -> list[tuple[str, Mutation]]:
    config = _config(folder)
    vocab = config["vocab_size"]
    cases: list[tuple[str, Mutation]] = []
    for key in (
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
    ):
        cases += _bad_values(key, config[key])
    cases += [
        ("head_dim=0", _set("head_dim", 0)),
        ("head_dim=8 (implied 16)", _set("head_dim", 8)),
        ("head_dim=16.5", _set("head_dim", 16.5)),
        ("max_position_embeddings=0", _set("max_position_embeddings", 0)),
        ("max_position_embeddings=-4", _set("max_position_embeddings", -4)),
        ("max_position_embeddings=1e3", _set("max_position_embeddings", 1e3)),
        ("vocab_size=16.7", _set("vocab_size", 16.7)),
        ("vocab_size=2**40", _set("vocab_size", 2**40)),
        ("hidden_size=2**40", _set("hidden_size", 2**40)),
    ]
    for key in ("rope_theta", "rms_norm_eps"):
        for v in (0, -1.0, float("inf"), float("nan"), "1e4", True, [1.0]):
            cases.append((f"{key}={v!r}", _set(key, v)))
    for key in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                "num_attention_heads"):  # fmt: skip
        cases.append((f"no {key}", _unset(key)))
        cases.append((f"{key}=null", _set(key, None)))
    for key, v in (("rope_parameters", [1, 2]), ("rope_scaling", "x"), ("layer_types", 3),
                   ("layer_types", [1])):  # fmt: skip
        cases.append((f"{key}={v!r}", _set(key, v)))
    for v in (vocab, -1, [1, vocab], 1.5, "1", [0, -3], True):
        cases.append((f"eos_token_id={v!r}", _set("eos_token_id", v)))
    for v in (vocab, -5, 2.0):
        cases.append((f"bos_token_id={v!r}", _set("bos_token_id", v)))
    cases.append(
        (
            "duplicate config key",
            _write_config_text(
                (folder / "config.json").read_text().replace("{", '{"hidden_size": 64,', 1)
            ),
        )
    )
    state = load_file(str(folder / "model.safetensors"))
    rng = random.Random(0)
    names = sorted(state)
    for name in sorted(rng.sample(names, 12)):
        cases += _shape_damage(name, state[name])
    missing = sorted(rng.sample(names, 3))
    cases += [(f"{n} missing", _tensors(lambda s, n=n: s.pop(n))) for n in missing]
    cases += [
        (
            "extra weight",
            _tensors(lambda s: s.update({"model.layers.0.extra.weight": torch.ones(2)})),
        ),
        (
            "extra layer",
            _tensors(lambda s: s.update({"model.layers.99.mlp.up_proj.weight": torch.ones(2, 2)})),
        ),
    ]
    cases += _file_damage(1)
    return cases


def draft_cases(folder: Path) -> list[tuple[str, Mutation]]:
    config = _config(folder)
    cases: list[tuple[str, Mutation]] = []
    for key in ("hidden_size", "intermediate_size", "draft_vocab_size", "target_hidden_size"):
        cases += _bad_values(key, config[key])
    cases += [
        ("d2t leaves the target vocabulary", _tensor("d2t", lambda x: x + 10_000)),
        ("d2t negative", _tensor("d2t", lambda x: x - 10_000)),
        ("d2t float", _tensor("d2t", lambda x: x.float())),
        ("d2t one short", _tensor("d2t", lambda x: x[:-1].clone())),
        ("rope_theta=0", _set("rope_theta", 0)),
    ]
    state = load_file(str(folder / "model.safetensors"))
    for name in ("fc.weight", "midlayer.self_attn.q_proj.weight", "norm.weight", "lm_head.weight"):
        cases += _shape_damage(name, state[name])
    cases += _file_damage(2)
    return cases


BENIGN: list[tuple[str, Mutation]] = [
    ("fp16 weights", _tensors(lambda s: s.update({k: v.half() for k, v in s.items()}))),
    ("bf16 weights", _tensors(lambda s: s.update({k: v.bfloat16() for k, v in s.items()}))),
    ("longer trained context", _set("max_position_embeddings", 4096)),
    ("eos list", _set("eos_token_id", [1, 2])),
    ("explicit head_dim equal to the implied one", _set("head_dim", 16)),
]


@pytest.fixture(scope="module")
def originals(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("checkpoints")
    make_hf_target("llama_tied", root / "target")
    make_hf_target("llama_gqa_rope3", root / "draft_target")
    make_eagle3_checkpoint(root / "draft", Eagle3Spec())
    return {
        "target": root / "target",
        "draft_target": root / "draft_target",
        "draft": root / "draft",
    }


def _damaged(original: Path, mutate: Mutation, tmp_path: Path) -> Path:
    folder = tmp_path / "ckpt"
    shutil.copytree(original, folder)
    mutate(folder)
    return folder


def _refused(build: Callable[[Path], object], folder: Path) -> str:
    with pytest.raises(EtspecError) as info:
        build(folder)
    text = str(info.value)
    assert text and "\n" not in text, text
    return text


def test_the_fuzz_has_at_least_200_damaged_checkpoints(originals) -> None:  # type: ignore[no-untyped-def]
    count = len(target_cases(originals["target"])) + len(draft_cases(originals["draft"]))
    assert count >= 200, count


def test_every_damaged_target_checkpoint_is_refused_in_one_line(originals, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # One test over every case (not one parametrized test each): a few hundred cases in
    # seconds, and a failure names the case.
    built = build_target(originals["target"], OPTS)  # the undamaged original builds
    assert built is not None
    for i, (name, mutate) in enumerate(target_cases(originals["target"])):
        folder = _damaged(originals["target"], mutate, tmp_path / str(i))
        try:
            _refused(lambda f: build_target(f, OPTS), folder)
        except BaseException as e:
            raise AssertionError(f"{name}: {type(e).__name__}: {e}") from None


def test_every_damaged_draft_checkpoint_is_refused_in_one_line(originals, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    target = build_target(originals["draft_target"], OPTS)
    meta = target_metadata(target, OPTS, None)
    build = lambda f: draft_program(f, meta, DraftExportOptions())  # noqa: E731
    assert build(originals["draft"]) is not None
    for i, (name, mutate) in enumerate(draft_cases(originals["draft"])):
        folder = _damaged(originals["draft"], mutate, tmp_path / str(i))
        try:
            _refused(build, folder)
        except BaseException as e:
            raise AssertionError(f"{name}: {type(e).__name__}: {e}") from None


@pytest.mark.parametrize("name,mutate", BENIGN, ids=[b[0] for b in BENIGN])
def test_benign_variants_still_build(
    originals, tmp_path: Path, name: str, mutate: Mutation
) -> None:  # type: ignore[no-untyped-def]
    folder = _damaged(originals["target"], mutate, tmp_path)
    model = build_target(folder, OPTS)
    reference = build_target(originals["target"], OPTS)
    for (key, got), want in zip(
        model.state_dict().items(), reference.state_dict().values(), strict=True
    ):
        if "fp16" in name or "bf16" in name:
            torch.testing.assert_close(got, want, atol=0.02, rtol=0.02, msg=key)
        else:
            assert torch.equal(got, want), key


@pytest.mark.parametrize(
    "name,mutate,words",
    [
        ("head_dim=0", _set("head_dim", 0), "head_dim must be an integer from 1"),
        ("rope_theta=0", _set("rope_theta", 0), "rope_theta must be a finite number above 0"),
        ("vocab_size=16.7", _set("vocab_size", 16.7), "vocab_size must be an integer"),
        ("eos outside", _set("eos_token_id", 4096), "eos_token_id must be token ids from 0 below"),
        (  # bool("yes") is true: the lm_head would have been untied silently
            "tie as a string",
            _set("tie_word_embeddings", "yes"),
            "tie_word_embeddings must be true or false",
        ),
        (
            "broadcastable weight",
            _tensor("model.norm.weight", lambda x: x[:1].clone()),
            "norm.weight has shape (1,), the config implies (64,)",
        ),
        ("NaN weight", _tensor("model.norm.weight", _poison(float("nan"))), "NaN or infinite"),
        (
            "int8 weight",
            _tensor("model.norm.weight", lambda x: x.to(torch.int8)),
            "must be floating",
        ),
        (
            "shard outside",
            _sharded(lambda keys: {k: "/etc/passwd" for k in keys}),
            "outside the checkpoint folder",
        ),
        (
            "duplicate shard key",
            _sharded(
                lambda keys: {k: "a.safetensors" for k in keys[:-1]} | {keys[-1]: "b.safetensors"},
                split=False,
            ),
            "also in another shard",
        ),
    ],
)
def test_export_cli_refuses_a_damaged_checkpoint_before_lowering(  # type: ignore[no-untyped-def]
    originals, tmp_path: Path, name: str, mutate: Mutation, words: str
) -> None:
    """What a user sees: a real ``etspec`` process, one ``error:`` line, exit 1, seconds
    (before any lowering), no output file."""
    folder = _damaged(originals["target"], mutate, tmp_path)
    out = tmp_path / "t.pte"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "etspec",
            "export",
            "target",
            str(folder),
            "-o",
            str(out),
            "--backend",
            "portable",
            "--max-seq",
            "64",
            "--prefill-chunk",
            "8",
            "--verify-width",
            "8",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert words in lines[0], lines[0]
    assert not out.exists()


@pytest.mark.parametrize("layers", [1, 2])
def test_a_shallow_target_builds_without_hidden_layers(tmp_path: Path, layers: int) -> None:
    """EAGLE-3's default taps (2, L//2, L-3) do not exist in a 1- or 2-layer model; they are
    clamped into it, so a target exported for decoding alone needs no --hidden-layers (it
    was refused with a message about an option the user never passed)."""
    make_hf_target("llama_tied", tmp_path / "ckpt", num_hidden_layers=layers)
    model = build_target(tmp_path / "ckpt", OPTS)
    assert len(model.layers) == layers
    assert all(0 <= i <= layers for i in model.hidden_spec.layers)


def _export(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "etspec", "export", *args], capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip


def test_an_unreadable_tokenizer_is_not_sealed_into_an_artifact(originals, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = _damaged(
        originals["target"], lambda f: (f / "tokenizer.json").write_text("{"), tmp_path
    )
    out = tmp_path / "t.pte"
    proc = _export("target", str(folder), "-o", str(out), "--backend", "portable",
                   "--max-seq", "64", "--prefill-chunk", "8", "--verify-width", "8")  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: the checkpoint's tokenizer.json cannot be read"), line
    assert not out.exists()


def test_a_tokenizer_whose_split_backtracks_is_not_sealed(originals, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A split expression that backtracks catastrophically encodes "Hello, world!" and then
    panics (onig's retry limit) on a long run of one character: refused at export in one
    line, no Rust backtrace, nothing written."""

    def backtracking(folder: Path) -> None:
        vocab = json.loads((folder / "config.json").read_text())["vocab_size"]
        tok = json.loads(write_tokenizer(folder, vocab))
        tok["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": "(a|a)+$"},
                                "behavior": "Isolated", "invert": False}  # fmt: skip
        (folder / "tokenizer.json").write_text(json.dumps(tok))

    folder = _damaged(originals["target"], backtracking, tmp_path)
    out = tmp_path / "t.pte"
    proc = _export("target", str(folder), "-o", str(out), "--backend", "portable",
                   "--max-seq", "64", "--prefill-chunk", "8", "--verify-width", "8")  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(
        "error: the checkpoint's tokenizer.json fails on a long run of one character (Onig: Regex "
        "search error: retry-limit-in-match over): its split expression backtracks"
    ), line
    assert not out.exists()


def test_a_d2t_leaving_the_target_vocabulary_is_not_sealed(artifacts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pair = artifacts.draft()
    folder = _damaged(pair.checkpoint, _tensor("d2t", lambda x: x + 10_000), tmp_path)
    out = tmp_path / "d.pte"
    proc = _export("draft", str(folder), "--target", str(pair.target.pte), "-o", str(out))
    assert proc.returncode == 1, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "d2t maps draft ids outside the target's" in line, line
    assert not out.exists()


def test_inspect_reports_an_artifact_s_problems(originals, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """An artifact sealed before export checked its tokenizer (here: the check switched
    off) is reported by ``inspect``: one ``error:`` line, exit 1; a sound one exits 0."""
    from click.testing import CliRunner

    from etspec.cli import main
    from etspec.export.export_target import export_target
    from etspec.models import build

    folder = _damaged(
        originals["target"], lambda f: (f / "tokenizer.json").write_text("{"), tmp_path
    )
    monkeypatch.setattr(build, "check_tokenizer", lambda model, tokenizer: None)
    out = tmp_path / "t.pte"
    export_target(folder, out, OPTS)
    res = CliRunner().invoke(main, ["inspect", str(out)])
    assert res.exit_code == 1, res.output
    (line,) = res.stderr.splitlines()
    assert line.startswith("error: the artifact's tokenizer cannot be read"), line
    res = CliRunner().invoke(main, ["inspect", "--json", str(out)])
    assert res.exit_code == 1 and json.loads(res.stdout)["problems"] == [line[len("error: ") :]]


def test_an_export_that_cannot_fit_is_refused_before_lowering(
    originals, tmp_path: Path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """A full filesystem is found from the weights' size before lowering starts (it was an
    OSError traceback after the whole lowering)."""
    import shutil as shutil_module

    from etspec.export import lowering
    from etspec.export.export_target import export_target

    real = shutil_module.disk_usage
    monkeypatch.setattr(lowering.shutil, "disk_usage", lambda p: real(p)._replace(free=1000))
    lowered = []
    monkeypatch.setattr(lowering, "_lower", lambda *a, **k: lowered.append(1))
    out = tmp_path / "t.pte"
    with pytest.raises(
        EtspecError, match=r"not enough space for .*t\.pte: the artifact needs at least"
    ):
        export_target(originals["target"], out, OPTS)
    assert not lowered and not out.exists() and list(tmp_path.iterdir()) == []
