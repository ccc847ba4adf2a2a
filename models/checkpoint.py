"""Reading local Hugging Face style checkpoint folders (no hub access, ever)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from etspec.errors import CheckpointError
from etspec.models.validation import check_config, check_tensor, read_json_object, shard_file

_SINGLE = "model.safetensors"
_INDEX = "model.safetensors.index.json"
_TORCH_BIN = "pytorch_model.bin"


def eos_token_ids(config: dict[str, Any]) -> tuple[int, ...]:
    """``eos_token_id`` of an HF config (an int, a list or absent) as a tuple."""
    eos = config.get("eos_token_id")
    if isinstance(eos, list):
        return tuple(int(e) for e in eos)
    return () if eos is None else (int(eos),)


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
    """``config.json``, its values checked for type and range (``validation.check_config``)."""
    p = checkpoint_dir(path) / "config.json"
    config = read_json_object(p)
    check_config(config, p)
    return config


def load_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """All tensors of a checkpoint (single or sharded safetensors, or a torch ``.bin``),
    each checked (``validation.check_tensor``): weights floating and finite, shards inside
    the folder, no tensor in two shards."""
    p = checkpoint_dir(path)
    if (p / _SINGLE).is_file():
        files = [p / _SINGLE]
    elif (p / _INDEX).is_file():
        index = read_json_object(p / _INDEX)
        weight_map = index.get("weight_map")
        if not isinstance(weight_map, dict):
            raise CheckpointError(f"{p / _INDEX}: not a safetensors index (no weight_map object)")
        files = sorted({shard_file(p, name, p / _INDEX) for name in weight_map.values()})
    elif (p / _TORCH_BIN).is_file():
        # Official EAGLE-3 drafts are often published as pytorch_model.bin.
        return _torch_bin(p / _TORCH_BIN)
    else:
        raise CheckpointError(f"{p} has no weights ({_SINGLE}, {_INDEX} or {_TORCH_BIN})")
    tensors: dict[str, torch.Tensor] = {}
    for f in files:
        if not f.is_file():
            raise CheckpointError(f"{f}: shard listed in the index is missing")
        try:
            with safe_open(str(f), framework="pt") as sf:
                for key in sf.keys():  # noqa: SIM118 - safe_open is not a mapping
                    if key in tensors:
                        raise CheckpointError(f"{f}: {key} is also in another shard")
                    tensors[key] = sf.get_tensor(key)
        except CheckpointError:
            raise
        except Exception as e:  # safetensors raises its own error types on damaged files
            raise CheckpointError(f"{f}: cannot read safetensors ({e})") from None
    for key, tensor in tensors.items():
        check_tensor(key, tensor, p)
    return tensors


def _torch_bin(f: Path) -> dict[str, torch.Tensor]:
    try:
        state = torch.load(f, map_location="cpu", weights_only=True)
    except Exception as e:  # pickle, zip and torch raise many types on damaged files
        raise CheckpointError(f"{f}: cannot read the torch checkpoint ({e})") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{f}: expected a dict of tensors, got {type(state).__name__}")
    for key, tensor in state.items():
        check_tensor(str(key), tensor, f.parent)
    return state


def read_tokenizer_json(path: str | Path) -> bytes | None:
    """The bytes of ``tokenizer.json`` when the checkpoint ships one, else None."""
    f = Path(path) / "tokenizer.json"
    return f.read_bytes() if f.is_file() else None


def read_chat_template(path: str | Path) -> bytes | None:
    """The checkpoint's chat template as the artifact stores it (``contract.CHAT_TEMPLATE``:
    UTF-8 JSON of the template text and the bos/eos tokens it may name), where transformers
    finds it: ``chat_template.jinja``, else ``tokenizer_config.json``'s ``chat_template``
    (text, or named templates of which ``default`` is the one); None without one."""
    folder = Path(path)
    config_file = folder / "tokenizer_config.json"
    config = read_json_object(config_file) if config_file.is_file() else {}
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        template: Any = jinja.read_text(encoding="utf-8")
    else:
        template = config.get("chat_template")
        if isinstance(template, list):  # [{"name": "default", "template": ...}, ...]
            named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
            template = named.get("default")
    if template is None:
        return None
    if not isinstance(template, str) or not template.strip():
        raise CheckpointError(
            f"{config_file}: chat_template must be the template's text, got "
            f"{type(template).__name__}; fix it or remove it"
        )
    entry = {"template": template}
    for name in ("bos_token", "eos_token"):
        token = config.get(name)
        if isinstance(token, dict):  # an AddedToken written out: {"content": ...}
            token = token.get("content")
        entry[name] = token if isinstance(token, str) else None
    return json.dumps(entry, ensure_ascii=False).encode("utf-8")
