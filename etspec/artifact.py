"""Opening ``.pte`` files and reading their etspec metadata.

Used by export (a draft is exported against a target artifact), by the runtime and by
``etspec inspect``. The header, sizes and integrity trailer are checked before ExecuTorch sees
the file, so a foreign, truncated or damaged file is rejected with a clear message rather
than loading garbage weights or crashing deep in the loader.
"""

from __future__ import annotations

import functools
import hashlib
import mmap
import os
import shutil
import struct
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from etspec import logs
from etspec.contract import (
    ARTIFACT_KIND,
    CHAT_TEMPLATE,
    DRAFT_D2T,
    DRAFT_KIND,
    FORMAT_VERSION,
    FORMAT_VERSION_FIELD,
    TARGET_DECODE,
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
    """Fail with a one-line error unless ``path`` is an intact etspec-exported program
    (``read_artifact``, the bytes dropped)."""
    return read_artifact(path)[0]


def read_artifact(path: str | Path) -> tuple[Path, bytes]:
    """The bytes of ``path``, read once, after checking they are an intact etspec-exported
    program: the ExecuTorch header, the sizes it declares and the integrity trailer's
    SHA-256, all before ExecuTorch parses them. The C++ runner makes the same checks in the
    same order, with the same messages."""
    snap = Snapshot.take(path, private=False)
    return snap.path, bytes(snap.data)


def _check_head(p: Path, head: bytes, size: int) -> int | None:
    """Refuse what the first bytes and the size already rule out; returns the program size
    the header declares (None when it declares none)."""
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
    return declared


class Snapshot:
    """The checked bytes of an artifact, held where no other process can change them.

    The runtime loads these very bytes (``open_artifact``), not the file again: what was
    checked is what runs, and a file truncated or rewritten in place while it is loaded
    (``cp`` over it) cannot take the process down with SIGBUS, as a mapping of the file
    would. On Linux the bytes live in an anonymous in-memory file (``memfd``) that ExecuTorch
    maps like a ``.pte``: once every method is loaded, the ranges it no longer maps (the
    weights XNNPACK packed, then freed) are released (``release_unmapped``), as the C++
    runner's mapping releases them. Elsewhere the bytes are held in memory whole.
    """

    def __init__(self, path: Path, data: Any, fd: int | None) -> None:
        self.path = path
        self.data = data  # bytes, or a read-only mmap of the memfd
        self.fd = fd

    @classmethod
    def take(cls, path: str | Path, private: bool = True) -> Snapshot:
        p = Path(path)
        if not p.exists():
            raise ArtifactError(message("no_file", path=p))
        if not p.is_file():
            raise ArtifactError(f"{p}: not a file")
        fd = None
        try:
            # The header first: a file that is no artifact (a multi-GB image, a sparse file)
            # is refused before any of it is copied.
            with p.open("rb") as f:
                _check_head(p, f.read(_MIN_SIZE), os.fstat(f.fileno()).st_size)
            if private and hasattr(os, "memfd_create"):
                fd = os.memfd_create(f"etspec:{p.name}", os.MFD_CLOEXEC)
                with p.open("rb") as src, open(fd, "wb", closefd=False) as dst:
                    shutil.copyfileobj(src, dst, 1 << 24)
                size = os.fstat(fd).st_size
                data: Any = mmap.mmap(fd, size, prot=mmap.PROT_READ) if size else b""
            else:
                data = p.read_bytes()
        except OSError as e:
            if fd is not None:
                os.close(fd)
            raise ArtifactError(f"{p}: cannot read ({e.strerror})") from None
        snap = cls(p, data, fd)
        try:
            snap._check()
        except ArtifactError:
            snap.close()
            raise
        return snap

    def _check(self) -> None:
        p, data = self.path, self.data
        declared = _check_head(p, bytes(data[:_MIN_SIZE]), len(data))
        _check_trailer(p, data, declared)

    def source(self) -> Any:
        """What ``Runtime.load_program`` loads: the memfd by path (ExecuTorch maps it, and
        frees what it is done with), or the bytes."""
        if self.fd is None:
            return self.data
        return f"/proc/self/fd/{self.fd}"

    def loaded(self) -> None:
        """The program has been loaded from ``source``: this snapshot's own view goes."""
        if isinstance(self.data, mmap.mmap):
            self.data.close()
            self.data = b""

    def release_unmapped(self) -> int:
        """Frees every range of the memfd that nothing maps any more (call once every
        method is loaded: later loads of a released range would read zeros); returns the
        bytes released."""
        if self.fd is None:
            return 0
        size = os.fstat(self.fd).st_size
        keep = sorted(_mapped_ranges(os.fstat(self.fd).st_ino))
        released, at = 0, 0
        for start, end in [*keep, (size, size)]:
            if start > at:
                released += _punch_hole(self.fd, at, start - at)
            at = max(at, end)
        return released

    def close(self) -> None:
        if isinstance(self.data, mmap.mmap):
            self.data.close()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _mapped_ranges(inode: int) -> list[tuple[int, int]]:
    """(file offset, end) of each mapping of the file with ``inode`` in this process."""
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            if len(fields) < 6 or int(fields[4]) != inode or "memfd:" not in line:
                continue
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            offset = int(fields[2], 16)
            out.append((offset, offset + hi - lo))
    return out


def _punch_hole(fd: int, offset: int, length: int) -> int:
    """Frees ``length`` bytes at ``offset`` of ``fd`` (they read as zeros afterwards)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    punch_hole_keep_size = 0x02 | 0x01  # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
    return length if libc.fallocate(fd, punch_hole_keep_size, offset, length) == 0 else 0


def _check_trailer(p: Path, data: bytes, declared: int | None) -> None:
    size = len(data)
    trailer = data[size - TRAILER_SIZE :]
    digest, length, magic = trailer[:32], trailer[32:40], trailer[40:]
    if magic != TRAILER_MAGIC:
        if declared is None or declared == size:
            raise ArtifactError(message("no_trailer", path=p, expected=FORMAT_VERSION))
        raise ArtifactError(message("damaged", path=p, what=message("damage_trailer")))
    program_size = int.from_bytes(length, "little")
    if program_size != size - TRAILER_SIZE or declared not in (None, program_size):
        raise ArtifactError(message("damaged", path=p, what=message("damage_sizes")))
    if hashlib.sha256(memoryview(data)[:program_size]).digest() != digest:
        raise ArtifactError(message("damaged", path=p, what=message("damage_digest")))


@dataclass
class OpenedArtifact:
    """A loaded ExecuTorch program with its validated etspec metadata."""

    path: Path
    program: Any  # executorch.runtime.Program
    metadata: TargetMetadata | DraftMetadata
    snapshot: Snapshot | None = None  # the bytes the program runs from

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

    def chat_template(self) -> bytes | None:
        """The stored chat template (``contract.CHAT_TEMPLATE``), or None."""
        if CHAT_TEMPLATE not in self.program.method_names:
            return None
        (data,) = self.constant(CHAT_TEMPLATE)
        return data.numpy().tobytes()

    def problems(self) -> list[str]:
        """What would fail when this artifact is used, found by reading it (``etspec
        inspect``): a tokenizer that does not parse, a draft whose ``d2t`` leaves the target
        vocabulary. The same messages the runtimes give at load or first use."""
        found = []
        data = self.tokenizer_json()
        if data is not None:
            from tokenizers import Tokenizer

            try:
                Tokenizer.from_str(data.decode("utf-8"))
            except Exception as e:  # the parser's text, whatever its type
                found.append(message("tokenizer_unreadable", reason=e))
        meta = self.metadata
        if isinstance(meta, DraftMetadata) and DRAFT_D2T in self.program.method_names:
            try:
                draft_target_ids(self.constant(DRAFT_D2T)[0], meta, self.path)
            except ArtifactError as e:
                found.append(str(e))
        return found


def draft_target_ids(d2t: Any, meta: DraftMetadata, path: str | Path) -> Any:
    """Draft id i's target id, ``i + d2t[i]`` ([Vd] long); refuses a map of the wrong size
    or one leaving the target vocabulary (the first verify would index past its logits)."""
    import torch

    d2t = torch.as_tensor(d2t, dtype=torch.long)
    if d2t.shape != (meta.draft_vocab_size,):
        raise ArtifactError(message("d2t_size", path=path))
    ids = torch.arange(meta.draft_vocab_size) + d2t
    if len(ids) and not 0 <= int(ids.min()) <= int(ids.max()) < meta.target_vocab_size:
        raise ArtifactError(message("d2t_range", path=path))
    return ids


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
    snap = Snapshot.take(path)
    p = snap.path
    runtime = executorch_runtime()
    try:
        # The loader logs its diagnostics on stderr itself; ours is the one-line error.
        with logs.quiet(native=True):
            program = runtime.load_program(snap.source())
    except Exception as e:  # the loader raises bare RuntimeError/ValueError on bad files
        snap.close()
        raise ArtifactError(message("cannot_load", path=p, error=e)) from None
    snap.loaded()
    try:
        opened = _opened(p, program, expect, snap)
    except Exception:
        snap.close()
        raise
    # Our descriptor of the memfd goes with the artifact; the program holds its own.
    weakref.finalize(opened, snap.close)
    return opened


def _opened(p: Path, program: Any, expect: str | None, snap: Snapshot) -> OpenedArtifact:
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
    if isinstance(metadata, TargetMetadata):
        _check_logits(program, metadata)
    return OpenedArtifact(p, program, metadata, snap)  # type: ignore[arg-type]


def _check_logits(program: Any, meta: TargetMetadata) -> None:
    """The decode's logits are ``vocab_size`` wide, read from the method's declared output
    (nothing runs): a forged ``vocab_size`` made the runtimes sample past the logits or
    disagree (Python emitted ids outside a forged 8, C++ emitted EOS)."""
    if TARGET_DECODE not in program.method_names:
        raise ArtifactError(message("missing_metadata", name=TARGET_DECODE))
    width = program.metadata(TARGET_DECODE).output_tensor_meta(0).sizes()[-1]
    if width != meta.vocab_size:
        raise ArtifactError(
            message(
                "metadata_logits",
                name="vocab_size",
                value=meta.vocab_size,
                method=TARGET_DECODE,
                width=width,
            )
        )


def sha256_hex(data: bytes | None) -> str:
    return hashlib.sha256(data).hexdigest() if data else ""
