"""The artifact contract: every metadata key of a target or draft ``.pte``, named once.

Export writes these values as ExecuTorch *constant methods* (a method that returns a value);
the runtime reads every one of them at load and fails loudly when one is missing or has the
wrong type. Method names of the programs are defined here too, so export, the Python runtime
and the C++ runner agree on one list: ``python -m etspec.contract OUT.h`` writes the same
definitions (method names, metadata fields and types, pair checks, error messages) as a C++
header, which the runner's build generates from this file rather than keeping a copy.

Hidden-state descriptor: ``hidden_state_point`` says where in the target the states are
tapped, ``hidden_state_layers`` which layers, in the order they are concatenated in the
``hidden`` output of every target method. ``layer_input``: the residual stream entering
decoder layer ``i``; ``i == num_layers`` is the final pre-norm state. ``final_norm`` (layers
``(num_layers,)``): the final state after the output norm, what Gemma 4's assistant reads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from etspec.errors import ArtifactError, MetadataMismatchError

# 2: draft_extend per verify width; 3: integrity trailer; 4: layer types; 5: every attending
# method takes a mask of dynamic width (the slots it attends)
FORMAT_VERSION = 6

# Export appends a trailer to the ExecuTorch program: SHA-256 of the program bytes, their
# length (u64 little-endian), then TRAILER_MAGIC, so the file ends with the magic. Runtimes
# check it before ExecuTorch parses anything: its loader trusts offsets inside the file and
# can crash on a damaged one, and a flipped weight byte would otherwise load silently.
# ExecuTorch ignores bytes after the program it describes.
TRAILER_MAGIC = b"ETSPSHA1"
TRAILER_SIZE = 32 + 8 + len(TRAILER_MAGIC)

# Method names of a target program.
TARGET_PREFILL = "target_prefill"
TARGET_DECODE = "target_decode"
TARGET_VERIFY = "target_verify"
TARGET_COMMIT = "target_commit"
TARGET_RESET = "target_reset"
TARGET_METHODS = (TARGET_PREFILL, TARGET_DECODE, TARGET_VERIFY, TARGET_COMMIT, TARGET_RESET)


def verify_method_name(width: int, widest: int) -> str:
    """``target_verify`` is the widest verify method; narrower ones are ``target_verify_<K>``."""
    return TARGET_VERIFY if width == widest else f"{TARGET_VERIFY}_{width}"


# A drafter exported into the target program (it reads the target's caches): one drafting
# call, ``(tokens[W], states[W, Hb], position[1]) -> (logits[W, V], states_out[W, Hb])``.
ASSISTANT_STEP = "assistant_step"

# Method names of an EAGLE-3 draft program.
DRAFT_PREFILL = "draft_prefill"
DRAFT_EXTEND = "draft_extend"
DRAFT_STEP = "draft_step"
DRAFT_COMMIT = "draft_commit"
DRAFT_RESET = "draft_reset"
DRAFT_D2T = "draft_d2t"
DRAFT_METHODS = (DRAFT_PREFILL, DRAFT_EXTEND, DRAFT_STEP, DRAFT_COMMIT, DRAFT_RESET)


def extend_method_name(width: int, widest: int) -> str:
    """``draft_extend`` is the widest extend method; narrower ones are ``draft_extend_<K>``."""
    return DRAFT_EXTEND if width == widest else f"{DRAFT_EXTEND}_{width}"


# Optional constant method holding the UTF-8 bytes of the HF ``tokenizer.json``.
TOKENIZER_JSON = "tokenizer_json"

KV_STRATEGIES = ("position-overwrite", "scratch-commit")
HIDDEN_POINTS = ("layer_input", "final_norm")
BACKENDS = ("xnnpack", "portable")
# Export recipes (``--dtype``, models/quantize.py: which weights at which width).
DTYPES = ("fp32", "8da4w", "8da8w", "8da4w-mixed", "8da8w-e4", "8da4w-mlp")
# What `etspec export` writes when --dtype is not given, on XNNPACK: the smallest recipe that
# keeps Gemma 3 270M (>= 90% top-1 agreement with fp32, held-out perplexity within 10%, the
# copy test; README "Gemma 3 270M"). The portable backend runs fp32 only.
DEPLOYMENT_DTYPE = "8da8w-e4"
# The context `export target` gives a checkpoint without --max-seq: its trained context
# (max_position_embeddings), at most this. Calls cost what their actual context costs
# (every mask has a dynamic width), so a larger context costs KV memory only.
DEFAULT_MAX_SEQ = 4096

# Additive mask value for "not attended". Finite on purpose: a fully masked (padded) query
# row then yields finite garbage instead of NaN, and NaN written into a cache slot would
# poison every later query through 0 * NaN in probs @ V even where that slot is masked.
MASK_MIN = -1.0e9

# A method's mask has one column per slot it attends: committed slots [0, n), then the
# scratch slots (models/layers.column_slots). Callers round n up to a multiple of
# MASK_GRANULE so the XNNPACK runtimes re-plan their shapes once per MASK_GRANULE tokens
# rather than at every token.
MASK_GRANULE = 64


def mask_width(needed: int, max_context: int, cache_size: int) -> int:
    """Columns of a mask that must show committed slots ``[0, needed)`` (and the scratch)."""
    n = min(max_context, max(1, -(-needed // MASK_GRANULE) * MASK_GRANULE))
    return n + cache_size - max_context


def band_start(lowest: int, committed: int, window: int) -> int:
    """First committed slot of a sliding layer's band (``models/layers.band_mask``) for a
    call whose lowest query position is ``lowest`` and whose mask covers ``committed``
    slots: where that query's window begins, rounded down to ``MASK_GRANULE`` (so the
    band's length, a dynamic dimension, changes once per granule), leaving at least two
    committed slots in the band (the dimension's minimum)."""
    lo = max(0, lowest - window + 1) // MASK_GRANULE * MASK_GRANULE
    return max(0, min(lo, committed - 2))


# One-line errors about artifacts, worded once for the Python runtime and the C++ runner.
MESSAGES = {
    "no_file": "{path}: no such file",
    "bad_header": "{path}: not an ExecuTorch .pte file (bad header)",
    "truncated": "{path}: truncated ({size} bytes, its header says {expected}); copy or "
    "export it again",
    "no_trailer": "{path}: not an etspec artifact of format version {expected} (no integrity "
    "trailer); export it with this etspec's `etspec export`",
    "damaged": "{path}: damaged ({what}); copy or export it again",
    "cannot_load": "{path}: ExecuTorch cannot load this file ({error})",
    "not_etspec": "{path}: not an etspec artifact (no etspec metadata); export it with "
    "`etspec export`",
    "unknown_kind": "{path}: unknown etspec artifact kind '{kind}'",
    "wrong_kind": "{path} is an etspec {kind} artifact, but a {expected} was expected",
    "no_version": "{path}: etspec metadata has no format_version",
    "format_version": "{path} has etspec format version {version}, this etspec reads version "
    "{expected}; re-export it with this etspec",
    "missing_metadata": "artifact is missing metadata '{name}'; re-export it with this etspec",
    "bad_metadata": "artifact metadata '{name}' has an unexpected value {value}",
    "pair_mismatch": "draft/target mismatch: the draft expects target {what} {expected}, the "
    "target has {actual}; export the draft against this target",
    "tokenizer_mismatch": "draft/target mismatch: the draft was exported for a target with "
    "tokenizer {expected}, the target has {actual}; export the draft against this target",
    # Sampling from target logits nothing can be drawn from (the Python runtime's
    # SamplingError, the C++ runner's Sampler::target_probs).
    "target_logits_nan": "the target logits hold NaN or a row without a finite value; nothing "
    "can be sampled from them (the model or its export is broken: check it with etspec "
    "validate)",
}


def message(key: str, **fields: Any) -> str:
    """``MESSAGES[key]`` with its ``{field}`` placeholders filled in."""
    return MESSAGES[key].format(**fields)


# XNNPACK's load-time option that packs each weight once for every method of a program
# (runtime/xnnpack.py; the C++ runner passes it when it loads a program), and the
# environment variable that turns it off in both runtimes.
XNNPACK_BACKEND = "XnnpackBackend"
XNNPACK_WEIGHT_CACHE = "weight_cache_enabled"
WEIGHT_CACHE_ENV = "ETSPEC_XNNPACK_WEIGHT_CACHE"

# Names users bring from other runtimes, accepted beside ours (ours stay the documented
# ones): our option -> (alias, where the name comes from). `etspec` (export, generate,
# validate, bench), the C++ runner (through the generated header) and the README's table
# all read this one table.
OPTION_ALIASES: dict[str, tuple[tuple[str, str], ...]] = {
    "--num-spec-tokens": (
        ("--num-speculative-tokens", "vLLM `num_speculative_tokens`"),
        ("--draft-max", "llama.cpp `--draft-max`"),
    ),
    "--draft-topk": (
        ("--speculative-eagle-topk", "SGLang `--speculative-eagle-topk`"),
        ("--topk", "etspec's earlier name (it sat beside sampling's `--top-k`)"),
        ("--top-k-draft", "etspec's earlier name"),
    ),
    "--num-steps": (("--speculative-num-steps", "SGLang `--speculative-num-steps`"),),
    "--total-tokens": (
        ("--speculative-num-draft-tokens", "SGLang `--speculative-num-draft-tokens`"),
        ("--num-draft-tokens", "SGLang, short form"),
    ),
    "--max-ngram": (("--prompt-lookup-max", "vLLM `prompt_lookup_max`"),),
    "--min-ngram": (("--prompt-lookup-min", "vLLM `prompt_lookup_min`"),),
    "--max-seq": (
        ("--max-context-length", "ExecuTorch `max_context_length`"),
        ("--ctx-size", "llama.cpp `--ctx-size`"),
    ),
    "--max-new-tokens": (
        ("--max-tokens", "vLLM / OpenAI `max_tokens`"),
        ("--n-predict", "llama.cpp `--n-predict`"),
    ),
    "--temperature": (("--temp", "llama.cpp `--temp`"),),
    "--prompt-file": (("--file", "llama.cpp `--file`"),),
}


def alias_names(option: str) -> tuple[str, ...]:
    """The aliases accepted for ``option`` (none for an option without any)."""
    return tuple(a for a, _ in OPTION_ALIASES.get(option, ()))


# Draft expectation checked against the target at pairing: (what, draft field, target field).
PAIR_CHECKS = (
    ("hidden size", "target_hidden_size", "hidden_size"),
    ("vocabulary size", "target_vocab_size", "vocab_size"),
)


@dataclass(frozen=True)
class HiddenStateSpec:
    """Which target hidden states an artifact exports (target) or expects (draft)."""

    point: str
    layers: tuple[int, ...]

    def __str__(self) -> str:
        return f"{self.point}{list(self.layers)}"

    def check(self, num_layers: int) -> None:
        if self.point not in HIDDEN_POINTS:
            raise ArtifactError(
                f"unknown hidden-state point {self.point!r}; supported: {', '.join(HIDDEN_POINTS)}"
            )
        if self.point == "final_norm" and self.layers != (num_layers,):
            raise ArtifactError(
                f"hidden-state point final_norm has layers ({num_layers},) for a "
                f"{num_layers}-layer target, not {list(self.layers)}"
            )
        bad = [i for i in self.layers if not 0 <= i <= num_layers]
        if bad or not self.layers:
            raise ArtifactError(
                f"hidden-state layers {list(self.layers)} must be non-empty and within "
                f"[0, {num_layers}] for a {num_layers}-layer target"
            )


def default_eagle3_layers(num_layers: int) -> tuple[int, ...]:
    """The EAGLE-3 taps used by the EAGLE repo and vLLM: inputs of layers 2, L//2, L-3."""
    return (2, num_layers // 2, num_layers - 3)


@dataclass(frozen=True)
class _Metadata:
    """Base: fields map one-to-one onto constant methods of the same name."""

    KIND: ClassVar[str] = ""

    def constant_methods(self) -> dict[str, Any]:
        out: dict[str, Any] = {"artifact_kind": self.KIND}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def read(cls, get: Callable[[str], list[Any]]) -> _Metadata:
        """Build from ``get(name) -> list of returned values`` (one constant method each)."""
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            try:
                raw = get(f.name)
            except KeyError:
                raise ArtifactError(message("missing_metadata", name=f.name)) from None
            values[f.name] = _coerce(f.name, f.type, raw)
        return cls(**values)

    def hidden_spec(self) -> HiddenStateSpec:
        return HiddenStateSpec(self.hidden_state_point, tuple(self.hidden_state_layers))  # type: ignore[attr-defined]


def _coerce(name: str, type_name: Any, raw: list[Any]) -> Any:
    t = str(type_name)
    try:
        if t.startswith("tuple"):
            return tuple(int(v) for v in raw)
        (value,) = raw
        if t == "int":
            return int(value)
        if t == "str":
            return str(value)
        if t == "float":
            return float(value)
    except (TypeError, ValueError):
        pass
    raise ArtifactError(message("bad_metadata", name=name, value=repr(raw)))


@dataclass(frozen=True)
class TargetMetadata(_Metadata):
    """Everything the runtime needs to drive a target program."""

    KIND: ClassVar[str] = "target"

    format_version: int
    model_family: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    layer_types: str  # "full" or "sliding" per layer, comma-separated
    sliding_window: int  # keys a sliding layer sees, its own included; 0: no sliding layers
    max_context: int
    cache_size: int
    prefill_chunk: int
    verify_width: int  # the widest verify method, ``target_verify``
    verify_widths: tuple[int, ...]  # every compiled verify width, ascending
    hidden_state_point: str
    hidden_state_layers: tuple[int, ...]
    bos_token_id: int
    eos_token_ids: tuple[int, ...]
    kv_strategies: str
    kv_cache_bytes: int
    dtype: str
    backend: str
    tokenizer_sha256: str
    assistant: str  # a drafter inside this program ("gemma4_assistant"), or ""
    assistant_step_width: int  # rows of ``assistant_step``; 0 without an assistant

    @property
    def hidden_state_width(self) -> int:
        return self.hidden_size * len(self.hidden_state_layers)

    def verify_method(self, width: int) -> str:
        """The method verifying ``width`` rows (one of ``verify_widths``)."""
        return verify_method_name(width, self.verify_width)

    def verify_width_for(self, rows: int) -> int:
        """The narrowest compiled verify width that holds ``rows`` rows."""
        return narrowest_width(self.verify_widths, rows, "verify")


@dataclass(frozen=True)
class DraftMetadata(_Metadata):
    """Everything the runtime needs to drive a draft program, and what it expects of its target."""

    KIND: ClassVar[str] = "draft"

    format_version: int
    draft_method: str
    draft_vocab_size: int
    hidden_size: int
    max_context: int
    cache_size: int
    prefill_chunk: int
    extend_width: int  # the widest extend method, ``draft_extend``
    extend_widths: tuple[int, ...]  # every compiled extend width, ascending
    step_width: int
    target_vocab_size: int
    target_hidden_size: int
    hidden_state_point: str
    hidden_state_layers: tuple[int, ...]
    target_tokenizer_sha256: str
    kv_cache_bytes: int
    dtype: str
    backend: str

    def extend_method(self, width: int) -> str:
        """The method extending ``width`` rows (one of ``extend_widths``)."""
        return extend_method_name(width, self.extend_width)

    def extend_width_for(self, rows: int) -> int:
        """The narrowest compiled extend width that holds ``rows`` rows."""
        return narrowest_width(self.extend_widths, rows, "extend")


def narrowest_width(widths: tuple[int, ...], rows: int, what: str) -> int:
    """The first of the ascending compiled ``widths`` that holds ``rows`` rows."""
    for width in widths:
        if width >= rows:
            return width
    raise ArtifactError(f"{rows} {what} rows exceed the widest compiled {what} width {widths[-1]}")


def check_format(kind: str, version: int, path: str) -> None:
    if version != FORMAT_VERSION:
        raise ArtifactError(
            message("format_version", path=path, version=version, expected=FORMAT_VERSION)
        )


def check_pair(target: TargetMetadata, draft: DraftMetadata) -> None:
    """Reject a draft whose expectations do not match the target, naming both values."""
    checks = [(what, getattr(draft, d), getattr(target, t)) for what, d, t in PAIR_CHECKS]
    checks.append(("hidden-state descriptor", str(draft.hidden_spec()), str(target.hidden_spec())))
    for what, expected, actual in checks:
        if expected != actual:
            raise MetadataMismatchError(
                message("pair_mismatch", what=what, expected=expected, actual=actual)
            )
    if (
        draft.target_tokenizer_sha256
        and target.tokenizer_sha256
        and draft.target_tokenizer_sha256 != target.tokenizer_sha256
    ):
        raise MetadataMismatchError(
            message(
                "tokenizer_mismatch",
                expected=draft.target_tokenizer_sha256[:12],
                actual=target.tokenizer_sha256[:12],
            )
        )


def cpp_header() -> str:
    """This contract as a C++17 header for ``runtime/cpp`` (generated at build time)."""

    def q(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    def fields(cls: type[_Metadata]) -> str:
        kinds = {"int": "INT", "str": "STR", "float": "FLOAT"}
        rows = []
        for f in dataclasses.fields(cls):
            t = str(f.type)
            rows.append(f"  X({f.name}, {'INTS' if t.startswith('tuple') else kinds[t]})")
        return " \\\n".join(rows)

    names = {
        "TARGET_PREFILL": TARGET_PREFILL,
        "TARGET_DECODE": TARGET_DECODE,
        "TARGET_VERIFY": TARGET_VERIFY,
        "TARGET_COMMIT": TARGET_COMMIT,
        "TARGET_RESET": TARGET_RESET,
        "DRAFT_PREFILL": DRAFT_PREFILL,
        "DRAFT_EXTEND": DRAFT_EXTEND,
        "DRAFT_STEP": DRAFT_STEP,
        "DRAFT_COMMIT": DRAFT_COMMIT,
        "DRAFT_RESET": DRAFT_RESET,
        "DRAFT_D2T": DRAFT_D2T,
        "ASSISTANT_STEP": ASSISTANT_STEP,
        "TOKENIZER_JSON": TOKENIZER_JSON,
    }
    out = [
        "// Generated from etspec/contract.py by `python -m etspec.contract`; do not edit.",
        "#pragma once",
        "#include <utility>",
        "namespace etspec::contract {",
        f"inline constexpr int kFormatVersion = {FORMAT_VERSION};",
        f"inline constexpr char kTrailerMagic[] = {q(TRAILER_MAGIC.decode())};",
        f"inline constexpr int kTrailerSize = {TRAILER_SIZE};",
        f"inline constexpr float kMaskMin = {MASK_MIN!r}f;",
        f"inline constexpr long kMaskGranule = {MASK_GRANULE};",
        # char arrays: BackendOptions::set_option takes its key as one.
        f"inline constexpr char kXnnpackBackend[] = {q(XNNPACK_BACKEND)};",
        f"inline constexpr char kXnnpackWeightCache[] = {q(XNNPACK_WEIGHT_CACHE)};",
        f"inline constexpr char kWeightCacheEnv[] = {q(WEIGHT_CACHE_ENV)};",
        *(f"inline constexpr const char* k{k} = {q(v)};" for k, v in names.items()),
        "inline constexpr const char* kKvStrategies[] = {"
        + ", ".join(q(k) for k in KV_STRATEGIES)
        + "};",
        "// alias -> our option name (OPTION_ALIASES).",
        "inline constexpr std::pair<const char*, const char*> kOptionAliases[] = {",
        *(f"    {{{q(a)}, {q(o)}}}," for o, aliases in OPTION_ALIASES.items() for a, _ in aliases),
        "};",
        "inline constexpr std::pair<const char*, const char*> kMessages[] = {",
        *(f"    {{{q(k)}, {q(v)}}}," for k, v in MESSAGES.items()),
        "};",
        "}  // namespace etspec::contract",
        "// X(name, INT | STR | FLOAT | INTS): one constant method per metadata field.",
        "#define ETSPEC_TARGET_FIELDS(X) \\\n" + fields(TargetMetadata),
        "#define ETSPEC_DRAFT_FIELDS(X) \\\n" + fields(DraftMetadata),
        "// X(what, draft field, target field): equal in a valid pair.",
        "#define ETSPEC_PAIR_CHECKS(X) \\\n"
        + " \\\n".join(f"  X({q(w)}, {d}, {t})" for w, d, t in PAIR_CHECKS),
    ]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 2:
        sys.exit("usage: python -m etspec.contract OUT.h")
    with open(sys.argv[1], "w", encoding="utf-8") as fh:
        fh.write(cpp_header())
