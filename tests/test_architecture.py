"""The house's rules, checked on the code: what a deployment runs imports no tooling and no
model definitions, training is imported by the CLI alone, no two modules import each other
(directly or around a circle), a new draft method is one file plus one registry line, and
files stay a readable size."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import torch
from click.testing import CliRunner

from etspec.cli import main
from etspec.runtime.program import Program
from etspec.runtime.runner import load_runners
from etspec.runtime.sampling import Sampler
from etspec.runtime.spec import RunnerSpec
from etspec.runtime.speculative import registry
from etspec.runtime.speculative.draft_method import DraftMethod
from etspec.runtime.speculative.draft_runner import SpeculativeDraftRunner
from etspec.runtime.speculative.shapes import TreeShape
from etspec.runtime.speculative.step import Acceptance, Proposal

ROOT = Path(__file__).resolve().parents[1]
# Import name -> folder (setup.py's ROOTS).
FOLDERS = {"etspec.runtime": "runtime", "etspec.tools": "tools", "etspec.cli": "etspec/cli"}


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at any depth (lazy imports inside functions too)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def test_the_runtime_imports_no_tooling_and_no_cli() -> None:
    files = sorted((ROOT / "runtime").rglob("*.py"))
    assert len(files) > 20  # the walk sees the runtime
    bad = {
        str(f.relative_to(ROOT)): sorted(
            m for m in _imports(f) if m.startswith(("etspec.tools", "etspec.cli"))
        )
        for f in files
    }
    assert {f: m for f, m in bad.items() if m} == {}


def _setup_roots() -> dict[str, str]:
    """Import name -> folder for the whole package: setup.py's ROOTS, read, not copied."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    node = next(
        n for n in tree.body
        if isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "ROOTS" for t in n.targets)
    )  # fmt: skip
    return ast.literal_eval(node.value)


ROOTS = _setup_roots()


def _modules() -> dict[str, Path]:
    """Every module of the package by its dotted name; a package is its ``__init__.py``."""
    found = {}
    for name, folder in ROOTS.items():
        for f in (ROOT / folder).rglob("*.py"):
            parts = f.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((name, *parts))] = f
    return found


