"""The C++ runner's text in and out: ``etspec_runner --prompt TEXT`` streams the text and
ids ``etspec generate --prompt TEXT`` gives with the same options, on a Llama target with
the bundled pair's byte-level BPE (with its EAGLE-3 draft) and a Gemma 3 target with a
Gemma-style SentencePiece tokenizer (with prompt lookup); prompt files; the text errors."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from etspec.cli import main

PROMPTS = [
    "def fib(n):\n    return",
    "héllo wörld 日本 😀 <|endoftext|> the",
    "  spaces\t\ttabs\n\nlines <start_of_turn>user\n",
]


def _run(binary: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=300)


def _python(args: list[str]) -> dict:  # type: ignore[type-arg]
    res = CliRunner().invoke(main, ["generate", *args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _pair_args(artifacts, which: str) -> list[str]:  # type: ignore[no-untyped-def]
    if which == "bpe-target-only":
        return ["--target", str(artifacts.target("llama_bpe_text").pte)]
    if which == "gemma-target-only":
        return ["--target", str(artifacts.target("gemma3_text").pte)]
    if which == "gemma-prompt-lookup":
        return ["--target", str(artifacts.target("gemma3_text").pte),
                "--draft-method", "prompt-lookup"]  # fmt: skip
    pair = artifacts.bpe_text_pair()
    return ["--target", str(pair.target.pte), "--draft", str(pair.pte)]


@pytest.mark.parametrize(
    ("which", "tree"),
    [
        ("bpe-target-only", []),
        ("bpe-eagle3", ["--tree", "chain", "--num-spec-tokens", "3"]),
        ("bpe-eagle3", ["--tree", "dynamic"]),
        ("gemma-target-only", []),
        ("gemma-prompt-lookup", ["--tree", "chain"]),
    ],
)
def test_text_prompt_streams_what_etspec_generate_gives(  # type: ignore[no-untyped-def]
    artifacts, runner_bin: Path, which: str, tree: list[str]
) -> None:
    base = _pair_args(artifacts, which) + tree + ["--max-new-tokens", "24", "--ignore-eos"]
    for prompt in PROMPTS:
        want = _python([*base, "--prompt", prompt])
        got = _run(runner_bin, *base, "--prompt", prompt, "--json")
        assert got.returncode == 0, got.stderr
        record = json.loads(got.stdout)
        assert record["token_ids"] == want["token_ids"], prompt
        assert record["text"] == want["text"], prompt
        for key in ("prompt_tokens", "verify_calls", "accepted_tokens"):
            assert record["stats"][key] == want["stats"][key], key
        streamed = _run(runner_bin, *base, "--prompt", prompt)
        assert streamed.returncode == 0, streamed.stderr
        assert streamed.stdout == want["text"] + "\n"  # the pieces, in order, then a newline


def test_prompt_file_and_ids_on_request(artifacts, runner_bin: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    target = str(artifacts.target("gemma3_text").pte)
    path = tmp_path / "prompt.txt"
    path.write_text(PROMPTS[1], encoding="utf-8")
    base = ["--target", target, "--max-new-tokens", "12", "--ignore-eos"]
    want = _python([*base, "--prompt-file", str(path)])
    got = _run(runner_bin, *base, "--prompt-file", str(path), "--print-ids")
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == [str(t) for t in want["token_ids"]]


def test_text_errors_are_one_line(artifacts, runner_bin: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    target = str(artifacts.target("gemma3_text").pte)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok \xc3\x28 then")
    big = tmp_path / "big.txt"
    with open(big, "wb") as f:  # 50 MB, sparse
        f.truncate(50 << 20)
    cases = [
        (["--prompt", "a", "--prompt-ids", "1"], 2, "give exactly one of --prompt TEXT"),
        ([], 2, "give exactly one of --prompt TEXT"),
        (["--prompt-file", str(tmp_path / "none.txt")], 1, "the prompt file cannot be read"),
        (["--prompt-file", str(bad)], 1, "not UTF-8 text (byte 0xc3 at offset 3)"),
        (["--prompt-file", str(tmp_path)], 1, "cannot be read (Is a directory)"),
        (["--prompt-file", "/dev/zero"], 1, "larger than 8 MiB, more than any context holds"),
        (["--prompt-file", str(big)], 1, "larger than 8 MiB, more than any context holds"),
    ]
    for args, code, text in cases:
        res = _run(runner_bin, "--target", target, *args)
        assert res.returncode == code, (args, res.stderr)
        assert res.stderr.startswith("error: ") and text in res.stderr, (args, res.stderr)
        assert res.stderr.count("\n") == 1 and res.stdout == ""
    # Invalid UTF-8 in --prompt: Python's surrogate-escaped argv and C++'s raw bytes alike.
    res = subprocess.run([str(runner_bin), "--target", target, "--prompt", b"ok \xff"],
                         capture_output=True)  # fmt: skip
    assert res.returncode == 1  # as etspec generate's
    line = "error: the prompt is not UTF-8 text (byte 0xff at offset 3); pass UTF-8 text\n"
    assert res.stderr.decode() == line
    python = subprocess.run([sys.executable, "-m", "etspec", "generate", "--target", target,
                             "--prompt", b"ok \xff"], capture_output=True)  # fmt: skip
    assert python.returncode == 1 and python.stderr.decode() == line, python.stderr


def test_a_tokenizer_the_runtime_cannot_read_leaves_ids_working(  # type: ignore[no-untyped-def]
    artifacts, runner_bin: Path
) -> None:
    """llama_small_text's tokenizer is word-level, which the C++ tokenizer does not have:
    text prompts get the reason in one line, ids still generate (and print as ids)."""
    target = str(artifacts.target("llama_small_text").pte)
    res = _run(runner_bin, "--target", target, "--prompt", "w1 w2")
    assert res.returncode == 1
    assert res.stderr == (
        "error: the artifact's tokenizer cannot be read (pre-tokenizer Whitespace is not "
        "supported by the C++ runner)\n"
    )
    res = _run(runner_bin, "--target", target, "--prompt-ids", "1,2", "--max-new-tokens", "4",
               "--ignore-eos")  # fmt: skip
    assert res.returncode == 0 and len(res.stdout.split()) == 4, res.stderr


def test_serve_answers_every_line_and_keeps_serving(artifacts, runner_bin: Path) -> None:  # type: ignore[no-untyped-def]
    """--serve: a request with a non-UTF-8 byte, one that is not JSON and one over the
    request size limit each get one JSON error line; the valid request after them is served."""
    target = str(artifacts.target("gemma3_text").pte)
    lines = [
        b'{"prompt": "caf\xe9"}',
        b"{not json",
        b'{"prompt": "' + b"a" * (9 << 20) + b'"}',
        b'{"prompt_ids": [3, 1, 4], "max_new_tokens": 3, "ignore_eos": true}',
    ]
    res = subprocess.run(
        [str(runner_bin), "--target", target, "--serve"],
        input=b"\n".join(lines) + b"\n",
        capture_output=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    answers = [json.loads(line) for line in res.stdout.decode().splitlines()]
    assert len(answers) == 4, answers
    assert "UTF-8" in answers[0]["error"]
    assert "error" in answers[1]
    assert "longer than 8 MiB" in answers[2]["error"]
    assert len(answers[3]["token_ids"]) == 3


def _malformed_requests() -> list[bytes]:
    """>= 300 request lines --serve must refuse, each with one JSON error line: broken JSON,
    JSON that is not an object, unknown fields, every field given a value of the wrong kind,
    and well-typed values the runner refuses (ranges, vocabulary, context)."""
    rng = random.Random(42)
    valid = b'{"prompt_ids": [3, 1, 4], "max_new_tokens": 3}'
    lines = [valid[:n] for n in range(1, len(valid))]  # every truncation: not JSON
    lines += [b"[" * 100_000, b"[" * 100_000 + b"]" * 100_000, b'{"prompt": "caf\xe9"}',
              b'{"prompt": "\xff\xfe"}', b"\x00", b"NaN", b'{"prompt_ids": [NaN]}',
              b'{"temperature": Infinity, "prompt": "a"}', b"{'prompt': 'a'}",
              b'{"prompt": "a",}', b'{"prompt": "a"} {"prompt": "b"}',
              b'{"prompt": "\\ud800"}']  # fmt: skip
    lines += [rng.randbytes(rng.randint(1, 64)).replace(b"\n", b"") or b"?" for _ in range(70)]
    lines += [json.dumps(v).encode() for v in (1, -2.5, "prompt", None, True, [], [1, 2], "")]
    wrong = [None, True, False, "3", "", 1.5, -1, 0, 2**64, -(2**63) - 1, [], [1.5], {}, {"a": 1},
             [[1]], [True], 1e400]  # fmt: skip
    kinds = {
        "prompt": lambda v: isinstance(v, str),
        "prompt_ids": lambda v: isinstance(v, list) and v and all(type(i) is int for i in v),
        "max_new_tokens": lambda v: type(v) is int and 1 <= v < 2**63,
        "temperature": lambda v: type(v) in (int, float) and 0 <= v < 1e300,
        "top_k": lambda v: type(v) is int and 0 <= v < 2**63,
        "top_p": lambda v: type(v) in (int, float) and 0 < v <= 1,
        "seed": lambda v: v is None or (type(v) is int and 0 <= v < 2**64),
        "ignore_eos": lambda v: isinstance(v, bool),
    }
    for field, ok in kinds.items():
        for value in wrong:
            if ok(value):
                continue
            base = {"prompt": "a"} if field != "prompt" else {}
            if field == "prompt_ids":
                base = {}
            lines.append(json.dumps({**base, field: value}).encode())
    for _ in range(40):  # unknown fields, some near-misses of real ones
        name = rng.choice(["temperture", "max_tokens", "Prompt", "top-p", "seed ", "n", "é" * 50,
                           "x" * 5000, "stream", "stop"])  # fmt: skip
        lines.append(json.dumps({"prompt": "a", name: rng.random()}).encode())
    lines += [json.dumps(r).encode() for r in (
        {}, {"max_new_tokens": 3}, {"prompt": "a", "prompt_ids": [1]},
        {"prompt_ids": [10**9]}, {"prompt_ids": [-1]}, {"prompt_ids": []},
        {"prompt_ids": [3], "max_new_tokens": 10**15}, {"prompt": "a", "temperature": -1},
        {"prompt": "a", "temperature": 1, "top_p": 0},
        {"prompt": "a", "temperature": 1, "top_p": 2},
        {"prompt_ids": [3] * 100_000},
    )]  # fmt: skip
    return lines


def test_serve_refuses_every_malformed_request_and_keeps_serving(  # type: ignore[no-untyped-def]
    artifacts, runner_bin: Path
) -> None:
    """Fuzz --serve: each of >= 300 malformed lines gets exactly one JSON line holding a
    one-line error (no library text, quotes cut short), the process never dies or hangs, and
    a valid request after all of them gives the tokens it gives alone."""
    target = str(artifacts.target("gemma3_text").pte)
    bad = _malformed_requests()
    assert len(bad) >= 300
    good = b'{"prompt_ids": [3, 1, 4], "max_new_tokens": 3, "ignore_eos": true}'
    cmd = [str(runner_bin), "--target", target, "--serve"]
    alone = subprocess.run(cmd, input=good + b"\n", capture_output=True, timeout=120)
    res = subprocess.run(cmd, input=b"\n".join([*bad, good]) + b"\n", capture_output=True,
                         timeout=300)  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    answers = [json.loads(line) for line in res.stdout.decode().splitlines()]
    assert len(answers) == len(bad) + 1
    for line, answer in zip(bad, answers[:-1], strict=True):
        assert set(answer) == {"error"}, (line[:80], answer)
        text = answer["error"]
        assert "\n" not in text and "json.exception" not in text and len(text) < 400, (
            line[:80],
            text,
        )
    assert answers[-1]["token_ids"] == json.loads(alone.stdout)["token_ids"]
    by_line = dict(zip(bad, (a["error"] for a in answers), strict=False))
    assert "unknown request field 'temperture'" in next(
        v for k, v in by_line.items() if b"temperture" in k
    )
    assert by_line[b'{"prompt": "a", "max_new_tokens": 1.5}'] == (
        "request field 'max_new_tokens' must be an integer >= 1, got 1.5"
    )
    assert by_line[b'{"prompt": "a", "seed": -1}'].startswith("request field 'seed' must be")
    assert by_line[b'{"prompt": "a", "prompt_ids": [1]}'] == (
        "a request needs exactly one of the fields prompt, prompt_ids and messages"
    )
