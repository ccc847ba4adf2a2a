"""Checkpoint -> a program's method modules and metadata: the one builder behind both
``etspec export`` (which lowers what it returns to a ``.pte``) and the eager reference
(``runtime/eager.py``, which runs the same modules in torch), so a ``.pte`` and its
reference differ only in the program that executes them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from etspec import logs
from etspec.artifact import draft_target_ids, sha256_hex
from etspec.contract import (
    CHAT_TEMPLATE,
    DEFAULT_MAX_SEQ,
    DEFAULT_VERIFY_WIDTHS,
    DRAFT_D2T,
    GEMMA4_ASSISTANT,
    TOKENIZER_JSON,
    DraftMetadata,
    HiddenStateSpec,
    TargetMetadata,
    check_pair,
    default_eagle3_layers,
)
from etspec.errors import ArtifactError, CheckpointError, ExportError, MetadataMismatchError
from etspec.models.checkpoint import (
    checkpoint_dir,
    load_state_dict,
    read_chat_template,
    read_config,
    read_tokenizer_json,
)
from etspec.models.eagle3 import Eagle3Draft
from etspec.models.families import check_target_config, target_class, target_family
from etspec.models.gemma4_assistant import Gemma4Assistant, assistant_hidden_spec
from etspec.models.methods import Methods, draft_methods, target_methods
from etspec.models.quantize import quantize
from etspec.models.target import TargetModel

# The shortest context an export compiles: its masks' dynamic widths need a range of at
# least two committed columns (models/methods.py), and no prompt fits in fewer anyway.
MIN_CONTEXT = 8
# The most draft scratch slots (and nodes per draft call) an export allocates: far past any
# useful tree, short of a typo's billion-slot allocation.
MAX_DRAFT_SCRATCH = 4096


@dataclass(frozen=True)
class TargetExportOptions:
    """Compile-time choices of a target program (all fixed in the ``.pte``)."""

    backend: str = "xnnpack"  # "eager": the reference program (runtime/eager.py)
    dtype: str = "fp32"
    max_seq: int | None = None  # default: default_context(the checkpoint's config)
    prefill_chunk: int = 32
    # The widest verify method (None: DEFAULT_VERIFY_WIDTHS fitted to the model, resolved).
    verify_width: int | None = None
    narrow_verify_widths: tuple[int, ...] = ()  # more verify methods, for small trees
    hidden_layers: tuple[int, ...] | None = None  # default: EAGLE-3's (2, L//2, L-3)
    # A Gemma 4 assistant checkpoint exported into the target (it reads the target's caches);
    # the target then exports its final normed state as ``hidden``.
    assistant: Path | None = None
    assistant_step_width: int = 4  # rows of one assistant call (one tree level per call)

    @property
    def verify_widths(self) -> tuple[int, ...]:
        """Every compiled verify width (after ``resolved``)."""
        assert self.verify_width is not None, "resolve the default widths first"
        return tuple(sorted({*self.narrow_verify_widths, self.verify_width}))

    def resolved(self, config: dict[str, Any], max_seq: int) -> TargetExportOptions:
        """These options with default verify widths fitted to a model of ``config``: each of
        ``DEFAULT_VERIFY_WIDTHS`` within its sliding window and the context, and the limit
        itself in place of those cut (a Gemma with a 12-token window gets 4, 8 and 12)."""
        if self.verify_width is not None:
            return self
        limit = min(max_seq, target_class(config).verify_width_limit(config) or max_seq)
        kept = {w for w in DEFAULT_VERIFY_WIDTHS if w <= limit}
        if len(kept) < len(DEFAULT_VERIFY_WIDTHS):
            kept.add(limit)
        return replace(self, verify_width=max(kept), narrow_verify_widths=tuple(sorted(kept)))

    def check(self) -> None:
        """Refuse option values no checkpoint could satisfy (before anything loads)."""
        for name in ("max_seq", "prefill_chunk", "verify_width"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ExportError(f"--{name.replace('_', '-')} must be at least 1")
        if self.max_seq is not None:
            check_context(self, self.max_seq)
        if self.verify_width is None and self.narrow_verify_widths:
            raise ExportError("narrow verify widths need the widest (verify_width) too")
        widest = self.verify_width or 0
        if any(not 1 <= w <= widest for w in self.narrow_verify_widths):
            raise ExportError(
                f"verify widths {list(self.verify_widths)} must be between 1 and the widest"
            )


@dataclass(frozen=True)
class DraftExportOptions:
    """Compile-time choices of an EAGLE-3 draft program."""

    backend: str = "xnnpack"  # "eager": the reference program
    dtype: str = "fp32"
    step_width: int = 4  # nodes drafted per call (tree top-k; 1 is a chain)
    scratch: int = 64  # draft slots for tree nodes beyond the committed context

    def check(self) -> None:
        if self.step_width < 1 or self.scratch < self.step_width:
            raise ExportError("--step-width must be >= 1 and --scratch >= --step-width")
        if self.scratch > MAX_DRAFT_SCRATCH or self.step_width > MAX_DRAFT_SCRATCH:
            raise ExportError(
                f"--scratch and --step-width must be at most {MAX_DRAFT_SCRATCH} (draft tree "
                f"nodes held at once; trees past a few hundred nodes never pay)"
            )


@dataclass
class ProgramBuild:
    """What a program is made of: its method modules (with example inputs and dynamic
    shapes), its metadata and its constant methods."""

    model: torch.nn.Module
    meta: TargetMetadata | DraftMetadata
    methods: Methods
    constants: dict[str, Any] = field(default_factory=dict)  # beyond the metadata
    # Parameter names (as the wrappers see them) that must stay outside the delegate so the
    # file holds them once (a tied fp32 embedding: export/lowering.py).
    keep_out: frozenset[str] = frozenset()

    @property
    def quantized(self) -> bool:
        return self.meta.dtype != "fp32"


def default_context(config: dict[str, Any]) -> int:
    """The context an export gets without ``--max-seq``: what the checkpoint was trained
    for, at most ``DEFAULT_MAX_SEQ``. A call costs what its actual context costs, so a
    large context costs only its KV memory (``kv_cache_bytes`` in the metadata)."""
    trained = config.get("max_position_embeddings")
    return min(DEFAULT_MAX_SEQ, int(trained)) if trained else DEFAULT_MAX_SEQ


def check_context(opts: TargetExportOptions, max_seq: int) -> None:
    if max_seq < MIN_CONTEXT:
        raise ExportError(
            f"a context of {max_seq} tokens is too short to export; use --max-seq {MIN_CONTEXT} "
            "or more"
        )
    if opts.prefill_chunk > max_seq or (opts.verify_width or 0) > max_seq:
        raise ExportError("--prefill-chunk and --verify-width must not exceed --max-seq")


def build_target(checkpoint: str | Path, opts: TargetExportOptions) -> TargetModel:
    """The exportable torch module for ``checkpoint`` (also what the eager reference runs)."""
    config = read_config(checkpoint)
    check_target_config(config, checkpoint_dir(checkpoint) / "config.json")
    max_seq = opts.max_seq or default_context(config)
    trained = config.get("max_position_embeddings")
    if trained and max_seq > trained:
        # Positions past it were never trained, and a typo here (1e9) would try to allocate
        # a KV cache of that many slots.
        raise ExportError(
            f"--max-seq {max_seq} exceeds the {trained} tokens this model was trained for "
            f"(max_position_embeddings); use --max-seq {trained} or less"
        )
    opts = opts.resolved(config, max_seq)
    check_context(opts, max_seq)
    build = target_family(config)
    num_layers = int(config.get("num_hidden_layers", 0))
    # EAGLE-3's taps clamped into a shallow model (1-3 layers), which has no layer L-3: a
    # target exported for decoding alone must not need --hidden-layers.
    default = tuple(min(max(i, 0), num_layers) for i in default_eagle3_layers(num_layers))
    layers = opts.hidden_layers or default
    spec = HiddenStateSpec("layer_input", tuple(layers))
    if opts.assistant is not None:
        if opts.hidden_layers:
            raise ExportError("--assistant exports the final normed state; drop --hidden-layers")
        spec = assistant_hidden_spec(num_layers)
    if any(not 0 <= i <= num_layers for i in layers):
        raise ExportError(
            f"--hidden-layers {list(layers)} outside [0, {num_layers}] for a "
            f"{num_layers}-layer model"
        )
    # Scratch holds one verify window: speculative entries (scratch-commit) and pad rows.
    scratch = max(opts.verify_width, opts.prefill_chunk)
    model = build(checkpoint, max_seq, scratch, spec)
    model.check_shapes(opts.verify_width)
    return model


def build_assistant(model: TargetModel, opts: TargetExportOptions) -> Gemma4Assistant | None:
    """The assistant drafter of ``opts`` over ``model``'s caches, if one was asked for."""
    if opts.assistant is None:
        return None
    if opts.assistant_step_width < 1:
        raise ExportError("--assistant-step-width must be at least 1")
    return Gemma4Assistant.from_checkpoint(opts.assistant, model)


