"""Write a small random Llama target and EAGLE-3 draft as local checkpoint folders.

A stand-in until the trained bundled pair exists: it exercises the whole export path with
checkpoints in exactly the layouts users bring (HF ``save_pretrained`` for the target, the
official EAGLE-3 key layout for the draft), written without ``transformers``.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import torch
from safetensors.torch import save_file

from etspec.models.config import DecoderConfig
from etspec.models.eagle3 import Eagle3Config, Eagle3Draft
from etspec.models.llama import LlamaTarget
from etspec.models.rope import RopeConfig

TARGET_CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 512,
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 6,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "max_position_embeddings": 1024,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": 2,
}


def _init_(module: torch.nn.Module, gen: torch.Generator) -> None:
    for name, p in module.named_parameters():
        if p.dim() > 1:
            p.data = torch.randn(p.shape, generator=gen) * 0.1
        elif "norm" in name:
            p.data = 1.0 + 0.1 * torch.randn(p.shape, generator=gen)


@click.command()
@click.argument("out_dir", type=click.Path(path_type=Path))
@click.option("--seed", default=0, show_default=True)
def main(out_dir: Path, seed: int) -> None:
    """Write OUT_DIR/target and OUT_DIR/draft."""
    gen = torch.Generator().manual_seed(seed)
    target_dir, draft_dir = out_dir / "target", out_dir / "draft"
    for d in (target_dir, draft_dir):
        d.mkdir(parents=True, exist_ok=True)

    cfg = DecoderConfig.from_hf(TARGET_CONFIG)
    target = LlamaTarget(cfg, max_context=8, scratch=0)
    _init_(target, gen)
    state = {
        ("lm_head.weight" if k == "lm_head.weight" else f"model.{k}"): v.contiguous()
        for k, v in target.state_dict().items()
    }
    save_file(state, str(target_dir / "model.safetensors"))
    (target_dir / "config.json").write_text(json.dumps(TARGET_CONFIG, indent=2))

    draft_vocab = 256
    dcfg = Eagle3Config(
        vocab_size=cfg.vocab_size,
        draft_vocab_size=draft_vocab,
        hidden_size=cfg.hidden_size,
        target_hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_heads=cfg.num_heads,
        num_kv_heads=cfg.num_kv_heads,
        head_dim=cfg.head_dim,
        rms_norm_eps=cfg.rms_norm_eps,
        rope=RopeConfig(),
    )
    draft = Eagle3Draft(dcfg, max_context=8, scratch=0)
    _init_(draft, gen)
    draft.d2t.copy_(torch.arange(draft_vocab))  # draft id i -> target id 2i
    draft.t2d.zero_()
    draft.t2d[torch.arange(draft_vocab) * 2] = True
    save_file(
        {k: v.contiguous() for k, v in draft.state_dict().items()},
        str(draft_dir / "model.safetensors"),
    )
    (draft_dir / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLMEagle3"],
                "model_type": "llama",
                "hidden_size": dcfg.hidden_size,
                "intermediate_size": dcfg.intermediate_size,
                "num_attention_heads": dcfg.num_heads,
                "num_key_value_heads": dcfg.num_kv_heads,
                "num_hidden_layers": 1,
                "rms_norm_eps": dcfg.rms_norm_eps,
                "rope_theta": 10000.0,
                "vocab_size": dcfg.vocab_size,
                "draft_vocab_size": draft_vocab,
                "target_hidden_size": dcfg.target_hidden_size,
                "hidden_act": "silu",
            },
            indent=2,
        )
    )
    click.echo(f"wrote {target_dir} and {draft_dir}")


if __name__ == "__main__":
    main()
