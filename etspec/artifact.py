"""Opening ``.pte`` files and reading their etspec metadata.

Used by export (a draft is exported against a target artifact), by the runtime and by
``etspec inspect``. The header, sizes and integrity trailer are checked before ExecuTorch sees
the file, so a foreign, truncated or damaged file is rejected with a clear message rather
than loading garbage weights or crashing deep in the loader.
"""

from __future__ import annotations

import functools
import hashlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from etspec import logs
from etspec.contract import (
    ARTIFACT_KIND,
    DRAFT_KIND,
    FORMAT_VERSION,
    FORMAT_VERSION_FIELD,
    TARGET_KIND,
    TOKENIZER_JSON,
    TRAILER_MAGIC,
    TRAILER_SIZE,
    DraftMetadata,
    TargetMetadata,
    check_format,
    message,
)
from etspec.errors import ArtifactError

# An ExecuTorch program is a flatbuffer whose file identifier "ET" + 2-digit schema version
# sits at bytes 4..8; an optional extended header ("eh00") at bytes 8.. gives the sizes of the
# flatbuffer and of the data segments (delegate blobs, constants) that follow it.
_FLATBUFFER_ID = slice(4, 8)
_EXTENDED_HEADER = b"eh00"
_MIN_SIZE = 64


def _declared_size(head: bytes) -> int | None:
    """Program bytes (flatbuffer plus segments) the extended header describes, if it has one."""
    if head[8:12] != _EXTENDED_HEADER or int.from_bytes(head[12:16], "little") < 32:
        return None
    program_size, segment_base, segment_size = struct.unpack_from("<QQQ", head, 16)
    return segment_base + segment_size if segment_size else program_size


def trailer(sha256: bytes, length: int) -> bytes:
    """The integrity trailer of a program of ``length`` bytes with digest ``sha256``."""
    return sha256 + length.to_bytes(8, "little") + TRAILER_MAGIC


def seal(program: bytes) -> bytes:
    """``program`` with the integrity trailer the runtimes check before loading it."""
    return program + trailer(hashlib.sha256(program).digest(), len(program))


def check_artifact(path: str | Path) -> Path:
    """Fail with a one-line error unless ``path`` is an intact etspec-exported program.

    Checks the ExecuTorch header, the sizes it declares against the file and the integrity
    trailer's SHA-256, all before ExecuTorch parses the file. The C++ runner makes the same
    checks in the same order, with the same messages.
    """
    p = Path(path)
    if not p.exists():
        raise ArtifactError(message("no_file", path=p))
    if not p.is_file():
        raise ArtifactError(f"{p}: not a file")
    try:
        with p.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(_MIN_SIZE)
            ident = head[_FLATBUFFER_ID]
            if len(head) < _MIN_SIZE or not (ident[:2] == b"ET" and ident[2:].isdigit()):
                raise ArtifactError(message("bad_header", path=p))
            declared = _declared_size(head)
            if declared is not None and size != declared and size < declared + TRAILER_SIZE:
                raise ArtifactError(
                    message("truncated", path=p, size=size, expected=declared + TRAILER_SIZE)
                )
            if size < _MIN_SIZE + TRAILER_SIZE:
                raise ArtifactError(message("no_trailer", path=p, expected=FORMAT_VERSION))
            _check_trailer(p, f, size, declared)
    except OSError as e:
        raise ArtifactError(f"{p}: cannot read ({e.strerror})") from None
    return p


