"""The one validation layer between a checkpoint folder and a model: what ``config.json``
and the weight files may hold before anything is built from them.

Every reader goes through it (``checkpoint.read_config``, ``checkpoint.load_state_dict`` and
the loaders' ``check_shape``), so a checkpoint that would load as a different model (a
broadcastable wrong-shape weight, ``head_dim: 0`` read as "absent", ``vocab_size: 16.7``
truncated to 16, ``rope_theta: 0`` giving NaN logits, int8 or NaN weights) is refused in one
line naming the key and the fix, before any lowering starts.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch

from etspec.errors import CheckpointError, EtspecError
from etspec.files import read_text

#: Integer config keys: (smallest, largest) accepted. The upper bounds are far beyond any
#: released model; they stop a typo from allocating terabytes before the shape checks run.
INT_RANGES: dict[str, tuple[int, int]] = {
    "vocab_size": (1, 1 << 22),
    "draft_vocab_size": (1, 1 << 22),
    "hidden_size": (1, 1 << 16),
    "target_hidden_size": (1, 1 << 16),
    "backbone_hidden_size": (1, 1 << 16),
    "intermediate_size": (1, 1 << 20),
    "num_hidden_layers": (1, 1024),
    "num_attention_heads": (1, 1024),
    "num_key_value_heads": (1, 1024),
    "head_dim": (1, 1 << 14),
    "global_head_dim": (1, 1 << 14),
    "max_position_embeddings": (1, 1 << 24),
    "sliding_window": (0, 1 << 24),
    "num_kv_shared_layers": (0, 1024),
}
#: Float config keys that must be finite and positive when present (0 or a negative value
#: makes RoPE frequencies or norms NaN/inf rather than failing).
POSITIVE_FLOATS = (
    "rope_theta",
    "rope_local_base_freq",
    "rms_norm_eps",
    "query_pre_attn_scalar",
    "final_logit_softcapping",
    "attn_logit_softcapping",
    "factor",
)
#: Nested objects checked with the same rules (a multimodal wrapper's text model, RoPE
#: parameters per attention kind).
NESTED = ("text_config", "rope_scaling", "rope_parameters", "full_attention", "sliding_attention")
#: Config keys that hold a list of names when present (the attention kind of each layer).
STRING_LISTS = ("layer_types",)
#: Config switches: JSON true or false when present (``"yes"`` or ``"false"`` read by
#: ``bool()`` is true, so a string silently untied the lm_head or added biases).
BOOLEANS = (
    "tie_word_embeddings",
    "attention_bias",
    "mlp_bias",
    "use_sliding_window",
    "attention_k_eq_v",
    "use_double_wide_mlp",
)
#: What every target config must give (``check_required``): no model can be built without.
TARGET_REQUIRED = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
)
#: Checkpoint tensors that are index maps, not weights (EAGLE-3's vocabulary maps, the Gemma 4
#: assistant's token ordering): integers or booleans, never floats.
INDEX_TENSORS = frozenset({"d2t", "t2d", "token_ordering"})


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key!r} appears twice")
        out[key] = value
    return out


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON file that must hold one object with no key given twice (a duplicated key would
    silently keep its last value)."""
    try:
        text = read_text(path, "JSON file")  # bounded: a config is never near 64 MiB
    except CheckpointError:
        raise
    except EtspecError as e:
        raise CheckpointError(str(e)) from None
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
    except (json.JSONDecodeError, ValueError, RecursionError) as e:
        raise CheckpointError(f"{path}: not valid JSON ({e}); fix or re-download it") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def _bad(path: Path, key: str, want: str, value: Any) -> CheckpointError:
    return CheckpointError(
        f"{path}: {key} must be {want}, got {value!r}; fix it in the checkpoint's config.json"
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_config(config: dict[str, Any], path: Path) -> None:
    """Refuse config values of the wrong type or outside their range (see ``INT_RANGES``,
    ``POSITIVE_FLOATS``), token ids outside the vocabulary, in ``config`` and ``NESTED``."""
    for key, (lo, hi) in INT_RANGES.items():
        value = config.get(key)
        if value is not None and (not _is_int(value) or not lo <= value <= hi):
            raise _bad(path, key, f"an integer from {lo} to {hi}", value)
    for key in POSITIVE_FLOATS:
        value = config.get(key)
        if value is None:
            continue
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or value <= 0:
            raise _bad(path, key, "a finite number above 0", value)
    vocab = config.get("vocab_size")
    eos = config.get("eos_token_id")
    for key, ids in (("eos_token_id", eos), ("bos_token_id", config.get("bos_token_id"))):
        if ids is None:
            continue
        listed = ids if isinstance(ids, list) else [ids]
        for i in listed:
            if not _is_int(i) or i < 0 or (vocab is not None and i >= vocab):
                where = f" below vocab_size {vocab}" if vocab is not None else ""
                raise _bad(path, key, f"token ids from 0{where}", ids)
    for key in NESTED:
        nested = config.get(key)
        if isinstance(nested, dict):
            check_config(nested, path)
        elif nested is not None:
            raise _bad(path, key, "an object", nested)
    for key in BOOLEANS:
        value = config.get(key)
        if value is not None and not isinstance(value, bool):
            raise _bad(path, key, "true or false", value)
    for key in STRING_LISTS:
        value = config.get(key)
        if value is not None and (
            not isinstance(value, list) or not all(isinstance(v, str) for v in value)
        ):
            raise _bad(path, key, "a list of strings", value)


def check_required(config: dict[str, Any], path: Path, keys: tuple[str, ...]) -> None:
    """Refuse a config without one of ``keys`` (or with it null), naming it."""
    for key in keys:
        if config.get(key) is None:
            raise CheckpointError(
                f"{path}: no {key}; a checkpoint of this model needs it: fix "
                "the config or download the checkpoint again"
            )


def check_tensor(name: str, tensor: Any, path: Path) -> None:
    """A checkpoint tensor: a tensor; a weight floating-point and finite; an index map
    (``INDEX_TENSORS``) integer or boolean."""
    if not isinstance(tensor, torch.Tensor):
        raise CheckpointError(f"{path}: {name} is a {type(tensor).__name__}, not a tensor")
    if name.rsplit(".", 1)[-1] in INDEX_TENSORS:
        if tensor.is_floating_point() or tensor.is_complex():
            raise CheckpointError(f"{path}: {name} must hold integers, got {tensor.dtype}")
        return
    if not tensor.is_floating_point():
        raise CheckpointError(
            f"{path}: weight {name} has dtype {tensor.dtype}; weights must be floating point "
            "(fp32, fp16 or bf16): re-save the checkpoint unquantized"
        )
    if not bool(torch.isfinite(tensor).all()):
        raise CheckpointError(
            f"{path}: weight {name} holds NaN or infinite values; the checkpoint is damaged"
        )


def check_shape(name: str, got: torch.Size, want: torch.Size, path: str | Path) -> None:
    """A weight's exact shape, as the config implies it (a broadcastable one is refused too:
    copying it would fill the model with repeated values)."""
    if got != want:
        raise CheckpointError(
            f"{path}: {name} has shape {tuple(got)}, the config implies {tuple(want)}; the "
            "weights do not belong to this config.json"
        )


def shard_file(folder: Path, name: Any, index: Path) -> Path:
    """A shard named by the index, confined to the checkpoint folder (an absolute path or
    ``..`` would read whatever file it names)."""
    if not isinstance(name, str) or not name:
        raise CheckpointError(f"{index}: weight_map values must be file names, got {name!r}")
    rel = Path(name)
    if rel.is_absolute() or ".." in rel.parts:
        raise CheckpointError(
            f"{index}: shard {name!r} is outside the checkpoint folder; shards must sit in {folder}"
        )
    return folder / rel
