"""Chat-style training prompts: the tasks chat users send, built from the corpus documents.

A draft trained on documentation and prose openings alone is rarely used on what users ask
(sampled, the dispatcher chose it in a few percent of steps on translate, summarize, answer,
word-problem and passage prompts). EAGLE-3 trains on a chat model's answers to users'
instructions; a base model's equivalent is its continuation of the prompts users write. Each
prompt here is a task template filled with material from the corpus documents the
``corpus`` stage read (``openings.jsonl``: this machine's manual pages, ``/usr/share/doc``,
the standard library, or ``--texts`` files): translate one of their sentences, summarize or
answer from one of their paragraphs, answer a question about a command, write a function
a docstring describes, follow up on an earlier answer; arithmetic word problems are
generated from templates and random numbers. The target writes the answers (``data
generate``: self-distillation).

No public benchmark's prompt is used, and the evaluation sets (``etspec.tools.task_prompts``,
written for this project) share no source text with these: the tests check that no 8-word
run of an evaluation prompt's material appears in a training prompt's material.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

TASKS = ("translate", "summarize", "qa", "math", "rag", "instruct", "code", "followup")
LANGUAGES = ("French", "German", "Spanish", "Italian", "Portuguese", "Dutch")


@dataclass(frozen=True)
class TaskPrompt:
    task: str
    text: str  # the whole prompt
    material: str  # what came from the corpus (or the generator), without the template


@dataclass
class Material:
    """What the templates are filled with, from the documents' openings."""

    paragraphs: list[str]
    sentences: list[str]
    commands: list[tuple[str, str]]  # (name, what it does) from manual pages' NAME lines
    about: dict[str, str]  # a command's first prose paragraph on its own page
    functions: list[tuple[str, str]]  # (signature, docstring's first sentence)


_PROSE = re.compile(r"^[A-Z][^\n]*[.!?]$")
_CODEY = re.compile(r"[{}<>$\\|=_]|--|\(\)|\t|https?:|\.\w+\(")


def _prose_paragraphs(text: str) -> list[str]:
    out = []
    for block in re.split(r"\n\s*\n", text):
        # A manual page's section heading (NAME, DESCRIPTION) sits on the line above its text.
        lines = [x for x in block.splitlines() if not re.fullmatch(r"\s*[A-Z][A-Z0-9 ]*\s*", x)]
        para = " ".join(" ".join(lines).split())
        letters = sum(c.isalpha() or c == " " for c in para)
        if (150 <= len(para) <= 900 and _PROSE.match(para) and not _CODEY.search(para)
                and letters > 0.9 * len(para)):  # fmt: skip
            out.append(para)
    return out


def _sentences(paragraph: str) -> list[str]:
    return [
        s
        for s in re.split(r"(?<=[.!?])\s+", paragraph)
        if 8 <= len(s.split()) <= 28 and _PROSE.match(s) and s.isascii() and len(s.split()[-1]) > 4
    ]  # fmt: skip  (not cut at "e.g." or "etc.")


def material(openings: Sequence[dict[str, str]]) -> Material:
    """Paragraphs, sentences, commands and functions of the documents' openings (each
    ``{"source", "name", "text"}``), in their order, without repeats."""
    paragraphs: dict[str, None] = {}
    commands: dict[str, str] = {}
    about: dict[str, str] = {}
    functions: dict[str, str] = {}
    for o in openings:
        text = o["text"]
        if o["source"] == "python":
            for m in re.finditer(
                r'\n(?:    )?def ([a-z]\w*\([^)\n]*\)):\n\s+"""([^"\n]{20,120}?\.)', text
            ):
                functions.setdefault(
                    m.group(1).replace("self, ", "").replace("self", ""), m.group(2)
                )
            continue
        if o["source"] == "man":
            m = re.search(r"NAME\s*\n\s*(\S+?)\s+[-\u2010\u2013]+\s+([a-z][^\n]{10,80})", text)
            if m:
                commands.setdefault(m.group(1).strip(","), m.group(2).strip().rstrip("."))
        found = _prose_paragraphs(text)
        for p in found:
            paragraphs.setdefault(p)
        if o["source"] == "man" and m and found:
            about.setdefault(m.group(1).strip(","), found[0])
    paras = list(paragraphs)
    sentences = list(dict.fromkeys(s for p in paras for s in _sentences(p)))
    return Material(paras, sentences, list(commands.items()), about, list(functions.items()))


# -- generated arithmetic word problems ------------------------------------------------------

