"""Files a user names: read within bounds (``read_text``, ``read_json``), written whole or not
at all (``write_atomically``)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from etspec.errors import EtspecError, OutputExistsError

# The most a prompts file, a report or a config is read of: far past any real one, and a
# bound on what a wrong path (a device, a huge file) can cost (`bench --prompts /dev/zero`
# grew to 24 GB before the kernel killed it).
READ_MAX_BYTES = 64 << 20


def read_bytes(path: str | Path, what: str, limit: int = READ_MAX_BYTES) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes; one-line errors for
    a missing file, a folder, a device or FIFO (which could stream forever or block), an
    unreadable one or a larger one. ``what`` names it in messages ("prompts file")."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            if stat.S_ISDIR(mode):
                raise EtspecError(f"{p} is a folder; give the {what} itself")
            if not stat.S_ISREG(mode):
                raise EtspecError(f"{p} is not a regular file (a device or pipe); give a {what}")
            data = f.read(limit + 1)
    except IsADirectoryError:
        raise EtspecError(f"{p} is a folder; give the {what} itself") from None
    except FileNotFoundError:
        raise EtspecError(f"{p}: no such {what}") from None
    except OSError as e:
        raise EtspecError(f"cannot read {what} {p} ({e.strerror or type(e).__name__})") from None
    if len(data) > limit:
        raise EtspecError(f"{p} is larger than {limit >> 20} MiB; a {what} is smaller than that")
    return data


def read_text(path: str | Path, what: str, limit: int = READ_MAX_BYTES) -> str:
    """``read_bytes`` decoded as UTF-8 (one line naming the first bad byte's offset if not)."""
    data = read_bytes(path, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise EtspecError(
            f"{path}: {what} is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})"
        ) from None


def read_json(path: str | Path, what: str, limit: int = READ_MAX_BYTES) -> Any:
    """``read_text`` parsed as JSON; one line for text that is not JSON, or nests past the
    parser's recursion limit (100,000 nested ``[``)."""
    text = read_text(path, what, limit)
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError, ValueError) as e:
        reason = "nested too deeply" if isinstance(e, RecursionError) else str(e)
        raise EtspecError(f"{path}: {what} is not JSON ({reason})") from None


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, read in blocks (never whole)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def write_atomically(
    path: Path, data: bytes | Callable[[BinaryIO], None], replace: bool = True
) -> None:
    """Write ``data`` (bytes, or a function writing into the open file) via a temp file in
    the same folder, so a failure never leaves a partial file. A replaced file keeps its
    mode. ``replace=False`` (no ``--force``): a file another process created at ``path``
    meanwhile is kept and this write refused, so two writers cannot both succeed."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data)
        # mkstemp creates 0600: give the artifact the replaced file's mode, or the mode a
        # plain open() would.
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except OSError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        if replace:
            os.replace(tmp, path)
            return
        try:
            os.link(tmp, path)  # fails if the name exists: never clobbers
        except FileExistsError:
            raise OutputExistsError(
                f"{path} was created by another process while this one ran; nothing was "
                "written (pass --force to overwrite it)"
            ) from None
        os.unlink(tmp)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_output(path: Path, data: bytes, option: str, replace: bool = True) -> None:
    """``write_atomically`` for a command's output: a full disk (or a folder gone) is one
    line naming ``option``, not a traceback."""
    try:
        write_atomically(path, data, replace)
    except OSError as e:
        raise EtspecError(
            f"cannot write {path} ({e.strerror or type(e).__name__}); nothing was written: "
            f"free space or choose another {option}"
        ) from None


def write_elsewhere(data: bytes, name: str) -> Path:
    """``data`` in a new file of the temp folder (often another disk), for output a full
    disk refused: a whole run's report is not lost at its last step."""
    fd, tmp = tempfile.mkstemp(prefix=f"etspec-{name}-", suffix=".json")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return Path(tmp)


def _is_input(p: Path, source: Path) -> bool:
    """Whether writing ``p`` would overwrite the input ``source`` (a file, or a file a
    checkpoint folder is read from)."""
    if not p.exists():
        return False
    if source.is_dir():
        read = p.name in ("config.json", "tokenizer.json") or p.suffix in (".safetensors", ".bin")
        return read and p.parent.exists() and os.path.samefile(p.parent, source)
    return source.exists() and os.path.samefile(p, source)


def check_output(
    path: str | Path,
    force: bool,
    option: str = "-o",
    inputs: tuple[str | Path | None, ...] = (),
) -> Path:
    """Where a command will write a file, checked before its work starts: not a user's file
    unless ``force`` (a dangling link counts), never one of the command's ``inputs`` (not
    even with ``force``), not a folder, in a folder that exists and takes the temp file
    ``write_atomically`` will write (``probe_writable``)."""
    p = Path(path)
    if str(path).endswith(("/", os.sep)):
        raise EtspecError(f"{option} {path} names a folder; name the file to write, e.g. {p}/out")
    try:
        for source in inputs:
            if source is not None and _is_input(p, Path(source)):
                raise EtspecError(
                    f"{option} {p} is an input of this command ({source}); choose another {option}"
                )
        return _check_output(p, force, option)
    except OSError as e:  # stat itself fails on a name longer than the filesystem allows
        raise EtspecError(
            f"cannot write {p} ({e.strerror or type(e).__name__}); choose another {option} (a "
            "writable folder, a shorter name)"
        ) from None


def _check_output(p: Path, force: bool, option: str) -> Path:
    if p.is_dir():
        raise OutputExistsError(f"{p} is a directory; {option} names the file to write")
    if p.exists() and not p.is_file():
        # --force replaces files and links, never a device or a FIFO (as root, `-o /dev/null
        # --force` would have replaced /dev/null with a regular file).
        raise OutputExistsError(
            f"{p} is not a regular file (a device or pipe); {option} names a file"
        )
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


def check_output_folder(
    path: str | Path, force: bool, owned: frozenset[str], option: str = "-o"
) -> Path:
    """Where a command will write a folder of ``owned`` files, checked before its work
    starts: not an existing folder unless ``force``, and then only one holding nothing but
    ``owned`` files (``--force`` replaces what etspec wrote there, never an input or other
    files); never a file or a symbolic link; its parent writable (or creatable)."""
    p = Path(path)
    try:
        if p.is_symlink():
            raise EtspecError(f"{option} {p} is a symbolic link; name the folder itself")
        if p.exists() and not p.is_dir():
            raise OutputExistsError(f"{p} is a file; {option} names the folder to write")
        if p.exists() and not force:
            raise OutputExistsError(f"{p} exists; pass --force to overwrite it")
        if p.exists():
            other = sorted(f.name for f in p.iterdir() if f.name not in owned or not f.is_file())
            if other:
                more = f" and {len(other) - 3} more" if len(other) > 3 else ""
                shown = ", ".join(other[:3]) + more
                raise OutputExistsError(
                    f"{p} holds files etspec did not write ({shown}); --force replaces only "
                    f"{', '.join(sorted(owned))}: choose another {option}"
                )
        parent = p.parent
        while not parent.exists():
            parent = parent.parent
        if not parent.is_dir():
            raise EtspecError(f"{option}: {parent} is a file, not a folder")
        tmp = tempfile.mkdtemp(prefix=f".{p.name}.", dir=parent)  # the name convert will use
        os.rmdir(tmp)
    except OSError as e:
        raise EtspecError(
            f"cannot write {p} ({e.strerror or type(e).__name__}); choose another {option} (a "
            "writable folder, a shorter name)"
        ) from None
    return p


def check_free_space(folder: Path, need: int, what: str, option: str = "-o") -> None:
    """Refuse work whose output (at least ``need`` bytes) cannot fit in ``folder``'s
    filesystem (the nearest existing folder above it counts)."""
    while not folder.exists():
        folder = folder.parent
    free = shutil.disk_usage(folder).free
    if free < need:
        raise EtspecError(
            f"not enough space for {what}: it needs at least {need / 1e6:.0f} MB, "
            f"{free / 1e6:.0f} MB are free in {folder}; free space or choose another {option}"
        )
