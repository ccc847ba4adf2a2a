"""Files written for a user: whole or not at all."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from etspec.errors import EtspecError, OutputExistsError


def write_atomically(path: Path, data: bytes | Callable[[BinaryIO], None]) -> None:
    """Write ``data`` (bytes, or a function writing into the open file) via a temp file in
    the same folder, so a failure never leaves a partial file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
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


def check_output(path: str | Path, force: bool, option: str = "-o") -> Path:
    """Where a command will write a file, checked before its work starts: not a user's file
    unless ``force`` (a dangling link counts), not a folder, in a folder that exists and
    takes the temp file ``write_atomically`` will write (``probe_writable``)."""
    p = Path(path)
    if str(path).endswith(("/", os.sep)):
        raise EtspecError(f"{option} {path} names a folder; name the file to write, e.g. {p}/out")
    try:
        return _check_output(p, force, option)
    except OSError as e:  # stat itself fails on a name longer than the filesystem allows
        raise EtspecError(
            f"cannot write {p} ({e.strerror or type(e).__name__}); choose another {option} (a "
            "writable folder, a shorter name)"
        ) from None


def _check_output(p: Path, force: bool, option: str) -> Path:
    if p.is_dir():
        raise OutputExistsError(f"{p} is a directory; {option} names the file to write")
    if (p.exists() or p.is_symlink()) and not force:
        raise OutputExistsError(f"{p} already exists; pass --force to overwrite it")
    if not p.parent.is_dir():
        raise EtspecError(f"{option}: folder {p.parent} does not exist; create it first")
    probe_writable(p, option)
    return p


def probe_writable(path: Path, option: str = "-o") -> None:
    """Create and remove the very temp file ``write_atomically`` will write (same folder,
    same name length), so a read-only folder or filesystem, a missing permission or an
    over-long name fails now, not after minutes of work."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        reason = e.strerror or type(e).__name__
        raise EtspecError(
            f"cannot write {path} ({reason}); choose another {option} (a writable folder, a "
            "shorter name)"
        ) from None
    os.close(fd)
    os.unlink(tmp)