_NAMES = ("Ravi", "Marta", "Chen", "Ola", "Tomas", "Aisha", "Pieter", "Lucia", "Kwame", "Ines",
          "Yusuf", "Hana", "Bram", "Sofia", "Dmitri", "Amara")  # fmt: skip
_ITEMS = (("apples", "bag"), ("stickers", "sheet"), ("bottles", "crate"), ("candles", "box"),
          ("seeds", "packet"), ("tiles", "pack"), ("pens", "box"), ("eggs", "carton"),
          ("cups", "stack"), ("nails", "tin"))  # fmt: skip


def _word_problem(rng: random.Random) -> str:
    name, (item, unit) = rng.choice(_NAMES), rng.choice(_ITEMS)
    a, b, c, d = rng.randint(2, 9), rng.randint(3, 24), rng.randint(2, 40), rng.randint(2, 6)
    price, hours, speed = rng.randint(2, 15), rng.randint(2, 9), rng.randint(20, 90)
    forms = (
        f"{name} buys {a} {unit}s of {item} with {b} {item} in each {unit} and gives {c} "
        f"{item} to a neighbour. How many {item} are left?",
        f"A shop sells {item} at {price} dollars per {unit}. {name} buys {a} {unit}s and "
        f"pays with a {price * a + c}-dollar note. How much change does {name} get?",
        f"A train travels at {speed} kilometres per hour for {hours} hours, then at "
        f"{speed + b} kilometres per hour for {d} hours. How far does it travel in all?",
        f"{name} saves {b} dollars a week for {a} weeks and then spends {c} dollars on a "
        f"present. How much money is left?",
        f"A bedroom floor measures {a + 3} by {d + 2} metres, and carpet costs {price} "
        "dollars a square metre. How much does carpet for the whole floor cost?",
        f"{name} shares {a * d * b} {item} equally among {d} friends, and each friend gives "
        f"{a} of theirs away. How many {item} does each friend have now?",
        f"A recipe for {d} people needs {b * d} grams of flour. How much flour is needed for "
        f"{d * a} people?",
        f"{name} reads {b} pages a day. The book has {b * (a + 5) + c} pages. After {a + 5} "
        "days, how many pages are left to read?",
    )
    return rng.choice(forms)


# -- templates -------------------------------------------------------------------------------


#: A manual page's summary that starts with one of these reads as an instruction ("list
#: directory contents"); others name a thing ("daemon that remembers ...").
_VERBS = frozenset((
    "add", "build", "change", "check", "compare", "compile", "compress", "configure", "control",
    "convert", "copy", "count", "create", "decode", "decompress", "delete", "determine",
    "display", "download", "dump", "edit", "encode", "extract", "find", "format", "generate",
    "get", "install", "kill", "list", "load", "locate", "make", "manage", "manipulate", "merge",
    "modify", "monitor", "mount", "move", "open", "pack", "parse", "print", "query", "read",
    "rebuild", "remove", "rename", "report", "reset", "run", "search", "send", "set", "show",
    "sort", "split", "start", "stop", "sync", "test", "trace", "translate", "update", "upload",
    "validate", "verify", "view", "wait", "write",
))  # fmt: skip


def _doing(what: str) -> str | None:
    """A manual page's summary as something to do ("list directory contents"), or None
    where it names a thing."""
    return what[0].lower() + what[1:] if what.split()[0].lower() in _VERBS else None


def _qa_question(rng: random.Random, cmd: tuple[str, str]) -> str:
    name, what = cmd
    forms = [
        f"What does the {name} command do?",
        f"What is {name} used for?",
        f"When would I use {name}, and what does it do?",
        f"Explain what {name} is in simple terms.",
    ]
    if doing := _doing(what):
        forms.append(f"How do I {doing}?")
    return rng.choice(forms)


