"""A GGUF file's tokenizer as ``tokenizer.json`` and ``tokenizer_config.json``.

A GGUF stores its vocabulary as metadata (``tokenizer.ggml.*``): the tokens, their types and
either merges (``gpt2``: byte-level BPE) or scores (``llama``: SentencePiece BPE). What the
file means is what llama.cpp does with it, so each tokenizer here is built to tokenize as
llama.cpp does with special tokens parsed (as Hugging Face tokenizers match added tokens):

- ``gpt2``: byte-level BPE with the file's merges, split first by the regular expression of
  its pre-tokenizer (``tokenizer.ggml.pre``: ``llama-bpe`` for Llama 3, ``qwen2``, ``gpt-2``,
  ``smollm``), whole-word lookup before merges where llama.cpp does it (``llama-bpe``).
- ``llama``: SentencePiece BPE (Llama 2, Mistral, TinyLlama): merges rebuilt from the scores
  (the best-scoring pair first, as SentencePiece merges), byte fallback, a space put in front
  of every piece of text that starts the input or follows a special token (SentencePiece's
  dummy prefix, as llama.cpp and the original ``tokenizer.json`` files do it).
- Gemma 3's vocabulary (``gemma_tokenizer``): merges in file order, no dummy prefix.

Control and unknown tokens are special (matched whole, skipped on request when decoding),
user-defined ones plain added tokens (matched whole); ``<bos>``/``<eos>`` are added as
``tokenizer.ggml.add_bos_token``/``add_eos_token`` say, with llama.cpp's defaults.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from etspec.errors import CheckpointError
from etspec.models.gguf_read import GGUFMetadata

# llama.cpp's token types (tokenizer.ggml.token_type).
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
SPECIAL_TYPES = (UNKNOWN, CONTROL)

# The split before byte-level BPE, by tokenizer.ggml.pre (the expressions of the original
# tokenizer.json files, which llama.cpp's pre-tokenizers implement).
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
#: tokenizer.ggml.pre -> (split: a regular expression, "gpt-2" for GPT-2's own inside
#: ByteLevel, "digits" for each digit alone and then GPT-2's; whole-word lookup first).
PRE_TOKENIZERS: dict[str, tuple[str, bool]] = {
    "llama-bpe": (_LLAMA3_SPLIT, True),
    "llama3": (_LLAMA3_SPLIT, True),
    "llama-v3": (_LLAMA3_SPLIT, True),
    "qwen2": (_QWEN2_SPLIT, False),
    "gpt-2": ("gpt-2", False),
    "smollm": ("digits", False),
}
#: tokenizer.ggml.model values the Llama family's conversion reads.
TOKENIZER_MODELS = {"gpt2": "byte-level BPE", "llama": "SentencePiece BPE"}


@dataclass
class GGUFTokenizer:
    """A converted tokenizer: ``tokenizer.json`` (bytes) and ``tokenizer_config.json``."""

    tokenizer_json: bytes
    tokenizer_config: dict[str, Any]


@lru_cache(maxsize=1)
def byte_chars() -> dict[int, str]:
    """GPT-2's printable spelling of each byte (``bytes_to_unicode``), as byte-level
    vocabularies spell their tokens."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    keep += range(ord("®"), ord("ÿ") + 1)
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def _merges(tokens: list[str], rank: dict[str, float]) -> list[tuple[str, str]]:
    """The BPE merges a SentencePiece vocabulary implies: every split of a token into two
    tokens, the pairs of the best-ranked token (lowest ``rank``) first, longer left and right
    pieces first among a token's own splits (as transformers rebuilds them)."""
    vocab = {t: i for i, t in enumerate(tokens)}  # a repeated spelling keeps its last id
    merges = []
    for token in rank:
        local = [
            (token[:k], token[k:])
            for k in range(1, len(token))
            if token[:k] in vocab and token[k:] in vocab
        ]
        local.sort(key=lambda lr: (vocab[lr[0]], vocab[lr[1]]))
        merges += [(rank[token], -len(lhs), -len(rhs), lhs, rhs) for lhs, rhs in local]
    merges.sort(key=lambda m: m[:3])  # stable: equal ranks keep the vocabulary's order
    return [(lhs, rhs) for _, _, _, lhs, rhs in merges]


def _types(m: GGUFMetadata, tokens: list[str]) -> list[int]:
    types = m("tokenizer.ggml.token_type", "types", None)
    types = [NORMAL] * len(tokens) if types is None else types
    if len(types) != len(tokens):
        raise m.bad(f"GGUF metadata tokenizer.ggml.token_type has {len(types)} entries for "
                    f"{len(tokens)} tokens")  # fmt: skip
    if "" in tokens:
        raise m.bad(f"GGUF metadata tokenizer.ggml.tokens holds an empty token (id "
                    f"{tokens.index('')})")  # fmt: skip
    return list(types)


