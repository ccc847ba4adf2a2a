"""The tokenizer that travels inside the target artifact (HF ``tokenizer.json``)."""

from __future__ import annotations

from collections.abc import Sequence

from etspec.errors import EtspecError


class Tokenizer:
    """Thin wrapper over ``tokenizers.Tokenizer``; encodes like HF ``tokenizer(text)``."""

    def __init__(self, tokenizer_json: bytes) -> None:
        from tokenizers import Tokenizer as HFTokenizer

        try:
            self._tok = HFTokenizer.from_str(tokenizer_json.decode("utf-8"))
        except Exception as e:
            raise EtspecError(f"the artifact's tokenizer cannot be read ({e})") from None

    def encode(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=True).ids)

    def decode(self, ids: Sequence[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=True)


class StreamDecoder:
    """Turns a growing list of ids into text pieces for streaming.

    Byte-level BPE splits characters across tokens, so text is decoded over the whole
    output and only the new, complete suffix is released (a trailing U+FFFD means a
    multi-byte character is still incomplete).
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.text = ""

    def push(self, ids: Sequence[int]) -> str:
        self.ids.extend(ids)
        text = self.tokenizer.decode(self.ids)
        if text.endswith("\ufffd"):
            return ""
        piece, self.text = text[len(self.text) :], text
        return piece

    def flush(self) -> str:
        text = self.tokenizer.decode(self.ids)
        piece, self.text = text[len(self.text) :], text
        return piece
