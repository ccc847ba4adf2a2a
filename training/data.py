"""Training data of an EAGLE-3 draft for a real target, built once and stored.

Three stages, each resumable (a finished piece is never redone; every file lands by rename):

``corpus``    text this machine already has (or ``--texts DIR``'s files), tokenized with the
              target's tokenizer into windows that start as requests do (with <bos> where the
              model reads one): manual pages (``man``, rendered), the text files of
              ``/usr/share/doc`` and this Python's standard library sources. Each source's
              licence is its own: the Debian packages' ``copyright`` files beside them, the
              PSF licence for the standard library. The windows are training inputs only;
              what the draft learns to predict is the target's distribution over them.
``generate``  self-distillation: the target's own continuations (half greedy, half sampled at
              T=0.8, top-p 0.95) of prompts made from the corpus (a manual page's summary
              line turned into a question or instruction, a passage's opening, a function's
              signature and docstring), of English prose openings (``prose_prompts``:
              the corpus has no general prose) and of chat-style task prompts made from the
              corpus (``chat_tasks``: translate, summarize, answer from a passage, questions,
              word problems, instructions, code, follow-ups), run through etspec's own
              runtime on the exported target (the greedy half drafted by prompt lookup: the
              same tokens, faster), or
              with ``--target`` by the checkpoint's eager model, rows batched over a KV cache
              (a GPU's way): the text the draft will be asked to predict when deployed.
``features``  the frozen target over every window, batched: its tapped hidden states (bf16)
              and its top-k next-token log-probabilities, so that training epochs run over
              the draft alone.

    python -m etspec.training.data corpus   --target HF_DIR --out DATA
    python -m etspec.training.data generate --target-pte TARGET.pte --out DATA [--count N]
    python -m etspec.training.data generate --target HF_DIR --out DATA    # eager, batched (GPU)
    python -m etspec.training.data windows  --out DATA                    # for --windows training
    python -m etspec.training.data features --target HF_DIR --out DATA
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import click
import numpy as np
import torch
from tqdm import tqdm

from etspec.training.chat_tasks import task_prompts
from etspec.training.corpus import source_files, stdlib_root
from etspec.training.prose_prompts import prose_prompts
from etspec.training.state import autocast, precision_option, use_bf16

WINDOW = 256  # tokens per training window, <bos> included
TOP_K = 20  # next-token log-probabilities stored per position
SHARD_ROWS = 64  # windows per feature shard
GEN_TOKENS = 160  # new tokens per self-distilled continuation
TASK_PROMPTS = 600  # chat-style task prompts continued (each twice), the recipe's default
GCLOUD_PAGES = 100  # the Cloud SDK ships ~16,000 near-identical pages; a few are enough


def _atomic_write(path: Path, write) -> None:  # type: ignore[no-untyped-def]
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)


def _save_npy(path: Path, array: np.ndarray) -> None:
    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            np.save(f, array)

    _atomic_write(path, write)


# -- corpus ----------------------------------------------------------------------------------


def _man_pages() -> list[Path]:
    pages = sorted(
        p for sec in ("1", "5", "7", "8") for p in Path(f"/usr/share/man/man{sec}").glob("*.gz")
    )
    cloud = [p for p in pages if p.name.startswith("gcloud")]
    return [p for p in pages if not p.name.startswith("gcloud")] + cloud[
        :: max(1, len(cloud) // GCLOUD_PAGES)
    ]


def _render_man(page: Path) -> str:
    env = {**os.environ, "MANWIDTH": "80", "MAN_KEEP_FORMATTING": "0", "LC_ALL": "C.UTF-8"}
    try:
        out = subprocess.run(
            ["man", "--no-hyphenation", "--no-justification", "-l", str(page)],
            capture_output=True,
            env=env,
            timeout=20,
        ).stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        return ""
    text = re.sub(r".\x08", "", out)  # overstrike bold/underline
    lines = text.strip().splitlines()[1:-1]  # the running header and footer
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _doc_files() -> list[Path]:
    root = Path("/usr/share/doc")
    keep = (".txt", ".md", ".rst", ".txt.gz", ".md.gz", ".rst.gz")
    files = [
        p
        for p in root.rglob("*")
        if p.is_file()
        and not p.is_symlink()
        and (p.name.endswith(keep) or p.name.startswith("README"))
        and "changelog" not in p.name.lower()
    ]
    return sorted(files)


def _read_doc(path: Path) -> str:
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        return raw.decode("utf-8")
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile):
        return ""


def _folder_texts(root: Path) -> Iterator[tuple[str, str, str]]:
    """(source, name, text) for every UTF-8 text file under ``root``, in path order."""
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if len(text) > 200:
            yield "files", path.relative_to(root).as_posix(), text


def _texts(root: Path | None = None) -> Iterator[tuple[str, str, str]]:
    """(source, name, text) for every corpus document, in a fixed order: the files under
    ``root`` when given, else this machine's manual pages, docs and standard library."""
    if root is not None:
        yield from _folder_texts(root)
        return
    for page in tqdm(_man_pages(), desc="man pages"):
        text = _render_man(page)
        if len(text) > 200:
            yield "man", page.name, text
    for path in _doc_files():
        text = _read_doc(path)
        if len(text) > 200:
            yield "doc", str(path), text
    root = stdlib_root()
    for path in source_files(root):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if len(text) > 200:
            yield "python", path.relative_to(root).as_posix(), text


