"""Small shared helpers for tests: programs from test cases, references from transformers."""

from __future__ import annotations

import torch

from etspec.contract import MASK_MIN
from etspec.export.export_target import build_target, target_metadata
from etspec.models.methods import target_methods
from etspec.runtime.program import EagerProgram, PteProgram

TOL = 1e-4  # max abs logits difference allowed against transformers (fp32)


def target_program(case, mode: str):  # type: ignore[no-untyped-def]
    """A fresh program (fresh cache) of the given test target, reset like the runtime does."""
    if mode == "pte":
        prog = PteProgram.load(case.pte, expect="target")
    else:
        model = build_target(case.checkpoint, case.opts)
        methods = target_methods(model, case.opts.prefill_chunk, case.opts.verify_width)
        prog = EagerProgram(
            {k: v[0] for k, v in methods.items()}, target_metadata(model, case.opts, None)
        )
        prog.model = model  # type: ignore[attr-defined]  # tests inspect caches
    prog.run("target_reset")
    return prog


@torch.no_grad()
def hf_forward(hf, ids: torch.Tensor):  # type: ignore[no-untyped-def]
    return hf(ids[None], output_hidden_states=True)


def hf_taps(out, layers) -> torch.Tensor:  # type: ignore[no-untyped-def]
    """HF ``hidden_states[i]`` is the input of layer i: the same taps etspec exports."""
    return torch.cat([out.hidden_states[i][0] for i in layers], dim=-1)


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.float() - b.float()).abs().max().item()


def tree_mask(
    parents: list[int], committed: int, slots: torch.Tensor, cache_size: int
) -> torch.Tensor:
    """Additive mask: node i sees the committed prefix, its ancestors and itself."""
    k = len(parents)
    mask = torch.full((k, cache_size), MASK_MIN)
    mask[:, :committed] = 0.0
    for i in range(k):
        j = i
        while j >= 0:
            mask[i, slots[j]] = 0.0
            j = parents[j]
    return mask


def path_to(parents: list[int], i: int) -> list[int]:
    path = []
    while i >= 0:
        path.append(i)
        i = parents[i]
    return path[::-1]
