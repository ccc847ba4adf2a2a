"""The C++ tokenizer (runtime/cpp/src/tokenizer*) against the Python runtime's
(runtime/tokenizer.py, HF ``tokenizers``): encoding, decoding and streamed text equal on a
corpus of hard strings, for the bundled tokenizer (GPT-2 byte-level BPE) and a Gemma-style
one (SentencePiece BPE with byte fallback, built by the same code that converts Gemma's GGUF);
Gemma 3 270M's own 262k-entry tokenizer under ``-m real``."""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pytest
from tiny import BUNDLED_TOKENIZER, gemma_style_tokenizer

from etspec.runtime.tokenizer import StreamDecoder, Tokenizer

ROOT = Path(__file__).resolve().parents[3]
BUNDLED = BUNDLED_TOKENIZER

CORPUS = [
    "",
    " ",
    "a",
    "Hello, world!",
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "    \n\n\t\t  x  \r\n",
    "  leading and trailing  ",
    "a  b   c    d",
    "tabs\tand\x0bvertical\x0cfeeds\x85nel\u2028line\u2029para\u3000ideo",
    "I'm, you're, they've, he'll, she'd, it's, don't; 'S 'T 'RE (case)",
    "''s ''' 're 'x",
    "Ünïcödé çàfé naïve résumé Ωμέγα Ђорђе",
    "日本語のテキストと中文文本，한국어 텍스트",
    "مرحبا بالعالم שלום עולם",
    "हिन्दी বাংলা தமிழ் ไทย ລາວ",
    "emoji 😀👍🏽👨‍👩‍👧‍👦🇺🇸 ❤️ ✨",
    "math ∑∫√∞ ≠ ≤ ≥ ½ ² ³ ⅓ Ⅻ ① ٣ ๓ 𝟘𝟙",
    "numbers 1234567890 3.14159 1e-10 0x1F 1,000,000",
    "symbols !@#$%^&*()_+-=[]{}|;':\",./<>?`~ «»‹› „“ ‘’",
    "combining e\u0301 a\u0308 \u0301alone",
    "zero\u200bwidth\u200d\ufeffbom",
    "<|endoftext|>",
    "before<|endoftext|>after <|endoftext|><|endoftext|>",
    "<|endoftext",
    "<bos>text<eos> <start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n",
    "<start_of_turn><start_of_turn",
    "\x00\x01\x1f\x7f control",
    "x" * 3000,
    " " * 300 + "y",
    "λ" * 500,
    "a\nb\n\nc\n\n\nd",
    "ends with newline\n",
    "𐍈𐌰𐌹𐍂 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 \U0001f9d1\u200d\U0001f4bb",
    "Σ σ ς ǅ ǈ ǋ ǲ",
]


def _random_strings(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    alphabet = (
        list("abcdefghijklmnopqrstuvwxyzABC0123456789 '\n\t.,;:!?()[]{}<>|_-=+*/\\\"")
        + list("éüßçñøåæœλΩжЖ中文日本語한국ไทยअ١٢٣😀🇺🇸\u200d\u0301\u3000\u00a0")
        + ["<|endoftext|>", "<bos>", "<start_of_turn>", "  ", "\n\n", "'s", "'ll", "▁"]
    )
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 80))) for _ in range(n)]


def _gemma3_270m_tokenizer() -> bytes | None:
    base = Path(os.environ.get("ETSPEC_GEMMA3_270M", ROOT / ".etspec-cache/gemma-3-270m"))
    path = base / "hf" / "tokenizer.json"
    return path.read_bytes() if path.is_file() else None


@pytest.fixture(scope="module")
def tokenize_bin(runner_bin: Path) -> Path:
    return runner_bin.parent / "etspec_tokenize"