def _tokenizer(target: Path):  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(target / "tokenizer.json"))


def _head(target: Path, tok) -> list[int]:  # type: ignore[no-untyped-def]
    """What a request's ids start with: the tokens the tokenizer puts in front (Gemma's and
    Llama 3's <bos>), else the config's ``bos_token_id``, else nothing (Qwen2 has no <bos>)."""
    head = list(tok.encode("", add_special_tokens=True).ids)
    if head:
        return head
    bos = json.loads((target / "config.json").read_text()).get("bos_token_id")
    return [bos] if isinstance(bos, int) else []


@click.group()
def cli() -> None:
    """Build an EAGLE-3 draft's training data for a real target."""


@cli.command()
@click.option("--target", type=click.Path(path_type=Path, exists=True), required=True)
@click.option("--out", type=click.Path(path_type=Path), required=True)
@click.option("--max-windows", default=2500, show_default=True, help="Per source.")
@click.option(
    "--texts", type=click.Path(path_type=Path, exists=True, file_okay=False), default=None,
    help="A folder of your own text files instead of the machine's.",
)  # fmt: skip
def corpus(target: Path, out: Path, max_windows: int, texts: Path | None) -> None:
    """Tokenize the machine's text into <bos>-led windows (DATA/corpus.npy, sources.json)."""
    build_corpus(target, out, max_windows, texts)


