"""Tiny random checkpoints for tests, written with transformers' own ``save_pretrained``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from etspec.contract import DEPLOYMENT_DTYPE
from etspec.export.export_target import TargetExportOptions

SLIDING, FULL = "sliding_attention", "full_attention"

# Larger init than HF's 0.02 so greedy argmax margins are far above float32 round-off.
_INIT = 0.1

TARGET_CONFIGS: dict[str, dict[str, Any]] = {
    # Llama with GQA and llama3 RoPE scaling (low/high frequency bands both exercised).
    "llama_tied": dict(
        model_type="llama",
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
    ),
    "llama_gqa_rope3": dict(
        model_type="llama",
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=6,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        rope_scaling={
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 16,
        },
    ),
    # Qwen2: q/k/v biases, different hidden size (also the "other target" of mismatch tests).
    "qwen2_bias": dict(
        model_type="qwen2",
        vocab_size=200,
        hidden_size=48,
        intermediate_size=96,
        num_hidden_layers=5,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        rope_theta=1000.0,
    ),
    # Mistral with tied input/output embeddings.
    "mistral_tied": dict(
        model_type="mistral",
        vocab_size=192,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=8,
        max_position_embeddings=512,
        tie_word_embeddings=True,
    ),
    # A 16-token vocabulary: random drafts agree with it often enough for mixed accept/reject
    # steps, EOS (id 2) falls inside speculative windows, and sampling tests can count
    # every outcome.
    "llama_small_vocab": dict(
        model_type="llama",
        vocab_size=16,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
    ),
    # Gemma 3: sliding and full layers with their own RoPE (linear scaling on full layers
    # only), query_pre_attn_scalar; a 12-token window that prompts plus generations cross.
    "gemma3_sliding": dict(
        model_type="gemma3_text",
        vocab_size=32,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=5,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        query_pre_attn_scalar=24,
        sliding_window=12,
        layer_types=[SLIDING, SLIDING, FULL, SLIDING, SLIDING],
        rope_scaling={"rope_type": "linear", "factor": 4.0},
        rope_theta=5000.0,
        rope_local_base_freq=100.0,
        max_position_embeddings=512,
    ),
    # Gemma 4: KV-shared layers (3 reads 2, 4 reads 1), per-layer input embeddings, full
    # layers with their own head size and proportional RoPE, double-wide shared MLPs.
    "gemma4_shared_ple": dict(
        model_type="gemma4_text",
        vocab_size=32,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=5,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        global_head_dim=32,
        sliding_window=12,
        layer_types=[SLIDING, FULL, SLIDING, SLIDING, FULL],
        hidden_size_per_layer_input=8,
        vocab_size_per_layer_input=32,
        num_kv_shared_layers=2,
        use_double_wide_mlp=True,
        max_position_embeddings=512,
    ),
    # Gemma 4: values from the key projection on full layers (one global KV head), final
    # logit softcapping, no per-layer inputs.
    "gemma4_k_eq_v": dict(
        model_type="gemma4_text",
        vocab_size=64,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        global_head_dim=32,
        num_global_key_value_heads=1,
        attention_k_eq_v=True,
        sliding_window=12,
        layer_types=[SLIDING, FULL, SLIDING, FULL],
        hidden_size_per_layer_input=0,
        final_logit_softcapping=3.0,
        max_position_embeddings=512,
    ),
}

ROOT = Path(__file__).resolve().parents[1]
# The bundled pair's tokenizer: GPT-2 byte-level BPE, 4,096 ids.
BUNDLED_TOKENIZER = ROOT / "checkpoints/etspec-code-14m/tokenizer.json"


_GEMMA_SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
_GEMMA_USER = ["▁▁", "▁▁▁▁", "\n\n", "<start_of_image>"]
_GEMMA_PIECES = ["\n", "▁", "e", "t", "a", "h", "o", "n", "s", "r", "d", "f", "i", "x", "(", ")",
                 ":", "▁t", "he", "▁the", "th", "▁a", "in", "de", "def", "▁f", "é", "λ", "日", "本",
                 "日本", "▁日本", "😀", "'", "s", "'s", "▁d", "▁de", "▁def", "ab", "c", "b", "abc",
                 "1", "2", "12", "▁1"]  # fmt: skip


def gemma_style_tokenizer() -> bytes:
    """A small SentencePiece-style tokenizer.json made by models/gguf.py's converter (the
    code that converts Gemma's GGUF): control and user-defined tokens, <0xXX> byte pieces,
    '▁'-spelled spaces, several scripts; <bos> put in front of every encoding."""
    from types import SimpleNamespace

    from etspec.models.gguf_read import GGUFMetadata
    from etspec.models.gguf_tokenizer import gemma_tokenizer

    specials, user, pieces = _GEMMA_SPECIALS, _GEMMA_USER, _GEMMA_PIECES
    tokens = specials + user + [f"<0x{b:02X}>" for b in range(256)] + pieces
    types = [3] * len(specials) + [4] * len(user) + [6] * 256 + [1] * len(pieces)
    fields = {
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.unknown_token_id": 3,
        "tokenizer.ggml.bos_token_id": 2,
        "tokenizer.ggml.add_bos_token": True,
    }
    reader = SimpleNamespace(
        fields={k: SimpleNamespace(contents=lambda v=v: v) for k, v in fields.items()}
    )
    return gemma_tokenizer(GGUFMetadata(reader, "tiny"))


# Gemma 3's instruct chat template (its tokenizer_config.json's, as the Hub has it): roles
# alternate (raise_exception otherwise), the system message prefixes the first user turn,
# the assistant is "model".
# ChatML (Qwen2.5's kind), with tools through tojson and a namespace.
CHATML = """{%- set ns = namespace(system=false) -%}
{%- for m in messages -%}{%- if m['role'] == 'system' -%}{%- set ns.system = true -%}
{%- endif -%}{%- endfor -%}
{%- if not ns.system -%}<|im_start|>system
You are a helpful assistant.<|im_end|>
{% endif -%}
{%- if tools -%}{{ tools | tojson }}{%- endif -%}
{%- for m in messages -%}<|im_start|>{{ m['role'] }}
{{ m['content'] }}<|im_end|>
{% endfor -%}
{%- if add_generation_prompt -%}<|im_start|>assistant
{% endif -%}"""
# Llama 3's kind: loop controls, a {% generation %} block, the eos token by name.
LLAMA3 = """{{ bos_token }}{% for m in messages %}
{% if m['role'] == 'skip' %}{% continue %}{% endif %}
{% if m['role'] == 'assistant' %}{% generation %}<|start_header_id|>assistant<|end_header_id|>

