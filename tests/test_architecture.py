"""The house's rules, checked on the code: what a deployment runs imports no tooling, a new
draft method is one file plus one registry line, and files stay a readable size."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import torch
from click.testing import CliRunner

from etspec.cli import main
from etspec.runtime.loading import RunnerSpec, load_runners
from etspec.runtime.program import Program
from etspec.runtime.sampling import Sampler
from etspec.runtime.speculative import registry
from etspec.runtime.speculative.draft_method import DraftMethod
from etspec.runtime.speculative.draft_runner import Acceptance, Proposal, SpeculativeDraftRunner
from etspec.runtime.speculative.shapes import TreeShape

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
    assert res.output.strip() == (
        "error: --min-ngram/--max-ngram applies to --draft-method prompt-lookup; add "
        "--draft-method prompt-lookup or drop --min-ngram/--max-ngram"
    )
