"""TextLLMRunner: target-only behaviour, bad requests, the CLI's generate and validate."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner
from helpers import causal, decode, pair_programs, runners, target_program

from etspec.cli import main
from etspec.contract import TARGET_PREFILL, TARGET_RESET
from etspec.errors import EtspecError
from etspec.runtime.runner import GenerationError, TextLLMRunner
from etspec.runtime.speculative.eagle3 import Eagle3DraftRunner
from etspec.runtime.speculative.generator import SpeculativeTokenGenerator

PROMPT = [3, 1, 4, 1, 5, 9, 2, 6, 5]


def _manual_greedy(program, prompt: list[int], n: int) -> list[int]:  # type: ignore[no-untyped-def]
    """Target-only decoding written out by hand: one prefill call, then one decode per token."""
    program.run(TARGET_RESET)
    chunk = program.metadata.prefill_chunk
    assert len(prompt) <= chunk
    ids = torch.zeros(chunk, dtype=torch.long)
    ids[: len(prompt)] = torch.tensor(prompt)
    logits, _ = program.run(
        TARGET_PREFILL,
        ids,
        torch.arange(chunk),
        torch.tensor([len(prompt) - 1]),
        causal(program, torch.arange(chunk)),
    )
    out = [int(logits.argmax())]
    while len(out) < n:
        pos = len(prompt) + len(out) - 1
        logits, _ = decode(program, out[-1], pos)
        out.append(int(logits.argmax()))
    return out


@pytest.mark.parametrize("name", ["llama_gqa_rope3", "qwen2_bias"])
def test_target_only_equals_transformers_and_a_hand_loop(artifacts, name: str) -> None:
    case = artifacts.target(name)
    program = target_program(case, "pte")
    runner = TextLLMRunner(program)
    prompt = PROMPT[:7]  # one prefill chunk, as the hand loop writes it
    out = runner.generate(prompt, 24, ignore_eos=True)
    assert out.token_ids == _manual_greedy(program, prompt, 24)
    hf = case.hf
    hf.generation_config.eos_token_id = None
    with torch.no_grad():
        ref = hf.generate(torch.tensor([prompt]), max_new_tokens=24, do_sample=False)
    assert out.token_ids == ref[0, len(prompt) :].tolist()
    assert out.stats.decode_calls == 23 and out.stats.verify_calls == 0


@pytest.fixture(scope="module")
def small(artifacts):  # type: ignore[no-untyped-def]
    target, draft = pair_programs(artifacts.small_draft(), "pte")
    base, spec = runners(target, Eagle3DraftRunner(draft), 3)
    return base, spec


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(prompt=torch.tensor([[1, 2], [3, 4]])), "batch size 2 is not supported"),
        (dict(prompt=[[1, 2], [3, 4]]), "batch size 2 is not supported"),
        (dict(prompt=torch.tensor([[[1, 2, 3]]])), r"a prompt tensor of shape \[1, 1, 3\]"),
        (dict(prompt=b"\x01\x02"), "prompt is bytes: pass text as str"),
        (dict(prompt=bytearray(b"\x01")), "prompt is bytes: pass text as str"),
        (dict(prompt=list(range(16)) * 4), "does not fit the context of 64"),
        (dict(prompt=[1, 2], max_new_tokens=63), "exceeds the context of 64"),
        (dict(prompt=[1, 2], max_new_tokens=0), "max_new_tokens must be at least 1"),
        (dict(prompt=[1, 2], max_new_tokens=-3), "max_new_tokens must be at least 1"),
        (dict(prompt=[]), "empty prompt"),
        (dict(prompt=[1, 99]), "outside the vocabulary"),
        (dict(prompt="text"), "carries no tokenizer"),
        (dict(prompt=[1, 2], max_new_tokens=5.0), "max_new_tokens must be at least 1, got 5.0"),
        (dict(prompt=[1, 2], max_new_tokens="5"), "max_new_tokens must be at least 1, got '5'"),
        (dict(prompt=[1, 2], max_new_tokens=True), "max_new_tokens must be at least 1, got True"),
        (dict(prompt=[1, 2.5]), r"token ids must be integers, got 2.5 \(float\)"),
        (dict(prompt=[1, True]), r"token ids must be integers, got True \(bool\)"),
        (dict(prompt=5), "prompt must be text .* got int"),
        (dict(prompt=None), "prompt must be text .* got NoneType"),
        (dict(prompt=[1, 2], sampling=0.7), "sampling must be a SamplingConfig, got float"),
    ],
)
def test_bad_requests_fail_clearly_and_leave_the_runner_usable(small, kwargs, message) -> None:  # type: ignore[no-untyped-def]
    base, spec = small
    for runner in (base, spec):
        before = runner.generate(PROMPT, 12).token_ids
        with pytest.raises(GenerationError, match=message):
            runner.generate(**{"max_new_tokens": 8, **kwargs})
        assert runner.generate(PROMPT, 12).token_ids == before


def test_numpy_ids_are_token_ids(small) -> None:  # type: ignore[no-untyped-def]
    import numpy as np

    base, _ = small
    want = base.generate(PROMPT, 6).token_ids
    assert base.generate(np.asarray(PROMPT), 6).token_ids == want
    assert base.generate([np.int64(t) for t in PROMPT], 6).token_ids == want


def test_lone_surrogate_prompt_is_refused(artifacts) -> None:  # type: ignore[no-untyped-def]
    runner = TextLLMRunner.from_pte(artifacts.target("gemma3_text").pte)
    with pytest.raises(GenerationError, match="lone surrogate U\\+D800 at offset 1"):
        runner.generate("a\ud800b", 4)


@pytest.mark.parametrize(
    ("args", "kwargs", "words"),
    [
        ((None,), {}, "target must be the path of a target .pte, got NoneType"),
        (("t.pte", 3), {}, "draft must be the path of a draft .pte, got int"),
        (("t.pte",), {"num_spec_tokens": "3"}, "chain length\\) must be at least 1, got '3'"),
        (("t.pte",), {"num_spec_tokens": True}, "must be at least 1, got True"),
        (("t.pte",), {"tree": 3}, "tree must be a mode name"),
    ],
)
def test_from_pte_checks_its_arguments_before_loading(args, kwargs, words) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(GenerationError, match=words):
        TextLLMRunner.from_pte(*args, **kwargs)


def test_generator_settings_are_checked_at_construction(artifacts) -> None:  # type: ignore[no-untyped-def]
    target, draft = pair_programs(artifacts.small_draft(), "pte")
    with pytest.raises(EtspecError, match="verify width of 9"):
        SpeculativeTokenGenerator(Eagle3DraftRunner(draft), target.metadata, 8)
    with pytest.raises(EtspecError, match="at least 1"):
        SpeculativeTokenGenerator(Eagle3DraftRunner(draft), target.metadata, 0)
    with pytest.raises(EtspecError, match="unknown KV strategy"):
        SpeculativeTokenGenerator(Eagle3DraftRunner(draft), target.metadata, 3, "paged")


def test_streaming_callback_sees_every_token_in_order(small) -> None:  # type: ignore[no-untyped-def]
    _, spec = small
    seen: list[int] = []
    out = spec.generate(PROMPT, 20, ignore_eos=True, callback=lambda ids, text: seen.extend(ids))
    assert seen == out.token_ids and len(seen) == 20


def test_pte_generation_runs_torch_on_one_thread_and_restores_it(artifacts, small) -> None:  # type: ignore[no-untyped-def]
    """Torch's spinning OpenMP threads would take cores from the program's own pool
    (runtime/threads.py): one thread while .pte programs generate, the caller's after, and
    an eager program keeps its threads for the model's work."""
    _, spec = small
    eager, _ = runners(target_program(artifacts.small_draft().target, "eager"))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for runner, inside in ((spec, 1), (eager, 2)):
            seen: list[int] = []

            def note(ids: list[int], text: str, seen: list[int] = seen) -> None:
                seen.append(torch.get_num_threads())

            runner.generate(PROMPT, 6, ignore_eos=True, callback=note)
            assert seen and set(seen) == {inside}
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_callback_returning_false_stops(small) -> None:  # type: ignore[no-untyped-def]
    _, spec = small
    out = spec.generate(PROMPT, 20, ignore_eos=True, callback=lambda ids, text: False)
    assert out.stop_reason == "callback" and len(out.token_ids) >= 1
    assert len(out.token_ids) < 20


