"""Chat-style training prompts (``etspec.training.chat_tasks``): every task type, built from
the corpus documents' own text, reproducible, and sharing no source text with any
evaluation prompt."""

from __future__ import annotations

import re

from etspec.tools.prompts import SETS
from etspec.tools.task_prompts import TASK_SETS
from etspec.training.chat_tasks import TASKS, material, task_prompts
from etspec.training.corpus import source_files, stdlib_root
from etspec.training.data import _doc_files, _man_pages, _read_doc, _render_man

PROSE = (
    "The daemon reads its configuration file when it starts and again whenever it receives "
    "a hangup signal. Settings that cannot be parsed are reported in the system log and "
    "ignored, so a mistake never stops a running service.\n\n"
    "Backups are written to a temporary file first and renamed into place once complete. "
    "A crash halfway through therefore leaves the previous backup untouched and readable."
)
OPENINGS = [
    {"source": "man", "name": "tarx.1.gz",
     "text": "TARX(1)\n\nNAME\n       tarx - store and extract files from an archive\n\n"
             "DESCRIPTION\n" + PROSE},
    {"source": "man", "name": "syncd.8.gz",
     "text": "NAME\n       syncd - keep two folders the same\n"},
    {"source": "python", "name": "shelf.py",
     "text": 'class Shelf:\n    def put(self, key, value):\n        """Store a value under a key '
             'and replace what was there."""\n        pass\n'},
    {"source": "doc", "name": "README", "text": PROSE},
]  # fmt: skip


def _shingles(text: str, n: int = 8) -> set[tuple[str, ...]]:
    words = re.findall(r"[a-z0-9']+", text.lower())
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def test_every_task_from_the_documents_reproducibly() -> None:
    m = material(OPENINGS)
    assert m.commands == [("tarx", "store and extract files from an archive"),
                          ("syncd", "keep two folders the same")]  # fmt: skip
    assert m.functions == [
        ("put(key, value)", "Store a value under a key and replace what was there.")
    ]
    assert len(m.paragraphs) == 2 and m.sentences[0].startswith("The daemon reads its")
    assert m.about == {"tarx": m.paragraphs[0]}  # the first answer of a follow-up
    prompts = task_prompts(OPENINGS, 64, seed=3)
    assert [p.task for p in prompts[: len(TASKS)]] == list(TASKS)  # the tasks in turn
    assert {p.task for p in prompts} == set(TASKS)
    assert len({p.text for p in prompts}) == len(prompts) == 64
    assert task_prompts(OPENINGS, 64, seed=3) == prompts
    assert task_prompts(OPENINGS, 64, seed=4) != prompts
    for p in prompts:
        if p.task in ("translate", "summarize", "rag", "qa"):
            assert p.material in p.text
        if p.task == "followup":
            assert p.text.startswith("Question: ") and m.paragraphs[0] in p.text
        if p.task == "math":
            assert re.search(r"\d", p.text) and "?" in p.text
    # Without manual pages or functions, the tasks that need them are skipped.
    docs_only = task_prompts([o for o in OPENINGS if o["source"] == "doc"], 20)
    assert {p.task for p in docs_only} == {"translate", "summarize", "rag", "math"}


def test_no_evaluation_prompt_shares_source_text_with_the_training_prompts() -> None:
    """On this machine's own documents (a sample of each source): no 8-word run of any
    built-in evaluation prompt appears in a training prompt's material."""
    openings = []
    for page in _man_pages()[:: max(1, len(_man_pages()) // 40)][:40]:
        openings.append({"source": "man", "name": page.name, "text": _render_man(page)[:4000]})
    for path in _doc_files()[:300]:
        openings.append({"source": "doc", "name": str(path), "text": _read_doc(path)[:4000]})
    for path in source_files(stdlib_root())[:200]:
        openings.append({"source": "python", "name": path.name, "text": path.read_text()[:4000]})
    prompts = task_prompts(openings, 800)
    assert {p.task for p in prompts} >= {"math", "code"}
    trained = set().union(*(_shingles(p.material) for p in prompts))
    evaluation = [*(t for ts in TASK_SETS.values() for t in ts),
                  *(t for ts in SETS.values() for t in ts if isinstance(t, str))]  # fmt: skip
    assert evaluation
    for text in evaluation:
        assert not _shingles(text) & trained, text[:80]


def test_the_recipe_continues_the_same_number_of_task_prompts_everywhere() -> None:
    from etspec.training.data import TASK_PROMPTS
    from etspec.training.pipeline import DraftTrainOptions

    assert DraftTrainOptions.tasks == TASK_PROMPTS == 600
