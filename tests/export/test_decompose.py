"""export/decompose.py: one method lowered with one re-trace builds the program ExecuTorch's
``to_edge_transform_and_lower`` builds with three, also where the partitioner refuses some
of the nodes it asked to keep whole (those are decomposed, as ExecuTorch decomposes them)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from etspec.export.decompose import to_edge_and_lower


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(16, 24)
        self.down = nn.Linear(24, 16)
        self.norm = nn.LayerNorm(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.softmax(self.up(x), dim=-1)
        return self.norm(self.down(h) + x)


def _partitioner(refuse_wide: bool) -> Any:
    """XNNPACK's partitioner; ``refuse_wide``: its check refuses the linears that output 24
    features, which it still asks to keep whole."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    class Refusing(XnnpackPartitioner):  # type: ignore[misc]
        def ops_to_not_decompose(self, ep: Any) -> Any:
            ops, check = super().ops_to_not_decompose(ep)

            def pick(node: torch.fx.Node) -> bool:
                val = node.meta.get("val")
                wide = isinstance(val, torch.Tensor) and val.shape[-1] == 24
                return check(node) and not wide

            return ops, pick

    return Refusing() if refuse_wide else XnnpackPartitioner()


def _summary(program: Any) -> tuple[list[str], list[list[str]]]:
    """The program's top-level op targets in order, and each delegate's ops in order."""
    from executorch.exir.lowered_backend_module import LoweredBackendModule

    def ops(graph: torch.fx.Graph) -> list[str]:
        return [str(n.target) for n in graph.nodes if n.op == "call_function"]

    delegates = [
        ops(m.original_module.graph)
        for m in program.graph_module.modules()
        if isinstance(m, LoweredBackendModule)
    ]
    return ops(program.graph), delegates


@pytest.mark.parametrize("refuse_wide", [False, True], ids=["accepts", "refuses"])
def test_same_program_as_executorch(refuse_wide: bool) -> None:
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    model, example = Block().eval(), (torch.randn(2, 16),)

    def lowered(ours: bool) -> Any:
        program = torch.export.export(model, example, strict=False)
        config = EdgeCompileConfig(_check_ir_validity=False)
        partitioners = [_partitioner(refuse_wide)]
        if ours:
            return to_edge_and_lower("forward", program, partitioners, config)
        one = to_edge_transform_and_lower(program, partitioner=partitioners, compile_config=config)
        return one.exported_program("forward")

    theirs, ours = _summary(lowered(False)), _summary(lowered(True))
    assert ours == theirs
    assert ours[1], "something was delegated"
    linears = sum("aten.linear.default" in op for d in ours[1] for op in d)
    assert linears == (1 if refuse_wide else 2)  # the refused one was decomposed
