"""GGUF files as checkpoints (models/gguf.py): a tiny Gemma 3 written as llama.cpp writes
one (tensor names, norm weights + 1, quantized tensors, the tokenizer as metadata) converts
back to the checkpoint it came from, exports straight from the .gguf, and bad files are
refused in one line. The real Gemma 3 270M file is held to transformers' own GGUF loader in
tests/test_real_gemma3.py (-m real)."""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import CliRunner
from helpers import gguf_value_type

from etspec.cli import main
from etspec.errors import CheckpointError
from etspec.models.gguf import CONVERTED_FILES, read_gguf

gguf = pytest.importorskip("gguf")

# A config as llama.cpp assumes Gemma 3 to be: every 6th layer full, sliding layers at RoPE
# base 10,000, queries scaled by 1/sqrt(head_dim).
CONFIG = dict(
    model_type="gemma3_text",
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=6,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    query_pre_attn_scalar=16,
    sliding_window=12,
    layer_types=["sliding_attention"] * 5 + ["full_attention"],
    rope_parameters={
        "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
        "full_attention": {"rope_type": "default", "rope_theta": 1_000_000.0},
    },
    max_position_embeddings=512,
    rms_norm_eps=1e-6,
    bos_token_id=2,
    eos_token_id=1,
    pad_token_id=0,
    tie_word_embeddings=True,
)
SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>"]
PIECES = ["\n", "▁", "e", "t", "a", "h", "o", "n", "s", "r", "d", "f", "i", "x", "(", ")",
          ":", "▁t", "he", "▁the", "th", "▁a", "in", "de", "def", "▁f"]  # fmt: skip
# (Merges follow the order of the list, as in SentencePiece vocabularies: "▁t" + "he" must
# come before "th" for "▁the" to form.)
# llama.cpp token types: 1 normal, 3 control, 6 byte.
TOKENS = SPECIALS + [f"<0x{b:02X}>" for b in range(256)] + PIECES
TYPES = [3] * len(SPECIALS) + [6] * 256 + [1] * len(PIECES)
NAMES = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "post_attention_norm",
    "pre_feedforward_layernorm": "ffn_norm",
    "post_feedforward_layernorm": "post_ffw_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def _gguf_name(hf: str) -> str:
    if hf.startswith("model.layers."):
        _, _, i, rest = hf.split(".", 3)
        base, suffix = rest.rsplit(".", 1)
        return f"blk.{i}.{NAMES[base]}.{suffix}"
    return {"model.embed_tokens.weight": "token_embd.weight",
            "model.norm.weight": "output_norm.weight"}[hf]  # fmt: skip


DROP = object()  # a metadata key or tensor left out of the file


class _Writer(gguf.GGUFWriter):  # type: ignore[misc]
    """gguf's writer, which also writes an empty array (it refuses to; damaged files hold
    them)."""

    def _pack_val(self, val: Any, vtype: Any, add_vtype: bool, sub_type: Any = None) -> bytes:
        if vtype == gguf.GGUFValueType.ARRAY and not len(val):
            head = self._pack("I", vtype) if add_vtype else b""
            return head + self._pack("I", sub_type) + self._pack("Q", 0)
        return super()._pack_val(val, vtype, add_vtype, sub_type)  # type: ignore[no-any-return]