{{ m['content'] | trim }}<|eot_id|>{% endgeneration %}{% else %}
<|start_header_id|>{{ m['role'] }}<|end_header_id|>

{{ m['content'] | trim }}<|eot_id|>{% endif %}{% endfor %}
{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>

{% endif %}{{ '' if add_generation_prompt else eos_token }}"""
GEMMA_CHAT_TEMPLATE = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
"""

# The three families' kinds of template, by the family whose template each follows.
CHAT_FAMILIES = {"gemma3": GEMMA_CHAT_TEMPLATE, "qwen2": CHATML, "llama3": LLAMA3}
CHAT_SPECIAL = {"bos_token": "<bos>", "eos_token": "<eos>"}


def transformers_render(template: str, conversations: list, generation_prompt: bool) -> list[str]:  # type: ignore[type-arg]
    """What transformers' ``apply_chat_template`` renders (the test reference)."""
    from transformers.utils.chat_template_utils import render_jinja_template

    want, _ = render_jinja_template(
        conversations=conversations, chat_template=template,
        add_generation_prompt=generation_prompt, **CHAT_SPECIAL,
    )  # fmt: skip
    return list(want)


def chat_conversations(n: int, seed: int) -> list[list[dict[str, str]]]:
    """``n`` conversations for rendering checks: with or without a system turn, one to five
    user turns (answered but the last), text with markup-like, quoted, non-ASCII and
    padded content."""
    import random

    rng = random.Random(seed)
    words = ["hello", "  padded  ", '"quoted"', "{{ not code }}", "{% raw %}", "<bos>",
             "été", "日本語", "😀", "line\nbreak", "tab\there", "a'b", "\\", "x" * 30]  # fmt: skip
    out = []
    for _ in range(n):
        turns = []
        if rng.random() < 0.4:
            turns.append({"role": "system", "content": " ".join(rng.choices(words, k=4))})
        for t in range(rng.randint(1, 5)):
            if t:
                turns.append({"role": "assistant", "content": " ".join(rng.choices(words, k=3))})
            turns.append({"role": "user", "content": " ".join(rng.choices(words, k=5))})
        out.append(turns)
    return out


def write_chat_template(folder: Path, template: str = GEMMA_CHAT_TEMPLATE) -> None:
    """A tokenizer_config.json holding ``template`` and Gemma's special tokens."""
    config = {"bos_token": "<bos>", "eos_token": "<eos>", "chat_template": template}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))


GEMMA_STYLE_VOCAB = len(_GEMMA_SPECIALS) + len(_GEMMA_USER) + 256 + len(_GEMMA_PIECES)
# Text targets for the C++ runner's text in and out: a Gemma 3 target with the Gemma-style
# tokenizer, a Llama target with the bundled pair's byte-level BPE.
TARGET_CONFIGS["gemma3_text"] = {
    **TARGET_CONFIGS["gemma3_sliding"],
    "vocab_size": GEMMA_STYLE_VOCAB,
}
TARGET_CONFIGS["llama_bpe_text"] = {**TARGET_CONFIGS["llama_small_vocab"], "vocab_size": 4096}


