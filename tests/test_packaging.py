"""A normal (non-editable) install works: the sdist and the wheel built from it hold every
subpackage, and from a fresh venv, outside the checkout, `etspec generate` with a draft and
the README's Python example give the ids the editable install gives.

The fresh venv reuses the test environment's dependencies (torch, executorch, ...) through a
``.pth`` file over a view of its site-packages without etspec, so the test is offline and
fast while pip still checks the wheel's declared dependencies against them.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import site
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _setup_roots() -> dict[str, str]:
    """setup.py's ROOTS (import name -> folder), read from the file: one definition."""
    for node in ast.parse((ROOT / "setup.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "ROOTS":
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py defines no ROOTS")


# The top-level folders that map into the etspec namespace: folder -> import name.
ROOTS = {folder: name for name, folder in _setup_roots().items()}


def _source_modules() -> set[str]:
    """Every module of the checkout, as its path inside an installed etspec."""
    out = set()
    for folder, package in ROOTS.items():
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT / folder)
            out.add("/".join([*package.split("."), *rel.parts]))
    return out


def _run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    res = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, f"{args}\n{res.stdout}\n{res.stderr}"
    return res.stdout


def test_every_package_folder_has_an_init() -> None:
    """setup.py packages folders with an __init__.py: a module folder without one would be
    left out of the wheel silently."""
    for folder in ROOTS:
        for path in (ROOT / folder).rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            for parent in path.relative_to(ROOT).parents:
                if parent != Path("."):
                    assert (ROOT / parent / "__init__.py").exists(), parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist of a copy of the checkout, and the wheel built from that sdist (what
    `pip install etspec-*.tar.gz` does); the checkout itself is not touched."""
    tmp = tmp_path_factory.mktemp("dist")
    src = tmp / "src"
    keep = [*ROOTS, "pyproject.toml", "setup.py", "README.md", "LICENSE"]
    src.mkdir()
    for name in keep:
        p = ROOT / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(p, src / name)
    build = "from setuptools import build_meta as b; import sys; print(b.build_sdist(sys.argv[1]))"
    sdist = tmp / _run(sys.executable, "-c", build, tmp, cwd=src).strip().splitlines()[-1]
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert "LICENSE" in names and "setup.py" in names and "pyproject.toml" in names
    for folder in ROOTS:
        for path in (ROOT / folder).rglob("*.py"):
            if "__pycache__" not in path.parts:
                assert str(path.relative_to(ROOT)) in names, path
    wheels = tmp / "wheels"
    _run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", wheels, sdist, cwd=tmp)  # fmt: skip
    (whl,) = wheels.glob("etspec-*.whl")
    return whl


def test_wheel_holds_every_module_and_the_license(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    assert _source_modules() <= names, sorted(_source_modules() - names)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), sorted(names)
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    with zipfile.ZipFile(wheel) as z:
        text = z.read(metadata).decode()
    assert "License-Expression: BSD-3-Clause" in text


@pytest.fixture(scope="module")
def fresh_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv with the wheel installed (not editable), its dependencies taken from this
    environment's site-packages minus etspec."""
    tmp = tmp_path_factory.mktemp("venv")
    venv = tmp / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp)
    (target_site,) = venv.glob("lib/python*/site-packages")
    deps = tmp / "deps"
    deps.mkdir()
    ours = re.compile(r"^(etspec|__editable__.*etspec|_?_editable.*etspec)", re.IGNORECASE)
    # Debian's site module lists dist-packages folders that may not exist.
    for sp in filter(Path.is_dir, map(Path, site.getsitepackages())):
        for entry in sp.iterdir():
            if not ours.match(entry.name) and not (deps / entry.name).exists():
                (deps / entry.name).symlink_to(entry)
    (target_site / "test-deps.pth").write_text(f"{deps}\n")
    # --no-index: the wheel's declared dependencies must be satisfied by what is there.
    _run(venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-index", wheel, cwd=tmp)
    return venv


def _readme_python_example() -> str:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"From Python:\n\n```python\n(.*?)```", text, re.S)
    assert block, "the README's Python example moved; update this test"
    return block.group(1)


def test_generate_and_the_readme_example_from_the_wheel_outside_the_checkout(  # type: ignore[no-untyped-def]
    artifacts, fresh_venv: Path, tmp_path: Path
) -> None:
    pair = artifacts.text_pair()
    work = tmp_path / "elsewhere"
    work.mkdir()
    shutil.copy(pair.target.pte, work / "target.pte")
    shutil.copy(pair.pte, work / "draft.pte")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{fresh_venv / 'bin'}{os.pathsep}{env['PATH']}"
    where = "import etspec.runtime.speculative as s; print(s.__file__)"
    installed = _run(fresh_venv / "bin" / "python", "-c", where, cwd=work, env=env)
    assert str(fresh_venv) in installed and str(ROOT) not in installed, installed

    args = ["generate", "--target", "target.pte", "--draft", "draft.pte", "--prompt-ids",
            "3,1,4,1,5", "--max-new-tokens", "24", "--ignore-eos", "--tree", "chain",
            "--json"]  # fmt: skip
    wheel_out = json.loads(_run(fresh_venv / "bin" / "etspec", *args, cwd=work, env=env))
    editable_out = json.loads(_run(sys.executable, "-m", "etspec", *args, cwd=work))
    assert wheel_out["token_ids"] == editable_out["token_ids"]
    assert len(wheel_out["token_ids"]) == 24

    example = work / "example.py"
    example.write_text(_readme_python_example())
    from_wheel = _run(fresh_venv / "bin" / "python", example, cwd=work, env=env)
    from_checkout = _run(sys.executable, example, cwd=work)
    # The example prints the streamed text, then the stats (timings differ run to run).
    ids = [line for line in from_wheel.splitlines() if line.strip()]
    assert ids and from_wheel.split("{")[0] == from_checkout.split("{")[0]
