"""Reference-mode programs built straight from checkpoints (no ``.pte``).

The modules are the very method wrappers export lowers, so the eager reference runs the same
computation as the artifact, in torch, on cpu, cuda or npu (Ascend via ``torch_npu``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from etspec.artifact import sha256_hex
from etspec.contract import DRAFT_D2T, TOKENIZER_JSON, HiddenStateSpec, TargetMetadata, check_pair
from etspec.errors import EtspecError
from etspec.models.checkpoint import read_config, read_tokenizer_json
from etspec.models.eagle3 import Eagle3Draft
from etspec.models.gemma4_assistant import Gemma4Assistant, assistant_hidden_spec
from etspec.models.methods import draft_methods, target_methods
from etspec.models.quantize import quantize
from etspec.models.target import TargetModel, load_target
from etspec.runtime.program import EagerProgram


def resolve_device(name: str) -> torch.device:
    """``cpu``, ``cuda[:i]`` or ``npu[:i]``; a clear error when the device is not present."""
    kind = name.split(":")[0]
    if kind == "npu":
        try:
            import torch_npu  # noqa: F401  # registers the npu device with torch
        except ImportError:
            raise EtspecError(
                "device npu needs torch_npu; install etspec[ascend] on an Ascend machine"
            ) from None
        if not torch.npu.is_available():  # type: ignore[attr-defined]
            raise EtspecError("device npu requested but no Ascend NPU is available")
    elif kind == "cuda" and not torch.cuda.is_available():
        raise EtspecError("device cuda requested but no CUDA GPU is available; use --device cpu")
    elif kind not in ("cpu", "cuda", "npu"):
        raise EtspecError(f"unknown device {name!r}; use cpu, cuda or npu")
    return torch.device(name)


def eager_target(
    checkpoint: str | Path,
    *,
    max_seq: int = 512,
    prefill_chunk: int = 32,
    verify_width: int = 8,
    narrow_verify_widths: tuple[int, ...] = (),
    hidden_layers: tuple[int, ...] | None = None,
    assistant: str | Path | None = None,
    assistant_step_width: int = 4,
    device: str = "cpu",
    dtype: str = "fp32",
) -> EagerProgram:
    """The target's methods in torch, with the static shapes an export would compile;
    ``assistant`` adds a Gemma 4 assistant's ``assistant_step``, as ``--assistant`` does;
    ``dtype`` quantizes by the same recipe as export (models/quantize.py)."""
    widths = tuple(sorted({*narrow_verify_widths, verify_width}))
    dev = resolve_device(device)
    spec = HiddenStateSpec("layer_input", tuple(hidden_layers)) if hidden_layers else None
    if assistant is not None:
        spec = assistant_hidden_spec(int(read_config(checkpoint)["num_hidden_layers"]))
    scratch = max(verify_width, prefill_chunk)
    model = load_target(checkpoint, max_seq, scratch, spec)
    model.check_shapes(verify_width)
    helper = None if assistant is None else Gemma4Assistant.from_checkpoint(assistant, model)
    quantize(model, dtype)
    if helper is not None:
        quantize(helper, dtype)
    tokenizer = read_tokenizer_json(checkpoint)
    meta = model.metadata(
        prefill_chunk=prefill_chunk,
        verify_widths=widths,
        dtype=dtype,
        backend="eager",
        tokenizer_sha256=sha256_hex(tokenizer),
    )
    if helper is not None:
        meta = replace(
            meta, assistant="gemma4_assistant", assistant_step_width=assistant_step_width
        )
    methods = target_methods(model, prefill_chunk, widths, helper, assistant_step_width)
    methods = {k: v[0] for k, v in methods.items()}
    constants = {TOKENIZER_JSON: tokenizer} if tokenizer is not None else {}
    prog = EagerProgram(methods, meta, constants, dev)
    prog.model = model
    return prog


def eager_draft(
    checkpoint: str | Path,
    target: EagerProgram,
    *,
    step_width: int = 4,
    scratch: int = 64,
    device: str = "cpu",
) -> EagerProgram:
    """An EAGLE-3 draft in torch, sized for ``target``; uses its embedding if it has none."""
    dev = resolve_device(device)
    meta_t = target.metadata
    assert isinstance(meta_t, TargetMetadata)
    embedding = None
    if isinstance(target.model, TargetModel):
        embedding = target.model.embed_tokens.weight.detach().cpu()
    scratch = max(scratch, meta_t.verify_width, meta_t.prefill_chunk)
    model = Eagle3Draft.from_checkpoint(checkpoint, meta_t.max_context, scratch, embedding)
    meta = model.metadata(meta_t, step_width=step_width, dtype="fp32", backend="eager")
    check_pair(meta_t, meta)
    methods = draft_methods(model, meta_t.prefill_chunk, meta_t.verify_widths, step_width)
    prog = EagerProgram(
        {k: v[0] for k, v in methods.items()}, meta, {DRAFT_D2T: model.d2t.clone()}, dev
    )
    prog.model = model
    return prog