def test_stop_from_another_thread_ends_generation_after_the_current_step(small) -> None:  # type: ignore[no-untyped-def]
    import threading

    _, spec = small
    full = spec.generate(PROMPT, 40, ignore_eos=True).token_ids
    started = threading.Event()

    def on_tokens(ids: list[int], text: str) -> None:
        if not started.is_set():
            started.set()
            stopper = threading.Thread(target=spec.stop)
            stopper.start()
            stopper.join()

    out = spec.generate(PROMPT, 40, ignore_eos=True, callback=on_tokens)
    assert out.stop_reason == "stop"
    assert 1 <= len(out.token_ids) < 40 and out.token_ids == full[: len(out.token_ids)]
    # The next request is not stopped by the earlier stop().
    assert spec.generate(PROMPT, 40, ignore_eos=True).token_ids == full


def test_executorch_style_generate_config_and_callbacks(artifacts) -> None:  # type: ignore[no-untyped-def]
    """Code written against ExecuTorch's TextLLMRunner runs unchanged: generate(prompt,
    config, token_callback, stats_callback), positionally or by keyword."""
    from etspec.runtime.runner import GenerationConfig

    runner = TextLLMRunner.from_pte(artifacts.text_pair().target.pte)
    prompt = "w3 w1 w4"
    assert runner.get_vocab_size() == 16
    want = runner.generate(prompt, 10, ignore_eos=True)
    pieces: list[str] = []
    stats: list = []  # type: ignore[type-arg]
    config = GenerationConfig(max_new_tokens=10, temperature=0.0, echo=True)
    out = runner.generate(prompt, config, pieces.append, stats.append, ignore_eos=True)
    assert out.token_ids == want.token_ids
    assert "".join(pieces) == prompt + want.text  # echo: the prompt's text comes first
    assert len(stats) == 1 and stats[0].generated_tokens == 10
    # Keywords, seq_len bounding prompt + new tokens, a warm-up run streaming nothing.
    n = len(runner.encode(prompt))
    pieces.clear()
    warm = GenerationConfig(seq_len=n + 4, temperature=0.0, warming=True)
    out = runner.generate(prompt, config=warm, token_callback=pieces.append, ignore_eos=True)
    assert out.token_ids == want.token_ids[:4] and pieces == []
    # -1 everywhere: what the context holds.
    assert GenerationConfig().resolve_max_new_tokens(96, n) == 96 - n
    with pytest.raises(GenerationError, match="num_bos/num_eos must be 0"):
        runner.generate(prompt, GenerationConfig(num_bos=1))
    with pytest.raises(GenerationError, match="not both"):
        runner.generate(prompt, config=config, max_new_tokens=4)


