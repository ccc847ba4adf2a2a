"""One protocol, two implementations with the same method names.

``PteProgram`` runs a ``.pte`` through ``executorch.runtime`` (performance mode);
``EagerProgram`` runs the very same torch method wrappers (reference mode, on cpu, cuda or
npu). Callers never branch on which one they hold.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from etspec import logs, openvino
from etspec.artifact import OpenedArtifact, open_artifact
from etspec.contract import (
    CHAT_TEMPLATE,
    DRAFT_D2T,
    DRAFT_RESET,
    TARGET_RESET,
    TOKENIZER_JSON,
    DraftMetadata,
    TargetMetadata,
    check_pair,
)
from etspec.errors import ArtifactError
from etspec.runtime.prefix_cache import PrefixCache
from etspec.runtime.xnnpack import default_weight_cache, set_weight_cache


class Program(Protocol):
    """A set of named methods over one shared state (the KV caches)."""

    metadata: TargetMetadata | DraftMetadata
    #: Where the program came from (a .pte path, a checkpoint folder), for messages.
    source: str
    #: Whether this is the reference program, whose state can be inspected: the runtime
    #: then checks its invariants (tree tensors, committed KV) at every step.
    reference: bool
    #: Held by a runner while it generates over this program: every runner built over one
    #: load shares its caches, so they take turns (one generation per program at a time).
    lock: threading.Lock
    #: What the program's KV cache holds between requests (``runtime/prefix_cache.py``).
    held: PrefixCache

    def run(self, method: str, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]: ...

    def constant(self, name: str) -> list[Any]: ...

    def tokenizer_json(self) -> bytes | None: ...

    def chat_template(self) -> bytes | None:
        """The checkpoint's chat template as stored (``contract.CHAT_TEMPLATE``), or None."""
        ...

    def weights_bytes(self) -> int: ...

    def cache_tensors(self) -> list[torch.Tensor]:
        """The live K and V buffers where the program exposes them (the reference); [] else."""
        ...