def _add_special(tok: Any, tokens: list[str], types: list[int]) -> None:
    """Control and unknown tokens as special tokens, user-defined ones as added tokens: both
    matched whole in the text (llama.cpp with special tokens parsed)."""
    from tokenizers import AddedToken

    pairs = list(zip(tokens, types, strict=True))
    tok.add_special_tokens(
        [AddedToken(t, normalized=False, special=True) for t, k in pairs if k in SPECIAL_TYPES]
    )
    tok.add_tokens(
        [AddedToken(t, normalized=False, special=False) for t, k in pairs if k == USER_DEFINED]
    )


def _template(tok: Any, tokens: list[str], bos: int | None, eos: int | None) -> bytes:
    """``tok``'s tokenizer.json with <bos> in front of and <eos> behind every encoding, as
    the ids say (None: not added). The template is written as the structure tokenizer.json
    holds, not as ``TemplateProcessing``'s string form, whose parser reads a token's text as
    syntax: a bos of ``$A`` repeated every prompt, ``$B:1`` or one with a space failed."""
    if bos is None and eos is None:
        return tok.to_str().encode("utf-8")  # type: ignore[no-any-return]
    from tokenizers import Tokenizer

    data = json.loads(tok.to_str())
    head = [_special(tokens[bos])] if bos is not None else []
    tail = [_special(tokens[eos])] if eos is not None else []
    one = [*head, {"Sequence": {"id": "A", "type_id": 0}}, *tail]
    two = [*head, {"Sequence": {"id": "B", "type_id": 0}}, *tail]
    data["post_processor"] = {
        "type": "TemplateProcessing",
        "single": one,
        "pair": one + two,
        "special_tokens": {
            tokens[i]: {"id": tokens[i], "ids": [i], "tokens": [tokens[i]]}
            for i in (bos, eos)
            if i is not None
        },
    }
    return Tokenizer.from_str(json.dumps(data)).to_str().encode("utf-8")  # type: ignore[no-any-return]


def _special(text: str) -> dict[str, Any]:
    return {"SpecialToken": {"id": text, "type_id": 0}}


def gemma_tokenizer(m: GGUFMetadata) -> bytes:
    """Gemma's tokenizer.json: BPE with byte fallback over the file's vocabulary, spaces as
    '▁', control tokens special, user-defined tokens matched whole, and <bos> added in front
    when the file says so (tokenizer.ggml.add_bos_token), as Gemma needs."""
    from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE

    # A token of spaces only is stored as spaces; the vocabulary spells spaces as '▁'.
    tokens = [
        "▁" * len(t) if " " in t and not t.strip() else t
        for t in m("tokenizer.ggml.tokens", "tokens")
    ]
    types = _types(m, tokens)
    unk_id = m.token_id("tokenizer.ggml.unknown_token_id", len(tokens), min(3, len(tokens) - 1))
    assert unk_id is not None
    # Gemma's files list no merges, and their scores do not follow merge order: the order
    # of the tokens in the file does (as transformers rebuilds them).
    by_position = {t: float(i) for i, t in enumerate(tokens)}
    tok = Tokenizer(
        BPE(
            vocab={t: i for i, t in enumerate(tokens)},
            merges=_merges(tokens, by_position),
            unk_token=tokens[unk_id],
            fuse_unk=True,
            byte_fallback=True,
        )
    )
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous", invert=False)
    tok.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    tok.add_special_tokens(
        [AddedToken(t, normalized=False, special=True)
         for t, k in zip(tokens, types, strict=True) if k == CONTROL]
    )  # fmt: skip
    user = [t for t, k in zip(tokens, types, strict=True) if k == USER_DEFINED]
    tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in user])
    bos_id = m.token_id("tokenizer.ggml.bos_token_id", len(tokens))
    adds_bos = m("tokenizer.ggml.add_bos_token", "flag", False) and bos_id is not None
    return _template(tok, tokens, bos_id if adds_bos else None, None)


def tokenizer_config(
    m: GGUFMetadata,
    tokens: list[str],
    ids: dict[str, int | None],
    add_bos: bool,
    add_eos: bool,
) -> dict[str, Any]:
    """``tokenizer_config.json``: the special tokens by name, whether <bos>/<eos> are added
    and the chat template (tokenizer.chat_template), for tools that load the folder with
    transformers (which then uses tokenizer.json as it is)."""
    config: dict[str, Any] = {"tokenizer_class": "PreTrainedTokenizerFast"}
    for name in ("bos", "eos", "unk", "pad"):
        i = ids.get(name)
        if i is not None:
            config[f"{name}_token"] = tokens[i]
    config["add_bos_token"] = add_bos
    config["add_eos_token"] = add_eos
    config["clean_up_tokenization_spaces"] = False
    template = m("tokenizer.chat_template", "text", None)
    if template is not None:
        config["chat_template"] = template
    return config


