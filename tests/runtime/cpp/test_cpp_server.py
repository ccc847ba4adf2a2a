"""`etspec serve`, the OpenAI-compatible server, through the official `openai` client: chat
and text completions, streamed and not, give the tokens `etspec generate` gives; concurrent
clients are all answered; malformed requests get a 4xx JSON error and serving goes on."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from etspec.runtime.runner import TextLLMRunner, load_runners
from etspec.runtime.sampling import SamplingConfig
from etspec.runtime.spec import RunnerSpec

openai = pytest.importorskip("openai")

CHAT = [
    [{"role": "user", "content": "hi there"}],
    [{"role": "system", "content": "be brief"}, {"role": "user", "content": "été?"}],
    [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ],
]
PROMPTS = ["def fib(n):", "import os\n", "class Point:"]


class Served:
    def __init__(self, runner_bin: Path, target: Path, draft: Path | None) -> None:
        server = runner_bin.parent / "etspec_server"
        cmd = [sys.executable, "-m", "etspec", "serve", "--target", str(target), "--port", "0"]
        cmd += ["--server-bin", str(server), *(["--draft", str(draft)] if draft else [])]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()  # "etspec server: http://127.0.0.1:PORT/v1 ..."
        assert "etspec server: http://127.0.0.1:" in line, line
        self.port = int(line.split("127.0.0.1:")[1].split("/")[0])
        self.client = openai.OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1", api_key="x")

    def raw(self, method: str, path: str, body: bytes | str | None = None) -> tuple[int, dict]:  # type: ignore[type-arg]
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
        res = conn.getresponse()
        data = res.read()
        conn.close()
        return res.status, json.loads(data)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def chat_server(artifacts, runner_bin: Path) -> Iterator[tuple[Served, Path]]:  # type: ignore[no-untyped-def]
    pte = artifacts.target("gemma3_text").pte
    served = Served(runner_bin, pte, None)
    yield served, pte
    served.close()


@pytest.fixture(scope="module")
def text_server(artifacts, runner_bin: Path) -> Iterator[tuple[Served, TextLLMRunner]]:  # type: ignore[no-untyped-def]
    pair = artifacts.bpe_text_pair()
    served = Served(runner_bin, pair.target.pte, pair.pte)
    _, runner = load_runners(RunnerSpec(pair.target.pte, pair.pte))
    assert runner is not None
    yield served, runner
    served.close()


def test_chat_completions_give_the_python_runners_text(chat_server) -> None:  # type: ignore[no-untyped-def]
    served, pte = chat_server
    runner = TextLLMRunner.from_pte(pte)
    for messages in CHAT:
        want = runner.chat(messages, 8, SamplingConfig(), ignore_eos=True).text
        kw = dict(model="m", messages=messages, max_tokens=8, temperature=0,
                  extra_body={"ignore_eos": True})  # fmt: skip
        got = served.client.chat.completions.create(**kw)
        assert got.choices[0].message.content == want
        assert got.usage.completion_tokens == 8
        assert got.choices[0].finish_reason == "length"
        stream = served.client.chat.completions.create(**kw, stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == want
    assert served.client.models.list().data[0].id == pte.name


def test_completions_give_the_python_runners_text_greedy_and_seeded(text_server) -> None:  # type: ignore[no-untyped-def]
    served, runner = text_server
    for prompt in PROMPTS:
        for temperature, seed in ((0.0, None), (0.8, 5)):
            sampling = SamplingConfig(temperature, seed=seed)
            want = runner.generate(prompt, 16, sampling, ignore_eos=True)
            kw = dict(model="m", prompt=prompt, max_tokens=16, temperature=temperature,
                      seed=seed, extra_body={"ignore_eos": True})  # fmt: skip
            got = served.client.completions.create(**kw)
            assert got.choices[0].text == want.text
            assert got.model_extra["etspec"]["completion_ids"] == want.token_ids
            stream = served.client.completions.create(**kw, stream=True)
            assert "".join(c.choices[0].text for c in stream if c.choices) == want.text


def test_a_conversation_reuses_its_cache_and_stop_strings_cut(text_server) -> None:  # type: ignore[no-untyped-def]
    served, runner = text_server
    first = served.client.completions.create(
        model="m", prompt="def fib(n):", max_tokens=12, temperature=0
    )
    again = served.client.completions.create(
        model="m", prompt="def fib(n):" + first.choices[0].text + "\n", max_tokens=4, temperature=0
    )
    assert again.usage.prompt_tokens_details.cached_tokens > 0
    whole = runner.generate("class Point:", 24, SamplingConfig(), ignore_eos=True).text
    stop = whole[5:8]
    cut = served.client.completions.create(
        model="m", prompt="class Point:", max_tokens=24, temperature=0, stop=[stop]
    )
    assert cut.choices[0].text == whole[: whole.index(stop)]
    assert cut.choices[0].finish_reason == "stop"


def test_four_concurrent_clients_are_all_answered(text_server) -> None:  # type: ignore[no-untyped-def]
    served, runner = text_server
    want = {p: runner.generate(p, 12, SamplingConfig(), ignore_eos=True).text for p in PROMPTS}
    got: list[tuple[str, str]] = []
    errors: list[BaseException] = []

    def ask(prompt: str) -> None:
        try:
            client = openai.OpenAI(base_url=f"http://127.0.0.1:{served.port}/v1", api_key="x")
            extra = {"ignore_eos": True}
            out = client.completions.create(
                model="m", prompt=prompt, max_tokens=12, temperature=0, extra_body=extra
            )
            got.append((prompt, out.choices[0].text))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=ask, args=(PROMPTS[i % 3],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and len(got) == 4
    assert all(text == want[p] for p, text in got)


MALFORMED: list[tuple[str, bytes | str]] = [
    ("/v1/chat/completions", b"{not json"),
    ("/v1/chat/completions", b"\xff\xfe\xfd"),
    ("/v1/chat/completions", b'{"messages": "\xff"}'),
    ("/v1/chat/completions", "[]"),
    ("/v1/chat/completions", "null"),
    ("/v1/chat/completions", "{}"),
    ("/v1/chat/completions", '{"messages": []}'),
    ("/v1/chat/completions", '{"messages": "hi"}'),
    ("/v1/chat/completions", '{"messages": [1]}'),
    ("/v1/chat/completions", '{"messages": [{"content": "x"}]}'),
    ("/v1/chat/completions", '{"messages": [{"role": 3, "content": "x"}]}'),
    ("/v1/chat/completions", '{"messages": [{"role": "user", "content": 3}]}'),
    ("/v1/chat/completions", '{"messages": [{"role": "user", "content": {}}]}'),
    ("/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": "x"}] * 2000})),
    ("/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": "x" * 5000}]})),
]
_ok = {"messages": [{"role": "user", "content": "hi"}]}
for _field, _value in [
    ("max_tokens", 0), ("max_tokens", -1), ("max_tokens", "8"), ("max_tokens", 1.5),
    ("max_tokens", 10**6), ("temperature", "hot"), ("temperature", -1), ("top_p", 2),
    ("top_p", "x"), ("top_k", -3), ("seed", "x"), ("seed", 1.5), ("stop", 3), ("stop", [""]),
    ("stop", ["a", "b", "c", "d", "e"]), ("stream", "yes"), ("stream_options", 1),
    ("stream_options", {"x": True}), ("n", 2), ("logprobs", True), ("tools", []),
    ("unknown_field", 1), ("ignore_eos", "no"), ("frequency_penalty", 1),
    ("max_completion_tokens", 0),
]:  # fmt: skip
    MALFORMED.append(("/v1/chat/completions", json.dumps({**_ok, _field: _value})))
MALFORMED += [
    ("/v1/completions", "{}"),
    ("/v1/completions", '{"prompt": 3}'),
    ("/v1/completions", '{"prompt": []}'),
    ("/v1/completions", '{"prompt": [1, "a"]}'),
    ("/v1/completions", '{"prompt": [99999999]}'),
    ("/v1/completions", '{"prompt": "x", "top_k": 1.5}'),
    ("/v1/completions", json.dumps({"prompt": "x", "max_tokens": 10**9})),
    ("/v1/nothing", "{}"),
    ("/v1/chat/completions", b"x" * (9 << 20)),
    ("/v1/completions", '{"prompt": "x", "echo": true}'),
]


def test_fifty_malformed_requests_each_get_a_4xx_json_error(chat_server) -> None:  # type: ignore[no-untyped-def]
    served, _ = chat_server
    assert len(MALFORMED) >= 50
    for path, body in MALFORMED:
        status, answer = served.raw("POST", path, body)
        assert 400 <= status < 500, (path, body[:80], status, answer)
        assert isinstance(answer["error"]["message"], str) and answer["error"]["message"]
        assert "\n" not in answer["error"]["message"]
    status, answer = served.raw("GET", "/health")
    assert (status, answer) == (200, {"status": "ok"})
    ok = served.client.chat.completions.create(
        model="m", messages=CHAT[0], max_tokens=4, temperature=0
    )
    assert ok.choices[0].message.content is not None


CACHE = Path(__file__).resolve().parents[3] / ".etspec-cache"
GEMMA = CACHE / "gemma-3-270m" / "exports"


def test_the_bundled_pair_serves_the_python_runners_text(runner_bin: Path) -> None:
    """The bundled pair as scripts/export_bundled.sh exports it (skipped before it has run):
    greedy and seeded completions, whole and streamed, are the Python runner's."""
    target, draft = CACHE / "target.pte", CACHE / "draft.pte"
    if not (target.is_file() and draft.is_file()):
        pytest.skip(f"no {target}: bash scripts/export_bundled.sh exports the bundled pair there")
    _, runner = load_runners(RunnerSpec(target, draft))
    assert runner is not None
    served = Served(runner_bin, target, draft)
    try:
        for prompt in ("def fib(n):", "def is_palindrome(text: str) -> bool:\n"):
            for temperature, seed in ((0.0, None), (0.8, 11)):
                want = runner.generate(prompt, 40, SamplingConfig(temperature, seed=seed))
                kw = dict(model="m", prompt=prompt, max_tokens=40, temperature=temperature,
                          seed=seed)  # fmt: skip
                got = served.client.completions.create(**kw)
                assert got.model_extra["etspec"]["completion_ids"] == want.token_ids
                stream = served.client.completions.create(**kw, stream=True)
                assert "".join(c.choices[0].text for c in stream if c.choices) == want.text
    finally:
        served.close()


