"""What the training scripts share: resumable state (weights, optimizer and step, written
atomically, so an interrupted save never leaves a truncated file behind) and precision."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import torch
from torch import nn

STATE_FILE = "train_state.pt"


def _trained(model: nn.Module) -> dict[str, torch.Tensor]:
    """The state that training changes: frozen parameters (a draft's copy of the target's
    embedding, 670 MB for Gemma 3) are rebuilt from the target on resume, not saved."""
    frozen = {name for name, p in model.named_parameters() if not p.requires_grad}
    return {k: v for k, v in model.state_dict().items() if k not in frozen}


class StateMismatch(RuntimeError):
    """A saved state whose tensors are not the model's (another model, an older trainer)."""


def save_state(out: Path, model: nn.Module, opt: torch.optim.Optimizer, step: int) -> None:
    tmp = out / (STATE_FILE + ".tmp")
    torch.save({"model": _trained(model), "optimizer": opt.state_dict(), "step": step}, tmp)
    tmp.replace(out / STATE_FILE)


def load_state(out: Path, model: nn.Module, opt: torch.optim.Optimizer, device: str) -> int:
    """Restore ``model`` and ``opt`` from ``out`` if a state is there; the step to resume at."""
    path = out / STATE_FILE
    if not path.is_file():
        return 0
    state = torch.load(path, map_location=device, weights_only=False)
    missing, unexpected = model.load_state_dict(state["model"], strict=False)
    frozen = {name for name, p in model.named_parameters() if not p.requires_grad}
    if unexpected or set(missing) - frozen:
        raise StateMismatch(f"{path} does not fit the model: {unexpected or missing}")
    opt.load_state_dict(state["optimizer"])
    return int(state["step"])


def bf16_matmuls(device: str) -> bool:
    """Whether bf16 matmuls pay on ``device``: CUDA, or a CPU with AMX or AVX512-BF16
    (oneDNN runs them at ~4x fp32's rate on a Xeon with AMX; on an AVX-512 Xeon without
    either it emulates them, 2.4-5x slower than fp32: docs/results.md)."""
    if device.startswith("cuda"):
        return True
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


def autocast(device: str, bf16: bool = True) -> contextlib.AbstractContextManager:  # type: ignore[type-arg]
    """bf16 mixed precision (fp32 master weights) where ``bf16``, else full fp32."""
    if bf16:
        return torch.autocast("cuda" if device.startswith("cuda") else "cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def precision_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """The ``--precision`` option of every script that runs a model over training data; read
    it with ``use_bf16``."""
    return click.option(
        "--precision",
        type=click.Choice(["auto", "fp32", "bf16"]),
        default="auto",
        show_default=True,
        help="Matmul precision (fp32 weights either way); auto is bf16 on CUDA and on CPUs "
        "with bf16 matrix units (AMX, AVX512-BF16), fp32 elsewhere.",
    )(command)


def use_bf16(precision: str, device: str) -> bool:
    """Whether ``--precision`` means bf16 matmuls on ``device``."""
    return precision == "bf16" or (precision == "auto" and bf16_matmuls(device))
