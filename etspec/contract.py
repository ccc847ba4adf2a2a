"""The artifact contract: every metadata key of a target or draft ``.pte``, named once.

Export writes these values as ExecuTorch *constant methods* (a method that returns a value);
the runtime reads every one of them at load and fails loudly when one is missing or has the
wrong type. Method names of the programs are defined here too, so export, the Python runtime
and (later) the C++ runner agree on one list.

Hidden-state descriptor: ``hidden_state_point`` says where in the target the states are
tapped, ``hidden_state_layers`` which layers, in the order they are concatenated in the
``hidden`` output of every target method. The only point today is ``layer_input``: the
residual stream entering decoder layer ``i``; ``i == num_layers`` is the final pre-norm state
(what MTP-style drafters read).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from etspec.errors import ArtifactError, MetadataMismatchError

FORMAT_VERSION = 2  # 2: draft_extend per verify width

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
HIDDEN_POINTS = ("layer_input",)
BACKENDS = ("xnnpack", "portable")
DTYPES = ("fp32", "8da4w")

# Additive mask value for "not attended". Finite on purpose: a fully masked (padded) query
# row then yields finite garbage instead of NaN, and NaN written into a cache slot would
# poison every later query through 0 * NaN in probs @ V even where that slot is masked.
MASK_MIN = -1.0e9


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
                raise ArtifactError(
                    f"artifact is missing metadata {f.name!r}; re-export it with this etspec"
                ) from None
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
    raise ArtifactError(f"artifact metadata {name!r} has an unexpected value {raw!r}")


@dataclass(frozen=True)
class TargetMetadata(_Metadata):
    """Everything the runtime needs to drive a target program."""

    KIND: ClassVar[str] = "target"

    format_version: int
    model_family: str
    vocab_size: int
    hidden_size: int
    num_layers: int
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
            f"{path} has etspec format version {version}, this etspec reads version "
            f"{FORMAT_VERSION}; re-export it with this etspec"
        )


def check_pair(target: TargetMetadata, draft: DraftMetadata) -> None:
    """Reject a draft whose expectations do not match the target, naming both values."""
    checks = [
        ("hidden size", draft.target_hidden_size, target.hidden_size),
        ("vocabulary size", draft.target_vocab_size, target.vocab_size),
        ("hidden-state descriptor", str(draft.hidden_spec()), str(target.hidden_spec())),
    ]
    for what, expected, actual in checks:
        if expected != actual:
            raise MetadataMismatchError(
                f"draft/target mismatch: the draft expects target {what} {expected}, "
                f"the target has {actual}; export the draft against this target"
            )
    if (
        draft.target_tokenizer_sha256
        and target.tokenizer_sha256
        and draft.target_tokenizer_sha256 != target.tokenizer_sha256
    ):
        raise MetadataMismatchError(
            "draft/target mismatch: the draft was exported for a target with tokenizer "
            f"{draft.target_tokenizer_sha256[:12]}, the target has "
            f"{target.tokenizer_sha256[:12]}; export the draft against this target"
        )