def _edges(name: str, path: Path, modules: dict[str, Path]) -> dict[str, int]:
    """The package's modules that one module imports, each with its first line: any import
    at any depth (inside functions and under ``if TYPE_CHECKING:`` too, since a lazy import
    is a dependency all the same), relative ones resolved, ``from etspec.a import b`` an edge
    to ``etspec.a.b`` where that is a module and to ``etspec.a`` otherwise."""
    is_package = path.name == "__init__.py"
    out: dict[str, int] = {}

    def add(target: str, line: int) -> None:
        while target not in modules and "." in target:  # `import etspec.a.b` of a name
            target = target.rsplit(".", 1)[0]
        if target in modules and target != name:
            out.setdefault(target, line)

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "etspec" or a.name.startswith("etspec."):
                    add(a.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name if is_package else name.rsplit(".", 1)[0]
                up = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{up}.{base}" if base else up
            if base != "etspec" and not base.startswith("etspec."):
                continue
            for a in node.names:
                sub = f"{base}.{a.name}"
                add(sub if sub in modules else base, node.lineno)
    return out


def _import_graph() -> dict[str, dict[str, int]]:
    """Module -> {imported module: line of the first such import}, over the package."""
    modules = _modules()
    return {name: _edges(name, path, modules) for name, path in sorted(modules.items())}


def _circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_import_graph_is_walked(tmp_path: Path) -> None:
    """The walk sees the package and every kind of import (lazy, under ``TYPE_CHECKING``,
    relative, a submodule named by ``from``), and Tarjan finds a circle."""
    graph = _import_graph()
    assert len(graph) > 60 and "etspec.runtime.speculative.tree" in graph
    assert "etspec.contract" in graph["etspec.runtime.program"]
    f = tmp_path / "m.py"
    f.write_text(
        "from typing import TYPE_CHECKING\n"
        "import torch\n"
        "from . import b\n"
        "from .b import x\n"
        "from .. import contract\n"
        "if TYPE_CHECKING:\n    from etspec.pkg.c import Y\n"
        "def f():\n    import etspec.pkg.d\n"
        "from etspec.pkg import name_in_init\n"
    )
    names = ("etspec.contract", "etspec.pkg", "etspec.pkg.m", "etspec.pkg.b", "etspec.pkg.c")
    modules = dict.fromkeys((*names, "etspec.pkg.d"), f)
    assert _edges("etspec.pkg.m", f, modules) == {
        "etspec.pkg.b": 3,
        "etspec.contract": 5,
        "etspec.pkg.c": 7,
        "etspec.pkg.d": 9,
        "etspec.pkg": 10,
    }
    assert _circles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [
        ["a", "b", "c"]
    ]


def test_no_import_circles() -> None:
    """No module imports itself around a circle, not even lazily: a circle makes import
    order matter, hides which layer depends on which, and is what a lazy import papers
    over. The message lists each circle's modules and the imports (file:line) inside it."""
    modules = _modules()
    graph = _import_graph()
    report = []
    for circle in _circles(graph):
        report.append("circle: " + ", ".join(circle))
        report += [
            f"  {a} -> {b} ({modules[a].relative_to(ROOT)}:{line})"
            for a in circle
            for b, line in sorted(graph[a].items())
            if b in circle
        ]
    assert report == [], "\n".join(report)


# The eager reference program (``--reference``) runs the model definitions in torch by
# design: it is what a .pte is checked against, never what a deployment runs.
REFERENCE_PROGRAM = "etspec.runtime.eager"


def test_the_runtime_imports_no_model_definitions() -> None:
    """A deployment runs an artifact, not a model: what the runtime needs from a model (mask
    values, shapes) is in the contract or the artifact's metadata, not in ``etspec.models``."""
    graph = _import_graph()
    bad = {
        m: sorted(t for t in targets if t == "etspec.models" or t.startswith("etspec.models."))
        for m, targets in graph.items()
        if m.startswith("etspec.runtime") and m != REFERENCE_PROGRAM
    }
    assert {m: t for m, t in bad.items() if t} == {}


def test_training_sits_on_top() -> None:
    """``etspec.training`` (draft training, ``etspec draft train``) builds on the models, the
    export and the runtime: nothing a deployment or an export runs (the runtime, the models,
    the export, the package's core) imports it, and it imports no CLI."""
    graph = _import_graph()
    assert "etspec.training.pipeline" in graph and "etspec.training.train_draft" in graph
    below = ("etspec.runtime", "etspec.models", "etspec.export")
    above = {"etspec.cli", "etspec.tools", "etspec.training", "etspec.__main__"}
    core = {m for m in graph if m.count(".") == 1} - above  # contract, artifact, errors, ...
    into = {
        m: sorted(t for t in targets if t.startswith("etspec.training"))
        for m, targets in graph.items()
        if m.startswith(below) or m in core
    }
    assert {m: t for m, t in into.items() if t} == {}
    out = {
        m: sorted(t for t in targets if t.startswith("etspec.cli"))
        for m, targets in graph.items()
        if m.startswith("etspec.training")
    }
    assert {m: t for m, t in out.items() if t} == {}
    assert "etspec.training.pipeline" in graph["etspec.cli.draft"]


def test_tests_import_no_script() -> None:
    """scripts/ holds the README's commands, thin wrappers and measurement scripts: a test
    imports the package, and runs a script only as a user does (``helpers.run_script``)."""
    scripts = {p.stem for p in (ROOT / "scripts").glob("*.py")}
    assert "soak" in scripts  # the walk sees the scripts
    bad = {
        str(f.relative_to(ROOT)): sorted(m for m in _imports(f) if m.split(".")[0] in scripts)
        for f in sorted((ROOT / "tests").rglob("*.py"))
    }
    assert {f: m for f, m in bad.items() if m} == {}
    text = (ROOT / "pyproject.toml").read_text()
    assert '"scripts"' not in text.split("pythonpath", 1)[1].split("]", 1)[0]


def test_files_stay_readable() -> None:
    long = {
        str(f.relative_to(ROOT)): n
        for folder, limit in (("etspec/cli", 300), ("runtime", 400))
        for f in (ROOT / folder).rglob("*.py")
        if (n := len(f.read_text(encoding="utf-8").splitlines())) > limit
    }
    assert long == {}


class RepeatLastDraftRunner(SpeculativeDraftRunner):
    """A toy drafter: guesses that the last token repeats."""

    def __init__(self) -> None:
        self.last = 0

    def reset(self) -> None:
        self.last = 0

    def prefill(self, prompt: list[int], first_token: int, hidden: torch.Tensor | None) -> int:
        self.last = first_token
        return 0

    def accept(self, acceptance: Acceptance) -> int:
        self.last = acceptance.next_token
        return 0

    def propose(self, shape: TreeShape, max_height: int, sampler: Sampler) -> Proposal:
        cost = shape.cost
        return Proposal.chain([self.last] * min(cost.max_height, cost.max_nodes, max_height))


class RepeatLastMethod(DraftMethod):
    name = "repeat-last"
    help = "a toy: the last token again"
    aliases = ("again",)

    def runner(
        self, spec: RunnerSpec, target: Program, draft: Program | None
    ) -> SpeculativeDraftRunner:
        return RepeatLastDraftRunner()


def test_a_draft_method_is_one_record_in_the_registry(artifacts) -> None:  # type: ignore[no-untyped-def]
    """Registered without editing another file: it loads, runs under every tree mode's
    policy (auto's cost probes included) and from the command line, and stays exact."""
    registry.register(RepeatLastMethod())
    try:
        _check_repeat_last(artifacts.target("mistral_tied").pte)
    finally:
        registry.DRAFT_METHODS.pop(RepeatLastMethod.name)


def _check_repeat_last(pte: Path) -> None:
    prompt = [5, 9, 9, 9, 2, 7, 7]
    base, spec = load_runners(RunnerSpec(pte, draft_method="again"))
    assert spec is not None
    want = base.generate(prompt, 24).token_ids
    got = spec.generate(prompt, 24)
    assert got.token_ids == want and got.stats.verify_calls > 0
    assert spec.describe()["draft"] == "RepeatLastDraftRunner"
    res = CliRunner().invoke(
        main,
        ["generate", "--target", str(pte), "--draft-method", "repeat-last", "--tree", "chain",
         "--prompt-ids", ",".join(map(str, prompt)), "--max-new-tokens", "24", "--json"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["token_ids"] == want
    # A method's own options are refused for the others, naming the owner.
    res = CliRunner().invoke(
        main, ["generate", "--target", str(pte), "--draft-method", "again", "--max-ngram", "2",
               "--prompt-ids", "1"],
    )  # fmt: skip
    assert res.output.strip().startswith(
        "error: --max-ngram applies to --draft-method prompt-lookup; add --draft-method "
        "prompt-lookup or drop --max-ngram; see `"
    )