def target_metadata(
    model: TargetModel, opts: TargetExportOptions, tokenizer: bytes | None
) -> TargetMetadata:
    meta = model.metadata(
        prefill_chunk=opts.prefill_chunk,
        verify_widths=opts.verify_widths,
        dtype=opts.dtype,
        backend=opts.backend,
        tokenizer_sha256=sha256_hex(tokenizer),
    )
    if opts.assistant is None:
        return meta
    return replace(meta, assistant=GEMMA4_ASSISTANT, assistant_step_width=opts.assistant_step_width)


def check_tokenizer(model: TargetModel, tokenizer: bytes | None) -> None:
    """Refuse a ``tokenizer.json`` the artifact could not serve, before it is sealed in: one
    that does not parse, encode and decode; one with ids beyond the model's vocabulary; and,
    for a family that needs <bos> (Gemma), one that does not put it in front of every prompt
    (a converted ``tokenizer.json`` without its post-processor silently drops it, and the
    model then writes garbage)."""
    if tokenizer is None:
        return
    from tokenizers import Tokenizer

    try:
        tok = Tokenizer.from_str(tokenizer.decode("utf-8"))
        ids = tok.encode("Hello, world!").ids
        tok.decode(ids)
        top = max(tok.get_vocab(with_added_tokens=True).values(), default=-1)
    except Exception as e:  # tokenizers raises plain Exceptions with its parser's text
        raise ExportError(
            f"the checkpoint's tokenizer.json cannot be read ({e}); fix it, or remove it to "
            "export an artifact that takes token ids only"
        ) from None
    _check_long_runs(tok)
    vocab = model.cfg.vocab_size
    if top >= vocab:
        raise ExportError(
            f"the checkpoint's tokenizer.json has token id {top}, the model has {vocab} "
            "embeddings; use the tokenizer this model was trained with"
        )
    bos = model.cfg.bos_token_id
    if not model.requires_bos or bos is None:
        return
    if not ids or ids[0] != bos:
        raise ExportError(
            f"the checkpoint's tokenizer.json does not add <bos> (id {bos}) in front of a "
            f"prompt, which {model.cfg.model_type} needs; add a TemplateProcessing "
            "post-processor for it (a GGUF converted by `etspec convert gguf` has one)"
        )