def test_stats_and_memory_are_reported(small) -> None:  # type: ignore[no-untyped-def]
    _, spec = small
    st = spec.generate(PROMPT, 20, ignore_eos=True).stats
    assert st.generated_tokens == 20
    assert st.verify_calls > 0 and st.draft_calls > 0
    # A step that proposes nothing (the budget's last token) is a plain decode.
    assert st.decode_calls == st.shape_steps.get("none", 0) <= 1
    assert st.accepted_tokens + st.rejected_tokens == st.drafted_tokens
    assert st.tpc == pytest.approx(1 + st.accepted_tokens / st.verify_calls)
    assert sum(st.accept_pos) == st.accepted_tokens
    # Each step emits its accepted drafts + 1 token: after the first token, that is all of them.
    assert st.accepted_tokens + st.verify_calls + st.decode_calls == st.generated_tokens - 1
    for key in (
        "target_weights_bytes",
        "target_kv_bytes",
        "draft_weights_bytes",
        "draft_kv_bytes",
        "peak_rss_bytes",
    ):
        assert st.memory[key] > 0
    assert set(st.stage_s) >= {"prefill", "draft", "tensorize", "verify", "accept", "commit"}


# --- CLI ------------------------------------------------------------------------------------


def _cli(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, [str(a) for a in args])


