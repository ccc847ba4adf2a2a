"""What a target's KV cache holds between requests, so that a request sharing a prefix with
it prefills only the rest: a conversation's next turn does not re-read the turns before it
(llama-server keeps each slot's prompt cache the same way).

Slots ``[0, len(tokens))`` hold the KV of ``tokens`` (slot == position: kv_cache.py's
invariant, which every request keeps); a request overwrites from its first token that
differs. A draft that reads the target's hidden states takes them for the whole prompt, so
the record keeps those too: ``hidden`` rows ``[0, hidden_rows)`` are the target's states of
the first ``hidden_rows`` tokens, written as their KV was.
"""

from __future__ import annotations

import numpy as np
import torch


class PrefixCache:
    """The tokens (and target hidden states) a target program's committed KV holds."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.hidden: torch.Tensor | None = None
        self.hidden_rows = 0

    def reusable(self, ids: list[int], needs_hidden: bool) -> int:
        """How many leading tokens of ``ids`` need no prefill: their common prefix with the
        tokens held (with hidden states too, when ``needs_hidden``), and never the last
        token of ``ids``, whose logits pick the first new token."""
        n = min(len(self.tokens), len(ids) - 1)
        if needs_hidden:
            n = min(n, self.hidden_rows)
        if n <= 0:
            return 0
        differ = np.flatnonzero(np.asarray(self.tokens[:n]) != np.asarray(ids[:n]))
        return int(differ[0]) if differ.size else n

    def truncate(self, n: int) -> None:
        """Keep the first ``n`` tokens only: a request is about to write from slot ``n``."""
        del self.tokens[n:]
        self.hidden_rows = min(self.hidden_rows, n)

    def keep_hidden(self, start: int, rows: torch.Tensor, capacity: int) -> None:
        """The target's states of the tokens at ``start..start+len(rows)-1``, just written
        to the KV. Rows after a gap are not kept (nothing could use them)."""
        if start > self.hidden_rows:
            return
        n = int(rows.shape[0])
        need = start + n
        buf = self.hidden
        if buf is not None and (buf.shape[-1] != rows.shape[-1] or buf.device != rows.device):
            buf, self.hidden, self.hidden_rows = None, None, 0  # nothing before is kept
            if start:
                return
        if buf is None or buf.shape[0] < need:
            # Grown by doubling to what the conversation needs, not the whole context: a
            # Gemma 3 270M export's 8,192 positions would hold 63 MB of states up front.
            rows_now = 0 if buf is None else buf.shape[0]
            grown = torch.empty(min(capacity, max(need, 2 * rows_now, 256)), rows.shape[-1],
                                device=rows.device)  # fmt: skip
            if buf is not None:
                grown[: self.hidden_rows] = buf[: self.hidden_rows]
            buf = self.hidden = grown
        buf[start:need] = rows
        self.hidden_rows = need

    def hold(self, tokens: list[int]) -> None:
        """A request ended with ``tokens`` in slots ``[0, len(tokens))``."""
        self.tokens = tokens
        self.hidden_rows = min(self.hidden_rows, len(tokens))

    def forget(self) -> None:
        """The caches were cleared."""
        self.tokens = []
        self.hidden_rows = 0
