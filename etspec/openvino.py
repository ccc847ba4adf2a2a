"""OpenVINO's inference precision: fp32 unless the environment asks for bf16.

ExecuTorch 1.5.1's OpenVINO backend imports each delegate's compiled model with no
properties, and OpenVINO's CPU plugin keeps no ``INFERENCE_PRECISION_HINT`` across export
and import (measured: a model compiled at f32, exported and imported, runs at bf16). Its
default is the CPU's: bf16 matmuls wherever the CPU has bf16 (AVX512-BF16, AMX), which
rounds decode and verify differently enough to flip greedy tokens on near-ties (the tiny
test pair: 6 of 20 prompts). The default is set by oneDNN's ISA: capped below bf16
(``ONEDNN_MAX_CPU_ISA``), the plugin computes in fp32. oneDNN reads the cap once, when
OpenVINO's CPU plugin first runs in a process, so it is set before the first OpenVINO
method loads (``prepare``; export too, ``cap_isa``), and the process's precision is checked
when OpenVINO's Python package can tell it. The C++ runner sets the same cap (``Program``).

``ETSPEC_OPENVINO_PRECISION=bf16`` leaves the CPU's default (bf16 where it has it): faster
on AMX, exact no longer (docs/artifact-contract.md, "Per delegate").
"""

from __future__ import annotations

import os

from etspec.contract import (
    ONEDNN_ISA_ENV,
    OPENVINO,
    OPENVINO_FP32_ISA,
    OPENVINO_PRECISION_ENV,
    OPENVINO_PRECISIONS,
    DraftMetadata,
    TargetMetadata,
    message,
)
from etspec.errors import ArtifactError, EtspecError


def precision() -> str:
    """The precision OpenVINO artifacts run at in this process (``ETSPEC_OPENVINO_PRECISION``,
    default fp32)."""
    value = os.environ.get(OPENVINO_PRECISION_ENV, OPENVINO_PRECISIONS[0]).strip().lower()
    if value not in OPENVINO_PRECISIONS:
        raise EtspecError(
            message(
                "unknown_choice",
                what=OPENVINO_PRECISION_ENV,
                value=value,
                choices=", ".join(OPENVINO_PRECISIONS),
            )
        )
    return value


def cap_isa() -> None:
    """Cap oneDNN below bf16 (unless bf16 was asked for or the cap is set already): before
    OpenVINO's CPU plugin first runs in this process, which export does too (a process that
    exports and then runs, as the tests do, keeps the precision it started with)."""
    if precision() == "fp32":
        os.environ.setdefault(ONEDNN_ISA_ENV, OPENVINO_FP32_ISA)


def prepare(meta: TargetMetadata | DraftMetadata, source: str) -> None:
    """Before the methods of an artifact lowered to OpenVINO load: ``cap_isa``, and refuse
    to run an fp32 program where OpenVINO already computes in bf16. Nothing for other
    backends."""
    if meta.backend != OPENVINO or precision() != "fp32":
        return
    cap_isa()
    if _process_precision() == "bf16":
        raise ArtifactError(
            message(
                "openvino_bf16",
                path=source,
                isa_env=ONEDNN_ISA_ENV,
                isa=os.environ.get(ONEDNN_ISA_ENV, ""),
                fp32_isa=OPENVINO_FP32_ISA,
                env=OPENVINO_PRECISION_ENV,
            )
        )


def _process_precision() -> str | None:
    """What OpenVINO's CPU plugin computes in here (``bf16``, ``fp32``), read from OpenVINO's
    Python package (the same plugin library as ExecuTorch's backend, so the same oneDNN and
    its cap); None without the package."""
    try:
        import openvino
    except ImportError:
        return None
    hint = openvino.Core().get_property("CPU", "INFERENCE_PRECISION_HINT")
    return "bf16" if hint == openvino.Type.bf16 else "fp32"