def _special_ids(m: GGUFMetadata, vocab: int, model: str) -> dict[str, int | None]:
    """<bos>, <eos>, <unk>, <pad> and the end-of-turn ids, with llama.cpp's defaults for a
    SentencePiece vocabulary (1, 2, 0)."""
    spm = model == "llama"
    key = "tokenizer.ggml.{}_token_id".format
    return {
        "bos": m.token_id(key("bos"), vocab, 1 if spm and vocab > 1 else None),
        "eos": m.token_id(key("eos"), vocab, 2 if spm and vocab > 2 else None),
        "unk": m.token_id(key("unknown"), vocab, 0 if spm else None),
        "pad": m.token_id(key("padding"), vocab),
        "eot": m.token_id(key("eot"), vocab),
        "eom": m.token_id(key("eom"), vocab),
    }


@dataclass
class TokenizerSpec:
    """What a Llama-family GGUF says of its tokenizer, every value checked
    (``read_tokenizer_spec``); ``build_tokenizer`` makes the files from it."""

    model: str
    pre: str | None
    tokens: list[str]
    types: list[int]
    ids: dict[str, int | None]
    add_bos: bool
    add_eos: bool
    merges: list[tuple[str, str]]  # byte-level BPE's; SentencePiece's come from the scores

    @property
    def eos_token_ids(self) -> list[int]:
        """<eos> and the end-of-turn/-message ids llama.cpp also stops at."""
        eos = [self.ids[k] for k in ("eos", "eot", "eom")]
        return list(dict.fromkeys(i for i in eos if i is not None))


def read_tokenizer_spec(m: GGUFMetadata, arch: str) -> TokenizerSpec:
    """The tokenizer metadata of a ``llama``/``qwen2`` GGUF (``tokenizer.ggml.model``
    ``gpt2`` or ``llama``), checked before anything is built."""
    model = m.raw("tokenizer.ggml.model")
    if model is None:
        raise CheckpointError(
            f"{m.path}: the GGUF file has no tokenizer (tokenizer.ggml.model is missing); "
            "convert the model again with its tokenizer (llama.cpp's convert_hf_to_gguf.py)"
        )
    if model not in TOKENIZER_MODELS:
        supported = ", ".join(f"{k} ({v})" for k, v in TOKENIZER_MODELS.items())
        raise CheckpointError(
            f"{m.path}: GGUF tokenizer model {str(model)[:40]!r} (tokenizer.ggml.model) is not "
            f"supported for {arch}; supported: {supported}"
        )
    tokens = m("tokenizer.ggml.tokens", "tokens")
    types = _types(m, tokens)
    ids = _special_ids(m, len(tokens), model)
    pre = None
    add_bos_default = True  # llama.cpp: SentencePiece vocabularies add <bos>
    if model == "gpt2":
        pre = m("tokenizer.ggml.pre", "text", None)
        supported = f"supported pre-tokenizers: {', '.join(PRE_TOKENIZERS)}"
        if pre is None:  # files converted before llama.cpp named pre-tokenizers (May 2024)
            raise CheckpointError(
                f"{m.path}: GGUF metadata tokenizer.ggml.pre is missing, so how text is split "
                "before BPE is unknown; convert the model again with llama.cpp's "
                f"convert_hf_to_gguf.py ({supported})"
            )
        if pre not in PRE_TOKENIZERS:
            raise CheckpointError(
                f"{m.path}: GGUF pre-tokenizer {pre[:40]!r} (tokenizer.ggml.pre) is not "
                f"supported; {supported}"
            )
        add_bos_default = PRE_TOKENIZERS[pre][1]  # llama.cpp adds <bos> for Llama 3 only
        merges = _read_merges(m)
    else:
        scores = m("tokenizer.ggml.scores", "numbers")
        if len(scores) != len(tokens):
            raise m.bad(f"GGUF metadata tokenizer.ggml.scores has {len(scores)} entries for "
                        f"{len(tokens)} tokens")  # fmt: skip
        if m("tokenizer.ggml.remove_extra_whitespaces", "flag", False):
            raise CheckpointError(
                f"{m.path}: GGUF tokenizer.ggml.remove_extra_whitespaces is not supported "
                "(SentencePiece vocabularies that keep white space are)"
            )
        m("tokenizer.ggml.add_space_prefix", "flag", True)
        merges = []
    add_bos = m("tokenizer.ggml.add_bos_token", "flag", add_bos_default)
    add_eos = m("tokenizer.ggml.add_eos_token", "flag", False)
    for name, on in (("bos", add_bos), ("eos", add_eos)):
        if on and ids[name] is None:
            raise m.bad(f"GGUF metadata tokenizer.ggml.{name}_token_id is missing (the file "
                        f"says tokenizer.ggml.add_{name}_token)")  # fmt: skip
    m("tokenizer.chat_template", "text", None)
    return TokenizerSpec(model, pre, tokens, types, ids, add_bos, add_eos, merges)


