"""The backend registry (export/backends.py): what each ``--backend`` accepts, and a backend
whose package is missing refused in one line with the fix, before anything is written."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from test_cli_errors import assert_one_line_error, run_cli

from etspec.contract import BACKENDS
from etspec.errors import ExportError
from etspec.export import backends
from etspec.export.backends import REGISTRY, check_options


def test_every_backend_name_is_registered_once() -> None:
    assert tuple(REGISTRY) == BACKENDS
    for name, entry in REGISTRY.items():
        assert entry.default_dtype in entry.dtypes, name


@pytest.mark.parametrize(("backend", "dtype"), [("portable", "8da8w"), ("openvino", "8da4w")])
def test_quantized_recipes_need_xnnpack(backend: str, dtype: str) -> None:
    with pytest.raises(ExportError, match=f"--dtype {dtype} needs --backend xnnpack"):
        check_options(backend, dtype)


def test_unknown_backend_names_the_choices() -> None:
    with pytest.raises(ExportError, match="unknown backend 'tpu'; choose one of xnnpack, "):
        check_options("tpu", "fp32")


def test_openvino_missing_is_a_one_line_error_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused before any input is read (so these inputs need not exist)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        backends.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "openvino" else real(name, *a),
    )
    ckpt, out = tmp_path / "checkpoint", tmp_path / "t.pte"
    r = run_cli("export", "target", str(ckpt), "-o", str(out), "--backend", "openvino")
    assert_one_line_error(r, "--backend openvino needs the openvino package", "etspec[openvino]")
    r = run_cli(
        "export", "draft", str(ckpt), "--target", str(tmp_path / "target.pte"), "-o", str(out),
        "--backend", "openvino",
    )  # fmt: skip
    assert_one_line_error(r, "pip install 'etspec[openvino]'")
    assert list(tmp_path.iterdir()) == []