# Long runs of one character, alone and followed by another (where a nested repetition
# backtracks), and a repeated word: a split expression that backtracks catastrophically
# encodes "Hello, world!" and then panics (onig's retry limit) or stalls on a user's prompt,
# so the export encodes these first.
LONG_RUNS = (*(c * 4096 + end for c in "a 1\n!\u00e9" for end in ("", "\u00b6")), "ab " * 1366)
LONG_RUN_SECONDS = 10.0


def _check_long_runs(tok: Any) -> None:
    for text in LONG_RUNS:
        began = time.perf_counter()
        try:
            with logs.quiet(native=True):  # a Rust panic prints its backtrace on fd 2
                tok.encode(text)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # a panic is a BaseException (pyo3's PanicException)
            raise ExportError(
                "the checkpoint's tokenizer.json fails on a long run of one character "
                f"({str(e).splitlines()[0] if str(e) else type(e).__name__}): its split "
                "expression backtracks; use the model's original tokenizer.json"
            ) from None
        spent = time.perf_counter() - began
        if spent > LONG_RUN_SECONDS:
            raise ExportError(
                f"the checkpoint's tokenizer.json took {spent:.0f} s to encode a long run of "
                "one character: its split expression backtracks; use the model's "
                "original tokenizer.json"
            )


# A tied fp32 table larger than this is stored once (its lm_head outside the delegate); a
# smaller one is packed into the delegate a second time. Outside the delegate the lm_head
# runs as ExecuTorch's own matmul kernel, which on the bundled target (a 4 MB table) cost
# 0.6-0.9 ms of a 2.7 ms decode and of a 4.4 ms 8-row verify, against about 0.1 ms in
# XNNPACK; at Gemma 3 270M's 671 MB, the second copy is what costs (63% of the model).
TIED_TABLE_SHARED_ABOVE = 64 * 2**20


def tied_embedding(model: TargetModel, opts: TargetExportOptions) -> frozenset[str]:
    """The parameter names (as the method wrappers see them: ``model.``...) of a tied fp32
    embedding larger than ``TIED_TABLE_SHARED_ABOVE`` bytes, whose lm_head then runs
    outside the XNNPACK delegate so that the file and memory hold the matrix once
    (export/backends.py, ``_xnnpack_partitioner``); empty for a smaller table, which the
    delegate packs for its lm_head (speed for a few MB). Quantized exports quantize the
    lm_head on its own; nothing is shared there."""
    if opts.dtype != "fp32" or opts.backend != "xnnpack" or not model.cfg.tie_word_embeddings:
        return frozenset()
    table = model.embed_tokens.weight
    if table.numel() * table.element_size() <= TIED_TABLE_SHARED_ABOVE:
        return frozenset()
    return frozenset({"model.embed_tokens.weight", "model.lm_head.weight"})


