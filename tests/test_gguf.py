"""GGUF files as checkpoints (models/gguf.py): a tiny Gemma 3 written as llama.cpp writes
one (tensor names, norm weights + 1, quantized tensors, the tokenizer as metadata) converts
back to the checkpoint it came from, exports straight from the .gguf, and bad files are
refused in one line. The real Gemma 3 270M file is held to transformers' own GGUF loader in
tests/test_real_gemma3.py (-m real)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from etspec.cli import main
from etspec.errors import CheckpointError
from etspec.models.gguf import read_gguf

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


def write_gemma3_gguf(path: Path, state: dict[str, torch.Tensor], arch: str = "gemma3") -> dict:  # type: ignore[type-arg]
    """``state`` as llama.cpp's converter writes it; returns the fp32 values a reader must
    get back (quantized tensors round-trip through their quantization)."""
    Q = gguf.GGMLQuantizationType
    w = gguf.GGUFWriter(str(path), arch)
    c = CONFIG
    w.add_context_length(c["max_position_embeddings"])
    w.add_embedding_length(c["hidden_size"])
    w.add_block_count(c["num_hidden_layers"])
    w.add_feed_forward_length(c["intermediate_size"])
    w.add_head_count(c["num_attention_heads"])
    w.add_head_count_kv(c["num_key_value_heads"])
    w.add_key_length(c["head_dim"])
    w.add_value_length(c["head_dim"])
    w.add_layer_norm_rms_eps(c["rms_norm_eps"])
    w.add_rope_freq_base(1_000_000.0)
    w.add_sliding_window(c["sliding_window"])
    w.add_tokenizer_model("llama")
    w.add_token_list(TOKENS)
    w.add_token_scores([-1000.0] * len(SPECIALS) + [0.0] * (len(TOKENS) - len(SPECIALS)))
    w.add_token_types(TYPES)
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_pad_token_id(0)
    w.add_add_bos_token(True)
    expect = {}
    for name, t in state.items():
        x = t.detach().float().numpy()
        if name.endswith("norm.weight"):
            x = x + 1.0  # llama.cpp's RMSNorm multiplies by w
            expect[name] = torch.from_numpy(x - 1.0)
        else:
            expect[name] = t.detach().float().clone()
        kind = Q.Q8_0 if "mlp" in name or "embed" in name else Q.F32
        if kind == Q.F32:
            w.add_tensor(_gguf_name(name), x)
        else:
            q = gguf.quants.quantize(x, kind)
            w.add_tensor(_gguf_name(name), q, raw_shape=q.shape, raw_dtype=kind)
            expect[name] = torch.from_numpy(gguf.quants.dequantize(q, kind).copy())
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
    assert {p.name for p in out.iterdir()} == {"config.json", "model.safetensors", "tokenizer.json"}
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
    llama = tmp_path / "llama.gguf"
    write_gemma3_gguf(llama, {"model.norm.weight": torch.ones(64)}, arch="llama")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF" + bytes(range(60)))
    cases = [
        (llama, "GGUF architecture 'llama' is not supported; supported: gemma3"),
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