def test_cli_generate_json_with_and_without_draft(artifacts, small) -> None:  # type: ignore[no-untyped-def]
    case = artifacts.small_draft()
    base, _ = small
    want = base.generate(PROMPT, 16, ignore_eos=True).token_ids
    ids = ",".join(map(str, PROMPT))
    common = [
        "generate",
        "--target",
        case.target.pte,
        "--prompt-ids",
        ids,
        "--max-new-tokens",
        "16",
        "--ignore-eos",
        "--json",
    ]
    plain = _cli(*common)
    assert plain.exit_code == 0, plain.output
    spec = _cli(*common, "--draft", case.pte, "--kv", "scratch-commit", "--tree", "chain")
    assert spec.exit_code == 0, spec.output
    for res in (plain, spec):
        obj = json.loads(res.stdout)
        assert obj["token_ids"] == want
        assert set(obj) >= {"token_ids", "text", "stats"}
    stats = json.loads(spec.stdout)["stats"]
    assert stats["verify_calls"] > 0 and "acceptance_rate" in stats and "accept_pos" in stats
    assert json.loads(plain.stdout)["stats"]["verify_calls"] == 0


def test_cli_generate_streams_and_reports_acceptance(artifacts) -> None:  # type: ignore[no-untyped-def]
    case = artifacts.small_draft()
    res = _cli(
        "generate",
        "--target",
        case.target.pte,
        "--draft",
        case.pte,
        "--prompt-ids",
        "1,2,3",
        "--max-new-tokens",
        "10",
        "--ignore-eos",
    )
    assert res.exit_code == 0, res.output
    assert len(res.stdout.split()) == 10  # ids streamed (the artifact has no tokenizer)
    assert "acceptance" in res.stderr and "TPC" in res.stderr


def test_cli_generate_text_prompt_with_embedded_tokenizer(artifacts) -> None:  # type: ignore[no-untyped-def]
    case = artifacts.target("mistral_tied")
    res = _cli(
        "generate",
        "--target",
        case.pte,
        "--prompt",
        "w5 w17 w3",
        "--max-new-tokens",
        "6",
        "--ignore-eos",
        "--json",
    )
    assert res.exit_code == 0, res.output
    obj = json.loads(res.stdout)
    assert len(obj["token_ids"]) == 6
    assert obj["text"].split() == [f"w{t}" for t in obj["token_ids"] if t != 0]


def test_cli_reference_mode_equals_pte(artifacts) -> None:  # type: ignore[no-untyped-def]
    case = artifacts.small_draft()
    opts = case.target.opts
    args = ["--prompt-ids", "4,5,6", "--max-new-tokens", "12", "--ignore-eos", "--json"]
    pte = _cli("generate", "--target", case.target.pte, "--draft", case.pte, *args)
    ref = _cli(
        "generate",
        "--reference",
        "--target",
        case.target.checkpoint,
        "--draft",
        case.checkpoint,
        "--max-seq",
        opts.max_seq,
        "--verify-width",
        ",".join(map(str, opts.verify_widths)),
        *args,
    )
    assert pte.exit_code == 0 and ref.exit_code == 0, ref.output
    assert json.loads(pte.stdout)["token_ids"] == json.loads(ref.stdout)["token_ids"]