def _read_merges(m: GGUFMetadata) -> list[tuple[str, str]]:
    """tokenizer.ggml.merges: "LEFT RIGHT" each (spaces inside tokens are spelled 'Ġ')."""
    merges = []
    for n, merge in enumerate(m("tokenizer.ggml.merges", "merges")):
        pair = merge.split(" ")
        if len(pair) != 2 or not all(pair):
            raise m.bad(f"GGUF metadata tokenizer.ggml.merges entry {n} ({merge[:40]!r}) is "
                        "not two tokens")  # fmt: skip
        merges.append((pair[0], pair[1]))
    return merges


def build_tokenizer(m: GGUFMetadata, spec: TokenizerSpec) -> GGUFTokenizer:
    """``tokenizer.json`` and ``tokenizer_config.json`` of a Llama-family GGUF."""
    try:
        if spec.model == "gpt2":
            assert spec.pre is not None
            tok = _byte_level(spec.tokens, spec.types, spec.merges, spec.pre)
        else:
            tok = _sentencepiece_bpe(m, spec.tokens, spec.ids["unk"])
    except CheckpointError:
        raise
    except Exception as e:  # what `tokenizers` refuses in a vocabulary the checks let by
        raise m.bad(f"its tokenizer cannot be built ({str(e)[:80]})") from None
    _add_special(tok, spec.tokens, spec.types)
    ids = spec.ids
    bos, eos = ids["bos"] if spec.add_bos else None, ids["eos"] if spec.add_eos else None
    return GGUFTokenizer(
        tokenizer_json=_template(tok, spec.tokens, bos, eos),
        tokenizer_config=tokenizer_config(m, spec.tokens, ids, spec.add_bos, spec.add_eos),
    )


def _byte_level(
    tokens: list[str], types: list[int], merges: list[tuple[str, str]], pre: str
) -> Any:
    """Byte-level BPE (``gpt2``): the file's merges over its vocabulary, split first as the
    pre-tokenizer says."""
    from tokenizers import Regex, Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE

    spelled = byte_chars()
    alphabet = set(spelled.values())
    vocab: dict[str, int] = {}
    for i, (t, k) in enumerate(zip(tokens, types, strict=True)):
        # Normal tokens are spelled in the byte alphabet; control and user-defined ones are
        # stored as their text, which is matched whole before any byte-level spelling.
        if k in (*SPECIAL_TYPES, USER_DEFINED) or set(t) <= alphabet:
            vocab[t] = i
        else:
            vocab["".join(spelled[b] for b in t.encode("utf-8"))] = i
    split, whole_words = PRE_TOKENIZERS[pre]
    tok = Tokenizer(BPE(vocab=vocab, merges=merges, ignore_merges=whole_words))
    if split == "gpt-2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        first = (
            pre_tokenizers.Digits(individual_digits=True)
            if split == "digits"
            else pre_tokenizers.Split(Regex(split), behavior="isolated", invert=False)
        )
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [first, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=split == "digits")]
        )
    tok.decoder = decoders.ByteLevel()
    return tok


def _sentencepiece_bpe(m: GGUFMetadata, tokens: list[str], unk_id: int | None) -> Any:
    """SentencePiece BPE (``llama``): merges by score, byte fallback, spaces as '▁' and the
    dummy prefix SentencePiece puts in front of each piece of text (llama.cpp: at the start
    and after every special token)."""
    from tokenizers import Tokenizer, decoders, normalizers
    from tokenizers.models import BPE

    scores = m("tokenizer.ggml.scores", "numbers")
    prefix = m("tokenizer.ggml.add_space_prefix", "flag", True)
    # The best score merges first; a repeated spelling keeps its last score.
    rank = {t: -float(s) for t, s in zip(tokens, scores, strict=True)}
    tok = Tokenizer(
        BPE(
            vocab={t: i for i, t in enumerate(tokens)},
            merges=_merges(tokens, rank),
            unk_token=tokens[unk_id] if unk_id is not None else None,
            fuse_unk=True,
            byte_fallback=True,
        )
    )
    spaces = normalizers.Replace(" ", "▁")
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), spaces]) if prefix else spaces
    steps = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    tok.decoder = decoders.Sequence(steps + ([decoders.Strip(" ", 1, 0)] if prefix else []))
    return tok
