"""Opening ``.pte`` files and reading their etspec metadata.

Used by export (a draft is exported against a target artifact), by the runtime and by
``etspec inspect``. The header is checked before ExecuTorch sees the file, so a foreign or
truncated file is rejected with a clear message rather than failing deep in the loader.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from etspec.contract import (
    TOKENIZER_JSON,
    DraftMetadata,
    TargetMetadata,
    check_format,
    message,
)
from etspec.errors import ArtifactError

# An ExecuTorch program is a flatbuffer whose file identifier "ET" + 2-digit schema version
# sits at bytes 4..8.
_FLATBUFFER_ID = slice(4, 8)
_MIN_SIZE = 64


def check_header(path: str | Path) -> Path:
    """Fail with a one-line error unless ``path`` looks like an ExecuTorch program."""
    p = Path(path)
    if not p.exists():
        raise ArtifactError(message("no_file", path=p))
    if not p.is_file():
        raise ArtifactError(f"{p}: not a file")
    try:
        with p.open("rb") as f:
            head = f.read(_MIN_SIZE)
    except OSError as e:
        raise ArtifactError(f"{p}: cannot read ({e.strerror})") from None
    ident = head[_FLATBUFFER_ID]
    if len(head) < _MIN_SIZE or not (ident[:2] == b"ET" and ident[2:].isdigit()):
        raise ArtifactError(message("bad_header", path=p))
    return p


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


def _run_constant(program: Any, name: str) -> list[Any]:
    if name not in program.method_names:
        raise KeyError(name)
    return list(program.load_method(name).execute([]))


def open_artifact(path: str | Path, expect: str | None = None) -> OpenedArtifact:
    """Load a ``.pte`` and read its metadata; ``expect`` is "target" or "draft" when known."""
    p = check_header(path)
    from executorch.runtime import Runtime

    try:
        program = Runtime.get().load_program(p)
    except Exception as e:  # the loader raises bare RuntimeError/ValueError on bad files
        raise ArtifactError(message("cannot_load", path=p, error=e)) from None
    try:
        (kind,) = _run_constant(program, "artifact_kind")
    except Exception:
        raise ArtifactError(message("not_etspec", path=p)) from None
    classes = {"target": TargetMetadata, "draft": DraftMetadata}
    if kind not in classes:
        raise ArtifactError(message("unknown_kind", path=p, kind=kind))
    if expect is not None and kind != expect:
        raise ArtifactError(message("wrong_kind", path=p, kind=kind, expected=expect))
    try:
        (version,) = _run_constant(program, "format_version")
    except Exception:
        raise ArtifactError(message("no_version", path=p)) from None
    check_format(kind, int(version), str(p))
    metadata = classes[kind].read(lambda name: _run_constant(program, name))
    return OpenedArtifact(p, program, metadata)  # type: ignore[arg-type]


def sha256_hex(data: bytes | None) -> str:
    return hashlib.sha256(data).hexdigest() if data else ""
