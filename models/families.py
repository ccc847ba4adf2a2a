"""The registry of target families: which ``TargetModel`` a checkpoint's ``model_type``
builds, and the loader that builds it.

Its own module so that the dependencies point one way: each family (``llama.py``,
``gemma.py``) imports the base in ``target.py``, and this registry imports the families;
the base imports none of them. A new family is a new module plus one line in ``FAMILIES``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from etspec.contract import HiddenStateSpec
from etspec.errors import UnsupportedModelError
from etspec.models.checkpoint import read_config
from etspec.models.gemma import GemmaTarget
from etspec.models.gemma_config import GEMMA_MODEL_TYPES, MULTIMODAL_MODEL_TYPES
from etspec.models.llama import LlamaTarget
from etspec.models.llama_config import LLAMA_MODEL_TYPES
from etspec.models.target import TargetModel
from etspec.models.validation import TARGET_REQUIRED, check_required

#: ``model_type`` -> its family's model class; each family's config names the ``model_type``s
#: it reads (``llama_config.LLAMA_MODEL_TYPES``, ``gemma_config.GEMMA_MODEL_TYPES``).
FAMILIES: dict[str, type[TargetModel]] = {
    **{t: LlamaTarget for t in LLAMA_MODEL_TYPES},
    **{t: GemmaTarget for t in GEMMA_MODEL_TYPES},
}


def target_class(config: dict[str, Any]) -> type[TargetModel]:
    """The model class of a checkpoint's ``model_type``; a one-line error naming the
    supported ones."""
    model_type = config.get("model_type")
    # The multimodal wrappers resolve to the Gemma loader, which refuses them with the fix.
    cls = FAMILIES.get(MULTIMODAL_MODEL_TYPES.get(model_type, model_type))  # type: ignore[arg-type]
    if cls is None:
        raise UnsupportedModelError(
            f"model_type {model_type!r} is not supported; supported: {', '.join(FAMILIES)}"
        )
    return cls


def check_target_config(config: dict[str, Any], path: Path) -> None:
    """Refuse a target config of an unsupported ``model_type`` or without a key every
    target needs (``validation.TARGET_REQUIRED``), before anything reads it."""
    target_class(config)
    if config.get("model_type") not in MULTIMODAL_MODEL_TYPES:  # refused with their own fix
        check_required(config, path, TARGET_REQUIRED)


def target_family(config: dict[str, Any]) -> Callable[..., TargetModel]:
    """The loader of a checkpoint's ``model_type`` (``target_class(config).from_checkpoint``)."""
    return target_class(config).from_checkpoint  # type: ignore[attr-defined,no-any-return]


def load_target(
    path: str | Path,
    max_context: int,
    scratch: int,
    hidden_spec: HiddenStateSpec | None = None,
) -> TargetModel:
    """The target model of the local HF checkpoint ``path``, by its ``model_type``."""
    return target_family(read_config(path))(path, max_context, scratch, hidden_spec)