def write_gemma3_gguf(  # type: ignore[no-untyped-def]
    path: Path,
    state: dict[str, torch.Tensor],
    arch: str = "gemma3",
    metadata: dict[str, Any] | None = None,
    tensors: dict[str, Any] | None = None,
) -> dict:  # type: ignore[type-arg]
    """``state`` as llama.cpp's converter writes it; returns the fp32 values a reader must
    get back (quantized tensors round-trip through their quantization). ``metadata`` and
    ``tensors`` replace (or ``DROP``) entries by their GGUF names, to write damaged files."""
    Q = gguf.GGMLQuantizationType
    w = _Writer(str(path), arch)
    c = CONFIG
    a = arch
    keys: dict[str, Any] = {
        f"{a}.context_length": c["max_position_embeddings"],
        f"{a}.embedding_length": c["hidden_size"],
        f"{a}.block_count": c["num_hidden_layers"],
        f"{a}.feed_forward_length": c["intermediate_size"],
        f"{a}.attention.head_count": c["num_attention_heads"],
        f"{a}.attention.head_count_kv": c["num_key_value_heads"],
        f"{a}.attention.key_length": c["head_dim"],
        f"{a}.attention.value_length": c["head_dim"],
        f"{a}.attention.layer_norm_rms_epsilon": c["rms_norm_eps"],
        f"{a}.rope.freq_base": 1_000_000.0,
        f"{a}.attention.sliding_window": c["sliding_window"],
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": TOKENS,
        "tokenizer.ggml.scores": [-1000.0] * len(SPECIALS) + [0.0] * (len(TOKENS) - len(SPECIALS)),
        "tokenizer.ggml.token_type": TYPES,
        "tokenizer.ggml.bos_token_id": 2,
        "tokenizer.ggml.eos_token_id": 1,
        "tokenizer.ggml.unknown_token_id": 3,
        "tokenizer.ggml.padding_token_id": 0,
        "tokenizer.ggml.add_bos_token": True,
    }
    keys.update(metadata or {})
    for key, value in keys.items():
        if value is DROP:
            continue
        if isinstance(value, list):
            sub = gguf_value_type(value[0]) if value else gguf.GGUFValueType.INT32
            if key == "tokenizer.ggml.token_type" and sub == gguf.GGUFValueType.UINT32:
                sub = gguf.GGUFValueType.INT32  # as llama.cpp writes it
            w.add_key_value(key, value, gguf.GGUFValueType.ARRAY, sub)
        else:
            w.add_key_value(key, value, gguf_value_type(value))
    expect = {}
    edits = dict(tensors or {})
    for name, t in state.items():
        x = t.detach().float().numpy()
        if name.endswith("norm.weight"):
            x = x + 1.0  # llama.cpp's RMSNorm multiplies by w
            expect[name] = torch.from_numpy(x - 1.0)
        else:
            expect[name] = t.detach().float().clone()
        gname = _gguf_name(name)
        if gname in edits:
            edit = edits.pop(gname)
            if edit is not DROP:
                w.add_tensor(gname, edit)
            continue
        kind = Q.Q8_0 if "mlp" in name or "embed" in name else Q.F32
        if kind == Q.F32:
            w.add_tensor(gname, x)
        else:
            q = gguf.quants.quantize(x, kind)
            w.add_tensor(gname, q, raw_shape=q.shape, raw_dtype=kind)
            expect[name] = torch.from_numpy(gguf.quants.dequantize(q, kind).copy())
    for gname, edit in edits.items():  # tensors the model does not have
        w.add_tensor(gname, edit)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return expect


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from transformers import AutoConfig, AutoModelForCausalLM

    root = tmp_path_factory.mktemp("gguf")
    cfg = dict(CONFIG)
    cfg.pop("model_type")
    torch.manual_seed(0)
    hf_cfg = AutoConfig.for_model("gemma3_text", vocab_size=len(TOKENS), **cfg)
    model = AutoModelForCausalLM.from_config(hf_cfg).float().eval()
    with torch.no_grad():
        for key, p in model.named_parameters():
            if key.endswith("norm.weight"):
                p.add_(torch.randn_like(p) * 0.3)
    state = {k: v for k, v in model.state_dict().items() if k != "lm_head.weight"}
    path = root / "tiny-gemma3.gguf"
    expect = write_gemma3_gguf(path, state)
    return path, expect, root


def test_tensors_config_and_tokenizer_come_back(tiny) -> None:  # type: ignore[no-untyped-def]
    path, expect, _ = tiny
    ck = read_gguf(path)
    assert set(ck.tensors) == set(expect)
    for name, value in expect.items():
        assert torch.equal(ck.tensors[name], value), name
    for key, value in CONFIG.items():  # GGUF stores floats as float32
        want = pytest.approx(value, rel=1e-7) if isinstance(value, float) else value
        assert ck.config[key] == want, key
    assert ck.config["vocab_size"] == len(TOKENS)
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(ck.tokenizer_json.decode())
    ids = tok.encode("def the fox").ids
    assert ids[0] == 2  # <bos>, as add_bos_token says
    assert tok.decode(ids, skip_special_tokens=True) == "def the fox"
    assert [tok.id_to_token(i) for i in ids[1:4]] == ["def", "▁the", "▁f"]
    # A character outside the vocabulary falls back to its bytes and decodes back.
    assert tok.decode(tok.encode("é").ids, skip_special_tokens=True) == "é"
    assert tok.encode("<start_of_turn>").ids == [2, 5]  # a control token stays whole


