"""XNNPACK's weight cache: one packed copy of each weight, whatever the number of methods.

XNNPACK repacks a delegate's weights into its own layout when a method loads. Without its
weight cache every method of a program keeps its own packed copy: the bundled target's
five compute methods held five copies (+54 MB each), Gemma 3 270M fp32's held five of
1 GB. The cache is compiled into the executorch wheel but off by default, and ExecuTorch's
Python runtime has no API for backend options, so this module sets the process-wide option
through the runtime library's own C++ ``set_option`` (ctypes, no compiler needed), and reads
it back to confirm it took. The C++ runner passes the same option when it loads a program.

The option is read when a delegated method loads: ``PteProgram.load`` sets it just before.
With the cache on, XNNPACK executes delegates under one process-wide lock, so runners in
two threads take turns inside delegate calls (the README gives the measured cost).
"""

from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path

from etspec.contract import WEIGHT_CACHE_ENV as ENV
from etspec.contract import XNNPACK_BACKEND, XNNPACK_WEIGHT_CACHE
from etspec.errors import EtspecError

BACKEND = XNNPACK_BACKEND.encode()
WEIGHT_CACHE = XNNPACK_WEIGHT_CACHE.encode()

# executorch::runtime::set_option / get_option(const char*, Span<BackendOption>): a Span is
# {pointer, size} passed by value, i.e. in two integer registers (x86-64 SysV, AArch64).
_SET = "_ZN10executorch7runtime10set_optionEPKcNS0_4SpanINS0_13BackendOptionEEE"
_GET = "_ZN10executorch7runtime10get_optionEPKcNS0_4SpanINS0_13BackendOptionEEE"


class _BackendOption(ctypes.Structure):
    """``executorch::runtime::BackendOption`` of executorch 1.5.1 (runtime/backend/
    options.h): ``char key[64]`` then ``std::variant<bool, int, std::array<char, 256>>``,
    whose 256-byte storage is followed by a one-byte index (0: bool) and padding to 4."""

    _fields_ = (
        ("key", ctypes.c_char * 64),
        ("value", ctypes.c_ubyte * 256),
        ("index", ctypes.c_ubyte),
        ("_pad", ctypes.c_ubyte * 3),
    )


def default_weight_cache() -> bool:
    """On unless ``ETSPEC_XNNPACK_WEIGHT_CACHE`` is ``0``, ``false``, ``off`` or ``no``."""
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "off", "no")


@functools.lru_cache(maxsize=1)
def _functions() -> tuple[ctypes._CFuncPtr, ctypes._CFuncPtr]:  # type: ignore[name-defined]
    import executorch

    lib_path = Path(next(iter(executorch.__path__))) / "lib" / "libexecutorch.so"
    if not lib_path.is_file():
        raise EtspecError(
            f"{lib_path} is missing: the XNNPACK weight cache needs the executorch wheel's "
            f"runtime library; set {ENV}=0 to load without it"
        )
    # The pybindings already loaded this library: dlopen returns that same instance, whose
    # backend registry holds the XNNPACK backend.
    lib = ctypes.CDLL(str(lib_path))
    out = []
    for name in (_SET, _GET):
        fn = getattr(lib, name)
        fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
        fn.restype = ctypes.c_uint32  # executorch::runtime::Error
        out.append(fn)
    return out[0], out[1]


def _option(value: bool | None = None) -> _BackendOption:
    opt = _BackendOption()
    opt.key = WEIGHT_CACHE
    opt.index = 0  # the bool alternative
    opt.value[0] = int(bool(value))
    return opt


def weight_cache_enabled() -> bool:
    """What XNNPACK will do for the next method load."""
    _, get = _functions()
    opt = _option()
    err = get(BACKEND, ctypes.addressof(opt), 1)
    if err != 0 or opt.index != 0:
        raise EtspecError(f"cannot read XNNPACK's {WEIGHT_CACHE.decode()} option (error {err})")
    return bool(opt.value[0])


def set_weight_cache(enabled: bool) -> None:
    """Turn XNNPACK's weight cache on or off for the methods loaded from now on (the
    option is process-wide); verified by reading it back."""
    if weight_cache_enabled() == enabled:
        return
    set_, _ = _functions()
    opt = _option(enabled)
    err = set_(BACKEND, ctypes.addressof(opt), 1)
    if err != 0 or weight_cache_enabled() != enabled:
        raise EtspecError(
            f"XNNPACK refused {WEIGHT_CACHE.decode()}={enabled} (error {err}); set {ENV}=0 "
            "to load without the weight cache"
        )
