"""The ExecuTorch backends an export can lower to, one registry entry each.

A backend is what ``--backend`` names: the partitioner that hands subgraphs to its delegate
(none for ``portable``: ExecuTorch's own kernels run everything), the weight recipes its
kernels run, the one it exports without ``--dtype``, and the package it needs. Every
registered backend keeps both KV strategies exact (docs/artifact-contract.md, "Per
delegate"); the loop never asks which backend a program was lowered to.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from etspec import openvino
from etspec.contract import BACKENDS, DEPLOYMENT_DTYPE, DTYPES
from etspec.errors import ExportError

# OpenVINO's device for ExecuTorch's partitioner (a compile spec: the runtime imports the
# compiled model on that device). CPU is the one every machine has.
OPENVINO_DEVICE = "CPU"


@dataclass(frozen=True)
class Backend:
    """One ``--backend``: how a program is lowered to it and what it runs."""

    name: str
    dtypes: tuple[str, ...]  # weight recipes its kernels run
    default_dtype: str  # what `export target` writes without --dtype
    # ``partitioner(keep_out)``: ExecuTorch partitioners (keep_out: parameter names whose
    # ops stay outside the delegate, export/lowering.py); None lowers to the portable kernels.
    partitioner: Callable[[frozenset[str]], list[Any]] | None
    # A Python module the partitioner needs beyond executorch, and how to install it.
    requires: str | None = None
    install: str | None = None

    def check_installed(self) -> None:
        """Refuse, in one line with the fix, a backend whose Python package is missing."""
        if self.requires and importlib.util.find_spec(self.requires) is None:
            raise ExportError(
                f"--backend {self.name} needs the {self.requires} package, which is not "
                f"installed: {self.install}"
            )


def _xnnpack(keep_out: frozenset[str]) -> list[Any]:
    return [_xnnpack_partitioner(keep_out)]


def _xnnpack_partitioner(keep_out: frozenset[str]) -> Any:
    """XNNPACK's partitioner, leaving every op that reads a parameter named in ``keep_out``
    (fully qualified names) to the portable/optimized kernels.

    A tied embedding is why: the embedding lookup is not an XNNPACK op, so its table is a
    program constant, while a delegated lm_head stores the same matrix a second time in the
    delegate's data (Gemma 3 270M fp32: 671 MB twice, 63% of the model). Kept out, the
    lookup and the projection read one constant.
    """
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    if not keep_out:
        return XnnpackPartitioner()

    class KeepOut(XnnpackPartitioner):  # type: ignore[misc]
        def get_matched_nodes_from_configs(self, ep: Any) -> list[list[Any]]:
            params = ep.graph_signature.inputs_to_parameters

            def reads_kept(node: Any) -> bool:
                names = [node.name, *(n.name for n in node.all_input_nodes)]
                return any(params.get(name) in keep_out for name in names)

            groups = super().get_matched_nodes_from_configs(ep)
            return [kept for g in groups if (kept := [n for n in g if not reads_kept(n)])]

    return KeepOut()


def _openvino(keep_out: frozenset[str]) -> list[Any]:
    return [_openvino_partitioner()]


# Symbolic-size arithmetic (a mask's dynamic width minus the scratch slots) that OpenVINO's
# converter translates but ExecuTorch's partitioner does not recognize by name.
_SHAPE_OPS = ("sym_size.int", "add", "sub", "mul", "floordiv")


def _openvino_partitioner() -> Any:
    """ExecuTorch's OpenVINO partitioner (device ``OPENVINO_DEVICE``), taking the shape
    arithmetic on the dynamic mask width into its partitions.

    ExecuTorch 1.5.1 looks each op up as ``torch.ops.<name>``, which misses ``sym_size.int``
    and Python's integer operators (OpenVINO's converter knows them as
    ``torch.ops.aten.sym_size.int`` and ``_operator.sub``). Left out, a width computed from
    the mask becomes a SymInt input of the delegate, which OpenVINO's compile cannot take
    (``'SymInt' object has no attribute 'type'``); inside, OpenVINO reads it from the mask's
    shape.
    """
    from executorch.backends.openvino.partitioner import OpenvinoPartitioner
    from executorch.exir.backend.compile_spec_schema import CompileSpec

    openvino.cap_isa()  # the precision this process runs OpenVINO at, set before it first runs

    class WithShapeOps(OpenvinoPartitioner):  # type: ignore[misc]
        def partition(self, exported_program: Any) -> Any:
            for node in exported_program.graph_module.graph.nodes:
                name = getattr(node.target, "__name__", "")
                if node.op == "call_function" and name in _SHAPE_OPS:
                    self._enabled_ops_by_name.add(node.name)
            return super().partition(exported_program)

    return WithShapeOps([CompileSpec("device", OPENVINO_DEVICE.encode())])


REGISTRY: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend("xnnpack", DTYPES, DEPLOYMENT_DTYPE, _xnnpack),
        # ExecuTorch's portable kernels have no quantized linears.
        Backend("portable", ("fp32",), "fp32", None),
        Backend(
            "openvino",
            ("fp32",),
            "fp32",
            _openvino,
            requires="openvino",
            install="pip install 'etspec[openvino]'",
        ),
    )
}
assert tuple(REGISTRY) == BACKENDS, "contract.BACKENDS names every registered backend"


def backend(name: str) -> Backend:
    """The registry entry of ``name``; unknown names are refused with the choices."""
    if name not in REGISTRY:
        raise ExportError(f"unknown backend {name!r}; choose one of {', '.join(REGISTRY)}")
    return REGISTRY[name]


def check_options(name: str, dtype: str) -> Backend:
    """``name`` and ``dtype`` as one export can use them (before anything loads)."""
    b = backend(name)
    if dtype not in DTYPES:
        raise ExportError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    if dtype not in b.dtypes:
        runs = [n for n, other in REGISTRY.items() if dtype in other.dtypes]
        raise ExportError(
            f"--dtype {dtype} needs --backend {' or '.join(runs)} ({name} runs "
            f"{', '.join(b.dtypes)} only)"
        )
    b.check_installed()
    return b