def test_convert_writes_a_folder_transformers_reads_as_the_same_model(tiny, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from transformers import AutoModelForCausalLM

    path, expect, _ = tiny
    out = tmp_path / "converted"
    res = CliRunner().invoke(main, ["convert", "gguf", str(path), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert {p.name for p in out.iterdir()} == CONVERTED_FILES
    tok_config = json.loads((out / "tokenizer_config.json").read_text())
    assert tok_config["bos_token"] == "<bos>" and tok_config["add_bos_token"] is True
    umask = os.umask(0)
    os.umask(umask)  # the modes a plain mkdir/open gives, not the temporary folder's 0700
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~umask
    assert {stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()} == {0o666 & ~umask}
    again = CliRunner().invoke(main, ["convert", "gguf", str(path), "-o", str(out)])
    assert again.exit_code == 1 and "pass --force" in again.output
    model = AutoModelForCausalLM.from_pretrained(out).float().eval()
    state = model.state_dict()
    for name, value in expect.items():
        assert torch.equal(state[name], value), name
    assert json.loads((out / "config.json").read_text())["model_type"] == "gemma3_text"


def test_export_reads_the_gguf_directly(tiny, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`etspec export target FILE.gguf`: greedy ids equal transformers on the converted
    checkpoint, text prompts get their <bos>."""
    from transformers import AutoModelForCausalLM

    from etspec.export.export_target import TargetExportOptions, export_target
    from etspec.runtime.runner import TextLLMRunner

    path, _, _ = tiny
    pte = tmp_path / "t.pte"
    opts = TargetExportOptions(backend="portable", max_seq=48, prefill_chunk=8, verify_width=4)
    export_target(path, pte, opts)
    runner = TextLLMRunner.from_pte(pte)
    out = runner.generate("def the fox", 16, ignore_eos=True)
    assert out.prompt_ids[0] == 2
    conv = tmp_path / "ref"
    CliRunner().invoke(main, ["convert", "gguf", str(path), "-o", str(conv)])
    hf = AutoModelForCausalLM.from_pretrained(conv).float().eval()
    ids = torch.tensor([out.prompt_ids])
    ref = hf.generate(ids, max_new_tokens=16, do_sample=False, min_new_tokens=16)
    assert out.token_ids == ref[0, ids.shape[1] :].tolist()


def test_bad_gguf_files_are_one_line_errors(tmp_path: Path) -> None:
    phi3 = tmp_path / "phi3.gguf"
    write_gemma3_gguf(phi3, {"model.norm.weight": torch.ones(64)}, arch="phi3")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF" + bytes(range(60)))
    cases = [
        (phi3, "GGUF architecture 'phi3' is not supported; supported: gemma3, llama, qwen2"),
        (junk, "not a readable GGUF file"),
        (tmp_path / "missing.gguf", "no such file"),
    ]
    for bad, message in cases:
        with pytest.raises(CheckpointError, match=message):
            read_gguf(bad)
        res = CliRunner().invoke(main, ["convert", "gguf", str(bad), "-o", str(tmp_path / "o")])
        assert res.exit_code == 1 and res.output.count("\n") == 1 and message in res.output
        assert not (tmp_path / "o").exists()


def test_export_refuses_a_gemma_tokenizer_without_bos(artifacts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A converted tokenizer.json that lost its post-processor: Gemma writes garbage without
    <bos>, so export says so instead of sealing it."""
    import shutil

    from tokenizers import Tokenizer, models, pre_tokenizers

    ckpt = tmp_path / "gemma"
    shutil.copytree(artifacts.target("gemma3_sliding").checkpoint, ckpt)
    vocab = {f"w{i}": i for i in range(32)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="w3"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(ckpt / "tokenizer.json"))
    config = json.loads((ckpt / "config.json").read_text())
    config["bos_token_id"] = 2
    (ckpt / "config.json").write_text(json.dumps(config))
    args = ["export", "target", str(ckpt), "-o", str(tmp_path / "t.pte"), "--verify-width", "4"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1 and res.output.count("\n") == 1
    assert "does not add <bos> (id 2)" in res.output and "gemma3_text needs" in res.output
    assert not (tmp_path / "t.pte").exists()


def _damaged_ggufs(tiny_path: Path, out: Path) -> tuple[list[Path], set[str]]:
    """>= 300 damaged variants of the tiny GGUF: each metadata key left out or given values
    of the wrong kind, broken token lists, missing, extra, misshapen and non-finite tensors,
    and the good file cut short or with bytes flipped at seeded random places. Also the
    files that must be refused (the rest may hold legal values, as 2.5 for an epsilon)."""
    import random

    state = read_gguf(tiny_path).tensors
    a = "gemma3"
    keys = [f"{a}.context_length", f"{a}.embedding_length", f"{a}.block_count",
            f"{a}.feed_forward_length", f"{a}.attention.head_count",
            f"{a}.attention.head_count_kv", f"{a}.attention.key_length",
            f"{a}.attention.layer_norm_rms_epsilon", f"{a}.rope.freq_base",
            f"{a}.attention.sliding_window", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
            "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
            "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id",
            "tokenizer.ggml.add_bos_token"]  # fmt: skip
    wrong = [DROP, "12", 0, -3, 2.5, 1 << 40, True, [], [1, 2], float("nan"), float("inf")]
    cases: list[tuple[dict, dict]] = [({k: v}, {}) for k in keys for v in wrong]  # type: ignore[type-arg]
    cases += [
        ({"tokenizer.ggml.tokens": [*TOKENS[:-1], ""]}, {}),
        ({"tokenizer.ggml.tokens": [*TOKENS[:-1], "x" * 5000]}, {}),
        ({"tokenizer.ggml.token_type": TYPES[:-3]}, {}),
        ({f"{a}.rope.scaling.type": "linear"}, {}),
        ({f"{a}.rope.scaling.type": "yarn"}, {}),
        ({f"{a}.rope.scaling.type": "linear", f"{a}.rope.scaling.factor": -1.0}, {}),
        ({f"{a}.attention.head_count_kv": 3}, {}),
        ({f"{a}.final_logit_softcapping": 0.0}, {}),
        ({}, {"blk.0.weight": torch.zeros(4).numpy()}),
        ({}, {"blk.99.attn_q.weight": torch.zeros(4).numpy()}),
        ({}, {"blk.x.attn_q.weight": torch.zeros(4).numpy()}),
        ({}, {"blk.0.attn_q.weight": DROP}),
        ({}, {"token_embd.weight": DROP}),
        ({}, {"blk.5.ffn_down.weight": torch.zeros(64, 64).numpy()}),
        ({}, {"blk.0.attn_q.weight": torch.zeros(64, 63).numpy()}),
        ({}, {"output_norm.weight": torch.full((64,), float("nan")).numpy()}),
        ({}, {"output.weight": torch.zeros(7, 64).numpy()}),
        ({f"{a}.block_count": 5}, {}),
        ({f"{a}.block_count": 7}, {}),
        ({f"{a}.embedding_length": 32}, {}),
    ]
    files, refuse = [], set()
    for i, (meta, tensors) in enumerate(cases):
        files.append(out / f"meta{i:03d}.gguf")
        write_gemma3_gguf(files[-1], state, metadata=meta, tensors=tensors)
        [(key, value)] = meta.items() if len(meta) == 1 else [(None, None)]
        kind_wrong = isinstance(value, str | list) or (value is True and "add_bos" not in key)
        out_of_range = (isinstance(value, int | float) and not value >= 0) or value == math.inf
        if i >= len(keys) * len(wrong) or kind_wrong or out_of_range:
            refuse.add(str(files[-1]))
    good = tiny_path.read_bytes()
    rng = random.Random(0)
    header = 4096  # where the metadata lives: most flips there, some in the tensors
    for i in range(60):
        files.append(out / f"cut{i:03d}.gguf")
        files[-1].write_bytes(good[: rng.randrange(4, len(good))])
    for i in range(60):
        data = bytearray(good)
        for _ in range(rng.randint(1, 8)):
            at = rng.randrange(4, header if rng.random() < 0.8 else len(good))
            data[at] = rng.randrange(256)
        files.append(out / f"flip{i:03d}.gguf")
        files[-1].write_bytes(bytes(data))
    refuse.update(str(f) for f in files if f.name.startswith("cut"))
    return files, refuse


def test_damaged_gguf_files_are_refused_in_one_line(tiny, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Fuzz: every one of >= 300 damaged GGUF files is converted or refused with one
    CheckpointError line in GGUF's terms, in a real process (a crash or a hang fails too);
    a few also through `etspec convert gguf` and `etspec export target`."""
    import subprocess
    import sys

    path, _, _ = tiny
    files, must_refuse = _damaged_ggufs(path, tmp_path)
    assert len(files) >= 300 and len(must_refuse) >= 180
    script = (
        "import json, sys\n"
        "from etspec.errors import CheckpointError\n"
        "from etspec.models.gguf import read_gguf\n"
        "for f in sys.argv[1:]:\n"
        "    try:\n"
        "        read_gguf(f); print(json.dumps([f, 'ok']), flush=True)\n"
        "    except CheckpointError as e:\n"
        "        print(json.dumps([f, str(e)]), flush=True)\n"
    )
    res = subprocess.run([sys.executable, "-c", script, *map(str, files)], capture_output=True,
                         text=True, timeout=600)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    outcome = dict(json.loads(line) for line in res.stdout.splitlines())
    assert len(outcome) == len(files)
    refused = {f: m for f, m in outcome.items() if m != "ok"}
    for f, m in refused.items():
        assert "\n" not in m and len(m) < 400 and m.startswith(f"{f}: "), m
    assert must_refuse <= set(refused), sorted(must_refuse - set(refused))
    by_name = {Path(f).name: m for f, m in refused.items()}
    assert "GGUF metadata gemma3.block_count is missing" in by_name["meta022.gguf"]
    want = {
        "tokenizer.ggml.token_type has 286 entries for 289 tokens",
        "GGUF tensor 'blk.0.weight' is not part of a gemma3 model with 6 blocks",
        "GGUF tensor blk.0.attn_q.weight missing",
        "GGUF tensor output_norm.weight holds NaN or infinite values",
        "GGUF metadata gemma3.rope.scaling.factor is missing",
    }
    for text in want:
        assert any(text in m for m in refused.values()), text
    # The CLI: one `error:` line, exit 1, nothing written.
    for name in ("meta022.gguf", "meta190.gguf"):
        bad = tmp_path / name
        for cmd in (["convert", "gguf", str(bad), "-o", str(tmp_path / "o")],
                    ["export", "target", str(bad), "-o", str(tmp_path / "o.pte")]):  # fmt: skip
            res = subprocess.run([sys.executable, "-m", "etspec", *cmd], capture_output=True,
                                 text=True, timeout=300)  # fmt: skip
            assert res.returncode == 1 and res.stderr.count("\n") == 1, res.stderr
            assert res.stderr.startswith(f"error: {bad}: GGUF "), res.stderr
            assert not (tmp_path / "o").exists() and not (tmp_path / "o.pte").exists()


def test_convert_output_is_checked_before_work_and_force_replaces_only_its_own(  # type: ignore[no-untyped-def]
    tiny, tmp_path: Path
) -> None:
    """`convert gguf -o`: an over-long name, a file, a symbolic link, or (with --force) a
    folder holding anything but what convert writes (the input GGUF itself, say) are refused
    in one line and left as they were; --force replaces a folder convert wrote."""
    path, _, _ = tiny

    def convert(out: Path | str, *flags: str) -> Any:
        return CliRunner().invoke(main, ["convert", "gguf", str(path), "-o", str(out), *flags])

    home = tmp_path / "home"
    home.mkdir()
    (home / "model.gguf").write_bytes(path.read_bytes())
    (home / "notes.txt").write_text("mine")
    link = tmp_path / "link"
    link.symlink_to(home)
    afile = tmp_path / "afile"
    afile.write_text("mine")
    cases = [
        (tmp_path / ("x" * 300), [], "choose another -o"),
        (afile, ["--force"], "is a file; -o names the folder to write"),
        (link, ["--force"], "is a symbolic link"),
        (home, ["--force"], "holds files etspec did not write (model.gguf, notes.txt)"),
        (home, [], "exists; pass --force"),
    ]
    for out, flags, words in cases:
        res = convert(out, *flags)
        assert res.exit_code == 1 and res.output.count("\n") == 1 and words in res.output, (
            out, res.output)  # fmt: skip
    assert sorted(p.name for p in home.iterdir()) == ["model.gguf", "notes.txt"]
    assert afile.read_text() == "mine" and link.is_symlink()
    out = tmp_path / "conv"
    assert convert(out).exit_code == 0
    (out / "config.json").chmod(0o600)
    res = convert(out, "--force")
    assert res.exit_code == 0, res.output
    assert {p.name for p in out.iterdir()} == CONVERTED_FILES


@pytest.mark.parametrize("bos", ["<s>", "<s> x", "$B:1", "$A", "a:b", "$0"])
def test_a_special_tokens_text_is_never_read_as_template_syntax(bos: str) -> None:
    """tokenizers' template strings parse their pieces (``$A``, ``X:1``, spaces): a GGUF
    bos spelled ``$A`` made a tokenizer that repeated every prompt, ``$B:1`` or one with a
    space failed in Rust. The template is written as tokenizer.json's structure."""
    from tokenizers import Tokenizer, models, processors

    from etspec.models.gguf_tokenizer import _template

    tokens = [bos, "a", "</s>"]
    tok = Tokenizer(models.WordLevel({t: i for i, t in enumerate(tokens)}, unk_token="a"))
    built = Tokenizer.from_str(_template(tok, tokens, 0, 2).decode())
    assert built.encode("a").ids == [0, 1, 2]
    if bos == "<s>":  # the structure is what the string form builds where it parses right
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A </s>", pair="<s> $A </s> <s> $B </s>",
            special_tokens=[("<s>", 0), ("</s>", 2)],
        )  # fmt: skip
        assert _template(tok, tokens, 0, 2) == tok.to_str().encode()