class PteProgram:
    """A loaded etspec ``.pte``. Every program method is loaded (and XNNPACK packs its
    weights) at load time, so a runner's resident memory is set before its first request
    rather than growing by a method's weight copy whenever a request first needs it."""

    reference = False

    def __init__(self, artifact: OpenedArtifact) -> None:
        self.artifact = artifact
        self.metadata = artifact.metadata
        self.source = str(artifact.path)
        self.lock = threading.Lock()
        self.held = PrefixCache()
        self._methods: dict[str, Any] = {}
        self.released_bytes = 0  # artifact bytes freed after loading (``Snapshot``)

    @classmethod
    def load(
        cls, path: str | Path, expect: str | None = None, weight_cache: bool | None = None
    ) -> PteProgram:
        """Load ``path`` and every method in it. ``weight_cache`` (default: on, unless
        ``ETSPEC_XNNPACK_WEIGHT_CACHE=0``) has XNNPACK pack each weight once for all methods
        instead of once per method (``runtime/xnnpack.py``)."""
        program = cls(open_artifact(path, expect))
        constants = {*program.metadata.constant_methods(), TOKENIZER_JSON, CHAT_TEMPLATE, DRAFT_D2T}
        set_weight_cache(default_weight_cache() if weight_cache is None else weight_cache)
        openvino.prepare(program.metadata, program.source)  # its precision, before it loads
        # The first method load probes the CPU and logs it on stderr (etspec.logs).
        with logs.quiet(native=True):
            for name in sorted(program.method_names() - constants):
                program._method(name)
        # Mutable buffers start as whatever the arena held; garbage that happens to be NaN
        # would poison attention even where masked (0 * NaN). Zeroed once here; runners do
        # not zero per request.
        reset = TARGET_RESET if isinstance(program.metadata, TargetMetadata) else DRAFT_RESET
        if reset in program.method_names():
            program.run(reset)
        # Every method is loaded: what the program no longer maps (weights XNNPACK packed)
        # leaves memory, as in the C++ runner (``artifact.Snapshot``).
        snapshot = program.artifact.snapshot
        if snapshot is not None:
            program.released_bytes = snapshot.release_unmapped()
            snapshot.close()
        return program

    @property
    def path(self) -> Path:
        return self.artifact.path

    def method_names(self) -> set[str]:
        return set(self.artifact.program.method_names)

    def _method(self, name: str) -> Any:
        m = self._methods.get(name)
        if m is None:
            if name not in self.artifact.program.method_names:
                raise ArtifactError(f"{self.path} has no method {name!r}")
            m = self._methods[name] = self.artifact.program.load_method(name)
        return m

    def run(self, method: str, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if method == TARGET_RESET:
            self.held.forget()
        return tuple(self._method(method).execute(list(inputs)))

    def constant(self, name: str) -> list[Any]:
        return self.artifact.constant(name)

    def tokenizer_json(self) -> bytes | None:
        return self.artifact.tokenizer_json()

    def chat_template(self) -> bytes | None:
        return self.artifact.chat_template()

    def weights_bytes(self) -> int:
        """The artifact's size: its weights, one copy, as stored (delegates may hold more)."""
        return self.path.stat().st_size

    def cache_tensors(self) -> list[torch.Tensor]:
        return []  # inside the ExecuTorch program's arena


class EagerProgram:
    """The same method wrappers run in torch, on any device torch supports; ``model`` is
    the module they share (its caches are what ``cache_tensors`` shows)."""

    reference = True

    def __init__(
        self,
        methods: dict[str, nn.Module],
        metadata: TargetMetadata | DraftMetadata,
        constants: dict[str, Any] | None = None,
        device: str | torch.device = "cpu",
        model: nn.Module | None = None,
        source: str = "eager program",
    ) -> None:
        self.device = torch.device(device)
        self.methods = {name: m.to(self.device) for name, m in methods.items()}
        self.metadata = metadata
        self.lock = threading.Lock()
        self.held = PrefixCache()
        self._constants = constants or {}
        self.model = model
        self.source = source

    @torch.no_grad()
    def run(self, method: str, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if method == TARGET_RESET:
            self.held.forget()
        out = self.methods[method](*(x.to(self.device) for x in inputs))
        out = out if isinstance(out, tuple) else (out,)
        return tuple(o.cpu() for o in out)

    def tokenizer_json(self) -> bytes | None:
        data = self._constants.get(TOKENIZER_JSON)
        return bytes(data) if data is not None else None

    def chat_template(self) -> bytes | None:
        data = self._constants.get(CHAT_TEMPLATE)
        return bytes(data) if data is not None else None

    def weights_bytes(self) -> int:
        seen: dict[int, int] = {}
        for m in self.methods.values():
            for p in m.parameters():
                seen[id(p)] = p.numel() * p.element_size()
        return sum(seen.values())

    def cache_tensors(self) -> list[torch.Tensor]:
        """The live K and V buffers (reference-mode invariant checks read them)."""
        if self.model is None:
            return []
        return [b for c in self.model.caches() for b in (c.k, c.v)]  # type: ignore[operator]

    def constant(self, name: str) -> list[Any]:
        value = self._constants.get(name)
        if value is None:
            value = self.metadata.constant_methods().get(name)
        if value is None:
            raise KeyError(name)
        return list(value) if isinstance(value, (list, tuple)) else [value]


def load_pair(
    target: str | Path, draft: str | Path, weight_cache: bool | None = None
) -> tuple[PteProgram, PteProgram]:
    """Load a target/draft ``.pte`` pair, rejecting a mismatched pair before any generation."""
    t = PteProgram.load(target, expect="target", weight_cache=weight_cache)
    d = PteProgram.load(draft, expect="draft", weight_cache=weight_cache)
    check_pair(t.metadata, d.metadata)  # type: ignore[arg-type]
    return t, d
