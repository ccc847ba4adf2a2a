"""The C API (etspec.h, libetspec_c): from Python through ctypes, as app bindings load it,
and from a plain C program. It generates the C++ runner's tokens, streams them, cancels, and
answers a missing file, a mismatched pair and a context overflow with one line."""

from __future__ import annotations

import ctypes
import json
import subprocess
from pathlib import Path

import pytest

PROMPT = [3, 1, 4, 1, 5, 9, 2, 6]
CALLBACK = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t, ctypes.c_char_p, ctypes.c_void_p
)


class LoadOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("draft_method", ctypes.c_char_p),
                ("tree", ctypes.c_char_p), ("num_spec_tokens", ctypes.c_int64),
                ("kv_strategy", ctypes.c_char_p)]  # fmt: skip


class GenerateOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("max_new_tokens", ctypes.c_int64),
                ("temperature", ctypes.c_double), ("top_k", ctypes.c_int64),
                ("top_p", ctypes.c_double), ("seed", ctypes.c_uint64), ("seeded", ctypes.c_int),
                ("ignore_eos", ctypes.c_int), ("reuse_prefix", ctypes.c_int)]  # fmt: skip


class Prompt(ctypes.Structure):
    _fields_ = [("text", ctypes.c_char_p), ("ids", ctypes.POINTER(ctypes.c_int64)),
                ("n_ids", ctypes.c_size_t), ("messages_json", ctypes.c_char_p)]  # fmt: skip


class Stats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64) for n in (
        "prompt_tokens", "cached_tokens", "generated_tokens", "prefill_calls", "decode_calls",
        "verify_calls", "draft_calls", "drafted_tokens", "accepted_tokens")] + [
        (n, ctypes.c_double) for n in (
        "acceptance_rate", "tokens_per_verify", "ttft_s", "total_s", "tokens_per_s")]  # fmt: skip


@pytest.fixture(scope="module")
def lib(runner_bin: Path) -> ctypes.CDLL:
    c = ctypes.CDLL(str(runner_bin.parent / "libetspec_c.so"))
    c.etspec_version.restype = ctypes.c_char_p
    c.etspec_last_error.restype = ctypes.c_char_p
    c.etspec_load.restype = ctypes.c_void_p
    c.etspec_load.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(LoadOptions)]
    c.etspec_generate.argtypes = [
        ctypes.c_void_p, ctypes.POINTER(Prompt), ctypes.POINTER(GenerateOptions), CALLBACK,
        ctypes.c_void_p, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_void_p),
    ]  # fmt: skip
    c.etspec_result_ids.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.POINTER(ctypes.c_int64))]
    c.etspec_result_ids.restype = ctypes.c_size_t
    c.etspec_result_stop_reason.argtypes = [ctypes.c_void_p]
    c.etspec_result_stop_reason.restype = ctypes.c_char_p
    c.etspec_result_stats.argtypes = [ctypes.c_void_p, ctypes.POINTER(Stats)]
    c.etspec_result_free.argtypes = [ctypes.c_void_p]
    c.etspec_free.argtypes = [ctypes.c_void_p]
    return c


def _load(lib: ctypes.CDLL, target: Path, draft: Path | None, tree: str = "auto") -> int:
    options = LoadOptions()
    lib.etspec_load_options_init(ctypes.byref(options))
    options.tree = tree.encode()
    handle = lib.etspec_load(str(target).encode(), str(draft).encode() if draft else None,
                             ctypes.byref(options))  # fmt: skip
    assert handle, lib.etspec_last_error().decode()
    return handle


def _generate(lib: ctypes.CDLL, handle: int, ids: list[int], max_new: int, cancel_after: int = 0):  # type: ignore[no-untyped-def]
    options = GenerateOptions()
    lib.etspec_generate_options_init(ctypes.byref(options))
    options.max_new_tokens, options.ignore_eos = max_new, 1
    array = (ctypes.c_int64 * len(ids))(*ids)
    prompt = Prompt(None, array, len(ids), None)
    streamed: list[int] = []
    cancel = ctypes.c_int(0)

    def on_tokens(got, n, text, user):  # type: ignore[no-untyped-def]
        streamed.extend(got[i] for i in range(n))
        if cancel_after and len(streamed) >= cancel_after:
            cancel.value = 1
        return 1

    result = ctypes.c_void_p()
    callback = CALLBACK(on_tokens)
    args = (ctypes.byref(prompt), ctypes.byref(options), callback, None, ctypes.byref(cancel))
    rc = lib.etspec_generate(handle, *args, ctypes.byref(result))
    if rc != 0:
        assert not result.value
        return None, streamed, lib.etspec_last_error().decode()
    out = ctypes.POINTER(ctypes.c_int64)()
    n = lib.etspec_result_ids(result, ctypes.byref(out))
    ids_out = [out[i] for i in range(n)]
    stop = lib.etspec_result_stop_reason(result).decode()
    stats = Stats()
    lib.etspec_result_stats(result, ctypes.byref(stats))
    lib.etspec_result_free(result)
    return ids_out, streamed, (stop, stats)


