"""Quantization recipes: which weights are stored at which width (``--dtype``).

A recipe names a scheme for the decoder's linear layers, one for the output projection
(lm_head) and one for the embedding table, applied in place with torchao through
ExecuTorch's LLM quantizer before export. The linear schemes run in XNNPACK: ``8da4w`` is
int4 weights in groups of 32 input channels with one scale each, multiplied with
activations quantized to int8 per row at run time; ``8da8w`` is int8 weights with one
scale per output channel. Embeddings are looked up by ExecuTorch's quantized kernels
(``8w``: int8 with one scale per row; ``4w``: int4 in groups of 32 with fp16 scales, which
save 10.5 MB on Gemma 3 270M's table; its quality is measured with them).

Why mixed widths: the output projection of a large-vocabulary model is most of its weights
(Gemma 3 270M: 168M of 268M parameters, tied to the embedding) and every logit goes
through it, so int4 there costs the most quality for the least speed; llama.cpp's Q4_K_M
keeps it at 6 bits and the embedding at 8 for the same reason. The README's Gemma 3
section gives the measured quality (``etspec quality``) and speed of each recipe.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from torch import nn

from etspec import logs
from etspec.contract import DTYPES
from etspec.errors import ExportError
from etspec.models.hqq import fitted_in_blocks

GROUP_SIZE = 32  # int4 groups of input channels; other widths take the int8 per-row scheme


@dataclass(frozen=True)
class Recipe:
    linear: str | None  # decoder linears: "8da4w", "8da8w" or None (fp32)
    lm_head: str | None  # the output projection
    embedding: str | None  # the embedding table: "8w", "4w" or None
    summary: str
    mlp: str | None = None  # the MLPs' linears, when they differ from ``linear``


RECIPES = {
    "fp32": Recipe(None, None, None, "every weight fp32"),
    "8da4w": Recipe("8da4w", "8da4w", None, "int4 linears and lm_head, fp32 embedding"),
    "8da8w": Recipe("8da8w", "8da8w", "8w", "int8 linears, lm_head and embedding"),
    "8da4w-mixed": Recipe(
        "8da4w", "8da8w", "8w", "int4 decoder linears; int8 lm_head and embedding"
    ),
    "8da8w-e4": Recipe("8da8w", "8da8w", "4w", "int8 linears and lm_head, int4 embedding"),
    "8da4w-mlp": Recipe(
        "8da8w", "8da8w", "4w", "int4 MLPs, int8 attention and lm_head, int4 embedding", "8da4w"
    ),
}


assert tuple(RECIPES) == DTYPES, "contract.DTYPES names the recipes"


def recipe(dtype: str) -> Recipe:
    if dtype not in RECIPES:
        raise ExportError(f"unknown dtype {dtype!r}; choose one of {', '.join(RECIPES)}")
    return RECIPES[dtype]


def quantize(
    model: nn.Module, dtype: str, head: str = "lm_head", keep: Collection[str] = ()
) -> None:
    """Quantize ``model`` in place by the recipe ``dtype``; ``head`` names its output
    projection module (quantized by the recipe's ``lm_head`` scheme) and ``keep`` the
    linears that stay fp32 under every recipe."""
    r = recipe(dtype)
    if r.linear is None and r.lm_head is None and r.embedding is None:
        return
    with logs.quiet():  # torchao's import warns about its optional CUDA kernels
        from torchao.quantization.quant_api import quantize_

    _untie(model, head)
    with fitted_in_blocks():  # torchao's scales, fitted a cache-sized block at a time
        _quantize(model, r, head, keep, quantize_)


def _quantize(
    model: nn.Module, r: Recipe, head: str, keep: Collection[str], quantize_: Callable[..., None]
) -> None:

    def is_head(fqn: str) -> bool:
        return fqn.split(".")[-1] == head

    def is_mlp(fqn: str) -> bool:
        return ".mlp." in f".{fqn}."

    if r.embedding is not None:
        for scheme, takes in _with_fallback(r.embedding):

            def table(m: nn.Module, _: str, takes: Callable[[nn.Module], bool] = takes) -> bool:
                return isinstance(m, nn.Embedding) and takes(m)

            quantize_(model, _config(scheme), filter_fn=table)
    rules: list[tuple[str | None, Callable[[str], bool]]] = [
        (r.lm_head, is_head),
        (r.mlp or r.linear, lambda f: is_mlp(f) and not is_head(f)),
        (r.linear, lambda f: not is_mlp(f) and not is_head(f)),
    ]
    for base, wanted in rules:
        if base is None:
            continue
        for scheme, takes in _with_fallback(base):

            def pick(
                m: nn.Module,
                fqn: str,
                wanted: Callable[[str], bool] = wanted,
                takes: Callable[[nn.Module], bool] = takes,
            ) -> bool:
                return (
                    isinstance(m, nn.Linear)
                    and fqn.split(".")[-1] not in keep
                    and wanted(fqn)
                    and takes(m)
                )

            quantize_(model, _config(scheme), filter_fn=pick)


def _with_fallback(scheme: str) -> list[tuple[str, Callable[[nn.Module], bool]]]:
    """(scheme, which modules it takes) for ``scheme``: an int4 scheme's groups need an
    input width that is a multiple of GROUP_SIZE, so the other layers take its int8 per-row
    counterpart (as llama.cpp falls back to a wider type for rows its blocks do not tile),
    never fp32 under a quantized recipe's name. The passes split the layers by width, so
    none is quantized twice; a per-row scheme takes every layer."""
    if not _group(scheme):
        return [(scheme, lambda m: True)]
    return [
        (scheme, lambda m: m.weight.shape[-1] % GROUP_SIZE == 0),
        (scheme[: -len("4w")] + "8w", lambda m: m.weight.shape[-1] % GROUP_SIZE != 0),
    ]


def _config(scheme: str) -> object:
    """The torchao config of a scheme (as ExecuTorch's LLM export builds them, with HQQ's
    scale fitting)."""
    import torch
    from torchao.quantization.granularity import PerAxis, PerGroup
    from torchao.quantization.quant_api import (
        Int8DynamicActivationIntxWeightConfig,
        IntxWeightOnlyConfig,
    )

    group = _group(scheme)
    granularity = PerAxis(0) if group == 0 else PerGroup(group)
    bits = torch.int4 if "4" in scheme else torch.int8
    if scheme.startswith("8da"):
        return Int8DynamicActivationIntxWeightConfig(
            weight_dtype=bits,
            weight_granularity=granularity,
            intx_choose_qparams_algorithm="hqq_scale_only",
        )
    return IntxWeightOnlyConfig(
        weight_dtype=bits,
        granularity=granularity,
        intx_choose_qparams_algorithm="hqq_scale_only",
        scale_dtype=torch.float16 if group else None,
    )


def _untie(model: nn.Module, head: str) -> None:
    """Give a tied output projection its own Parameter (same storage, no copy): the head and
    the table are quantized by different schemes, and torchao swaps a weight for its
    quantized form in place, which a shared Parameter would carry into both."""
    for name, m in model.named_modules():
        if name.split(".")[-1] != head or not isinstance(m, nn.Linear):
            continue
        shared = [n for n, p in model.named_parameters(remove_duplicate=False)
                  if p is m.weight and not n.startswith(f"{name}.")]  # fmt: skip
        if shared:
            m.weight = nn.Parameter(m.weight.detach(), requires_grad=False)


def _group(scheme: str) -> int:
    return GROUP_SIZE if scheme.endswith("4w") else 0  # 0: one scale per output channel
