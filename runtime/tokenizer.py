"""The tokenizer that travels inside the target artifact (HF ``tokenizer.json``)."""

from __future__ import annotations

from collections.abc import Sequence

from etspec.contract import message
from etspec.errors import EtspecError


class Tokenizer:
    """Thin wrapper over ``tokenizers.Tokenizer``; encodes like HF ``tokenizer(text)``."""

    def __init__(self, tokenizer_json: bytes) -> None:
        from tokenizers import Tokenizer as HFTokenizer

        try:
            self._tok = HFTokenizer.from_str(tokenizer_json.decode("utf-8"))
        except Exception as e:
            raise EtspecError(message("tokenizer_unreadable", reason=e)) from None
        # SentencePiece-style byte-fallback pieces (<0x00> ... <0xFF>) are decoded as one
        # run, whose bytes all become U+FFFD when the run is not valid UTF-8; special
        # tokens are skipped in decoding, so they do not end a run.
        byte_ids = (self._tok.token_to_id(f"<0x{b:02X}>") for b in range(256))
        byte_ids = {i for i in byte_ids if i is not None}
        if byte_ids:
            specials = self._tok.get_added_tokens_decoder().items()
            byte_ids |= {i for i, t in specials if t.special}
        self.run_ids = frozenset(byte_ids)

    def encode(self, text: str, special: bool = True) -> list[int]:
        """``special`` False: without the tokens the tokenizer adds itself (<bos>), for
        text that writes them already (a rendered chat template)."""
        return list(self._tok.encode(text, add_special_tokens=special).ids)

    def decode(self, ids: Sequence[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=True)


class StreamDecoder:
    """Turns a growing list of ids into text pieces for streaming, in linear time.

    Byte-level BPE and byte-fallback split characters across tokens, so a piece is released
    only once it decodes to complete characters. ``tokenizers``' ``DecodeStream`` does this
    over a few trailing tokens per push (decoding the whole output on every push made a
    7,000-token stream cost seconds). ``flush`` releases whatever is left so that the pieces
    always concatenate to the one-shot ``decode`` of every pushed id.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        from tokenizers.decoders import DecodeStream

        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.text = ""  # what has been released
        self._stream: DecodeStream | None = DecodeStream(skip_special_tokens=True)
        self._held: list[int] = []

    def push(self, ids: Sequence[int]) -> str:
        self.ids.extend(ids)
        if self._stream is None or not ids:
            return ""
        # A trailing run of byte-fallback pieces is held back: the next piece may still be a
        # byte that makes the run invalid UTF-8, and then a one-shot decode turns every byte
        # of the run, including ones already complete, into U+FFFD.
        held = self._held + list(ids)
        cut = len(held)
        while cut and held[cut - 1] in self.tokenizer.run_ids:
            cut -= 1
        feed, self._held = held[:cut], held[cut:]
        if not feed:
            return ""
        try:
            piece = self._stream.step(self.tokenizer._tok, feed)
        except Exception:
            # DecodeStream refuses decoders whose output does not grow by appending (its
            # InvalidPrefix error); the rest of the text then comes out at flush.
            self._stream = None
            return ""
        if not piece:
            return ""
        self.text += piece
        return piece

    def flush(self, text: str | None = None) -> str:
        """The text not yet released (an incomplete character at the end decodes to U+FFFD,
        as in a one-shot decode). ``text``: the one-shot decode of every pushed id, when the
        caller already has it."""
        if text is None:
            text = self.tokenizer.decode(self.ids)
        if not text.startswith(self.text):  # never seen; keep the stream append-only
            return ""
        piece, self.text = text[len(self.text) :], text
        self._stream = None
        return piece