def _runner_ids(runner_bin: Path, target: Path, draft: Path, ids: list[int], n: int) -> list[int]:
    request = json.dumps({"prompt_ids": ids, "max_new_tokens": n, "ignore_eos": True})
    cmd = [str(runner_bin), "--target", str(target), "--draft", str(draft), "--serve"]
    out = subprocess.run(cmd, input=request + "\n", capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["token_ids"]


def test_ctypes_generates_streams_and_cancels_as_the_runner(lib, artifacts, runner_bin) -> None:  # type: ignore[no-untyped-def]
    pair = artifacts.tree_draft()
    want = _runner_ids(runner_bin, pair.target.pte, pair.pte, PROMPT, 20)
    assert lib.etspec_version().decode() == "0.1.0" and lib.etspec_c_api_version() == 1
    for tree in ("chain", "static", "dynamic", "auto"):
        handle = _load(lib, pair.target.pte, pair.pte, tree)
        ids, streamed, (stop, stats) = _generate(lib, handle, PROMPT, 20)
        assert ids == want and streamed == want
        assert stop == "max_new_tokens" and stats.generated_tokens == 20
        assert stats.prompt_tokens == len(PROMPT)
        ids, streamed, (stop, _) = _generate(lib, handle, PROMPT, 20, cancel_after=3)
        assert stop == "callback" and 3 <= len(ids) < 20 and ids == want[: len(ids)]
        lib.etspec_free(handle)


def test_ctypes_errors_are_one_line(lib, artifacts) -> None:  # type: ignore[no-untyped-def]
    pair = artifacts.tree_draft()
    assert not lib.etspec_load(b"/no/such/target.pte", None, None)
    missing = lib.etspec_last_error().decode()
    assert "/no/such/target.pte" in missing and "\n" not in missing
    other = artifacts.draft().pte  # another target's draft
    assert not lib.etspec_load(str(pair.target.pte).encode(), str(other).encode(), None)
    mismatch = lib.etspec_last_error().decode()
    assert mismatch and "\n" not in mismatch
    handle = _load(lib, pair.target.pte, pair.pte)
    ids, _, error = _generate(lib, handle, PROMPT, 10**6)
    assert ids is None and "context" in error and "\n" not in error
    ids, _, _ = _generate(lib, handle, PROMPT, 4)  # the runner still works
    assert ids is not None and len(ids) == 4
    lib.etspec_free(handle)


def test_a_plain_c_program_gets_the_runners_tokens(artifacts, runner_bin: Path) -> None:  # type: ignore[no-untyped-def]
    pair = artifacts.tree_draft()
    check = runner_bin.parent / "etspec_c_check"
    want = _runner_ids(runner_bin, pair.target.pte, pair.pte, PROMPT, 16)
    ids = ",".join(map(str, PROMPT))
    out = subprocess.run([str(check), str(pair.target.pte), str(pair.pte), ids, "16"],
                         capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["ids"] == want and got["stop"] == "max_new_tokens" and got["version"] == "0.1.0"
    out = subprocess.run([str(check), str(pair.target.pte), str(pair.pte), ids, "16", "2"],
                         capture_output=True, text=True)  # fmt: skip
    cancelled = json.loads(out.stdout)
    assert cancelled["stop"] == "callback" and cancelled["ids"] == want[: len(cancelled["ids"])]
    out = subprocess.run([str(check), "/no/such.pte", "-", ids, "16"], capture_output=True,
                         text=True)  # fmt: skip
    assert out.returncode == 1 and out.stderr.startswith("error: ") and "/no/such.pte" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
