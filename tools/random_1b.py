"""Seeded random checkpoints at 1B scale, for memory and speed (not acceptance), in both
etspec's and llama.cpp's formats.

    python -m etspec.tools.random_1b --family gemma3-1b   --out .etspec-cache/random-1b/gemma3-1b
    python -m etspec.tools.random_1b --family llama3.2-1b --out .etspec-cache/random-1b/llama3.2-1b

Writes ``OUT/hf/`` (``config.json``, bf16 ``model.safetensors``, ``tokenizer.json``) and the
same weights as GGUF: ``OUT/model-bf16.gguf`` as llama.cpp's converter lays them out (Gemma's
norms stored as 1 + w, Llama's q/k rows permuted for its RoPE layout, Llama 3's RoPE factors
as ``rope_freqs``), then ``model-q8_0.gguf`` and ``model-q4_k_m.gguf`` made by llama.cpp's
own quantizer (``llama-cpp-python``) when it is installed.

Configurations are the published ones: Gemma 3 1B (26 layers, hidden 1152, 4/1 heads of 256,
262,144 tokens, a sliding window of 512 on five layers of six) with Gemma's tokenizer (from
``etspec fetch gemma-3-270m``: the same tokenizer); Llama 3.2 1B (16 layers, hidden 2048,
32/8 heads of 64, 128,256 tokens, Llama 3 RoPE scaling, tied) with a byte-level BPE trained
here on the standard library (as many merges as it yields, ~122,700) plus special tokens up
to 128,256 (Meta's tokenizer is not obtainable here; the vocabulary size, which is what
costs, is the same).
Weights are N(0, 0.02), norms at their identity; every value follows from ``--seed``.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import click
import numpy as np
import torch
from safetensors.torch import save_file

from etspec.models.gguf import GEMMA3_LAYER, GEMMA3_TOP

GEMMA_CACHE = Path(".etspec-cache") / "gemma-3-270m"  # etspec fetch's default folder

GEMMA3_1B = {
    "architectures": ["Gemma3ForCausalLM"],
    "model_type": "gemma3_text",
    "vocab_size": 262144,
    "hidden_size": 1152,
    "intermediate_size": 6912,
    "num_hidden_layers": 26,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "head_dim": 256,
    "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-06,
    "pad_token_id": 0,
    "eos_token_id": 1,
    "bos_token_id": 2,
    "tie_word_embeddings": True,
    "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
    },
    "query_pre_attn_scalar": 256,
    "sliding_window": 512,
    "layer_types": [
        "full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(26)
    ],
    "final_logit_softcapping": None,
    "attn_logit_softcapping": None,
    "attention_bias": False,
}

LLAMA32_1B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 128256,
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "hidden_act": "silu",
    "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "rope_type": "llama3",
        "factor": 32.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "tie_word_embeddings": True,
    "attention_bias": False,
    "mlp_bias": False,
}

FAMILIES = {"gemma3-1b": GEMMA3_1B, "llama3.2-1b": LLAMA32_1B}

# Hugging Face name (per layer, after model.layers.N.) -> llama.cpp name (after blk.N.):
# Gemma 3's is the inverse of what the converter reads (models/gguf.py).
GGUF_LAYER = {
    "gemma3": {hf: name for name, hf in GEMMA3_LAYER.items()},
    "llama": {
        "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output",
        "input_layernorm": "attn_norm",
        "post_attention_layernorm": "ffn_norm",
        "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
    },
}
GGUF_TOP = {hf: name for name, hf in GEMMA3_TOP.items()}


def random_state(cfg: dict, seed: int) -> dict[str, torch.Tensor]:  # type: ignore[type-arg]
    """bf16 weights N(0, 0.02) in Hugging Face names; norms at identity (Gemma stores w of
    its (1 + w), so zeros; Llama ones)."""
    gemma = cfg["model_type"].startswith("gemma")
    h, inter, d = cfg["hidden_size"], cfg["intermediate_size"], cfg["head_dim"]
    hq, hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    shapes = {"model.embed_tokens.weight": (cfg["vocab_size"], h), "model.norm.weight": (h,)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes |= {
            p + "self_attn.q_proj.weight": (hq * d, h),
            p + "self_attn.k_proj.weight": (hkv * d, h),
            p + "self_attn.v_proj.weight": (hkv * d, h),
            p + "self_attn.o_proj.weight": (h, hq * d),
            p + "mlp.gate_proj.weight": (inter, h),
            p + "mlp.up_proj.weight": (inter, h),
            p + "mlp.down_proj.weight": (h, inter),
            p + "input_layernorm.weight": (h,),
            p + "post_attention_layernorm.weight": (h,),
        }
        if gemma:
            shapes |= {
                p + "self_attn.q_norm.weight": (d,),
                p + "self_attn.k_norm.weight": (d,),
                p + "pre_feedforward_layernorm.weight": (h,),
                p + "post_feedforward_layernorm.weight": (h,),
            }
    gen = torch.Generator().manual_seed(seed)
    state = {}
    for name, shape in shapes.items():
        if name.endswith("norm.weight"):
            state[name] = (torch.zeros if gemma else torch.ones)(shape, dtype=torch.bfloat16)
        else:
            state[name] = (torch.randn(shape, generator=gen) * 0.02).to(torch.bfloat16)
    return state


def llama_tokenizer(out: Path) -> None:
    """A byte-level BPE of Llama 3's size: 128,000 tokens trained on the standard library,
    then <|begin_of_text|>, <|end_of_text|> and reserved special tokens up to 128,256."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    from etspec.training.corpus import read_texts, stdlib_root

    texts, held = read_texts(stdlib_root())
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=128000,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts + held, trainer)
    regular = tok.get_vocab_size()
    specials = ["<|begin_of_text|>", "<|end_of_text|>"]
    specials += [f"<|reserved_special_token_{i}|>" for i in range(128256 - regular - 2)]
    tok.add_special_tokens(specials)
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", bos)]
    )
    tok.save(str(out / "tokenizer.json"))
    assert tok.get_vocab_size() == 128256, tok.get_vocab_size()