def test_cli_validate_passes_and_prints_a_line_per_prompt(artifacts, tmp_path) -> None:  # type: ignore[no-untyped-def]
    case = artifacts.small_draft()
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("\n".join(json.dumps({"prompt_ids": p}) for p in ([1, 2], [7] * 10)))
    res = _cli(
        "validate",
        "--target",
        case.target.pte,
        "--draft",
        case.pte,
        "--prompts",
        prompts,
        "--kv",
        "scratch-commit",
        "--tree",
        "dynamic",
    )
    assert res.exit_code == 0, res.output
    assert res.stdout.count("PASS") == 2 and "2/2 prompts identical" in res.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--prompt", "hello"], "carries no tokenizer"),
        (["--prompt-ids", "1,2;3,4"], "batch size 2 is not supported"),
        (["--prompt-ids", "1,2", "--max-new-tokens", "500"], "exceeds the context"),
        (["--prompt-ids", "1,2", "--temperature", "-1"], "temperature must be"),
        (["--prompt-ids", "1,2", "--top-p", "0"], "top-p must be in"),
        (
            ["--prompt-ids", "1,2", "--draft", "{draft}", "--repetition-penalty", "1.2"],
            "cannot be replayed",
        ),
        (
            [
                "--prompt-ids",
                "1,2",
                "--draft",
                "{draft}",
                "--tree",
                "chain",
                "--num-spec-tokens",
                "20",
            ],
            "needs a verify width of 21",
        ),
        (
            [
                "--prompt-ids",
                "1,2",
                "--draft",
                "{draft}",
                "--tree",
                "dynamic",
                "--total-tokens",
                "40",
            ],
            "re-export the target with a larger --verify-width",
        ),
        (
            [
                "--prompt-ids",
                "1,2",
                "--draft",
                "{draft}",
                "--tree",
                "static",
                "--static-tree",
                "[[0], [2, 1]]",
            ],
            "has no parent",
        ),
        (
            ["--prompt-ids", "1,2", "--draft", "{draft}", "--depth", "2", "--num-steps", "3"],
            "not both",
        ),
        (["--prompt-ids", "1,2", "--draft", "{target}"], "draft was expected"),
        ([], "exactly one of --prompt"),
    ],
)
def test_cli_generate_errors_are_one_line(artifacts, args, message) -> None:  # type: ignore[no-untyped-def]
    case = artifacts.small_draft()
    args = [str(a).format(draft=case.pte, target=case.target.pte) for a in args]
    res = _cli("generate", "--target", case.target.pte, *args)
    # Settings refused as they are parsed are usage errors (2), as click's own; the rest 1.
    assert res.exit_code == (2 if message == "not both" else 1)
    assert message in res.stderr
    assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1
    assert "Traceback" not in res.output


def test_reference_device_errors_are_clear() -> None:
    from etspec.runtime.eager import resolve_device

    assert resolve_device("cpu").type == "cpu"
    with pytest.raises(EtspecError, match="unknown device"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(EtspecError, match="no CUDA GPU"):
            resolve_device("cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_reference_on_cuda_equals_cpu(artifacts) -> None:  # type: ignore[no-untyped-def]
    from etspec.runtime.runner import load_runners
    from etspec.runtime.spec import RunnerSpec

    case = artifacts.small_draft()
    opts = case.target.opts
    outs = []
    for device in ("cpu", "cuda"):
        spec = RunnerSpec(
            case.target.checkpoint,
            case.checkpoint,
            reference=True,
            device=device,
            max_seq=opts.max_seq,
            prefill_chunk=opts.prefill_chunk,
            verify_widths=opts.verify_widths,
        )
        _, runner = load_runners(spec)
        assert runner is not None
        outs.append(runner.generate(PROMPT, 24, ignore_eos=True, record_logits=True))
    assert outs[0].token_ids == outs[1].token_ids