def _cpp(tool: Path, tokenizer: bytes, request: dict, tmp_path: Path) -> dict:
    (tmp_path / "tokenizer.json").write_bytes(tokenizer)
    (tmp_path / "request.json").write_text(json.dumps(request))
    res = subprocess.run(
        [str(tool), str(tmp_path / "tokenizer.json"), str(tmp_path / "request.json")],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def _id_sequences(tok: Tokenizer, texts: list[str], seed: int) -> list[list[int]]:
    """What decoding must get right: the corpus's encodings, and random ids (any order of
    byte pieces, special tokens, split characters)."""
    rng = random.Random(seed)
    vocab = tok._tok.get_vocab_size(with_added_tokens=True)
    byte_ids = sorted(tok.run_ids) or list(range(min(vocab, 300)))
    out = [tok.encode(t) for t in texts]
    for _ in range(200):
        pool = byte_ids if rng.random() < 0.5 else range(vocab)
        out.append([rng.choice(pool) for _ in range(rng.randint(1, 24))])
    return out


def _pushes(ids: list[int], rng: random.Random) -> list[list[int]]:
    pushes, i = [], 0
    while i < len(ids):
        k = rng.choice([1, 1, 1, 2, 3, 5])
        pushes.append(ids[i : i + k])
        i += k
    return pushes


def _hold_to_python(tokenizer: bytes, tool: Path, tmp_path: Path, seed: int = 0) -> None:
    tok = Tokenizer(tokenizer)
    texts = CORPUS + _random_strings(300, seed)
    ids = _id_sequences(tok, texts, seed)
    rng = random.Random(seed)
    streams = [_pushes(seq, rng) for seq in ids]
    got = _cpp(tool, tokenizer, {"encode": texts, "decode": ids, "stream": streams}, tmp_path)
    for text, cpp in zip(texts, got["encode"], strict=True):
        assert cpp == tok.encode(text), repr(text)
    for seq, cpp in zip(ids, got["decode"], strict=True):
        assert cpp == tok.decode(seq), seq
    for pushes, cpp in zip(streams, got["stream"], strict=True):
        python = StreamDecoder(tok)
        want = [python.push(p) for p in pushes] + [python.flush()]
        assert cpp == want, pushes
        assert "".join(cpp) == tok.decode([i for p in pushes for i in p])


def test_bundled_tokenizer_equals_python(tokenize_bin: Path, tmp_path: Path) -> None:
    _hold_to_python(BUNDLED.read_bytes(), tokenize_bin, tmp_path)


def test_gemma_style_tokenizer_equals_python(tokenize_bin: Path, tmp_path: Path) -> None:
    _hold_to_python(gemma_style_tokenizer(), tokenize_bin, tmp_path)


@pytest.mark.real
def test_gemma3_270m_tokenizer_equals_python(tokenize_bin: Path, tmp_path: Path) -> None:
    data = _gemma3_270m_tokenizer()
    if data is None:
        pytest.skip("Gemma 3 270M is not here: etspec fetch gemma-3-270m")
    _hold_to_python(data, tokenize_bin, tmp_path, seed=1)


def test_unicode_tables_are_the_python_tokenizers(tmp_path: Path) -> None:
    """The checked-in classes equal what the installed ``tokenizers`` splits by, at every
    code point (else: python scripts/gen_unicode_tables.py)."""
    from helpers import run_script

    out = tmp_path / "unicode_tables.inc"
    res = run_script("gen_unicode_tables", out)
    assert res.returncode == 0, res.stdout + res.stderr
    body = out.read_text().split("\n", 3)[3]
    checked_in = (ROOT / "runtime/cpp/src/tokenizer/unicode_tables.inc").read_text()
    assert checked_in.split("\n", 3)[3] == body


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda j: j.update(normalizer={"type": "NFKC"}), "normalizer NFKC"),
        (lambda j: j["model"].update(type="Unigram"), "model Unigram"),
        (
            lambda j: j.update(
                pre_tokenizer={
                    "type": "Split",
                    "pattern": {"Regex": "\\s+"},
                    "behavior": "Isolated",
                    "invert": False,
                }
            ),
            "Regex pattern",
        ),
        (lambda j: j.update(decoder={"type": "WordPiece"}), "decoder WordPiece"),
        (lambda j: j["model"]["merges"].append(["zzqq", "x"]), "outside the vocabulary"),
        (lambda j: j.clear(), "model"),
    ],
)
def test_an_unreadable_tokenizer_is_one_line(  # type: ignore[no-untyped-def]
    tokenize_bin: Path, tmp_path: Path, change, named
) -> None:
    j = json.loads(BUNDLED.read_text())
    change(j)
    (tmp_path / "t.json").write_text(json.dumps(j))
    (tmp_path / "r.json").write_text("{}")
    res = subprocess.run([str(tokenize_bin), str(tmp_path / "t.json"), str(tmp_path / "r.json")],
                         capture_output=True, text=True)  # fmt: skip
    assert res.returncode == 1
    assert res.stderr.startswith("error: the artifact's tokenizer cannot be read (")
    assert named in res.stderr and res.stderr.count("\n") == 1, res.stderr