def write_gguf(folder: Path, cfg: dict, state: dict, path: Path) -> None:  # type: ignore[type-arg]
    """The checkpoint as llama.cpp's convert_hf_to_gguf.py writes it (bf16 tensors)."""
    import gguf

    gemma = cfg["model_type"].startswith("gemma")
    arch = "gemma3" if gemma else "llama"
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"random {path.parent.name}")
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_key_length(cfg["head_dim"])
    w.add_value_length(cfg["head_dim"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    if gemma:
        w.add_rope_freq_base(cfg["rope_parameters"]["full_attention"]["rope_theta"])
        w.add_sliding_window(cfg["sliding_window"])
        _copy_gemma_tokenizer(w)
    else:
        w.add_rope_freq_base(cfg["rope_theta"])
        w.add_rope_dimension_count(cfg["head_dim"])
        w.add_vocab_size(cfg["vocab_size"])
        _add_bpe_tokenizer(w, folder / "tokenizer.json", cfg)
    layer_names = GGUF_LAYER[arch]
    hq, hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    for name, t in state.items():
        base = name.removesuffix(".weight")
        if base.startswith("model.layers."):
            _, _, i, rest = base.split(".", 3)
            target = f"blk.{i}.{layer_names[rest]}.weight"
        else:
            target = f"{GGUF_TOP[base]}.weight"
        x = t.float()
        if gemma and base.endswith("norm"):
            x = x + 1.0  # llama.cpp's RMSNorm multiplies by w; Gemma's by (1 + w)
        if not gemma and rest_is(base, "self_attn.q_proj"):
            x = _permute(x, hq)
        elif not gemma and rest_is(base, "self_attn.k_proj"):
            x = _permute(x, hkv)
        if x.dim() == 1:
            w.add_tensor(target, x.numpy())
        else:
            raw = x.to(torch.bfloat16).view(torch.int16).numpy()
            w.add_tensor(target, raw, raw_shape=raw.shape, raw_dtype=gguf.GGMLQuantizationType.BF16)
    if not gemma:
        w.add_tensor("rope_freqs.weight", _llama3_rope_factors(cfg))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def rest_is(base: str, suffix: str) -> bool:
    return base.endswith("." + suffix)


def _permute(w: torch.Tensor, heads: int) -> torch.Tensor:
    """HF's rotate-half q/k rows -> llama.cpp's interleaved pairs (convert_hf_to_gguf's
    LlamaModel.permute)."""
    return (
        w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)
    )


def _llama3_rope_factors(cfg: dict) -> np.ndarray:  # type: ignore[type-arg]
    """Llama 3's RoPE scaling as llama.cpp reads it: a divisor per frequency."""
    s = cfg["rope_scaling"]
    d, base = cfg["head_dim"], cfg["rope_theta"]
    freqs = 1.0 / (base ** (np.arange(0, d, 2, dtype=np.float64) / d))
    old = s["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / s["low_freq_factor"], old / s["high_freq_factor"]
    out = []
    for f in freqs:
        wavelen = 2 * math.pi / f
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(s["factor"])
        else:
            smooth = (old / wavelen - s["low_freq_factor"]) / (
                s["high_freq_factor"] - s["low_freq_factor"]
            )
            out.append(1 / ((1 - smooth) / s["factor"] + smooth))
    return np.asarray(out, dtype=np.float32)


def _copy_gemma_tokenizer(w) -> None:  # type: ignore[no-untyped-def]
    """Gemma 3 1B shares Gemma 3 270M's tokenizer: its fields, copied from that GGUF."""
    import gguf

    src = gguf.GGUFReader(str(GEMMA_CACHE / "gemma-3-270m-q4_k_m.gguf"))

    def value(key: str):  # type: ignore[no-untyped-def]
        return src.fields[key].contents()

    w.add_tokenizer_model(value("tokenizer.ggml.model"))
    w.add_tokenizer_pre(value("tokenizer.ggml.pre"))
    w.add_token_list(value("tokenizer.ggml.tokens"))
    w.add_token_scores(value("tokenizer.ggml.scores"))
    w.add_token_types(value("tokenizer.ggml.token_type"))
    w.add_bos_token_id(value("tokenizer.ggml.bos_token_id"))
    w.add_eos_token_id(value("tokenizer.ggml.eos_token_id"))
    w.add_unk_token_id(value("tokenizer.ggml.unknown_token_id"))
    w.add_pad_token_id(value("tokenizer.ggml.padding_token_id"))
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)


def _add_bpe_tokenizer(w, tokenizer_json: Path, cfg: dict) -> None:  # type: ignore[no-untyped-def,type-arg]
    data = json.loads(tokenizer_json.read_text())
    vocab = data["model"]["vocab"] | {t["content"]: t["id"] for t in data["added_tokens"]}
    tokens = [""] * cfg["vocab_size"]
    for t, i in vocab.items():
        tokens[i] = t
    special = {t["id"] for t in data["added_tokens"]}
    merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe")
    w.add_token_list(tokens)
    w.add_token_types([3 if i in special else 1 for i in range(len(tokens))])
    w.add_token_merges(merges)
    w.add_bos_token_id(cfg["bos_token_id"])
    w.add_eos_token_id(cfg["eos_token_id"])
    w.add_add_bos_token(True)


def quantize(src: Path, dst: Path, kind: str) -> bool:
    """llama.cpp's own quantizer (llama-cpp-python), as a user would run llama-quantize."""
    try:
        import llama_cpp
    except ImportError:
        return False
    ftype = {
        "q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0,
        "q4_k_m": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M,
    }
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype[kind]
    tmp = dst.with_name(dst.name + ".tmp")
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(tmp).encode(), params)
    if rc != 0:
        raise click.ClickException(f"llama.cpp could not quantize {src} to {kind} (rc {rc})")
    tmp.replace(dst)
    return True