EXPORT_OPTIONS: dict[str, TargetExportOptions] = {
    # XNNPACK for one config (the default backend), portable for the rest: exact kernels and
    # a third of the export time.
    "llama_gqa_rope3": TargetExportOptions(
        backend="xnnpack", max_seq=96, prefill_chunk=8, verify_width=16
    ),
    # The same model with a tied embedding, quantized by the default recipe.
    "llama_tied_q": TargetExportOptions(
        backend="xnnpack",
        dtype=DEPLOYMENT_DTYPE,
        max_seq=64,
        prefill_chunk=8,
        verify_width=8,
        narrow_verify_widths=(4,),
    ),
    "qwen2_bias": TargetExportOptions(
        backend="portable", max_seq=96, prefill_chunk=8, verify_width=4
    ),
    "mistral_tied": TargetExportOptions(
        backend="portable", max_seq=96, prefill_chunk=8, verify_width=4
    ),
    "llama_small_vocab": TargetExportOptions(
        backend="xnnpack", max_seq=64, prefill_chunk=8, verify_width=8
    ),
    # The same 16-token model with a tokenizer (text prompts); portable: a fast export.
    "llama_small_text": TargetExportOptions(
        backend="portable", max_seq=96, prefill_chunk=8, verify_width=8
    ),
    # Text in and out of the C++ runner; portable: a fast export.
    "gemma3_text": TargetExportOptions(
        backend="portable", max_seq=96, prefill_chunk=8, verify_width=8
    ),
    "llama_bpe_text": TargetExportOptions(
        backend="portable", max_seq=96, prefill_chunk=8, verify_width=8
    ),
    # The same 16-token model compiled for trees of up to 64 draft nodes, with a narrower
    # verify method that small trees use instead.
    "llama_tree": TargetExportOptions(
        backend="xnnpack",
        max_seq=128,
        prefill_chunk=8,
        verify_width=72,
        narrow_verify_widths=(16,),
    ),
    # Verify widths up to the window: trees of up to 8 rows straddle the window boundary.
    "gemma3_sliding": TargetExportOptions(
        backend="xnnpack", max_seq=96, prefill_chunk=8, verify_width=12, narrow_verify_widths=(4,)
    ),
    "gemma4_shared_ple": TargetExportOptions(
        backend="portable", max_seq=96, prefill_chunk=8, verify_width=8
    ),
    "gemma4_k_eq_v": TargetExportOptions(
        backend="portable", max_seq=96, prefill_chunk=8, verify_width=8
    ),
}

GEMMA = ("gemma3_sliding", "gemma4_shared_ple", "gemma4_k_eq_v")


def hf_config(name: str, **overrides: Any) -> Any:
    from transformers import AutoConfig

    kwargs = {**TARGET_CONFIGS[name], **overrides}
    model_type = kwargs.pop("model_type")
    return AutoConfig.for_model(model_type, initializer_range=_INIT, **kwargs)


def make_hf_target(
    name: str, out: Path, seed: int = 0, config: str | None = None, **overrides: Any
) -> Any:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    cfg = hf_config(config or name, **overrides)
    model = AutoModelForCausalLM.from_config(cfg).float().eval()
    if cfg.model_type.startswith("gemma"):
        # HF initializes every norm weight alike (Gemma 3: 0, as it scales by 1 + w; Gemma 4:
        # 1) and layer scalars to 1: random values make a loader that drops one visible.
        with torch.no_grad():
            for key, p in model.named_parameters():
                if key.endswith("norm.weight"):
                    p.add_(torch.randn_like(p) * 0.3)
            for key, b in model.named_buffers():
                if key.endswith("layer_scalar"):
                    b.uniform_(0.5, 1.5)
    model.save_pretrained(out)
    return model


@dataclass
class Eagle3Spec:
    target_vocab: int = 256
    draft_vocab: int = 64
    hidden: int = 64
    target_hidden: int = 64
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 128
    aux_layer_ids: tuple[int, ...] | None = (2, 3, 3)
    with_embedding: bool = True


