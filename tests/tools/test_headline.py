"""README's headline table is generated from docs/results/headline/ and describes HEAD's code:
the table and results.md's section equal what ``etspec.tools.headline`` writes from the
files, every file was measured on a clean tree at a revision whose runtime/export code is
HEAD's, and a changed figure or a stale file is caught and named."""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from etspec.tools import headline
from etspec.tools.prompts import TASK_SETS, load_prompts

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / headline.HEADLINE_DIR


def _block(text: str) -> str:
    return text.split(headline.BEGIN, 1)[1].split(headline.END, 1)[0].strip("\n")


@pytest.fixture(scope="module")
def data() -> dict:
    found = headline.load(FOLDER)
    assert found, f"no reports in {FOLDER}: bash scripts/reproduce.sh"
    return found


def test_every_headline_row_has_its_files(data: dict) -> None:
    kinds = {
        "gemma-tasks-sampled",
        "gemma-tasks-greedy",
        "gemma-draft-chain5-greedy",
        "gemma-draft-chain5-sampled",
        "bundled-humaneval40",
        "gemma-memory",
        "gemma-sampling",
    }
    assert set(data) == kinds
    assert len(headline.rows(data)) == 6
    for name in ("gemma-tasks-sampled", "gemma-tasks-greedy", "bundled-humaneval40"):
        for run in data[name]:  # full reports: every prompt's record of every system
            n = run["summary"]["target-only"]["prompts"]
            assert all(len(recs) == n for recs in run["records"].values())


def test_readme_and_results_md_are_generated_from_the_files(data: dict) -> None:
    assert _block((ROOT / "README.md").read_text()) == headline.readme_block(data)
    assert _block((ROOT / "docs/results.md").read_text()) == headline.results_block(data)


def test_each_task_table_weighs_the_default_against_the_faster_drafter_alone(data: dict) -> None:
    block = headline.results_block(data)
    for mode in ("sampled", "greedy"):
        section = block.split(f"### Gemma 3 270M on task prompts, {mode}", 1)[1].split("###")[0]
        rows = section.split("| the default against the faster drafter alone |", 1)[1]
        for runtime in ("python", "cpp"):
            cells = rows.split(f"\n| {runtime} | ", 1)[1].split("\n", 1)[0].split(" | ")
            assert len(cells) == len(TASK_SETS), cells
            assert all(" of prompt-lookup" in c or " of eagle3" in c for c in cells), cells


def test_the_files_measured_heads_code(data: dict) -> None:
    if (
        subprocess.run(
            ["git", "rev-parse", "--is-shallow-repository"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
        != "false"
    ):
        pytest.skip("not a full git clone: the revisions cannot be compared")
    assert headline.stale(data, ROOT) == []


def test_a_changed_figure_or_stale_file_is_named(data: dict, tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copy(ROOT / "docs/results.md", tmp_path / "docs/results.md")
    shutil.copytree(FOLDER, tmp_path / headline.HEADLINE_DIR)
    readme = tmp_path / "README.md"
    text = readme.read_text()
    block = _block(text)
    figure = block.split("| ")[6].split("x")[0]  # the first row's first speedup
    readme.write_text(text.replace(block, block.replace(figure, figure + "1", 1)))
    out = CliRunner().invoke(headline.main, ["--check", "--root", str(tmp_path)])
    assert out.exit_code == 1
    assert "README.md: its headline differs from docs/results/headline/" in out.output
    # Rewriting restores it; the check then passes but for the files' revisions.
    CliRunner().invoke(headline.main, ["--root", str(tmp_path)])
    assert readme.read_text() == text

    stale = copy.deepcopy(data)
    stale["gemma-memory"][0]["manifest"]["git_dirty"] = True
    stale["gemma-sampling"][0]["manifest"]["git_revision"] = "0" * 40
    assert headline.stale(stale, ROOT) == [
        "gemma-memory.json: measured with uncommitted changes or outside git",
        "gemma-sampling.json: revision 0000000 is not in this clone's history",
    ]


def test_quick_task_prompts_take_the_first_of_every_set() -> None:
    quick = load_prompts("tasks:2")
    assert [p.id for p in quick] == [f"{t}/{i}" for t in TASK_SETS for i in (0, 1)]
    assert [p.text for p in quick[:2]] == [p.text for p in load_prompts("tasks")[:2]]


def test_reproduce_refuses_an_unknown_argument() -> None:
    out = subprocess.run(
        ["bash", str(ROOT / "scripts/reproduce.sh"), "--fast"], capture_output=True, text=True
    )
    assert out.returncode == 2 and "usage: bash scripts/reproduce.sh [--quick]" in out.stderr
    assert all((ROOT / p).exists() for p in headline.CODE_PATHS)