def _check_trailer(p: Path, f: BinaryIO, size: int, declared: int | None) -> None:
    f.seek(size - TRAILER_SIZE)
    trailer = f.read(TRAILER_SIZE)
    digest, length, magic = trailer[:32], trailer[32:40], trailer[40:]
    if magic != TRAILER_MAGIC:
        if declared is None or declared == size:
            raise ArtifactError(message("no_trailer", path=p, expected=FORMAT_VERSION))
        raise ArtifactError(message("damaged", path=p, what=message("damage_trailer")))
    program_size = int.from_bytes(length, "little")
    if program_size != size - TRAILER_SIZE or declared not in (None, program_size):
        raise ArtifactError(message("damaged", path=p, what=message("damage_sizes")))
    sha = hashlib.sha256()
    f.seek(0)
    left = program_size
    while left:
        chunk = f.read(min(left, 1 << 22))
        sha.update(chunk)
        left -= len(chunk)
    if sha.digest() != digest:
        raise ArtifactError(message("damaged", path=p, what=message("damage_digest")))


@dataclass
class OpenedArtifact:
    """A loaded ExecuTorch program with its validated etspec metadata."""

    path: Path
    program: Any  # executorch.runtime.Program
    metadata: TargetMetadata | DraftMetadata

    @property
    def kind(self) -> str:
        return self.metadata.KIND

    def constant(self, name: str) -> list[Any]:
        return _run_constant(self.program, name)

    def tokenizer_json(self) -> bytes | None:
        if TOKENIZER_JSON not in self.program.method_names:
            return None
        (data,) = self.constant(TOKENIZER_JSON)
        return data.numpy().tobytes()


def executorch_runtime() -> Any:
    """ExecuTorch's runtime. Its first import warns about optional CUDA kernels, and its
    thread pool probes the CPU and logs that when first used: both happen here, inside
    ``logs.quiet``, instead of in the middle of a user's first generation."""
    with logs.quiet(native=True):
        from executorch.extension.pybindings import portable_lib
        from executorch.runtime import Runtime

        count = getattr(portable_lib, "_threadpool_get_thread_count", None)
        if count is not None:
            count()  # creates the pool
        _register_quantized_kernels()
    return Runtime.get()


@functools.lru_cache(maxsize=1)
def _register_quantized_kernels() -> None:
    """ExecuTorch's quantized kernels (the int8 embedding lookup of quantized exports) are
    in the wheel's runtime libraries but not linked into its Python bindings: loading the
    library registers them with the runtime the bindings use, as linking it does for the
    C++ runner."""
    import ctypes

    import executorch

    lib = Path(next(iter(executorch.__path__))) / "lib" / "libexecutorch_kernels_quantized.so"
    if lib.is_file():
        ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)


def _run_constant(program: Any, name: str) -> list[Any]:
    if name not in program.method_names:
        raise KeyError(name)
    return list(program.load_method(name).execute([]))


def open_artifact(path: str | Path, expect: str | None = None) -> OpenedArtifact:
    """Load a ``.pte`` and read its metadata; ``expect`` is "target" or "draft" when known."""
    p = check_artifact(path)
    runtime = executorch_runtime()
    try:
        # The loader logs its diagnostics on stderr itself; ours is the one-line error.
        with logs.quiet(native=True):
            program = runtime.load_program(p)
    except Exception as e:  # the loader raises bare RuntimeError/ValueError on bad files
        raise ArtifactError(message("cannot_load", path=p, error=e)) from None
    try:
        (kind,) = _run_constant(program, ARTIFACT_KIND)
    except Exception:
        raise ArtifactError(message("not_etspec", path=p)) from None
    classes = {TARGET_KIND: TargetMetadata, DRAFT_KIND: DraftMetadata}
    if kind not in classes:
        raise ArtifactError(message("unknown_kind", path=p, kind=kind))
    if expect is not None and kind != expect:
        raise ArtifactError(message("wrong_kind", path=p, kind=kind, expected=expect))
    try:
        (version,) = _run_constant(program, FORMAT_VERSION_FIELD)
    except Exception:
        raise ArtifactError(message("no_version", path=p)) from None
    check_format(kind, int(version), str(p))
    metadata = classes[kind].read(lambda name: _run_constant(program, name))
    return OpenedArtifact(p, program, metadata)  # type: ignore[arg-type]


def sha256_hex(data: bytes | None) -> str:
    return hashlib.sha256(data).hexdigest() if data else ""