def target_program(
    checkpoint: str | Path,
    opts: TargetExportOptions,
    stage: Callable[[str], None] = lambda name: None,
) -> ProgramBuild:
    """Everything a target program of ``checkpoint`` (an HF folder) holds under ``opts``:
    the model (quantized by ``opts.dtype``), its methods, metadata and tokenizer. ``stage``
    hears each long step begin (an export's progress)."""
    config = read_config(checkpoint)
    check_target_config(config, checkpoint_dir(checkpoint) / "config.json")
    opts = opts.resolved(config, opts.max_seq or default_context(config))
    model = build_target(checkpoint, opts)
    tokenizer = read_tokenizer_json(checkpoint)
    check_tokenizer(model, tokenizer)
    assistant = build_assistant(model, opts)
    meta = target_metadata(model, opts, tokenizer)
    stage(f"quantize ({opts.dtype})")
    quantize(model, opts.dtype)
    if assistant is not None:
        quantize(assistant, opts.dtype)
    keep_out = tied_embedding(model, opts)
    model.head_reads_table = bool(keep_out)
    methods = target_methods(
        model, opts.prefill_chunk, opts.verify_widths, assistant, opts.assistant_step_width
    )
    constants = {TOKENIZER_JSON: tokenizer} if tokenizer is not None else {}
    chat = read_chat_template(checkpoint)
    if chat is not None:
        constants[CHAT_TEMPLATE] = chat
    return ProgramBuild(model, meta, methods, constants, keep_out)


def target_embedding(target_checkpoint: str | Path | None) -> torch.Tensor | None:
    """The input embedding of a target checkpoint (for a draft that has none of its own)."""
    if target_checkpoint is None:
        return None
    state = load_state_dict(target_checkpoint)
    for key in ("model.embed_tokens.weight", "embed_tokens.weight"):
        if key in state:
            return state[key]
    raise ExportError(f"{target_checkpoint}: no embed_tokens.weight in the target checkpoint")


def build_draft(
    draft_checkpoint: str | Path,
    target: TargetMetadata,
    opts: DraftExportOptions,
    embedding: torch.Tensor | None = None,
) -> Eagle3Draft:
    """The exportable draft module, sized for ``target``'s context and verify width;
    ``embedding``: the target's, for a draft checkpoint without one."""
    # The draft needs room for the prompt and for every tree node drafted in one step.
    scratch = max(opts.scratch, target.verify_width, target.prefill_chunk)
    model = Eagle3Draft.from_checkpoint(draft_checkpoint, target.max_context, scratch, embedding)
    if model.cfg.num_aux != len(target.hidden_state_layers):
        raise MetadataMismatchError(
            f"draft/target mismatch: the draft fuses {model.cfg.num_aux} target states, the "
            f"target exports {len(target.hidden_state_layers)}; re-export the target with "
            "matching --hidden-layers"
        )
    return model


def draft_program(
    draft_checkpoint: str | Path,
    target: TargetMetadata,
    opts: DraftExportOptions,
    embedding: torch.Tensor | None = None,
    stage: Callable[[str], None] = lambda name: None,
) -> ProgramBuild:
    """Everything an EAGLE-3 draft program for ``target`` holds under ``opts``; refuses a
    draft whose expectations the target does not meet. ``stage`` hears each long step
    begin."""
    model = build_draft(draft_checkpoint, target, opts, embedding)
    meta = model.metadata(
        target, step_width=opts.step_width, dtype=opts.dtype, backend=opts.backend
    )
    check_pair(target, meta)
    # Draft id i proposes target id i + d2t[i]: every one must exist in the target, or the
    # first verify indexes past the target's logits.
    try:
        draft_target_ids(model.d2t, meta, draft_checkpoint)
    except ArtifactError:  # the runtime's words name a .pte; these name the checkpoint
        raise CheckpointError(
            f"{draft_checkpoint}: d2t maps draft ids outside the target's {target.vocab_size}-"
            "token vocabulary; this draft was trained for another target"
        ) from None
    stage(f"quantize ({opts.dtype})")
    quantize(model, opts.dtype, keep=model.FULL_PRECISION)
    methods = draft_methods(model, target.prefill_chunk, target.verify_widths, opts.step_width)
    return ProgramBuild(model, meta, methods, {DRAFT_D2T: model.d2t.clone()})