def make_eagle3_checkpoint(out: Path, spec: Eagle3Spec, seed: int = 0) -> dict[str, torch.Tensor]:
    """A draft in the official EAGLE-3 key layout (config + model.safetensors)."""
    g = torch.Generator().manual_seed(seed)
    h, th, d = spec.hidden, spec.target_hidden, spec.hidden // spec.heads

    def w(*shape: int, scale: float = _INIT) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * scale

    def norm(n: int) -> torch.Tensor:
        return 1.0 + 0.1 * torch.randn(n, generator=g)

    # A non-trivial reduced vocabulary: draft id i maps to a scattered target id.
    chosen = torch.sort(torch.randperm(spec.target_vocab, generator=g)[: spec.draft_vocab]).values
    d2t = chosen - torch.arange(spec.draft_vocab)
    t2d = torch.zeros(spec.target_vocab, dtype=torch.bool)
    t2d[chosen] = True
    state = {
        "fc.weight": w(h, 3 * th),
        "midlayer.input_layernorm.weight": norm(h),
        "midlayer.hidden_norm.weight": norm(h),
        "midlayer.post_attention_layernorm.weight": norm(h),
        "midlayer.self_attn.q_proj.weight": w(spec.heads * d, 2 * h),
        "midlayer.self_attn.k_proj.weight": w(spec.kv_heads * d, 2 * h),
        "midlayer.self_attn.v_proj.weight": w(spec.kv_heads * d, 2 * h),
        "midlayer.self_attn.o_proj.weight": w(h, spec.heads * d),
        "midlayer.mlp.gate_proj.weight": w(spec.intermediate, h),
        "midlayer.mlp.up_proj.weight": w(spec.intermediate, h),
        "midlayer.mlp.down_proj.weight": w(h, spec.intermediate),
        "norm.weight": norm(h),
        "lm_head.weight": w(spec.draft_vocab, h),
        "d2t": d2t,
        "t2d": t2d,
    }
    if spec.with_embedding:
        state["embed_tokens.weight"] = w(spec.target_vocab, h, scale=1.0)
    config: dict[str, Any] = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": h,
        "intermediate_size": spec.intermediate,
        "num_attention_heads": spec.heads,
        "num_key_value_heads": spec.kv_heads,
        "num_hidden_layers": 1,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "max_position_embeddings": 512,
        "vocab_size": spec.target_vocab,
        "draft_vocab_size": spec.draft_vocab,
        "target_hidden_size": th,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
    }
    if spec.aux_layer_ids is not None:
        config["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": list(spec.aux_layer_ids)}
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    save_file({k: v.contiguous() for k, v in state.items()}, str(out / "model.safetensors"))
    return state


#: The EAGLE-3 draft of ``llama_small_vocab`` (12 of its 16 tokens in the draft vocabulary).
SMALL_VOCAB_DRAFT = Eagle3Spec(
    target_vocab=16,
    draft_vocab=12,
    hidden=32,
    target_hidden=32,
    intermediate=64,
    aux_layer_ids=None,
)


def write_tokenizer(out: Path, vocab_size: int, bos: int | None = None) -> bytes:
    """A word-level ``tokenizer.json`` over ``vocab_size`` ids, as HF checkpoints ship one;
    with ``bos``, it puts that id in front of every encoding (as Gemma's does)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = {"[UNK]": 0, **{f"w{i}": i for i in range(1, vocab_size)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    if bos is not None:
        tok.post_processor = processors.TemplateProcessing(
            single=f"w{bos} $A", special_tokens=[(f"w{bos}", bos)]
        )
    tok.save(str(out / "tokenizer.json"))
    return (out / "tokenizer.json").read_bytes()


def make_hf_assistant(target: str, out: Path, ordered: bool, seed: int = 1) -> Any:
    """A random ``Gemma4AssistantForCausalLM`` for the Gemma 4 test target ``target``: two
    layers (sliding, full) shaped like the target's KV, hidden 32, ``ordered``: 8 centroids
    of which the best 2 are scored."""
    from transformers import AutoConfig
    from transformers.models.gemma4_assistant import (
        Gemma4AssistantConfig,
        Gemma4AssistantForCausalLM,
    )

    t = dict(TARGET_CONFIGS[target])
    t.pop("model_type")
    for key in ("num_kv_shared_layers", "use_double_wide_mlp", "vocab_size_per_layer_input"):
        t.pop(key, None)
    text = AutoConfig.for_model(
        "gemma4_text",
        initializer_range=_INIT,
        **{
            **t,
            "hidden_size": 32,
            "intermediate_size": 48,
            "num_hidden_layers": 2,
            "layer_types": [SLIDING, FULL],
            "num_kv_shared_layers": 2,
            "hidden_size_per_layer_input": 0,
            "vocab_size_per_layer_input": 0,
        },
    )
    torch.manual_seed(seed)
    cfg = Gemma4AssistantConfig(
        text_config=text,
        backbone_hidden_size=t["hidden_size"],
        use_ordered_embeddings=ordered,
        num_centroids=8,
        centroid_intermediate_top_k=2,
    )
    model = Gemma4AssistantForCausalLM(cfg).float().eval()
    with torch.no_grad():
        if ordered:
            model.masked_embedding.token_ordering.copy_(torch.randperm(t["vocab_size"]))
        for key, p in model.named_parameters():
            if key.endswith("norm.weight"):
                p.add_(torch.randn_like(p) * 0.3)
    model.save_pretrained(out)
    return model
