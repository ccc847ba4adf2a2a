"""Shared lowering: a dict of method wrappers -> one ExecuTorch program with a shared cache."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import multiprocessing
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import torch

from etspec import logs
from etspec.artifact import seal, trailer
from etspec.contract import OPENVINO
from etspec.errors import ExportError
from etspec.export.backends import backend as backend_entry
from etspec.export.backends import check_options
from etspec.export.decompose import to_edge_and_lower
from etspec.files import write_atomically
from etspec.models.methods import Methods
from etspec.progress import Progress

log = logging.getLogger(__name__)


__all__ = ["check_options", "lower", "lower_to_file"]


def check_space(path: Path, need: int) -> None:
    """Refuse an export whose artifact cannot fit the free space left in its folder (``need``
    is a lower bound: the weights as the recipe stores them)."""
    free = shutil.disk_usage(path.parent).free
    if free < need:
        raise ExportError(
            f"not enough space for {path}: the artifact needs at least {need / 1e6:.0f} MB, "
            f"{free / 1e6:.0f} MB are free there; free space or choose another -o"
        )


def weights_lower_bound(model: torch.nn.Module, quantized: bool) -> int:
    """Bytes the artifact holds at least: every parameter once, at fp32 or (quantized) at the
    narrowest width a recipe stores (int4: half a byte)."""
    numel = sum(p.numel() for p in model.parameters())
    return numel // 2 if quantized else numel * 4


def lower(
    methods: Methods,
    constant_methods: dict[str, Any],
    backend: str,
    desc: str,
    share_cache: bool = True,
    keep_out: frozenset[str] = frozenset(),
) -> bytes:
    """Export every method, lower them together and serialize one program, sealed with the
    integrity trailer (in memory: for small programs and tests; exports stream with
    ``lower_to_file``).

    All wrappers hold the same model, so its cache buffers become mutable buffers shared by
    every method (``share_mutable_buffers``); without that each method silently reads its
    own stale copy of the cache. ``share_cache=False`` exists only so tests can prove they
    detect that failure.
    """
    with (
        logs.quiet(),
        _one_copy_of_each_blob(),
        _provenance_shared(),
        _weights_shared_with_delegates(backend),
        _preprocess_in_background(backend) as background,
        Progress(desc) as progress,
    ):
        program = _lower(
            methods, constant_methods, backend, progress, background, share_cache, keep_out
        )
        return seal(program.buffer)


def lower_to_file(
    methods: Methods,
    constant_methods: dict[str, Any],
    backend: str,
    progress: Progress,
    path: Path,
    keep_out: frozenset[str] = frozenset(),
    quantized: bool = False,
    replace: bool = True,
) -> None:
    """``lower`` streamed into ``path`` (atomically): the serialized program is written
    piece by piece and hashed on the way, never joined into one buffer (that and the
    sealed copy were two more copies of every weight at export's peak). ``replace=False``:
    refused if ``path`` appeared meanwhile (``write_atomically``). Each stage is reported
    on ``progress``."""
    model = next(iter(methods.values()))[0]
    check_space(path, weights_lower_bound(model, quantized))
    with (
        logs.quiet(),
        _one_copy_of_each_blob(),
        _provenance_shared(),
        _weights_shared_with_delegates(backend),
        _preprocess_in_background(backend) as background,
    ):
        program = _lower(
            methods, constant_methods, backend, progress, background, True, keep_out, quantized
        )
        progress.stage(f"write {path.name}")
        try:
            write_atomically(path, functools.partial(_write_sealed, program), replace)
        except OSError as e:  # the folder filled up or went away while lowering
            raise ExportError(
                f"cannot write {path} ({e.strerror or type(e).__name__}); nothing was written: "
                "free space or choose another -o"
            ) from None


def _write_sealed(program: Any, f: BinaryIO) -> None:
    """The program's pieces, then the integrity trailer over them (``artifact.seal``)."""
    digest, length = hashlib.sha256(), 0

    class Hashing:
        def write(self, data: bytes) -> int:
            nonlocal length
            digest.update(data)
            length += len(data)
            return f.write(data)

    program.write_to_file(Hashing())
    f.write(trailer(digest.digest(), length))


@contextlib.contextmanager
def _one_copy_of_each_blob() -> Iterator[None]:
    """Every method's delegate serializes its own bytes of each weight before the program's
    data store merges identical blobs: five methods held five copies of every weight at
    once (Gemma 3 270M fp32: 5 GB). Identical blobs are handed on as one object instead."""
    from executorch.exir._serialize._named_data_store import NamedDataStore

    seen: dict[tuple[int, bytes], bytes] = {}
    original = NamedDataStore.add_named_data

    def add_named_data(self: Any, key: str, data: Any, *args: Any, **kwargs: Any) -> None:
        original(self, key, _one_of(seen, data), *args, **kwargs)

    NamedDataStore.add_named_data = add_named_data  # type: ignore[method-assign]
    try:
        yield
    finally:
        NamedDataStore.add_named_data = original  # type: ignore[method-assign]


@contextlib.contextmanager
def _weights_shared_with_delegates(backend: str) -> Iterator[None]:
    """ExecuTorch deep-copies every delegated subgraph of every method before the backend
    preprocesses it (``BackendDetails.copy_exported_program_for_preprocess``, the hook a
    backend overrides), parameters included and all methods at once: the export's peak was
    a copy of the weights per method. XNNPACK's and OpenVINO's preprocessing read weights
    and never write them, so the copies here share the parameter and constant tensors and
    copy only the graphs (the tests hold every export to its eager reference)."""
    from executorch.backends.xnnpack.xnnpack_preprocess import XnnpackBackend

    backends: list[Any] = [XnnpackBackend]
    if backend == OPENVINO:  # its preprocessing imports OpenVINO: only when lowering to it
        from executorch.backends.openvino.preprocess import OpenvinoBackend

        backends.append(OpenvinoBackend)
    name = "copy_exported_program_for_preprocess"
    own = {b: b.__dict__.get(name) for b in backends}  # inherited from BackendDetails in 1.5.1

    def copy_sharing_weights(cls: Any, edge_program: Any, compile_specs: Any) -> Any:
        import copy

        shared = [*edge_program.state_dict.values(), *edge_program.constants.values()]
        memo = {id(t): t for t in shared if isinstance(t, torch.Tensor)}
        return copy.deepcopy(edge_program, memo)

    for b in backends:
        setattr(b, name, classmethod(copy_sharing_weights))
    try:
        yield
    finally:
        for b, method in own.items():
            if method is None:
                delattr(b, name)
            else:
                setattr(b, name, method)


@contextlib.contextmanager
def _provenance_shared() -> Iterator[None]:
    """torch.fx records each node's provenance (``meta["from_node"]``, a chain of
    ``NodeSource`` records growing by one link per pass), and each new node's record
    deep-copies the chain of the node it replaces: every pass of to_edge and of XNNPACK's
    preprocess copies every node's whole history again (profiled: 33 s of Gemma 3 270M's
    export in the parent alone). The records are never changed once made (a pass appends to
    a node's own list, never to a record's), so the new record shares them in a list of its
    own; the artifact is byte for byte the same."""
    from torch.fx import traceback as fx_traceback

    cls = fx_traceback.NodeSource
    original = cls.__init__

    def shared(self: Any, node: Any, pass_name: str = "", action: Any = None) -> None:
        history = node.meta.get("from_node") if node is not None else None
        if history is not None:
            node.meta["from_node"] = []  # the original's deepcopy then copies nothing
        try:
            original(self, node, pass_name, action)
        finally:
            if history is not None:
                node.meta["from_node"] = history
        if history is not None:
            self.from_node = list(history)

    cls.__init__ = shared  # type: ignore[method-assign]
    try:
        yield
    finally:
        cls.__init__ = original  # type: ignore[method-assign]


# The processes a method's lowering may keep busy: the exporting process and N-1 forked
# workers preprocessing its partitions; more than the cores it may use only add memory.
PREPROCESS_WORKERS_ENV = "ETSPEC_EXPORT_WORKERS"


def _preprocess_workers() -> int:
    value = os.environ.get(PREPROCESS_WORKERS_ENV, "").strip()
    try:
        return max(1, int(value) if value else len(os.sched_getaffinity(0)))
    except (ValueError, AttributeError):
        return os.cpu_count() or 1


_PREPROCESS_JOBS: tuple[Any, dict[str, list[Any]], dict[str, list[Any]]] | None = None
_PENDING = b"etspec: preprocessed in a worker, result pending "


def _preprocess_one(job: tuple[str, int]) -> Any:
    """In a forked worker: XNNPACK's preprocess of one partition of one method, from the
    programs the parent held when it forked (nothing is pickled on the way in)."""
    assert _PREPROCESS_JOBS is not None
    backend_cls, programs, specs = _PREPROCESS_JOBS
    method, i = job
    torch.set_num_threads(1)  # the workers are the parallelism; no thread pools per worker
    return backend_cls.preprocess(programs[method][i], specs[method][i])


class _Preprocessing:
    """XNNPACK's preprocessing of the methods already partitioned, running in forked
    workers while the exporting process decomposes and partitions the next method."""

    def __init__(self) -> None:
        self.workers = _preprocess_workers()
        self.pending: dict[bytes, tuple[Any, int]] = {}  # placeholder -> (results, index)
        self.pools: list[Any] = []

    def fork(self) -> bool:
        return self.workers >= 2 and "fork" in multiprocessing.get_all_start_methods()

    def submit(self, cls: Any, programs: dict[str, list[Any]], specs: dict[str, list[Any]]) -> Any:
        """Start the partitions' preprocess in a worker forked now; placeholders meanwhile
        (``fill`` puts the results in the lowered modules)."""
        from executorch.exir.backend.backend_details import PreprocessResult

        global _PREPROCESS_JOBS
        jobs = [(m, i) for m, progs in programs.items() for i in range(len(progs))]
        _PREPROCESS_JOBS = (cls, programs, specs)
        try:  # the worker sees the programs as they are at this fork
            pool = multiprocessing.get_context("fork").Pool(min(len(jobs), self.workers - 1))
        finally:
            _PREPROCESS_JOBS = None
        results = pool.map_async(_preprocess_one, jobs, chunksize=1)
        pool.close()
        self.pools.append(pool)
        out: dict[str, list[Any]] = {m: [] for m in programs}
        for n, (m, _) in enumerate(jobs):
            mark = _PENDING + f"{len(self.pending)}".encode()
            self.pending[mark] = (results, n)
            out[m].append(PreprocessResult(processed_bytes=mark, debug_handle_map={}))
        return out

    def fill(self, programs: dict[str, Any]) -> None:
        """Wait for every worker and put its results in the lowered modules holding their
        placeholders; identical weight blobs of different methods become one object, as
        ``_one_copy_of_each_blob`` makes them in one process."""
        from executorch.exir.lowered_backend_module import LoweredBackendModule

        seen: dict[tuple[int, bytes], bytes] = {}
        for program in programs.values():
            for module in program.graph_module.modules():
                if not isinstance(module, LoweredBackendModule):
                    continue
                mark = module.processed_bytes
                if mark not in self.pending:
                    continue
                results, n = self.pending.pop(mark)
                result = results.get()[n]
                store = result.data_store_output
                if store is not None:
                    store.buffers = [_one_of(seen, b) for b in store.buffers]
                module._processed_bytes = result.processed_bytes
                module._named_data_store_output = store
                module.meta["debug_handle_map"] = result.debug_handle_map
                if result._delegate_info_meta is not None:
                    module.meta["_delegate_info_meta"] = result._delegate_info_meta
        assert not self.pending, "a preprocessed partition found no lowered module"
        for pool in self.pools:
            pool.join()


@contextlib.contextmanager
def _preprocess_in_background(backend: str) -> Iterator[_Preprocessing]:
    """XNNPACK's preprocess re-traces each method's graph once per pass: two thirds of
    Gemma 3 270M's lowering (measured: 68% of 398 s), and ExecuTorch runs it method after
    method in the exporting process, after every method is decomposed and partitioned.
    ``_lower`` lowers the methods one at a time, and each method's preprocessing runs in a
    worker forked when it is partitioned, beside the decomposition of the next; ``fill``
    collects the results before the program is emitted.

    ExecuTorch deep-copies every partition's program before preprocessing it, so that the
    passes leave the program it keeps untouched (measured without those copies: Gemma 3
    270M's lowering 321 -> 308 s, the artifact byte for byte the same).
    A forked worker's passes change only its own copy-on-write pages, so the copies are made
    only where preprocess runs in this process (``ETSPEC_EXPORT_WORKERS=1``, or no fork)."""
    from executorch.backends.xnnpack.xnnpack_preprocess import XnnpackBackend

    name, copy_name = "preprocess_multimethod", "copy_exported_program_for_preprocess"
    own = XnnpackBackend.__dict__.get(name)  # inherited from BackendDetails in 1.5.1
    own_copy = XnnpackBackend.__dict__.get(copy_name)
    serial = XnnpackBackend.preprocess_multimethod
    copy = XnnpackBackend.copy_exported_program_for_preprocess
    background = _Preprocessing()

    def in_background(cls: Any, programs: dict[str, list[Any]], specs: dict[str, list[Any]]) -> Any:
        if not background.fork():
            # Here the passes run in this process: on copies, as ExecuTorch makes them.
            copies = {m: [copy(p, s) for p, s in zip(progs, specs[m], strict=True)]
                      for m, progs in programs.items()}  # fmt: skip
            return serial(copies, specs)
        return background.submit(cls, programs, specs)

    def uncopied(cls: Any, edge_program: Any, compile_specs: Any) -> Any:
        return edge_program

    XnnpackBackend.preprocess_multimethod = classmethod(in_background)  # type: ignore[method-assign,assignment]
    XnnpackBackend.copy_exported_program_for_preprocess = classmethod(uncopied)  # type: ignore[method-assign,assignment]
    try:
        yield background
    finally:
        for pool in background.pools:
            pool.terminate()  # after fill, a no-op; after a failure, no orphaned worker
        for attr, method in ((name, own), (copy_name, own_copy)):
            if method is None:
                delattr(XnnpackBackend, attr)
            else:
                setattr(XnnpackBackend, attr, method)


def _one_of(seen: dict[tuple[int, bytes], bytes], data: Any) -> Any:
    """``data``, or the first blob of its length and hash seen (large blobs only)."""
    if isinstance(data, bytes) and len(data) >= 1 << 16:
        return seen.setdefault((len(data), hashlib.sha256(data).digest()), data)
    return data


class _SharedBufferPlanning:
    """ExecuTorch's memory planning (``MemoryPlanningAlgorithmSuite``) without a hole the
    size of the shared caches in every method's activation arena.

    With ``share_mutable_buffers``, ExecuTorch 1.5.1 places the caches in one arena of their
    own (mem_id 2), but each in-place cache write (``index_put_``) is also a graph output
    whose spec the output node still holds from before the write was aliased onto its
    buffer; the planner then gives that stale spec the buffer's size in the activation arena,
    for the whole call, and nothing ever uses it. Runtimes allocate every arena when they
    load a method, so each method reserved one cache's worth of memory more than it uses
    (Gemma 3 270M at 4,096 tokens: 152 MB per method; with this, decode plans 9.5 MB and the
    widest verify 25.8 MB). Untouched pages cost little resident memory (the C++ runner:
    763 -> 747 MB), but an allocator that commits what it is asked for, as on many devices,
    pays all of it. Pointing those outputs at their buffer's own spec lets the
    shared-buffer placement cover them, as it covers the buffer itself.
    """

    def __init__(self) -> None:
        from executorch.exir.memory_planning import MemoryPlanningAlgorithmSuite

        self.suite = MemoryPlanningAlgorithmSuite()

    def __call__(self, alignment, specs, graph_module, graph_signature, extra_padding):  # type: ignore[no-untyped-def]
        stale: set[int] = set()
        if graph_signature is not None:
            holders = {
                graph_signature.inputs_to_buffers[n.target]: n.meta["spec"]
                for n in graph_module.graph.nodes
                if n.op == "placeholder" and n.target in graph_signature.inputs_to_buffers
            }
            out = next(n for n in graph_module.graph.nodes if n.op == "output")
            out_specs = list(out.meta["spec"])
            for i, arg in enumerate(out.args[0]):
                fqn = graph_signature.buffers_to_mutate.get(getattr(arg, "name", None))
                if fqn is not None and fqn in holders:
                    stale.add(id(out_specs[i]))
                    out_specs[i] = holders[fqn]
            out.meta["spec"] = tuple(out_specs)
        kept = [spec for spec in specs if id(spec) not in stale]
        return self.suite(alignment, kept, graph_module, graph_signature, extra_padding)


def _lower(
    methods: Methods,
    constant_methods: dict[str, Any],
    backend: str,
    progress: Progress,
    background: _Preprocessing,
    share_cache: bool,
    keep_out: frozenset[str] = frozenset(),
    quantized: bool = False,
) -> Any:
    from executorch.exir import (
        EdgeCompileConfig,
        EdgeProgramManager,
        ExecutorchBackendConfig,
    )
    from executorch.exir.passes import MemoryPlanningPass

    make_partitioners = backend_entry(backend).partitioner
    partitioner = make_partitioners(keep_out) if make_partitioners else []
    exported = {}
    progress.expect(2 * len(methods) + 2)
    config = EdgeCompileConfig(_check_ir_validity=False)
    with torch.no_grad():
        for name, (module, example, dynamic) in methods.items():
            progress.stage(f"export {name}")
            exported[name] = torch.export.export(
                module, example, dynamic_shapes=dynamic, strict=False
            )
        # One method at a time, so that each method's preprocessing (in the background)
        # runs beside the next one's decomposition and partitioning.
        lowered = {}
        for name in list(exported):
            progress.stage(f"lower {name} to {backend}")
            lowered[name] = to_edge_and_lower(name, exported.pop(name), partitioner, config)
        progress.stage(f"finish lowering to {backend}")
        background.fill(lowered)
        edge = EdgeProgramManager(lowered, constant_methods, config)
        if quantized:
            for name in edge.methods:
                _explicit_dequantize_dtype(edge.exported_program(name).graph_module)
        progress.stage("emit the program")
        program = edge.to_executorch(
            ExecutorchBackendConfig(
                memory_planning_pass=MemoryPlanningPass(
                    memory_planning_algo=_SharedBufferPlanning() if share_cache else None,
                    share_mutable_buffers=share_cache,
                ),
                emit_mutable_buffer_names=True,
                # Cache writes (index_put) stay outside the delegate; functional, each one
                # copied its whole buffer and copied it back. In place they touch only the
                # written rows (measured: decode 8.9 -> 5.2 ms on the bundled target).
                run_reinplace_pass=True,
                # Quantized embeddings left outside the delegate become ExecuTorch's
                # quantized embedding kernels (dequantize + embedding fused).
                do_quant_fusion_and_const_prop=quantized,
            )
        )
        return program


def _explicit_dequantize_dtype(gm: torch.fx.GraphModule) -> None:
    """Spell out the output dtype of every torchao ``dequantize_affine`` in ``gm``.

    Export drops the argument when it is the default (fp32), and ExecuTorch's quantized
    embedding fusion then picks the kernel variant that writes in the scales' dtype: with
    fp16 scales (the int4 table's) it wrote fp16 into the fp32 output (NaN). With the dtype
    spelled out it picks ``embedding_4bit.dtype``, which dequantizes in fp32 as torchao does
    (measured: identical to the eager lookup)."""
    changed = False
    for node in gm.graph.nodes:
        op = getattr(node.target, "_op", node.target)  # edge dialect wraps the aten overload
        if (
            node.op == "call_function"
            and str(op) == "torchao.dequantize_affine.default"
            and len(node.args) < 8
            and "output_dtype" not in node.kwargs
        ):
            node.args = (*node.args, node.meta["val"].dtype)
            changed = True
    if changed:
        gm.recompile()


def as_uint8(data: bytes) -> torch.Tensor:
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).clone()