def _build(task: str, rng: random.Random, m: Material) -> TaskPrompt | None:
    """One prompt of ``task`` (None when the material has none of what it needs)."""
    if task == "translate" and m.sentences:
        s, lang = rng.choice(m.sentences), rng.choice(LANGUAGES)
        text = rng.choice((
            f"Translate this sentence into {lang}.\n\nEnglish: {s}\n{lang}:",
            f"Translate into {lang}: {s}\n\n",
            f'How do you say "{s}" in {lang}?\n\n',
            f"English: {s}\n{lang}:",
        ))  # fmt: skip
        return TaskPrompt(task, text, s)
    if task == "summarize" and m.paragraphs:
        p = rng.choice(m.paragraphs)
        text = rng.choice((
            f"Article: {p}\n\nSummarize the article in two sentences.\n\nSummary:",
            f"{p}\n\nTL;DR:",
            f"Text: {p}\n\nWrite a one-sentence summary of the text.\n\nSummary:",
            f"Summarize the following in plain words.\n\n{p}\n\n",
        ))  # fmt: skip
        return TaskPrompt(task, text, p)
    if task == "rag" and m.paragraphs:
        p = rng.choice(m.paragraphs)
        words = [w.strip(".,;:()") for w in p.split() if len(w) > 6 and w.isalpha()]
        topic = rng.choice(words) if words else "it"
        q = rng.choice((
            "What is the main point of the passage?",
            f"What does the passage say about {topic}?",
            "According to the passage, what should a user do first?",
            "What problem does the passage describe, and how is it solved?",
        ))  # fmt: skip
        text = rng.choice((
            "Read the passage and answer the question.\n\n"
            f"Passage: {p}\n\nQuestion: {q}\n\nAnswer:",
            f"Context: {p}\n\nBased on the context, {q[0].lower() + q[1:]}\n\n",
        ))  # fmt: skip
        return TaskPrompt(task, text, p)
    if task == "qa" and m.commands:
        q = _qa_question(rng, rng.choice(m.commands))
        text = rng.choice((f"Question: {q}\n\nAnswer:", f"Q: {q}\nA:", f"{q}\n\n"))
        return TaskPrompt(task, text, q)
    if task == "math":
        q = _word_problem(rng)
        text = rng.choice((
            f"Question: {q}\n\nAnswer: Let's solve it step by step.",
            f"Question: {q}\n\nAnswer:",
            f"{q} Show your working.\n\n",
        ))  # fmt: skip
        return TaskPrompt(task, text, q)
    if task == "instruct" and m.commands:
        name, what = rng.choice(m.commands)
        forms = [
            f"Give three tips for using {name} safely.",
            f"Explain {name} ({what}) to someone who has never used a terminal.",
            f"Compare {name} with {rng.choice(m.commands)[0]}: when is each the better choice?",
            f"Write a short email to a colleague recommending {name}.",
        ]
        if doing := _doing(what):
            forms += [f"Write a short email to a colleague explaining how to {doing}.",
                      f"Write a short checklist for someone who needs to {doing}."]  # fmt: skip
        q = rng.choice(forms)
        return TaskPrompt(task, rng.choice((f"Question: {q}\n\nAnswer:", f"{q}\n\n")), q)
    if task == "code" and m.functions:
        sig, doc = rng.choice(m.functions)
        q = rng.choice((
            f"Write a Python function `{sig}`: {doc}",
            f"Implement `{sig}` in Python. {doc}",
            f"Question: Write a Python function `{sig}` whose job is this: {doc}\n\nAnswer:",
        ))  # fmt: skip
        return TaskPrompt(task, q + ("" if q.endswith("Answer:") else "\n\n"), f"{sig} {doc}")
    if task == "followup" and m.about:
        # A first answer: the paragraph the command's own page opens with.
        name = rng.choice(sorted(m.about))
        q, p = _qa_question(rng, (name, dict(m.commands)[name])), m.about[name]
        follow = rng.choice((
            "Can you give an example?", "Can you say that more simply?",
            "What should I watch out for?", "Summarize that in one sentence.",
            "Why does that matter?", "What would be a good next step?",
        ))  # fmt: skip
        text = f"Question: {q}\n\nAnswer: {p}\n\nQuestion: {follow}\n\nAnswer:"
        return TaskPrompt(task, text, f"{q} {p}")
    return None


def task_prompts(openings: Sequence[dict[str, str]], count: int, seed: int = 0) -> list[TaskPrompt]:
    """``count`` chat-style prompts over the tasks in turn (``TASKS``), filled from the
    documents' ``openings``; the same arguments give the same prompts. A task whose material
    the documents lack (no manual pages: no commands) is skipped."""
    rng = random.Random(seed)
    m = material(openings)
    builders: list[Callable[[], TaskPrompt | None]] = [
        (lambda t=t: _build(t, rng, m)) for t in TASKS
    ]
    out: list[TaskPrompt] = []
    seen: set[str] = set()
    misses = 0
    while len(out) < count and misses < 50 * len(TASKS):
        for build in builders:
            p = build()
            if p is None or p.text in seen:
                misses += 1
                continue
            seen.add(p.text)
            out.append(p)
            if len(out) == count:
                break
    return out
