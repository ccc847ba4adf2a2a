"""Prompt lookup's n-gram search against a plain reference, over arbitrary histories."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from etspec.runtime.speculative.prompt_lookup import PromptLookupDraftRunner
from etspec.runtime.speculative.step import Acceptance

# A 3-token alphabet makes matches of every length common; 600 tokens outgrow the
# runner's first buffer (256), so growth is exercised too.
HISTORY = st.lists(st.integers(0, 2), min_size=1, max_size=600)
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference(history: list[int], longest: int, shortest: int, most: int) -> tuple[int, list[int]]:
    """The longest n-gram ending the history (n from ``longest`` down to ``shortest``) that
    also occurs earlier, starting before the final one; what followed its latest such
    occurrence, repeated to ``most`` tokens when fewer followed."""
    total = len(history)
    for n in range(min(longest, total - 1), shortest - 1, -1):
        tail = history[total - n :]
        for start in range(total - n - 1, -1, -1):
            if history[start : start + n] == tail:
                period = total - start - n  # what followed, up to the end, repeats
                return n, [history[start + n + k % period] for k in range(most)]
    return 0, []


@SETTINGS
@given(HISTORY, st.integers(1, 4), st.integers(0, 3), st.integers(0, 12), st.data())
def test_match_finds_the_latest_occurrence_of_the_longest_ngram(  # type: ignore[no-untyped-def]
    history, longest, extra, most, data
) -> None:
    shortest = max(1, longest - extra)
    runner = PromptLookupDraftRunner(3, longest, shortest)
    # Built as a generation builds it: a prefill, then accepted steps.
    split = data.draw(st.integers(1, len(history)))
    runner.prefill(history[: split - 1], history[split - 1], None)
    at = split
    while at < len(history):
        # A step commits its root (the last token so far), its accepted tokens, and emits
        # one more: ``step`` new tokens in all.
        step = data.draw(st.integers(1, min(8, len(history) - at)))
        tokens = history[at - 1 : at - 1 + step]
        runner.accept(Acceptance(0, tokens, list(range(step)), history[at - 1 + step], None))
        at += step
    assert runner.history == history
    assert runner.match(most) == reference(history, longest, shortest, most)


def test_reset_forgets_the_history() -> None:
    runner = PromptLookupDraftRunner(3)
    runner.prefill([1, 2, 1], 2, None)
    assert runner.match(4) == (2, [1, 2, 1, 2])  # [1, 2] followed [1, 2]: a loop
    runner.reset()
    assert runner.history == [] and runner.match(4) == (0, [])
