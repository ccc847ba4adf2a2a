"""Built-in benchmark prompt sets for real models: where copying from the prompt helps
(``copy``), where it barely does (``open``), and a long document with a question (``long``).

Prompt lookup and llama.cpp's lookup decoding speed up only what the prompt already holds,
so a real-model table needs both kinds side by side; HumanEval (``bench.humaneval_prompts``)
is the code set. Every text is fixed here (the long document is generated from a fixed seed)
so a figure can be reproduced from the revision alone.
"""

from __future__ import annotations

import random

# The answer quotes or edits the prompt: code edits, quotes, lists in the prompt's words.
COPY = (
    "Fix the typo in this function and return the corrected code.\n\n"
    "def average(values):\n    total = 0\n    for v in values:\n        total += v\n"
    "    return totl / len(values)\n\nCorrected code:\n\n",
    "Text: The lighthouse keeper wrote the weather into his ledger every morning at six: "
    "wind from the north-west, a falling glass, and a grey swell that broke white on the "
    "outer rocks.\n\nQuote the sentence above exactly, then say what the weather was.\n\n"
    "Quote:",
    "Meeting notes: Ana will send the budget by Friday. Ben owns the launch checklist. "
    "Chen reviews the contract on Monday.\n\nList each person and their task, using the "
    "notes' own words:\n-",
    "Rename the variable `n` to `count` everywhere in this code and return the code.\n\n"
    "def count_vowels(text):\n    n = 0\n    for ch in text.lower():\n"
    "        if ch in 'aeiou':\n            n += 1\n    return n\n\nRenamed code:\n\n",
    "Customer email: Hello, I ordered the blue kettle (order 48213) on March 3rd, but a red "
    "toaster arrived instead. Please send the kettle and a return label for the toaster. "
    "Thanks, Priya.\n\nSummarize the email in two sentences, keeping the order number, the "
    "date and both product names exactly as written.\n\nSummary:",
    "Convert this list into a Markdown table with the columns City, Country and "
    "Population.\n\nTokyo, Japan, 37 million\nDelhi, India, 32 million\nShanghai, China, "
    "29 million\nSao Paulo, Brazil, 22 million\n\nTable:\n\n",
)

# Open-ended: little of the answer is in the prompt.
OPEN = (
    "def is_prime(n):",
    "The three most important ideas in thermodynamics are",
    "Write a short story about a robot who learns to paint.\n\n",
    "Explain how a hash table handles collisions.\n\n",
    "Give five tips for a first trip to the mountains in winter:\n\n1.",
    'def merge_sorted(a, b):\n    """Merge two sorted lists into one sorted list."""\n',
)

_NAMES = ("Ana", "Ben", "Chen", "Dara", "Eli", "Farah", "Goran", "Hana", "Ivo", "Jun")
_PLACES = ("Lisbon", "Osaka", "Quito", "Tromso", "Accra", "Perth", "Riga", "Lima")
_ITEMS = ("crates of tiles", "rolls of cable", "pallets of paper", "drums of paint")
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
_REASONS = (
    "the crane was down",
    "the road was closed by snow",
    "the customs papers were missing a stamp",
    "the buyer asked for a later slot",
    "the truck failed its brake check",
)
# About this many tokens per ledger line under Gemma's tokenizer (3,545 tokens for 125 lines).
_TOKENS_PER_LINE = 28


def long_document(tokens: int = 3000) -> str:
    """A shipping ledger of about ``tokens`` tokens (fixed seed) and a question whose answer
    quotes one entry: the long-prompt case (time to first token is mostly its prefill)."""
    rng = random.Random(0)
    lines = max(4, tokens // _TOKENS_PER_LINE)
    entries = [
        f"Entry {i + 1}: {rng.choice(_NAMES)} moved the {rng.choice(_PLACES)} shipment of "
        f"{rng.randint(2, 90)} {rng.choice(_ITEMS)} to {rng.choice(_DAYS)} because "
        f"{rng.choice(_REASONS)}."
        for i in range(lines)
    ]
    asked = lines // 3
    return (
        "Shipping ledger:\n\n" + "\n".join(entries) + f"\n\nQuestion: what happened in entry "
        f"{asked}, and why? Quote the entry, then explain.\n\nAnswer: Entry {asked}:"
    )


SETS: dict[str, tuple[str, ...]] = {"copy": COPY, "open": OPEN}