@click.command()
@click.option("--family", type=click.Choice(sorted(FAMILIES)), required=True)
@click.option("--out", type=click.Path(path_type=Path), required=True)
@click.option("--seed", default=0, show_default=True)
def main(family: str, out: Path, seed: int) -> None:
    """Write a seeded random checkpoint of FAMILY's configuration, and its GGUFs, to OUT."""
    cfg = FAMILIES[family]
    hf = out / "hf"
    hf.mkdir(parents=True, exist_ok=True)
    if cfg["model_type"].startswith("gemma"):
        src = GEMMA_CACHE / "hf" / "tokenizer.json"
        if not src.is_file():
            raise click.ClickException(
                f"Gemma's tokenizer is not at {src}: etspec fetch gemma-3-270m"
            )
        shutil.copyfile(src, hf / "tokenizer.json")
    else:
        if not (hf / "tokenizer.json").is_file():
            llama_tokenizer(hf)
        from tokenizers import Tokenizer

        # The trained BPE stops short of 128,000 merges on this corpus; its specials (and
        # so <bos>/<eos>) follow its last regular token instead of sitting at 128000.
        tok = Tokenizer.from_file(str(hf / "tokenizer.json"))
        cfg = cfg | {
            "bos_token_id": tok.token_to_id("<|begin_of_text|>"),
            "eos_token_id": tok.token_to_id("<|end_of_text|>"),
        }
    state = random_state(cfg, seed)
    if not (hf / "model.safetensors").is_file():
        tmp = hf / "model.safetensors.tmp"
        save_file(state, str(tmp), metadata={"format": "pt"})
        tmp.replace(hf / "model.safetensors")
        (hf / "config.json").write_text(json.dumps(cfg | {"torch_dtype": "bfloat16"}, indent=2))
    params = sum(t.numel() for t in state.values())
    bf16 = out / "model-bf16.gguf"
    if not bf16.is_file():
        tmp = out / "model-bf16.gguf.tmp"
        write_gguf(hf, cfg, state, tmp)
        tmp.replace(bf16)
    del state
    made = [bf16.name]
    for kind in ("q8_0", "q4_k_m"):
        dst = out / f"model-{kind}.gguf"
        if dst.is_file() or quantize(bf16, dst, kind):
            made.append(dst.name)
    click.echo(f"{family}: {params / 1e9:.2f}B parameters (seed {seed}) -> {hf}, {', '.join(made)}")


if __name__ == "__main__":
    main()