@pytest.mark.real
def test_gemma3_270m_with_its_draft_serves_the_python_runners_text(runner_bin: Path) -> None:
    """The real pair (scripts/bench_gemma_draft.sh exports it): greedy completions, streamed
    and whole, are the Python runner's text, and a conversation's next turn is reused."""
    target, draft = GEMMA / "target-default.pte", GEMMA / "draft-shipped.pte"
    if not (target.is_file() and draft.is_file()):
        pytest.skip(f"no {target} and {draft}: run scripts/bench_gemma_draft.sh")
    _, runner = load_runners(RunnerSpec(target, draft))
    assert runner is not None
    served = Served(runner_bin, target, draft)
    try:
        prompts = ["Translate to French: The weather is lovely today.\nFrench:",
                   "Q: Why is the sky blue?\nA:"]  # fmt: skip
        for prompt in prompts:
            want = runner.generate(prompt, 48, SamplingConfig(), ignore_eos=True)
            kw = dict(model="m", prompt=prompt, max_tokens=48, temperature=0,
                      extra_body={"ignore_eos": True})  # fmt: skip
            got = served.client.completions.create(**kw)
            assert got.model_extra["etspec"]["completion_ids"] == want.token_ids
            stream = served.client.completions.create(**kw, stream=True)
            assert "".join(c.choices[0].text for c in stream if c.choices) == want.text
        turn = served.client.completions.create(
            model="m", prompt=prompts[-1] + got.choices[0].text + "\nQ: And at sunset?\nA:",
            max_tokens=16, temperature=0,
        )  # fmt: skip
        assert turn.usage.prompt_tokens_details.cached_tokens >= len(want.prompt_ids)
    finally:
        served.close()


def test_serve_without_a_server_binary_says_how_to_get_one(tmp_path: Path) -> None:
    target = tmp_path / "t.pte"
    target.write_bytes(b"x")
    cmd = [sys.executable, "-m", "etspec", "serve", "--target", str(target),
           "--server-bin", str(tmp_path / "missing")]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert out.stderr.strip() == f"error: --server-bin {tmp_path / 'missing'}: no such executable"
