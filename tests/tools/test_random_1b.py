"""etspec.tools.random_1b at a tiny scale: the GGUF it writes is llama.cpp's layout of the same
weights (names, Gemma's 1 + w norms, Llama's permuted q/k rows, Llama 3's RoPE factors)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

gguf = pytest.importorskip("gguf")

from etspec.tools.random_1b import (  # noqa: E402
    LLAMA32_1B,
    _llama3_rope_factors,
    _permute,
    random_state,
    write_gguf,
)

TINY_LLAMA = LLAMA32_1B | {
    "vocab_size": 300,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "bos_token_id": 256,
    "eos_token_id": 257,
}


def _tokenizer(folder: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {bytes([b]).decode("latin-1"): b for b in range(256)}
    vocab |= {f"t{i}": 256 + i for i in range(300 - 256)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.save(str(folder / "tokenizer.json"))


def test_llama_gguf_is_llama_cpp_layout(tmp_path: Path) -> None:
    state = random_state(TINY_LLAMA, seed=3)
    assert state["model.layers.0.input_layernorm.weight"].float().eq(1).all()
    _tokenizer(tmp_path)
    path = tmp_path / "tiny.gguf"
    write_gguf(tmp_path, TINY_LLAMA, state, path)
    r = gguf.GGUFReader(str(path))
    tensors = {t.name: t for t in r.tensors}

    def read(name: str) -> torch.Tensor:
        t = tensors[name]
        data = gguf.quants.dequantize(t.data, t.tensor_type)
        return torch.from_numpy(np.array(data, dtype=np.float32)).reshape(
            *reversed([int(x) for x in t.shape])
        )

    q = state["model.layers.1.self_attn.q_proj.weight"].float()
    k = state["model.layers.1.self_attn.k_proj.weight"].float()
    torch.testing.assert_close(read("blk.1.attn_q.weight"), _permute(q, 4), atol=0, rtol=0)
    torch.testing.assert_close(read("blk.1.attn_k.weight"), _permute(k, 2), atol=0, rtol=0)
    # Row 1 of head 0 in llama.cpp's layout is HF's row head_dim / 2 (the pair of row 0).
    torch.testing.assert_close(read("blk.1.attn_q.weight")[1], q[8], atol=0, rtol=0)
    torch.testing.assert_close(
        read("blk.0.ffn_norm.weight"),
        state["model.layers.0.post_attention_layernorm.weight"].float(),
    )
    assert "output.weight" not in tensors  # tied
    assert r.fields["tokenizer.ggml.bos_token_id"].contents() == 256
    assert len(r.fields["tokenizer.ggml.tokens"].contents()) == 300


def test_llama3_rope_factors_match_transformers() -> None:
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    cfg = {k: v for k, v in LLAMA32_1B.items() if k not in ("architectures", "model_type")}
    hf = LlamaConfig(**cfg)
    scaled, _ = ROPE_INIT_FUNCTIONS["llama3"](hf, "cpu")
    d, base = LLAMA32_1B["head_dim"], LLAMA32_1B["rope_theta"]
    plain = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    factors = torch.from_numpy(_llama3_rope_factors(LLAMA32_1B)).double()
    torch.testing.assert_close(plain / factors, scaled.double(), rtol=1e-5, atol=0)
    assert json.dumps(LLAMA32_1B)  # the configuration is plain JSON
