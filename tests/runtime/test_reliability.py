"""Bad input at every entry point, and threads.

One table of bad inputs, tried on the Python API (``TextLLMRunner``/``from_pte``), the CLI
(``etspec generate``) and the C++ runner wherever the entry point can receive it. Each must
give a one-line error naming the problem (and the fix), leave a loaded runner producing
exactly what it produced before, and leave the user's files as they were."""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from tiny import write_tokenizer

from etspec.cli import main
from etspec.contract import TRAILER_SIZE
from etspec.errors import EtspecError
from etspec.export.export_draft import DraftExportOptions, export_draft
from etspec.export.export_target import TargetExportOptions, export_target
from etspec.runtime.runner import GenerationError, TextLLMRunner, load_runners
from etspec.runtime.sampling import SamplingConfig
from etspec.runtime.spec import RunnerSpec, TreeSettings

PROMPT = [3, 1, 4, 1, 5, 9, 2, 6, 5]
CONTEXT = 64  # the small pair's max_context
EOS = 2


@pytest.fixture(scope="module")
def files(artifacts, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:  # type: ignore[no-untyped-def]
    """The small pair plus every bad file a user can point the runtime at."""
    pair = artifacts.small_draft()
    root = tmp_path_factory.mktemp("bad_files")
    data = pair.target.pte.read_bytes()
    out = {"target": pair.target.pte, "draft": pair.pte, "other_draft": artifacts.draft().pte}
    out["missing"] = root / "missing.pte"
    out["directory"] = root / "folder.pte"
    out["directory"].mkdir()
    out["truncated"] = root / "truncated.pte"
    out["truncated"].write_bytes(data[: len(data) // 2])
    flipped = bytearray(data)
    flipped[len(data) // 3] ^= 0x10
    out["bit_flipped"] = root / "flipped.pte"
    out["bit_flipped"].write_bytes(bytes(flipped))
    out["foreign"] = root / "foreign.pte"  # an ExecuTorch program etspec did not write
    out["foreign"].write_bytes(data[:-TRAILER_SIZE])
    out["not_utf8"] = root / "prompt.txt"
    out["not_utf8"].write_bytes(b"def f():\n    return '\xff\xfe caf\xe9'\n")
    out.update(_tokenizer_mismatch(pair, root))
    return out


def _tokenizer_mismatch(pair, root: Path) -> dict[str, Path]:  # type: ignore[no-untyped-def]
    """Two exports of one target that differ only in their tokenizer, and a draft exported
    against the first: shapes all match, so only the tokenizer hash tells them apart."""
    out = {}
    for name, word in (("tok_a", "w"), ("tok_b", "v")):
        ckpt = root / name
        shutil.copytree(pair.target.checkpoint, ckpt)
        write_tokenizer(ckpt, 16)
        text = (ckpt / "tokenizer.json").read_text().replace('"w', f'"{word}')
        (ckpt / "tokenizer.json").write_text(text)
        out[name] = root / f"{name}.pte"
        opts = TargetExportOptions(
            backend="portable", max_seq=CONTEXT, prefill_chunk=8, verify_width=8
        )
        export_target(ckpt, out[name], opts)
    out["draft_tok_a"] = root / "draft_tok_a.pte"
    export_draft(
        pair.checkpoint, out["tok_a"], out["draft_tok_a"], DraftExportOptions(backend="portable")
    )
    return out


def _snapshot(paths: dict[str, Path]) -> dict[str, str]:
    return {k: hashlib.sha256(p.read_bytes()).hexdigest() for k, p in paths.items() if p.is_file()}


@pytest.fixture(scope="module")
def loaded(files):  # type: ignore[no-untyped-def]
    spec = RunnerSpec(files["target"], files["draft"], tree=TreeSettings("chain", 3))
    return load_runners(spec)


def _assert_one_line(message: str, *words: str) -> None:
    assert message and "\n" not in message.strip(), message
    for w in words:
        assert w in message, (w, message)


# --- the table ------------------------------------------------------------------------------
# Requests: (name, generate kwargs, words of the message, CLI args, C++ args).
REQUESTS: list[tuple[str, dict[str, Any], str, list[str] | None, list[str] | None]] = [
    ("empty prompt", dict(prompt=[]), "empty prompt", ["--prompt-ids", ""], ["--prompt-ids", ""]),
    (
        "prompt longer than context",
        dict(prompt=list(range(16)) * 4),
        "does not fit the context of 64",
        ["--prompt-ids", ",".join(["1"] * 70)],
        ["--prompt-ids", ",".join(["1"] * 70)],
    ),
    ("max_new_tokens 0", dict(max_new_tokens=0), "max_new_tokens must be at least 1",
     ["--max-new-tokens", "0"], ["--max-new-tokens", "0"]),
    ("max_new_tokens negative", dict(max_new_tokens=-5), "max_new_tokens must be at least 1",
     ["--max-new-tokens", "-5"], ["--max-new-tokens", "-5"]),
    ("max_new_tokens beyond context", dict(max_new_tokens=60), "exceeds the context of 64",
     ["--max-new-tokens", "60"], ["--max-new-tokens", "60"]),
    ("temperature negative", dict(sampling=SamplingConfig(temperature=-1.0)),
     "temperature must be a finite number", ["--temperature", "-1"], ["--temperature", "-1"]),
    ("temperature NaN", dict(sampling=SamplingConfig(temperature=math.nan)),
     "temperature must be a finite number", ["--temperature", "nan"], ["--temperature", "nan"]),
    ("top-p 0", dict(sampling=SamplingConfig(1.0, top_p=0.0)), "top-p must be in (0, 1]",
     ["--temperature", "1", "--top-p", "0"], ["--temperature", "1", "--top-p", "0"]),
    ("top-p above 1", dict(sampling=SamplingConfig(1.0, top_p=1.5)), "top-p must be in (0, 1]",
     ["--temperature", "1", "--top-p", "1.5"], ["--temperature", "1", "--top-p", "1.5"]),
    ("top-p NaN", dict(sampling=SamplingConfig(1.0, top_p=math.nan)), "top-p must be in (0, 1]",
     ["--temperature", "1", "--top-p", "nan"], ["--temperature", "1", "--top-p", "nan"]),
    ("top-k negative", dict(sampling=SamplingConfig(1.0, top_k=-2)), "top-k must be",
     ["--temperature", "1", "--top-k", "-2"], ["--temperature", "1", "--top-k", "-2"]),
    ("token outside vocabulary", dict(prompt=[1, 99]), "outside the vocabulary [0, 16)",
     ["--prompt-ids", "1,99"], ["--prompt-ids", "1,99"]),
    ("negative token id", dict(prompt=[1, -1]), "outside the vocabulary",
     ["--prompt-ids", "1,-1"], ["--prompt-ids", "1,-1"]),
    ("text without tokenizer", dict(prompt="hello"), "carries no tokenizer",
     ["--prompt", "hello"], None),
    ("batch of two", dict(prompt=[[1, 2], [3, 4]]), "batch size 2 is not supported", None, None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "kwargs", "words", "cli", "cpp"), REQUESTS, ids=[r[0] for r in REQUESTS]
)
def test_bad_request_python_api(loaded, name: str, kwargs, words: str, cli, cpp) -> None:  # type: ignore[no-untyped-def]
    for runner in loaded:
        before = runner.generate(PROMPT, 12).token_ids
        with pytest.raises(EtspecError) as e:
            runner.generate(**{"prompt": PROMPT, "max_new_tokens": 8, **kwargs})
        _assert_one_line(str(e.value), words)
        assert runner.generate(PROMPT, 12).token_ids == before  # usable, state intact


def _cli(*args: Any) -> Any:
    return CliRunner().invoke(main, [str(a) for a in args])


def _cli_error(res: Any, code: int = 1) -> str:
    assert res.exit_code == code, (res.exit_code, res.output)
    assert "Traceback" not in res.output and res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def _cpp_error(binary: Path, *args: Any) -> str:
    """The C++ runner's single ``error:`` line for ``args`` (exit 1, or 2 for usage)."""
    res = subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True)
    assert res.returncode in (1, 2) and res.stdout == "", res
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


CLI_REQUESTS = [r for r in REQUESTS if r[3] is not None]


@pytest.mark.parametrize(
    ("name", "kwargs", "words", "cli", "cpp"), CLI_REQUESTS, ids=[r[0] for r in CLI_REQUESTS]
)
def test_bad_request_cli(files, name: str, kwargs, words: str, cli, cpp) -> None:  # type: ignore[no-untyped-def]
    before = _snapshot(files)
    args = ["generate", "--target", files["target"], "--draft", files["draft"], "--tree", "chain"]
    if "--prompt-ids" not in cli and "--prompt" not in cli:
        args += ["--prompt-ids", ",".join(map(str, PROMPT))]
    _assert_one_line(_cli_error(_cli(*args, *cli)), words)
    assert _snapshot(files) == before


CPP_REQUESTS = [r for r in REQUESTS if r[4] is not None]


@pytest.mark.parametrize(
    ("name", "kwargs", "words", "cli", "cpp"), CPP_REQUESTS, ids=[r[0] for r in CPP_REQUESTS]
)
def test_bad_request_cpp(files, runner_bin: Path, name: str, kwargs, words: str, cli, cpp) -> None:  # type: ignore[no-untyped-def]
    args = ["--target", str(files["target"]), "--draft", str(files["draft"]), "--tree", "chain"]
    if "--prompt-ids" not in cpp:
        args += ["--prompt-ids", ",".join(map(str, PROMPT))]
    _assert_one_line(_cpp_error(runner_bin, *args, *cpp), words)


# Runner settings and files: (name, RunnerSpec fields (tree: TreeSettings arguments), words,
# CLI args, C++ args). "{x}" is files[x].
LOADS: list[tuple[str, dict[str, Any], str, list[str] | None, list[str] | None]] = [
    ("unknown tree mode", dict(tree=dict(mode="bush")), "'bush'",
     ["--tree", "bush"], ["--tree", "bush"]),
    ("tree wider than verify", dict(tree=dict(mode="chain", num_spec_tokens=9)),
     "verify width of 10",
     ["--tree", "chain", "--num-spec-tokens", "9"], ["--tree", "chain", "--num-spec-tokens", "9"]),
    ("static tree wider than verify", dict(tree=dict(mode="static", static_tree="N12")),
     "verify width of 13", ["--tree", "static", "--static-tree", "N12"],
     ["--tree", "static", "--static-tree", "N12"]),
    ("full tree of trillions of nodes", dict(tree=dict(mode="static", static_tree="D12xBF12")),
     "has up to 9726655034460 draft tokens", ["--tree", "static", "--static-tree", "D12xBF12"],
     ["--tree", "static", "--static-tree", "D12xBF12"]),
    ("pruned tree of 10^8 nodes", dict(tree=dict(mode="static", static_tree="N100000000")),
     "verify width of 100000001", ["--tree", "static", "--static-tree", "N100000000"],
     ["--tree", "static", "--static-tree", "N100000000"]),
    ("unknown KV strategy", dict(kv_strategy="paged"), "paged",
     ["--kv", "paged"], ["--kv", "paged"]),
    ("missing target", dict(target="{missing}"), "no such file",
     ["--target", "{missing}"], ["--target", "{missing}"]),
    ("target is a folder", dict(target="{directory}"), "not a file",
     ["--target", "{directory}"], ["--target", "{directory}"]),
    ("truncated target", dict(target="{truncated}"), "truncated",
     ["--target", "{truncated}"], ["--target", "{truncated}"]),
    ("bit-flipped target", dict(target="{bit_flipped}"), "SHA-256 mismatch",
     ["--target", "{bit_flipped}"], ["--target", "{bit_flipped}"]),
    ("foreign program", dict(target="{foreign}"), "no integrity trailer",
     ["--target", "{foreign}"], ["--target", "{foreign}"]),
    ("draft given as target", dict(target="{draft}"), "but a target was expected",
     ["--target", "{draft}"], ["--target", "{draft}"]),
    ("truncated draft", dict(draft="{truncated}"), "truncated",
     ["--draft", "{truncated}"], ["--draft", "{truncated}"]),
    ("draft of another target", dict(draft="{other_draft}"), "draft/target mismatch",
     ["--draft", "{other_draft}"], ["--draft", "{other_draft}"]),
    ("tokenizer mismatch", dict(target="{tok_b}", draft="{draft_tok_a}"),
     "exported for a target with tokenizer", ["--target", "{tok_b}", "--draft", "{draft_tok_a}"],
     ["--target", "{tok_b}", "--draft", "{draft_tok_a}"]),
]  # fmt: skip


def _fill(value: Any, files: dict[str, Path]) -> Any:
    if isinstance(value, str) and value.startswith("{"):
        return files[value.strip("{}")]
    return value


@pytest.mark.parametrize(
    ("name", "fields", "words", "cli", "cpp"), LOADS, ids=[r[0] for r in LOADS]
)
def test_bad_settings_and_files_python_api(
    loaded, files, name: str, fields, words: str, cli, cpp
) -> None:  # type: ignore[no-untyped-def]
    before_files = _snapshot(files)
    before = loaded[1].generate(PROMPT, 12).token_ids
    with pytest.raises(EtspecError) as e:
        # A setting out of range is refused when the settings are made (TreeSettings).
        spec = RunnerSpec(
            _fill(fields.get("target"), files) or files["target"],
            _fill(fields.get("draft"), files) or files["draft"],
            tree=TreeSettings(**fields.get("tree", {"mode": "chain", "num_spec_tokens": 3})),
            kv_strategy=fields.get("kv_strategy", "position-overwrite"),
        )
        base, speculative = load_runners(spec)
        # Some settings are checked when the first request meets them.
        (speculative or base).generate(PROMPT, 8)
    _assert_one_line(str(e.value), words)
    assert loaded[1].generate(PROMPT, 12).token_ids == before  # other runners unaffected
    assert _snapshot(files) == before_files


@pytest.mark.parametrize(
    ("name", "fields", "words", "cli", "cpp"), LOADS, ids=[r[0] for r in LOADS]
)
def test_bad_settings_and_files_cli(files, name: str, fields, words: str, cli, cpp) -> None:  # type: ignore[no-untyped-def]
    before = _snapshot(files)
    args = {"--target": files["target"], "--draft": files["draft"], "--tree": "chain"}
    for flag, value in zip(cli[::2], cli[1::2], strict=True):
        args[flag] = _fill(value, files)
    flat = [x for kv in args.items() for x in kv]
    res = _cli("generate", *flat, "--prompt-ids", ",".join(map(str, PROMPT)))
    code = 2 if name in ("unknown tree mode", "unknown KV strategy") else 1  # usage errors
    _assert_one_line(_cli_error(res, code), words)
    assert _snapshot(files) == before


@pytest.mark.parametrize(
    ("name", "fields", "words", "cli", "cpp"), LOADS, ids=[r[0] for r in LOADS]
)
def test_bad_settings_and_files_cpp(
    files, runner_bin: Path, name: str, fields, words: str, cli, cpp
) -> None:  # type: ignore[no-untyped-def]
    args = {"--target": files["target"], "--draft": files["draft"], "--tree": "chain"}
    for flag, value in zip(cpp[::2], cpp[1::2], strict=True):
        args[flag] = _fill(value, files)
    flat = [x for kv in args.items() for x in kv]
    prompt = ",".join(map(str, PROMPT))
    _assert_one_line(_cpp_error(runner_bin, *flat, "--prompt-ids", prompt), words)


def test_prompt_files_cli(files, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base = ["generate", "--target", files["target"], "--prompt-file"]
    line = _cli_error(_cli(*base, files["not_utf8"]))
    _assert_one_line(line, "not UTF-8 text (byte 0xff at offset 21)", "save the prompt as UTF-8")
    _assert_one_line(_cli_error(_cli(*base, tmp_path / "none.txt")), "prompt file cannot be read")
    _assert_one_line(_cli_error(_cli(*base, tmp_path)), "cannot be read (Is a directory)")
    # Valid UTF-8 reaches the tokenizer check: this target has none.
    (tmp_path / "ok.txt").write_text("w1 w2", encoding="utf-8")
    _assert_one_line(_cli_error(_cli(*base, tmp_path / "ok.txt")), "carries no tokenizer")
    res = _cli("generate", "--target", files["tok_a"], "--prompt-file", tmp_path / "ok.txt",
               "--max-new-tokens", "4", "--json")  # fmt: skip
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("source", ["/dev/zero", "50 MB file"])
def test_endless_or_huge_prompt_files_are_refused_before_reading_them(
    files, tmp_path: Path, source: str
) -> None:  # type: ignore[no-untyped-def]
    """In a real process: one line, within 2 s beyond start-up, and no more than 200 MB
    beyond what refusing a missing file costs (a whole read of /dev/zero never ends)."""
    import time

    path = tmp_path / "big.txt"
    with open(path, "wb") as f:
        f.truncate(50 << 20)  # sparse: nothing is written
    target = source if source == "/dev/zero" else str(path)

    def run(prompt_file: str) -> tuple[int, str, float, int]:
        """(exit code, stderr, seconds, this child's own peak RSS in bytes)."""
        t0 = time.perf_counter()
        with open(tmp_path / "err.txt", "w+") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "etspec", "generate", "--target", str(files["target"]),
                 "--prompt-file", prompt_file], stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            err.seek(0)
            return proc.returncode, err.read(), time.perf_counter() - t0, usage.ru_maxrss * 1024

    code, stderr, base_s, base_rss = run(str(tmp_path / "none.txt"))
    assert code == 1 and "cannot be read" in stderr
    code, stderr, seconds, rss = run(target)
    assert code == 1
    assert stderr.startswith("error: ") and stderr.count("\n") == 1, stderr
    assert "larger than 8 MiB, more than any context holds" in stderr
    assert seconds < base_s + 2.0
    assert rss < base_rss + (200 << 20)


def test_prompt_of_only_special_tokens_is_served_like_any_other(
    loaded, files, runner_bin: Path
) -> None:  # type: ignore[no-untyped-def]
    """BOS/EOS-only prompts are legal input: generated as a fresh runner would, everywhere."""
    prompt = [1, EOS, EOS, 1]
    fresh = load_runners(RunnerSpec(files["target"]))[0].generate(prompt, 10, ignore_eos=True)
    for runner in loaded:
        got = runner.generate(prompt, 10, ignore_eos=True)
        assert got.token_ids == fresh.token_ids
    res = subprocess.run(
        [str(runner_bin), "--target", str(files["target"]), "--draft", str(files["draft"]),
         "--tree", "chain", "--prompt-ids", "1,2,2,1", "--max-new-tokens", "10", "--ignore-eos",
         "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    import json

    assert json.loads(res.stdout)["token_ids"] == fresh.token_ids


# --- memory ---------------------------------------------------------------------------------


def test_inspect_memory_reports_every_method_s_resident_cost(files) -> None:  # type: ignore[no-untyped-def]
    import json

    # A process of its own, as a user runs it: in this one, memory freed by earlier tests
    # can absorb a load step (``tools/memory.py`` measures resident growth).
    def inspect(*args: str) -> str:
        res = subprocess.run(
            [sys.executable, "-m", "etspec", "inspect", "--memory", *args, str(files["draft"])],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr
        return res.stdout

    info = json.loads(inspect("--json"))
    mem = info["memory"]
    assert set(mem["load_steps_bytes"]) == {"program", *info["methods"]}
    assert mem["loaded_bytes"] == sum(mem["load_steps_bytes"].values()) > 0
    assert mem["kv_cache_bytes"] == info["metadata"]["kv_cache_bytes"] > 0
    assert mem["file_bytes"] == files["draft"].stat().st_size
    text = inspect()
    assert "resident after loading every method" in text and "program: +" in text


# --- threads ----------------------------------------------------------------------------------


def test_two_runners_in_two_threads_give_the_ids_they_give_alone(files) -> None:  # type: ignore[no-untyped-def]
    prompts = [PROMPT, [1, 5, 7], [4, 4, 4, 4, 8], [9, 3]]
    specs = [
        RunnerSpec(files["target"], files["draft"], tree=TreeSettings("chain", 3)),
        RunnerSpec(files["target"], files["draft"], tree=TreeSettings("static", 3),
                   kv_strategy="scratch-commit"),
    ]  # fmt: skip
    runners = [load_runners(s)[1] for s in specs]
    alone = [[r.generate(p, 30, ignore_eos=True).token_ids for p in prompts] for r in runners]
    results: list[list[list[int]]] = [[], []]
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(3):
                results[i].extend(
                    runners[i].generate(p, 30, ignore_eos=True).token_ids for p in prompts
                )
        except BaseException as e:  # surfaced below, not lost in the thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i in range(2):
        assert results[i] == alone[i] * 3


@pytest.mark.parametrize("call", ["generate", "reset"])
@pytest.mark.parametrize("second_runner", [1, 0], ids=["same runner", "other runner of the load"])
def test_runners_of_one_load_refuse_a_second_thread(loaded, second_runner: int, call: str) -> None:  # type: ignore[no-untyped-def]
    """The speculative runner generates in one thread; the same runner, or the target-only
    runner built over the same programs, is refused from another with one line, and the
    running request is not disturbed (their KV writes would otherwise interleave)."""
    runner: TextLLMRunner = loaded[1]
    other: TextLLMRunner = loaded[second_runner]
    before = runner.generate(PROMPT, 20, ignore_eos=True).token_ids
    other_before = other.generate(PROMPT, 4, ignore_eos=True).token_ids
    inside, release = threading.Event(), threading.Event()
    out: dict[str, Any] = {}

    def hold(ids: list[int], text: str) -> None:
        inside.set()
        release.wait(timeout=30)

    def first() -> None:
        out["ids"] = runner.generate(PROMPT, 20, ignore_eos=True, callback=hold).token_ids

    t = threading.Thread(target=first)
    t.start()
    assert inside.wait(timeout=30)
    second: Callable[[], Any] = (
        (lambda: other.generate(PROMPT, 4)) if call == "generate" else other.reset
    )
    with pytest.raises(GenerationError) as err:
        second()
    _assert_one_line(str(err.value), f"cannot {call}", "generating in another thread")
    release.set()
    t.join()
    assert out["ids"] == before  # the refused call did not disturb the running one
    assert runner.generate(PROMPT, 20, ignore_eos=True).token_ids == before
    assert other.generate(PROMPT, 4, ignore_eos=True).token_ids == other_before


def test_resets_hammered_from_another_thread_never_change_a_generation(loaded) -> None:  # type: ignore[no-untyped-def]
    """reset() on the other runner of the load in a tight loop while 30 requests run: a
    reset and a generate never overlap (the later one is refused with one line); every
    request's tokens equal its solo run."""
    runner, other = loaded[1], loaded[0]
    alone = runner.generate(PROMPT, 12, ignore_eos=True).token_ids
    done = threading.Event()
    refused = [0, 0]  # refused, landed

    def hammer() -> None:
        while not done.is_set():
            try:
                other.reset()
                refused[1] += 1
            except GenerationError:
                refused[0] += 1
            time.sleep(0.001)  # a reset every millisecond, as the reproduction did

    t = threading.Thread(target=hammer)
    t.start()
    got: list[list[int]] = []
    try:
        while len(got) < 30:
            try:  # a reset holding the load refuses this thread's call in turn: retry
                got.append(runner.generate(PROMPT, 12, ignore_eos=True).token_ids)
            except GenerationError as e:
                _assert_one_line(str(e), "cannot generate", "another thread")
    finally:
        done.set()
        t.join()
    assert all(ids == alone for ids in got)
    assert refused[0] > 0  # the hammer did hit running generations


# --- soak (the full run is scripts/soak.py on the bundled pair) ------------------------------


def test_soak_script_on_a_tiny_pair(artifacts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import json

    from helpers import run_script

    pair = artifacts.tree_draft()
    out = tmp_path / "soak.json"
    res = run_script("soak", "--target", pair.target.pte, "--draft", pair.pte,
                     "--requests", 18, "--max-new-tokens", 8, "--warmup", 2,
                     "--fresh-checks", 3, "--json", out)  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads(out.read_text())
    assert report["requests"] == 18 and report["generated_tokens"] == 18 * 8
    modes = {"target-only", "chain3", "chain7 scratch", "static", "dynamic", "chain3 sampled"}
    assert set(report["modes"]) == modes and min(report["modes"].values()) >= 2
    assert len(report["rss_bytes"]) == 18 and report["fresh_checks"] == 3
    assert not (report["repeat_mismatches"] or report["greedy_mismatches"])
    assert not report["fresh_mismatches"]


@pytest.mark.slow
def test_soak_200_requests_keep_memory_flat_and_outputs_fresh(artifacts, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The full soak on the tiny tree pair: 200 requests, 12,800 tokens, one loaded pair."""
    import json

    from helpers import run_script

    pair = artifacts.tree_draft()
    out = tmp_path / "soak.json"
    res = run_script("soak", "--target", pair.target.pte, "--draft", pair.pte, "--json", out)
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads(out.read_text())
    assert report["requests"] == 200 and report["generated_tokens"] == 200 * 64
    # Growth over the 180 steady requests stays under 1% of the resident set.
    growth = report["rss_slope_bytes_per_request"] * (report["requests"] - 20)
    assert growth < 0.01 * report["rss_after_warmup_bytes"], report


def test_errors_quoting_user_input_stay_one_line(files, runner_bin: Path) -> None:  # type: ignore[no-untyped-def]
    """A newline in the input is printed escaped, so the error is still one line (the CLI
    in a real process, and the C++ runner)."""
    args = ["--target", str(files["target"]), "--draft", str(files["draft"])]
    cli = subprocess.run(
        [sys.executable, "-m", "etspec", "generate", *args, "--prompt-ids", "1,x\ny"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert cli.returncode == 2 and "Traceback" not in cli.stderr  # a usage error
    assert cli.stderr.splitlines()[-1].startswith("error: ") and "x\\ny" in cli.stderr
    cpp = _cpp_error(runner_bin, *args, "--prompt-ids", "1,x\ny")
    assert "x\\ny" in cpp


def test_cpp_chain_longer_than_any_int_is_refused_with_its_width(files, runner_bin: Path) -> None:  # type: ignore[no-untyped-def]
    big = str(2**63 - 1)
    line = _cpp_error(runner_bin, "--target", str(files["target"]), "--draft",
                      str(files["draft"]), "--tree", "chain", "--num-spec-tokens", big,
                      "--prompt-ids", "1,2")  # fmt: skip
    assert f"needs a verify width of {2**63};" in line and "-9223372036854775808" not in line


def test_seeded_auto_sampling_repeats_in_python_and_cpp(files, runner_bin: Path) -> None:  # type: ignore[no-untyped-def]
    """A seeded sampling request under --tree auto gives the same ids on every run, in both
    runtimes, and they are target-only's: coupled sampling fixes each token by the seed and
    its position, whatever the timed dispatcher chose (5 requests on one runner after an
    unseeded one that taught the dispatcher, 5 C++ processes, each runtime's target-only)."""
    spec = RunnerSpec(files["target"], files["draft"], tree=TreeSettings("auto"))
    base, runner = load_runners(spec)
    assert runner is not None
    runner.generate(PROMPT, 20, SamplingConfig(0.8), ignore_eos=True)
    seeded = SamplingConfig(0.8, top_p=0.95, seed=7)
    python = {tuple(runner.generate(PROMPT, 20, seeded, ignore_eos=True).token_ids)
              for _ in range(5)}  # fmt: skip
    assert python == {tuple(base.generate(PROMPT, 20, seeded, ignore_eos=True).token_ids)}
    args = [str(runner_bin), "--target", str(files["target"]), "--temperature", "0.8",
            "--top-p", "0.95", "--seed", "7", "--prompt-ids", ",".join(map(str, PROMPT)),
            "--max-new-tokens", "20", "--ignore-eos", "--print-ids"]  # fmt: skip
    speculative = [*args, "--draft", str(files["draft"]), "--tree", "auto"]
    cpp = {subprocess.run(speculative, capture_output=True, text=True, check=True).stdout
           for _ in range(5)}  # fmt: skip
    alone = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    assert cpp == {alone}
    assert [int(t) for t in alone.split()] == list(python.pop())  # the same in both runtimes


def test_a_seeded_draw_depends_on_the_seed_and_position_alone() -> None:
    """Coupled sampling: what a seeded request draws at a position follows from the seed,
    the position and the distribution, not from how many draws came before (which shapes
    the dispatcher ran) nor from the time anything took."""
    import numpy as np

    from etspec.runtime.sampling import Sampler, TokenDist

    rng = np.random.default_rng(0)
    p = TokenDist(np.arange(50), rng.dirichlet(np.full(50, 0.3)))
    a, b = Sampler(SamplingConfig(0.7, seed=1)), Sampler(SamplingConfig(0.7, seed=1))
    for _ in range(7):
        b.uniform()  # other draws in between change nothing
    first = [a.draw(p, i) for i in range(200)]
    assert first == [b.draw(p, i) for i in reversed(range(200))][::-1]
    assert first != [Sampler(SamplingConfig(0.7, seed=2)).draw(p, i) for i in range(200)]
    assert len(set(first)) > 5
    assert not Sampler(SamplingConfig(0.7)).coupled  # unseeded: rejection sampling


@pytest.mark.parametrize(
    ("knob", "mode"),
    [(["--static-tree", "N3"], "static"), (["--draft-topk", "2"], "dynamic"),
     (["--total-tokens", "4"], "dynamic"), (["--num-steps", "2"], "dynamic")],
)  # fmt: skip
def test_tree_options_without_their_mode_are_refused(files, runner_bin: Path, knob, mode) -> None:  # type: ignore[no-untyped-def]
    """--static-tree with --tree chain (or auto, the default) used to be ignored silently."""
    args = ["--target", str(files["target"]), "--draft", str(files["draft"]),
            "--prompt-ids", "1,2", *knob]  # fmt: skip
    words = f"{knob[0]} shapes --tree {mode} only; add --tree {mode} or drop {knob[0]}"
    res = _cli("generate", *args, "--tree", "chain")
    assert res.exit_code == 2 and words in res.stderr, res.output
    assert words in _cpp_error(runner_bin, *args)  # C++'s default --tree is auto


def test_temperatures_below_the_sampling_eps_are_greedy(loaded, files, runner_bin: Path) -> None:  # type: ignore[no-untyped-def]
    """As in vLLM: 5e-324 (0 as a float) used to emit one token over and over in C++ and
    call the model broken in Python; now both give the greedy ids."""
    for runner in loaded:
        greedy = runner.generate(PROMPT, 12, ignore_eos=True).token_ids
        tiny = runner.generate(PROMPT, 12, SamplingConfig(5e-324, seed=1), ignore_eos=True)
        assert tiny.token_ids == greedy
    args = [str(runner_bin), "--target", str(files["target"]), "--draft", str(files["draft"]),
            "--tree", "chain", "--prompt-ids", ",".join(map(str, PROMPT)),
            "--max-new-tokens", "12", "--ignore-eos"]  # fmt: skip
    run = [subprocess.run([*args, *extra], capture_output=True, text=True, check=True).stdout
           for extra in ([], ["--temperature", "5e-324", "--seed", "1"])]  # fmt: skip
    assert run[0] == run[1] and run[0].split()


_CHANGED_UNDERNEATH = """
import sys
from pathlib import Path
from etspec.runtime.spec import RunnerSpec
from etspec.runtime.runner import load_runners
from etspec.runtime.spec import TreeSettings

target, draft = Path(sys.argv[1]), Path(sys.argv[2])
runners = load_runners(RunnerSpec(target, draft, tree=TreeSettings("chain", 3)))
prompt = [3, 1, 4, 1, 5, 9, 2, 6, 5]
before = [r.generate(prompt, 12).token_ids for r in runners]
for f in (target, draft):
    size = f.stat().st_size
    with f.open("r+b") as out:  # what `cp other.pte f` does: truncate, then write in place
        out.truncate(64)
        out.write(b"\\0" * 4096)
after = [r.generate(prompt, 12).token_ids for r in runners]
print(before == after, before[1])
"""


def test_a_loaded_runner_survives_its_files_changing_underneath(files, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Truncating and rewriting a loaded ``.pte`` in place (``cp`` over it) leaves the
    loaded runners generating what they generated before: the runtime runs the bytes it
    checked, read once, not a mapping of the file (which died of SIGBUS). In a subprocess,
    because a SIGBUS would take the test process with it."""
    target, draft = tmp_path / "t.pte", tmp_path / "d.pte"
    shutil.copy(files["target"], target)
    shutil.copy(files["draft"], draft)
    proc = subprocess.run(
        [sys.executable, "-c", _CHANGED_UNDERNEATH, str(target), str(draft)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    same, ids = proc.stdout.split(" ", 1)
    assert same == "True", proc.stdout
    assert ids.strip() == str(files_ids(files)), proc.stdout


def files_ids(files) -> list[int]:  # type: ignore[no-untyped-def]
    """The speculative runner's ids for the subprocess's request, from a fresh load here."""
    spec = RunnerSpec(files["target"], files["draft"], tree=TreeSettings("chain", 3))
    return load_runners(spec)[1].generate(PROMPT, 12).token_ids


# --- in a real process ------------------------------------------------------------------------
# What a user sees on stderr, from the installed entry point (``python -m etspec``): CliRunner
# runs in-process and cannot see native log lines or exit codes set by the interpreter.
# (name, args with "{x}" for files[x], exit code, words of the one error line)
PROCESS_CASES: list[tuple[str, list[str], int, str]] = [
    ("seed beyond 64 bits", ["generate", "--target", "{target}", "--prompt-ids", "1,2",
     "--temperature", "1", "--seed", str(1 << 64)], 2, "--seed"),
    ("negative seed", ["generate", "--target", "{target}", "--prompt-ids", "1,2",
     "--temperature", "1", "--seed", "-1"], 2, "--seed"),
    ("prompt not UTF-8", ["generate", "--target", "{target}", "--prompt", "ab\udcff"], 1,
     "not UTF-8"),
    ("prompt-ids typo", ["generate", "--target", "{target}", "--draft", "{draft}",
     "--prompt-ids", "1,2,x"], 2, "comma-separated token ids"),
    ("token outside vocabulary after load", ["generate", "--target", "{target}",
     "--prompt-ids", "1,99"], 1, "outside the vocabulary"),
    ("static tree of 10^8 nodes", ["generate", "--target", "{target}", "--draft", "{draft}",
     "--tree", "static", "--static-tree", "N100000000", "--prompt-ids", "1,2"], 1,
     "needs a verify width of 100000001"),
    ("repetition penalty NaN", ["generate", "--target", "{target}", "--prompt-ids", "1,2",
     "--repetition-penalty", "nan"], 1, "repetition penalty must be a finite number"),
    ("max-seq not an integer", ["generate", "--reference", "--target", "{target_ckpt}",
     "--max-seq", "1e9", "--prompt-ids", "1,2"], 2, "--max-seq"),
    ("reference max-seq beyond training", ["generate", "--reference", "--target",
     "{target_ckpt}", "--max-seq", "1000000000", "--prompt-ids", "1,2"], 1,
     "exceeds the 512 tokens this model was trained for"),
    ("bench --cpp-runner not the runner", ["bench", "--target", "{target}", "--prompts",
     "{prompts}", "--max-new-tokens", "4", "--cpp-runner", sys.executable], 1,
     "is not the etspec C++ runner"),
    ("bench --json into a missing folder", ["bench", "--target", "{target}", "--prompts",
     "{prompts}", "--max-new-tokens", "4", "--json", "{missing_dir}/x.json"], 1,
     "does not exist"),
    ("bench --json onto a folder", ["bench", "--target", "{target}", "--prompts", "{prompts}",
     "--max-new-tokens", "4", "--json", "{directory}"], 1, "is a directory"),
    ("bench --traces onto a folder", ["bench", "--target", "{target}", "--draft", "{draft}",
     "--prompts", "{prompts}", "--max-new-tokens", "4", "--traces", "{directory}"], 1,
     "is a directory"),
    ("validate non-integer prompt ids", ["validate", "--target", "{target}", "--draft",
     "{draft}", "--prompts", "{bad_prompts}"], 1, "prompt"),
    ("export -o naming a folder", ["export", "target", "{target_ckpt}", "-o", "{out_dir}/"], 1,
     "names a folder"),
    ("export -o a dangling link", ["export", "target", "{target_ckpt}", "-o", "{dangling}"], 1,
     "already exists"),
    ("export -o a name too long", ["export", "target", "{target_ckpt}", "-o",
     "{out_dir}/" + "x" * 300 + ".pte"], 1, "File name too long"),
    ("export --max-seq beyond training", ["export", "target", "{target_ckpt}", "-o",
     "{out_dir}/t.pte", "--max-seq", "100000"], 1, "exceeds the 512 tokens"),
    ("chain length 0 under --tree auto", ["generate", "--target", "{target}", "--draft",
     "{draft}", "--prompt-ids", "1,2", "--num-spec-tokens", "0"], 2, "--num-spec-tokens"),
    ("no command", [], 2, "no command given"),
]  # fmt: skip


@pytest.fixture(scope="module")
def process_files(files, artifacts, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("process")
    out = dict(files)
    out["target_ckpt"] = artifacts.small_draft().target.checkpoint
    out["prompts"] = root / "prompts.jsonl"
    out["prompts"].write_text('{"prompt_ids": [1, 2, 3]}\n')
    out["bad_prompts"] = root / "bad.jsonl"
    out["bad_prompts"].write_text('{"prompt_ids": [1, "x", 3]}\n')
    out["missing_dir"] = root / "missing"
    out["out_dir"] = root / "out"
    out["out_dir"].mkdir()
    out["dangling"] = root / "out" / "link.pte"
    out["dangling"].symlink_to(root / "nowhere.pte")
    return out


@pytest.mark.parametrize(
    ("name", "args", "code", "words"), PROCESS_CASES, ids=[c[0] for c in PROCESS_CASES]
)
def test_bad_input_in_a_real_process(process_files, name: str, args, code: int, words: str) -> None:  # type: ignore[no-untyped-def]
    argv = [a.format(**{k: str(v) for k, v in process_files.items()}) for a in args]
    before = _snapshot({k: v for k, v in process_files.items() if k != "dangling"})
    res = subprocess.run(
        [sys.executable, "-m", "etspec", *argv],
        capture_output=True,
        text=True,
        errors="surrogateescape",
        timeout=300,
    )
    assert res.returncode == code, (res.returncode, res.stderr[-3000:])
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr[-3000:]
    assert words in lines[0], lines[0]
    assert res.stdout == ""
    assert _snapshot({k: v for k, v in process_files.items() if k != "dangling"}) == before
    assert process_files["dangling"].is_symlink() and not process_files["dangling"].exists()
    assert list(process_files["out_dir"].iterdir()) == [process_files["dangling"]]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        # istream reads "-1" into an unsigned seed as 2^64 - 1.
        (["--temperature", "1", "--seed", "-1"], "--seed takes a number, got '-1'"),
        # Under the default --tree auto no chain is built, so the length was never checked.
        (["--num-spec-tokens", "0"], "--num-spec-tokens must be at least 1"),
    ],
)
def test_cpp_refuses_values_out_of_range_before_loading(
    files, runner_bin: Path, args, words
) -> None:  # type: ignore[no-untyped-def]
    line = _cpp_error(runner_bin, "--target", files["target"], "--draft", files["draft"],
                      "--prompt-ids", "1,2", *args)  # fmt: skip
    assert words in line, line
