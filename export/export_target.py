"""Export a local Hugging Face target checkpoint to a multi-method target ``.pte``."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from etspec.artifact import sha256_hex
from etspec.contract import (
    DEFAULT_MAX_SEQ,
    TOKENIZER_JSON,
    HiddenStateSpec,
    TargetMetadata,
    default_eagle3_layers,
)
from etspec.errors import ExportError
from etspec.export.lowering import (
    as_uint8,
    check_options,
    check_output,
    lower_to_file,
)
from etspec.models.checkpoint import read_config, read_tokenizer_json
from etspec.models.gemma4_assistant import Gemma4Assistant, assistant_hidden_spec
from etspec.models.gguf import checkpoint_folder
from etspec.models.methods import target_methods
from etspec.models.quantize import quantize
from etspec.models.target import TargetModel, target_family


@dataclass(frozen=True)
class TargetExportOptions:
    """Compile-time choices of a target artifact (all fixed in the ``.pte``)."""

    backend: str = "xnnpack"
    dtype: str = "fp32"
    max_seq: int | None = None  # default: default_context(the checkpoint's config)
    prefill_chunk: int = 32
    verify_width: int = 8  # the widest verify method
    narrow_verify_widths: tuple[int, ...] = ()  # more verify methods, for small trees
    hidden_layers: tuple[int, ...] | None = None  # default: EAGLE-3's (2, L//2, L-3)
    # A Gemma 4 assistant checkpoint exported into the target (it reads the target's caches);
    # the target then exports its final normed state as ``hidden``.
    assistant: Path | None = None
    assistant_step_width: int = 4  # rows of one assistant call (one tree level per call)

    @property
    def verify_widths(self) -> tuple[int, ...]:
        return tuple(sorted({*self.narrow_verify_widths, self.verify_width}))

    def check(self) -> None:
        check_options(self.backend, self.dtype)
        for name in ("max_seq", "prefill_chunk", "verify_width"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ExportError(f"--{name.replace('_', '-')} must be at least 1")
        if self.max_seq is not None:
            check_context(self, self.max_seq)
        if any(not 1 <= w <= self.verify_width for w in self.narrow_verify_widths):
            raise ExportError(
                f"verify widths {list(self.verify_widths)} must be between 1 and the widest"
            )


def default_context(config: dict[str, Any]) -> int:
    """The context an export gets without ``--max-seq``: what the checkpoint was trained
    for, at most ``DEFAULT_MAX_SEQ``. A call costs what its actual context costs, so a
    large context costs only its KV memory (``kv_cache_bytes`` in the metadata)."""
    trained = config.get("max_position_embeddings")
    return min(DEFAULT_MAX_SEQ, int(trained)) if trained else DEFAULT_MAX_SEQ


def check_context(opts: TargetExportOptions, max_seq: int) -> None:
    if opts.prefill_chunk > max_seq or opts.verify_width > max_seq:
        raise ExportError("--prefill-chunk and --verify-width must not exceed --max-seq")


def build_target(checkpoint: str | Path, opts: TargetExportOptions) -> TargetModel:
    """The exportable torch module for ``checkpoint`` (also what the eager reference runs)."""
    config = read_config(checkpoint)
    max_seq = opts.max_seq or default_context(config)
    check_context(opts, max_seq)
    build = target_family(config)
    num_layers = int(config.get("num_hidden_layers", 0))
    layers = opts.hidden_layers or default_eagle3_layers(num_layers)
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
    return replace(
        meta, assistant="gemma4_assistant", assistant_step_width=opts.assistant_step_width
    )


def check_tokenizer(model: TargetModel, tokenizer: bytes | None) -> None:
    """Refuse a tokenizer that does not encode the way the model was trained to read: a
    family that needs <bos> (Gemma) must get it in front of every prompt (a converted
    ``tokenizer.json`` without its post-processor silently drops it, and the model then
    writes garbage)."""
    bos = model.cfg.bos_token_id
    if tokenizer is None or not model.requires_bos or bos is None:
        return
    from tokenizers import Tokenizer

    try:
        ids = Tokenizer.from_str(tokenizer.decode("utf-8")).encode("x").ids
    except Exception as e:
        raise ExportError(f"the checkpoint's tokenizer.json cannot be read ({e})") from None
    if not ids or ids[0] != bos:
        raise ExportError(
            f"the checkpoint's tokenizer.json does not add <bos> (id {bos}) in front of a "
            f"prompt, which {model.cfg.model_type} needs; add a TemplateProcessing "
            "post-processor for it (a GGUF converted by `etspec convert gguf` has one)"
        )


def tied_embedding(model: TargetModel, opts: TargetExportOptions) -> frozenset[str]:
    """The parameter names (as the method wrappers see them: ``model.``...) of a tied fp32
    embedding, whose lm_head then runs outside the XNNPACK delegate so that the file and
    memory hold the matrix once (export/lowering.py, ``_xnnpack_partitioner``). Quantized
    exports quantize the lm_head on its own; nothing is shared there."""
    if opts.dtype != "fp32" or opts.backend != "xnnpack" or not model.cfg.tie_word_embeddings:
        return frozenset()
    return frozenset({"model.embed_tokens.weight", "model.lm_head.weight"})


def export_target(
    checkpoint: str | Path,
    output: str | Path,
    opts: TargetExportOptions | None = None,
    force: bool = False,
) -> TargetMetadata:
    """Export ``checkpoint`` (a Hugging Face folder or a ``.gguf`` file) to ``output``;
    returns the metadata written into the artifact."""
    opts = opts or TargetExportOptions()
    opts.check()
    out = check_output(output, force)
    with checkpoint_folder(checkpoint) as folder:
        model = build_target(folder, opts)
        tokenizer = read_tokenizer_json(folder)
    check_tokenizer(model, tokenizer)
    assistant = build_assistant(model, opts)
    meta = target_metadata(model, opts, tokenizer)
    quantize(model, opts.dtype)
    if assistant is not None:
        quantize(assistant, opts.dtype)
    constants = meta.constant_methods()
    if tokenizer is not None:
        constants[TOKENIZER_JSON] = as_uint8(tokenizer)
    keep_out = tied_embedding(model, opts)
    model.head_reads_table = bool(keep_out)
    methods = target_methods(
        model, opts.prefill_chunk, opts.verify_widths, assistant, opts.assistant_step_width
    )
    lower_to_file(
        methods,
        constants,
        opts.backend,
        desc=f"export target -> {out.name}",
        path=out,
        keep_out=keep_out,
        quantized=opts.dtype != "fp32",
    )
    return meta
