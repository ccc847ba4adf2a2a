"""Reading local Hugging Face style checkpoint folders (no hub access, ever)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from etspec.errors import CheckpointError

_SINGLE = "model.safetensors"
_INDEX = "model.safetensors.index.json"
_TORCH_BIN = "pytorch_model.bin"


def checkpoint_dir(path: str | Path) -> Path:
    p = Path(path)
    if not p.exists():
        raise CheckpointError(f"{p}: no such directory")
    if not p.is_dir():
        raise CheckpointError(f"{p}: expected a checkpoint folder, got a file")
    if not (p / "config.json").is_file():
        raise CheckpointError(
            f"{p} is not a Hugging Face checkpoint folder (no config.json); point at the folder "
            "that save_pretrained wrote"
        )
    return p


def read_config(path: str | Path) -> dict[str, Any]:
    p = checkpoint_dir(path) / "config.json"
    try:
        return json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{p}: not valid JSON ({e})") from None


def load_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """All tensors of a checkpoint: single or sharded safetensors, or a torch ``.bin``."""
    p = checkpoint_dir(path)
    if (p / _SINGLE).is_file():
        files = [p / _SINGLE]
    elif (p / _INDEX).is_file():
        try:
            weight_map = json.loads((p / _INDEX).read_text())["weight_map"]
        except (json.JSONDecodeError, KeyError) as e:
            raise CheckpointError(f"{p / _INDEX}: not a safetensors index ({e})") from None
        files = [p / name for name in sorted(set(weight_map.values()))]
    elif (p / _TORCH_BIN).is_file():
        # Official EAGLE-3 drafts are often published as pytorch_model.bin.
        return torch.load(p / _TORCH_BIN, map_location="cpu", weights_only=True)
    else:
        raise CheckpointError(f"{p} has no weights ({_SINGLE}, {_INDEX} or {_TORCH_BIN})")
    tensors: dict[str, torch.Tensor] = {}
    for f in files:
        if not f.is_file():
            raise CheckpointError(f"{f}: shard listed in the index is missing")
        try:
            with safe_open(str(f), framework="pt") as sf:
                for key in sf.keys():  # noqa: SIM118 - safe_open is not a mapping
                    tensors[key] = sf.get_tensor(key)
        except Exception as e:  # safetensors raises its own error types on damaged files
            raise CheckpointError(f"{f}: cannot read safetensors ({e})") from None
    return tensors


def read_tokenizer_json(path: str | Path) -> bytes | None:
    """The bytes of ``tokenizer.json`` when the checkpoint ships one, else None."""
    f = Path(path) / "tokenizer.json"
    return f.read_bytes() if f.is_file() else None