def build_corpus(
    target: Path, out: Path, max_windows: int = 2500, texts: Path | None = None
) -> None:
    """``corpus``: DATA/corpus.npy (windows), corpus_lengths.npy, sources.json and
    openings.jsonl (the documents' openings, for prompts); kept when already there."""
    out.mkdir(parents=True, exist_ok=True)
    if (out / "corpus.npy").exists():
        click.echo(f"{out / 'corpus.npy'} exists")
        return
    tok = _tokenizer(target)
    head = _head(target, tok)
    body = WINDOW - len(head)
    per_source: dict[str, list[np.ndarray]] = {}
    openings: list[dict] = []  # type: ignore[type-arg]
    for source, name, text in _texts(texts):
        ids = np.asarray(tok.encode(text, add_special_tokens=False).ids, dtype=np.int32)
        rows = per_source.setdefault(source, [])
        openings.append({"source": source, "name": name, "text": text[:4000]})
        for start in range(0, max(1, len(ids) - body // 2), body):
            piece = ids[start : start + body]
            if len(piece) < body // 2:
                break
            pad = np.zeros(body - len(piece), np.int32)
            rows.append(np.concatenate([np.asarray(head, np.int32), piece, pad]))
    rng = np.random.default_rng(0)
    windows, lengths, counts = [], [], {}
    for source, rows in sorted(per_source.items()):
        pick = rng.permutation(len(rows))[:max_windows]
        counts[source] = {"documents": sum(o["source"] == source for o in openings),
                          "windows": len(pick)}  # fmt: skip
        for i in sorted(pick):
            row = rows[i]
            windows.append(row)
            nz = np.flatnonzero(row)
            lengths.append(int(nz[-1]) + 1 if len(nz) else 1)
    _save_npy(out / "corpus_lengths.npy", np.asarray(lengths, np.int32))
    _save_npy(out / "corpus.npy", np.stack(windows).astype(np.int32))
    licences = {
        "man": "manual pages of the installed Debian packages; each page's licence is in "
        "/usr/share/doc/<package>/copyright",
        "doc": "text files of /usr/share/doc; licence per package in its copyright file",
        "python": "CPython standard library sources, PSF License Agreement",
        "files": f"the text files of {texts}, under their own licences",
    }
    if not windows:
        raise click.UsageError(
            f"no text of over 200 characters to tokenize in {texts or 'this machine'}"
        )
    licences = {k: v for k, v in licences.items() if k in counts}
    meta = {"sources": counts, "licences": licences, "window": WINDOW}
    (out / "sources.json").write_text(json.dumps(meta, indent=2))
    random.Random(0).shuffle(openings)
    with open(out / "openings.jsonl", "w") as f:
        for o in openings:
            f.write(json.dumps(o) + "\n")
    click.echo(f"corpus: {json.dumps(counts)}")


# -- self-distillation -----------------------------------------------------------------------


def _prompts(out: Path, count: int) -> list[str]:
    """Prompts in the forms users write to a base model, from the corpus openings."""
    rng = random.Random(1)
    prompts: list[str] = []
    forms = (
        "Explain what {} does.\n\n",
        "Write a short guide to {}.\n\n",
        "Q: What is {}?\nA:",
        "Describe {} in a few sentences.\n\n",
        "Give three tips for using {}:\n\n1.",
        "Write a short story about someone who uses {}.\n\n",
    )
    with open(out / "openings.jsonl") as f:
        openings = [json.loads(line) for line in f]
    for o in openings:
        text = o["text"]
        if o["source"] == "man":
            m = re.search(r"NAME\s*\n\s*(.+?)\s+[-\u2010\u2013]+\s+(.+)", text)
            if m:
                prompts.append(rng.choice(forms).format(f"{m.group(1)} ({m.group(2).strip()})"))
            paras = [p for p in text.split("\n\n")[2:8] if len(p) > 60]
            if paras:
                prompts.append(" ".join(rng.choice(paras).split())[:300])
        elif o["source"] in ("doc", "files"):
            prompts.append(text[: rng.randrange(80, 400)])
        else:
            m = re.search(r"\n(    )?def [^\n]+\n(\s+\"\"\"[\s\S]*?\"\"\"\n)?", text)
            prompts.append(m.group(0).lstrip("\n") if m else text[:300])
    prompts = [p for p in prompts if len(p.strip()) > 10]
    rng.shuffle(prompts)
    return prompts[:count]


def _task_prompts(out: Path, count: int) -> list[str]:
    """``count`` chat-style task prompts filled from the corpus documents' openings."""
    if not count:
        return []
    with open(out / "openings.jsonl") as f:
        openings = [json.loads(line) for line in f]
    return [p.text for p in task_prompts(openings, count, seed=1)]


@cli.command()
@click.option(
    "--target-pte", type=click.Path(path_type=Path, exists=True), default=None,
    help="The exported target: continuations through etspec's runtime, as users run it.",
)  # fmt: skip
@click.option(
    "--target", type=click.Path(path_type=Path, exists=True), default=None,
    help="Or the target's checkpoint (HF_DIR): continuations of the eager model in fp32, "
    "batched over a KV cache: for a GPU, where batches are cheap (Gemma 3 targets).",
)  # fmt: skip
@click.option("--out", type=click.Path(path_type=Path), required=True)
@click.option("--count", default=1200, show_default=True, help="Corpus prompts to continue.")
@click.option(
    "--prose", default=len(prose_prompts(10**6)), show_default=True,
    help="English prose openings (etspec.training.prose_prompts) to continue, each twice: greedy "
    "and sampled.",
)  # fmt: skip
@click.option(
    "--tasks", default=TASK_PROMPTS, show_default=True,
    help="Chat-style task prompts (etspec.training.chat_tasks) to continue, each twice.",
)  # fmt: skip
@click.option("--new-tokens", default=GEN_TOKENS, show_default=True, help="Per continuation.")
@click.option("--seed", default=0, show_default=True)
@click.option("--batch", default=256, show_default=True, help="Rows per batch (--target).")
@click.option("--device", default=None, help="--target's device [default: cuda when present].")
def generate(
    target_pte: Path | None,
    target: Path | None,
    out: Path,
    count: int,
    prose: int,
    tasks: int,
    new_tokens: int,
    seed: int,
    batch: int,
    device: str | None,
) -> None:
    """The target's own continuations, greedy and sampled (DATA/generated.jsonl): of ``count``
    prompts made from the corpus, then of ``prose`` English openings, then of ``tasks``
    chat-style task prompts. Prompt i is greedy when i is even; each opening and task prompt
    appears twice in a row, so it is continued both ways."""
    if (target_pte is None) == (target is None):
        raise click.UsageError("give one of --target-pte (the export) and --target (HF_DIR)")
    self_distill(out, target_pte=target_pte, target=target, count=count, prose=prose,
                 tasks=tasks, new_tokens=new_tokens, seed=seed, batch=batch,
                 device=device)  # fmt: skip


def self_distill(
    out: Path,
    *,
    target_pte: Path | None = None,
    target: Path | None = None,
    count: int = 1200,
    prose: int | None = None,
    tasks: int = 0,
    new_tokens: int = GEN_TOKENS,
    seed: int = 0,
    batch: int = 256,
    device: str | None = None,
    tokenizer: Path | None = None,
) -> int:
    """``generate``: continuations through the export (``target_pte``) or the checkpoint's
    eager model (``target``), appended to DATA/generated.jsonl; the prompts already there
    are kept. Returns the tokens made. ``tokenizer``: a checkpoint folder whose
    ``tokenizer.json`` encodes the prompts for the export (default: the export's own)."""
    if prose is None:
        prose = len(prose_prompts(10**6))
    path = out / "generated.jsonl"
    done = set()
    if path.exists():
        with open(path) as f:
            done = {json.loads(line)["i"] for line in f if line.endswith("\n")}
    # Prose after the corpus prompts, task prompts after both: a run with more of the last
    # kind keeps what is written.
    prompts = _prompts(out, count) + [p for p in prose_prompts(prose) for _ in range(2)]
    prompts += [p for p in _task_prompts(out, tasks) for _ in range(2)]
    todo = [(i, p) for i, p in enumerate(prompts) if i not in done]
    t0 = time.time()
    if target_pte is not None:
        made = _generate_with_runtime(target_pte, path, todo, new_tokens, seed, tokenizer)
    else:
        assert target is not None
        made = _generate_eager(target, path, todo, new_tokens, seed, batch, device)
    click.echo(f"generated {made} tokens in {time.time() - t0:.0f} s")
    return made


def _key(seed: int, i: int) -> int:
    """Prompt i's sampling seed."""
    return int(hashlib.sha256(f"{seed}:{i}".encode()).hexdigest()[:8], 16)


def _generate_with_runtime(
    target_pte: Path,
    path: Path,
    todo: list[tuple[int, str]],
    new_tokens: int,
    seed: int,
    tokenizer: Path | None = None,
) -> int:
    from etspec.runtime.runner import load_runners
    from etspec.runtime.sampling import SamplingConfig
    from etspec.runtime.spec import RunnerSpec

    # Greedy continuations go through prompt lookup: the same tokens as the target alone
    # (lossless), 2.3-3.2x faster on a base model's greedy loops (docs/results.md). Sampled
    # ones do not: lookup costs more than it saves once sampling breaks the loops.
    runner, lookup = load_runners(RunnerSpec(target_pte, draft_method="prompt-lookup"))
    assert lookup is not None
    room = runner.meta.max_context - new_tokens  # prompt tokens that leave room to continue
    if room < 1:
        raise click.UsageError(
            f"--new-tokens {new_tokens} leaves no room for a prompt in {target_pte}'s "
            f"{runner.meta.max_context}-token context: pass fewer"
        )
    encode = runner.encode
    if tokenizer is not None:
        tok = _tokenizer(tokenizer)

        def encode(text: str) -> list[int]:
            return list(tok.encode(text, add_special_tokens=True).ids)

    made = 0
    with open(path, "a") as f:
        for i, prompt in tqdm(todo, desc="self-distill"):
            sampled = i % 2 == 1
            sampling = (
                SamplingConfig(temperature=0.8, top_p=0.95, seed=_key(seed, i))
                if sampled
                else SamplingConfig()
            )
            ids = encode(prompt)[: min(WINDOW // 2, room)]
            result = (runner if sampled else lookup).generate(ids, new_tokens, sampling)
            row = {"i": i, "sampled": sampled, "prompt_ids": ids, "ids": list(result.token_ids)}
            f.write(json.dumps(row) + "\n")
            f.flush()
            made += len(result.token_ids)
    return made


def _generate_eager(
    target: Path,
    path: Path,
    todo: list[tuple[int, str]],
    new_tokens: int,
    seed: int,
    batch: int,
    device: str | None,
) -> int:
    """Continuations of the checkpoint's eager model, rows of one mode batched by prompt
    length (left-padded): greedy rows take the first highest logit, as the runtime does;
    sampled rows draw from the runtime sampler's distribution (T=0.8, top-p 0.95) with one
    generator per batch, seeded from its first prompt (the draws differ from the runtime's
    per-prompt ones; the distribution is the same)."""
    from etspec.models.families import load_target
    from etspec.models.training import continue_batch
    from etspec.runtime.sampling import Sampler, SamplingConfig

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    tok = _tokenizer(target)
    model = load_target(target, max_context=WINDOW // 2 + new_tokens, scratch=0)
    model.to(device).eval().requires_grad_(False)
    eos = set(model.cfg.eos_token_ids)  # what the export's metadata stops at
    sampler = Sampler(SamplingConfig(temperature=0.8, top_p=0.95))
    groups: dict[bool, list[tuple[int, list[int]]]] = {False: [], True: []}
    for i, prompt in todo:
        ids = list(tok.encode(prompt, add_special_tokens=True).ids)[: WINDOW // 2]
        groups[i % 2 == 1].append((i, ids))
    rows: dict[int, dict] = {}  # type: ignore[type-arg]
    made = 0
    bar = tqdm(total=len(todo), desc="self-distill")
    for sampled, members in groups.items():
        members.sort(key=lambda m: (len(m[1]), m[0]))  # little padding within a batch
        for start in range(0, len(members), batch):
            part = members[start : start + batch]
            width = max(len(ids) for _, ids in part)
            pad = torch.tensor([width - len(ids) for _, ids in part], device=device)
            prompts = torch.tensor([[0] * (width - len(ids)) + ids for _, ids in part])
            prompts = prompts.to(device)
            if sampled:
                gen = torch.Generator(device=device).manual_seed(_key(seed, part[0][0]))

                def pick(logits: torch.Tensor, gen: torch.Generator = gen) -> torch.Tensor:
                    return torch.multinomial(sampler.probs(logits), 1, generator=gen)[:, 0]
            else:

                def pick(logits: torch.Tensor) -> torch.Tensor:
                    return logits.argmax(-1)

            new = continue_batch(model, prompts, new_tokens, pick, pad).tolist()
            for (i, ids), cont in zip(part, new, strict=True):
                stop = next((j for j, t in enumerate(cont) if t in eos), len(cont) - 1)
                rows[i] = {"i": i, "sampled": sampled, "prompt_ids": ids,
                           "ids": cont[: stop + 1], "source": "checkpoint"}  # fmt: skip
                made += stop + 1
            bar.update(len(part))
    bar.close()
    with open(path, "a") as f:  # in prompt order, as the runtime path writes them
        for i in sorted(rows):
            f.write(json.dumps(rows[i]) + "\n")
    return made


@cli.command()
@click.option("--out", type=click.Path(path_type=Path), required=True)
def windows(out: Path) -> None:
    """The training windows alone (DATA/windows.npy, lengths.npy, generated.npy), for
    ``train_draft --windows``, which runs the target itself (no features)."""
    rows, lengths, generated = write_windows(out)
    click.echo(f"windows: {len(rows)} ({int(generated.sum())} generated), "
               f"{int(lengths.sum())} tokens")  # fmt: skip


def write_windows(out: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``windows``: corpus and generated windows written for the trainer; returns them."""
    rows, lengths, generated = _windows(out)
    _save_windows(out, rows, lengths, generated)
    return rows, lengths, generated


# -- features --------------------------------------------------------------------------------


def _windows(out: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(windows [N, WINDOW], valid lengths [N], generated? [N]) over corpus and generations."""
    rows = [np.load(out / "corpus.npy")]
    lengths = [np.load(out / "corpus_lengths.npy")]
    gen_rows, gen_len = [], []
    path = out / "generated.jsonl"
    if path.exists():
        with open(path) as f:
            for line in f:
                if not line.endswith("\n"):
                    continue
                r = json.loads(line)
                ids = (r["prompt_ids"] + r["ids"])[:WINDOW]
                gen_rows.append(np.pad(np.asarray(ids, np.int32), (0, WINDOW - len(ids))))
                gen_len.append(len(ids))
    if gen_rows:
        rows.append(np.stack(gen_rows))
        lengths.append(np.asarray(gen_len, np.int32))
    flags = np.concatenate([np.zeros(len(rows[0]), bool), np.ones(len(gen_rows), bool)])
    return np.concatenate(rows), np.concatenate(lengths), flags


def _save_windows(
    out: Path, windows: np.ndarray, lengths: np.ndarray, generated: np.ndarray
) -> None:
    """What the trainer reads of ``_windows``: DATA/windows.npy, lengths.npy, generated.npy."""
    _save_npy(out / "windows.npy", windows)
    _save_npy(out / "lengths.npy", lengths)
    _save_npy(out / "generated.npy", generated)


def shard_order(n_shards: int, generated: np.ndarray) -> list[int]:
    """Shards in the order they are worth computing: those holding the target's own
    continuations first (what the draft must predict at run time), then corpus shards spread
    evenly over the sources (the corpus is stored source by source), so that any prefix of
    this order is a fair sample of the data."""
    own = [s for s in range(n_shards) if generated[s * SHARD_ROWS : (s + 1) * SHARD_ROWS].any()]
    rest = [s for s in range(n_shards) if s not in set(own)]
    golden = (5**0.5 - 1) / 2  # i * golden mod 1: every prefix spreads over [0, 1)
    return own + sorted(rest, key=lambda s: (s * golden) % 1.0)


def _grow(shards: Path, before: np.ndarray, windows: np.ndarray) -> None:
    """Keep the shards made before more continuations were generated: windows are only ever
    appended, so every full shard of ``before`` holds the same rows. Its partial last shard
    gained rows and is made again."""
    n = len(before)
    if n > len(windows) or not np.array_equal(windows[:n], before):
        raise click.UsageError(f"the windows changed since {shards} was made; remove it first")
    if n < len(windows) and n % SHARD_ROWS:
        for part in ("topk_ids", "hidden", "topk_logp"):  # topk_ids (the mark of done) first
            (shards / f"{n // SHARD_ROWS:05d}.{part}.npy").unlink(missing_ok=True)


@cli.command()
@click.option("--target", type=click.Path(path_type=Path, exists=True), required=True)
@click.option("--out", type=click.Path(path_type=Path), required=True)
@click.option("--batch", default=4, show_default=True)
@click.option(
    "--shards", "limit", type=click.IntRange(min=1), default=None,
    help="Compute at most this many shards (in shard_order); run again with more to extend.",
)  # fmt: skip
@precision_option
def features(target: Path, out: Path, batch: int, limit: int | None, precision: str) -> None:
    """Tapped hidden states and top-k log-probabilities of every window (DATA/shards/).
    ``features.json`` lists the complete shards; the trainer reads those."""
    store_features(target, out, batch, limit, precision)


def store_features(
    target: Path, out: Path, batch: int = 4, limit: int | None = None, precision: str = "auto"
) -> dict:  # type: ignore[type-arg]
    """``features``: the shards in ``shard_order`` up to ``limit`` (those done are kept);
    returns ``features.json``'s record."""
    from etspec.models.families import load_target
    from etspec.models.training import target_forward

    windows, lengths, generated = _windows(out)
    shards = out / "shards"
    shards.mkdir(exist_ok=True)
    if (out / "windows.npy").exists():
        _grow(shards, np.load(out / "windows.npy"), windows)
    _save_windows(out, windows, lengths, generated)
    model = (
        load_target(target, max_context=windows.shape[1], scratch=0).eval().requires_grad_(False)
    )
    # auto: bf16 only where the CPU has bf16 matrix units; without them oneDNN emulates
    # bf16 at a fraction of fp32's rate (docs/results.md, on a Xeon without AMX).
    bf16 = use_bf16(precision, "cpu")
    n_shards = -(-len(windows) // SHARD_ROWS)
    order = shard_order(n_shards, generated)[:limit]
    todo = [s for s in order if not (shards / f"{s:05d}.topk_ids.npy").exists()]
    for s in tqdm(todo, desc="target features"):
        rows = torch.from_numpy(windows[s * SHARD_ROWS : (s + 1) * SHARD_ROWS].astype(np.int64))
        hidden, ids, logp = [], [], []
        with torch.no_grad(), autocast("cpu", bf16):
            for chunk in rows.split(batch):
                logits, h = target_forward(model, chunk)
                lp = torch.log_softmax(logits.float(), -1)
                top = lp.topk(TOP_K, -1)
                hidden.append(h.to(torch.bfloat16).view(torch.int16))
                ids.append(top.indices.int())
                logp.append(top.values.half())
        _save_npy(shards / f"{s:05d}.hidden.npy", torch.cat(hidden).numpy())
        _save_npy(shards / f"{s:05d}.topk_logp.npy", torch.cat(logp).numpy())
        _save_npy(shards / f"{s:05d}.topk_ids.npy", torch.cat(ids).numpy())  # written last
    # Every complete shard (topk_ids is written last), including ones an earlier, longer run made.
    done = [s for s in range(n_shards) if (shards / f"{s:05d}.topk_ids.npy").exists()]
    meta = {"windows": len(windows), "generated": int(generated.sum()), "shards": n_shards,
            "complete": done,
            "shard_rows": SHARD_ROWS, "window": windows.shape[1], "top_k": TOP_K,
            "hidden_width": model.hidden_width, "tokens": int(lengths.sum()),
            "bf16": bf16}  # fmt: skip
    (out / "features.json").write_text(json.dumps(meta, indent=2))
    click.echo(f"features: {json.dumps(meta)}")
    return meta


if __name__ == "__main__":
    cli()
