"""Shared lowering: a dict of method wrappers -> one ExecuTorch program with a shared cache."""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm import tqdm

from etspec import logs
from etspec.artifact import seal
from etspec.contract import BACKENDS, DTYPES
from etspec.errors import ExportError, OutputExistsError

log = logging.getLogger(__name__)

# 8da4w groups 32 input channels per scale; layers whose width is not a multiple stay fp32.
QUANT_GROUP_SIZE = 32


def check_options(backend: str, dtype: str) -> None:
    if backend not in BACKENDS:
        raise ExportError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if dtype not in DTYPES:
        raise ExportError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    if dtype == "8da4w" and backend != "xnnpack":
        raise ExportError("--dtype 8da4w needs --backend xnnpack (portable has no int4 kernels)")


def check_output(path: str | Path, force: bool) -> Path:
    """Refuse to overwrite a user's file unless asked; fail early on an unwritable folder."""
    p = Path(path)
    if p.exists() and not force:
        raise OutputExistsError(f"{p} already exists; pass --force to overwrite it")
    if p.exists() and p.is_dir():
        raise OutputExistsError(f"{p} is a directory; name a .pte file")
    if not p.parent.exists():
        raise ExportError(f"output folder {p.parent} does not exist")
    return p


def quantize(model: nn.Module, dtype: str) -> None:
    if dtype != "8da4w":
        return
    from executorch.extension.llm.export.quantize import quantize_model_

    quantize_model_(
        model,
        qlinear_config="8da4w",
        qlinear_group_size=QUANT_GROUP_SIZE,
        skip_incompatible_shapes=True,
    )


def lower(
    methods: dict[str, tuple[nn.Module, tuple[torch.Tensor, ...]]],
    constant_methods: dict[str, Any],
    backend: str,
    desc: str,
    share_cache: bool = True,
) -> bytes:
    """Export every method, lower them together and serialize one program, sealed with the
    integrity trailer.

    All wrappers hold the same model, so its cache buffers become mutable buffers shared by
    every method (``share_mutable_buffers``); without that each method silently reads its
    own stale copy of the cache. ``share_cache=False`` exists only so tests can prove they
    detect that failure.
    """
    # torch.export warns about its own internals (buffer mutations, deprecations) and
    # ExecuTorch's imports about optional CUDA kernels: logged, not shown (etspec.logs).
    with logs.quiet():
        return _lower(methods, constant_methods, backend, desc, share_cache)


def _lower(
    methods: dict[str, tuple[nn.Module, tuple[torch.Tensor, ...]]],
    constant_methods: dict[str, Any],
    backend: str,
    desc: str,
    share_cache: bool,
) -> bytes:
    from executorch.exir import (
        EdgeCompileConfig,
        ExecutorchBackendConfig,
        to_edge_transform_and_lower,
    )
    from executorch.exir.passes import MemoryPlanningPass

    partitioner = []
    if backend == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        partitioner = [XnnpackPartitioner()]
    exported = {}
    # disable=None: a bar on a terminal only, not in logs and pipes.
    bar_args: dict[str, Any] = {"unit": "step", "leave": False, "disable": None}
    with torch.no_grad(), tqdm(total=len(methods) + 2, desc=desc, **bar_args) as bar:
        for name, (module, example) in methods.items():
            bar.set_postfix_str(f"export {name}")
            exported[name] = torch.export.export(module, example, strict=False)
            bar.update()
        bar.set_postfix_str(f"lower to {backend}")
        edge = to_edge_transform_and_lower(
            exported,
            partitioner=partitioner,
            compile_config=EdgeCompileConfig(_check_ir_validity=False),
            constant_methods=constant_methods,
        )
        bar.update()
        bar.set_postfix_str("serialize")
        program = edge.to_executorch(
            ExecutorchBackendConfig(
                memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=share_cache),
                emit_mutable_buffer_names=True,
                # Cache writes (index_put) stay outside the delegate; functional, each one
                # copied its whole buffer and copied it back. In place they touch only the
                # written rows (measured: decode 8.9 -> 5.2 ms on the bundled target).
                run_reinplace_pass=True,
            )
        )
        bar.update()
        return seal(program.buffer)


def write_atomically(path: Path, data: bytes) -> None:
    """Write via a temp file in the same folder, so a failure never leaves a partial file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        # mkstemp creates 0600; give the artifact the mode a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def as_uint8(data: bytes) -> torch.Tensor:
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).clone()
