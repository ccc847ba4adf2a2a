"""Reference-mode programs built straight from checkpoints (no ``.pte``).

``models/build.py`` builds the modules, metadata and constants, the very ones export lowers,
so the eager reference runs the same computation as the artifact, in torch, on cpu, cuda or
npu (Ascend via ``torch_npu``).
"""

from __future__ import annotations

from pathlib import Path

import torch

from etspec.contract import TargetMetadata
from etspec.errors import EtspecError
from etspec.models.build import (
    DraftExportOptions,
    ProgramBuild,
    TargetExportOptions,
    draft_program,
    target_program,
)
from etspec.models.target import TargetModel
from etspec.runtime.program import EagerProgram

#: ``backend`` of a reference program's metadata (and of the options it is built with).
EAGER = "eager"


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


def _program(build: ProgramBuild, device: torch.device, source: str) -> EagerProgram:
    methods = {name: module for name, (module, _, _) in build.methods.items()}
    return EagerProgram(methods, build.meta, build.constants, device, build.model, source)


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
    dev = resolve_device(device)
    opts = TargetExportOptions(
        backend=EAGER,
        dtype=dtype,
        max_seq=max_seq,
        prefill_chunk=prefill_chunk,
        verify_width=verify_width,
        narrow_verify_widths=narrow_verify_widths,
        hidden_layers=hidden_layers,
        assistant=None if assistant is None else Path(assistant),
        assistant_step_width=assistant_step_width,
    )
    return _program(target_program(checkpoint, opts), dev, str(checkpoint))


def eager_draft(
    checkpoint: str | Path,
    target: EagerProgram,
    *,
    step_width: int = 4,
    scratch: int = 64,
    device: str = "cpu",
) -> EagerProgram:
    """An EAGLE-3 draft in torch, sized for ``target``; uses its embedding if it has none."""
    meta = target.metadata
    assert isinstance(meta, TargetMetadata)
    embedding = None
    if isinstance(target.model, TargetModel):
        embedding = target.model.embed_tokens.weight.detach().cpu()
    opts = DraftExportOptions(backend=EAGER, step_width=step_width, scratch=scratch)
    build = draft_program(checkpoint, meta, opts, embedding)
    return _program(build, resolve_device(device), str(checkpoint))
