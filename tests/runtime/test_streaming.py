"""Streamed text: the pieces a runner streams concatenate to exactly the one-shot decode of
the same ids, for any ids and any split into pushes, on a byte-level BPE (the bundled
tokenizer) and a SentencePiece-style byte-fallback BPE (the kind Gemma and Llama 2 ship);
and the decoder's cost is linear (the scripts/bench_stream.py benchmark, on a short run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from etspec.runtime.tokenizer import StreamDecoder, Tokenizer

ROOT = Path(__file__).resolve().parents[2]
HARD_TEXTS = [
    "def f(x):\n    return x  # héllo wörld\n",
    "emoji 😀👍🏽 and flags 🇫🇷, a ZWJ family 👨‍👩‍👧",
    "mixed scripts: 日本語のテキスト, 한국어, العربية, עברית, ελληνικά",
    "whitespace   runs\t\ttabs\n\n\nand trailing   ",
    "code: if (a <= b && c != d) { return a->b[0]; } // ~!@#$%^&*()",
    "combining: e\u0301 n\u0303 a\u0308, nbsp:\u00a0, zero-width:\u200b.",
]


def _bundled() -> Tokenizer:
    return Tokenizer((ROOT / "checkpoints/etspec-code-14m/tokenizer.json").read_bytes())


def _byte_fallback() -> Tokenizer:
    """A small SentencePiece-style BPE: '▁' for spaces, byte-fallback tokens <0xNN> in the
    vocabulary for characters outside it, decoders Replace + ByteFallback + Fuse + Strip of
    the first space, as in Llama 2's and Gemma's tokenizer.json."""
    from tokenizers import Tokenizer as HF
    from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

    tok = HF(models.BPE(unk_token=None))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.pre_tokenizer = pre_tokenizers.Split("▁", "merged_with_next")
    tok.decoder = decoders.Sequence(
        [
            decoders.Replace("▁", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(" ", 1, 0),
        ]
    )
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<pad>", "<bos>", "<eos>"])
    tok.train_from_iterator([HARD_TEXTS[0] * 20, "the quick brown fox " * 10], trainer)
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    for b in range(256):  # the byte pieces are ordinary vocabulary, as in SentencePiece
        vocab.setdefault(f"<0x{b:02X}>", len(vocab))
    spec["model"]["byte_fallback"] = True
    return Tokenizer(json.dumps(spec).encode())


TOKENIZERS = {"byte-level BPE": _bundled(), "byte-fallback BPE": _byte_fallback()}


def _stream(tok: Tokenizer, ids: list[int], cuts: list[int]) -> str:
    dec = StreamDecoder(tok)
    pieces, start = [], 0
    for cut in [*sorted(cuts), len(ids)]:
        pieces.append(dec.push(ids[start:cut]))
        start = max(start, cut)
    pieces.append(dec.flush())
    return "".join(pieces)


@pytest.mark.parametrize("name", list(TOKENIZERS))
@pytest.mark.parametrize("text", HARD_TEXTS)
def test_hard_strings_stream_to_their_one_shot_decode(name: str, text: str) -> None:
    tok = TOKENIZERS[name]
    ids = tok.encode(text)
    assert _stream(tok, ids, list(range(len(ids)))) == tok.decode(ids)  # one id per push
    assert _stream(tok, ids, list(range(0, len(ids), 3))) == tok.decode(ids)


@pytest.mark.parametrize("name", list(TOKENIZERS))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_any_ids_any_pushes_stream_to_the_one_shot_decode(name: str, data) -> None:  # type: ignore[no-untyped-def]
    """Arbitrary id sequences, including lone byte-fallback bytes and special tokens that
    never make valid UTF-8, split into arbitrary pushes."""
    tok = TOKENIZERS[name]
    vocab = tok._tok.get_vocab_size()
    ids = data.draw(st.lists(st.integers(0, vocab - 1), max_size=40))
    cuts = data.draw(st.lists(st.integers(0, len(ids)), max_size=12))
    assert _stream(tok, ids, cuts) == tok.decode(ids)


def test_runner_streams_exactly_its_result_text(artifacts) -> None:  # type: ignore[no-untyped-def]
    from etspec.runtime.runner import load_runners
    from etspec.runtime.spec import RunnerSpec, TreeSettings

    pair = artifacts.text_pair()
    spec = RunnerSpec(pair.target.pte, pair.pte, tree=TreeSettings("chain", 3))
    for runner in load_runners(spec):
        assert runner is not None
        pieces: list[str] = []

        def keep(ids: list[int], text: str, pieces: list[str] = pieces) -> None:
            pieces.append(text)

        out = runner.generate("w1 w2 w3", 40, ignore_eos=True, callback=keep)
        assert "".join(pieces) == out.text and out.text.split()


def test_stream_benchmark_is_linear_and_exact(tmp_path: Path) -> None:
    """scripts/bench_stream.py on 2,048 tokens: the streamed text equals the one-shot decode
    and the JSON carries the figures docs/results.md quotes (the 8k run is the benchmark)."""
    from helpers import run_script

    out = tmp_path / "stream.json"
    res = run_script("bench_stream", "--tokens", 2048, "--repeats", 1, "--json", out)
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads(out.read_text())
    assert report["identical"] and report["tokens"] == 2048 and report["pushes"] == 2048
    assert report["stream_total_s"] > 0 and report["one_shot_decode_s"] > 0
