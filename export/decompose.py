"""One method from ATen to the edge dialect and lowered, with its partitioner's ops kept
whole, in one re-trace of the program where ExecuTorch takes three.

ExecuTorch 1.5.1's ``to_edge_transform_and_lower`` re-traces a method once to functionalize
it, once to decompose every op the partitioner does not keep, and, for a partitioner that
checks each node (XNNPACK does), once more after marking the kept nodes it accepts, so that
the kept nodes it refuses are decomposed too. Each re-trace of a Gemma 3 270M method takes
6-7 s in the exporting process, which is the export's critical path. Here functionalizing
and decomposing are one re-trace (``run_decompositions`` does both), and the third runs
only when a kept node is refused (none is, on any method of the families etspec exports):
the program is otherwise the one ExecuTorch builds, op for op.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch


def to_edge_and_lower(
    name: str, program: torch.export.ExportedProgram, partitioners: list[Any], config: Any
) -> torch.export.ExportedProgram:
    """``to_edge_transform_and_lower({name: program}, partitioners, config)``'s program,
    with fewer re-traces where the method has one node-checking partitioner (otherwise
    ExecuTorch's own path)."""
    from executorch.exir import to_edge_transform_and_lower

    edge = _to_edge(name, program, partitioners, config)
    if edge is None:
        one = to_edge_transform_and_lower(
            {name: program}, partitioner=partitioners, compile_config=config
        )
        return one.exported_program(name)
    return _lower(name, *edge, partitioners[0], config)


def _to_edge(
    name: str, program: Any, partitioners: list[Any], config: Any
) -> tuple[Any, set[Any]] | None:
    """The edge program ExecuTorch's ``_gen_edge_manager_for_partitioners`` builds for one
    method and one partitioner that checks nodes, and the ops kept whole in it; None where
    that is not the case."""
    from executorch.exir.program._program import (
        _default_decomposition_table,
        _generate_edge_program,
        _remove_invalid_ops_for_not_decompose,
        _replace_aten_ops_with_transformed_ops,
        _restore_transformed_ops_to_aten_ops,
    )

    if len(partitioners) != 1:
        return None
    (partitioner,) = partitioners
    program = partitioner.transform_for_pre_decomposition(program)
    ops, check = partitioner.ops_to_not_decompose(program)
    if check is None:  # ExecuTorch decomposes such a method in one pass already
        return None
    ops = _remove_invalid_ops_for_not_decompose(ops)
    table = _default_decomposition_table()
    for op in ops:
        table.pop(op, None)
    program = program.run_decompositions(table)  # functionalized and decomposed at once
    _, check = partitioner.ops_to_not_decompose(program)  # its check reads this program
    calls = [n for n in _nodes(program) if n.op == "call_function" and n.target in ops]
    if all(check(n) for n in calls):
        kept = {n.target for n in calls}
    else:  # ExecuTorch's last pass: the kept ops it refuses are decomposed after all
        kept = set(_replace_aten_ops_with_transformed_ops(name, program, {name: [partitioner]}))
        program = program.run_decompositions(_default_decomposition_table())
        _restore_transformed_ops_to_aten_ops(program)
    # As ExecuTorch records them: later programs' verifiers accept the kept ops.
    config._core_aten_ops_exception_list = list(set(config._core_aten_ops_exception_list) | kept)
    return _generate_edge_program(config, program, preserve_ops=list(kept)), kept


def _lower(name: str, edge: Any, kept: set[Any], partitioner: Any, config: Any) -> Any:
    """``edge`` lowered by ``partitioner``, checked as ``to_edge_transform_and_lower``
    checks it: no node the partitioner kept whole may be left outside its delegate."""
    from executorch.exir import EdgeProgramManager
    from executorch.exir.program._program import (
        _remove_invalid_ops_for_not_decompose,
        _sanity_check_graph_for_non_decomp_ops,
    )

    manager = EdgeProgramManager({name: edge}, None, config, list(kept))
    lowered = manager.to_backend({name: partitioner}).exported_program(name)
    ops, check = partitioner.ops_to_not_decompose(lowered)
    _sanity_check_graph_for_non_decomp_ops(
        name,
        lowered,
        set(_remove_invalid_ops_for_not_decompose(ops)),
        check,
        partitioner_name=type(partitioner).__name__,
        generate_error=True,
    )
    return lowered


def _nodes(program: Any) -> Iterator[torch.fx.Node]:
    """Every node of ``program``'s graph and of its control-flow branches."""
    from executorch.exir.graph_module import get_control_flow_submodules

    yield from program.graph.nodes
    for _, submodule, _ in get_control_flow_submodules(program.graph_module):
        yield from submodule.graph.nodes
