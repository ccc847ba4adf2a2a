"""Session-scoped fixtures: tiny checkpoints and their exported artifacts, built once."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tiny import (
    BUNDLED_TOKENIZER,
    EXPORT_OPTIONS,
    SMALL_VOCAB_DRAFT,
    TARGET_CONFIGS,
    Eagle3Spec,
    gemma_style_tokenizer,
    make_eagle3_checkpoint,
    make_hf_target,
    write_chat_template,
    write_tokenizer,
)

from etspec.export.export_draft import DraftExportOptions, export_draft
from etspec.export.export_target import TargetExportOptions, export_target


@dataclass
class TargetCase:
    name: str
    checkpoint: Path
    pte: Path
    hf: Any  # transformers model, the reference
    opts: TargetExportOptions


@dataclass
class DraftCase:
    checkpoint: Path
    pte: Path
    target: TargetCase
    state: dict[str, Any]


class Artifacts:
    """Builds each checkpoint/artifact on first use and keeps it for the session."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._targets: dict[str, TargetCase] = {}
        self._drafts: dict[str, DraftCase] = {}

    def target(self, name: str) -> TargetCase:
        if name not in self._targets:
            ckpt = self.root / name
            hf = make_hf_target(name, ckpt, config=TREE_CONFIG_OF.get(name, name))
            if name in WITH_TOKENIZER:  # as real targets do
                vocab = TARGET_CONFIGS[TREE_CONFIG_OF.get(name, name)]["vocab_size"]
                write_tokenizer(ckpt, vocab)
            if name in TEXT_TOKENIZERS:
                (ckpt / "tokenizer.json").write_bytes(TEXT_TOKENIZERS[name]())
            if name == "gemma3_text":  # an instruct target: its chat template travels along
                write_chat_template(ckpt)
            pte = self.root / f"{name}.pte"
            export_target(ckpt, pte, EXPORT_OPTIONS[name])
            self._targets[name] = TargetCase(name, ckpt, pte, hf, EXPORT_OPTIONS[name])
        return self._targets[name]

    def _pair(self, target: str, name: str, spec: Eagle3Spec, step_width: int) -> DraftCase:
        if name not in self._drafts:
            case = self.target(target)
            ckpt = self.root / name
            state = make_eagle3_checkpoint(ckpt, spec)
            pte = self.root / f"{name}.pte"
            opts = DraftExportOptions(backend="xnnpack", step_width=step_width)
            export_draft(ckpt, case.pte, pte, opts)
            self._drafts[name] = DraftCase(ckpt, pte, case, state)
        return self._drafts[name]

    def draft(self) -> DraftCase:
        return self._pair("llama_gqa_rope3", "eagle3_draft", Eagle3Spec(), step_width=4)

    def small_draft(self) -> DraftCase:
        """The 16-token target and its EAGLE-3 draft: mixed accept/reject, frequent EOS."""
        return self._pair("llama_small_vocab", "eagle3_small", SMALL_VOCAB_DRAFT, step_width=1)

    def gemma_draft(self, target: str) -> DraftCase:
        """An EAGLE-3 draft of a Gemma test target (24 of its 32 tokens), step width 4."""
        spec = Eagle3Spec(target_vocab=32, draft_vocab=24, aux_layer_ids=None, intermediate=64)
        return self._pair(target, f"eagle3_{target}", spec, step_width=4)

    def text_pair(self) -> DraftCase:
        """The 16-token pair with a (word-level) tokenizer in the target: text in and out."""
        return self._pair("llama_small_text", "eagle3_small_text", SMALL_VOCAB_DRAFT, 4)

    def bpe_text_pair(self) -> DraftCase:
        """A 4,096-token Llama with the bundled pair's tokenizer, and its EAGLE-3 draft."""
        spec = Eagle3Spec(target_vocab=4096, draft_vocab=256, hidden=32, target_hidden=32,
                          intermediate=64, aux_layer_ids=None)  # fmt: skip
        return self._pair("llama_bpe_text", "eagle3_bpe_text", spec, step_width=4)

    def tree_draft(self) -> DraftCase:
        """The 16-token pair compiled for trees: verify widths 16 and 72, draft step width 4."""
        return self._pair("llama_tree", "eagle3_tree", SMALL_VOCAB_DRAFT, step_width=4)


# Export variants that reuse another entry's model config (and weights: same seed).
TREE_CONFIG_OF = {
    "llama_tree": "llama_small_vocab",
    "llama_small_text": "llama_small_vocab",
    "llama_tied_q": "llama_tied",
}
# Targets whose checkpoint ships a tokenizer.json (embedded in the .pte at export).
WITH_TOKENIZER = {"mistral_tied", "llama_small_text"}
# Targets with a real tokenizer's kind (the C++ runner reads these; it has no word-level model).
TEXT_TOKENIZERS = {
    "gemma3_text": gemma_style_tokenizer,
    "llama_bpe_text": BUNDLED_TOKENIZER.read_bytes,
}


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Artifacts:
    return Artifacts(tmp_path_factory.mktemp("artifacts"))


ROOT = Path(__file__).resolve().parents[1]


def _cmake_ok() -> bool:
    cmake = shutil.which("cmake")
    if cmake is None or shutil.which("c++") is None:
        return False
    out = subprocess.run([cmake, "--version"], capture_output=True, text=True).stdout.split()
    major, minor = (int(x) for x in out[2].split(".")[:2])
    return (major, minor) >= (3, 19)


@pytest.fixture(scope="session")
def runner_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not _cmake_ok():
        pytest.skip("the C++ runner needs CMake >= 3.19 and a C++17 compiler")
    build = tmp_path_factory.mktemp("cpp")
    env = {**os.environ, "PYTHON": sys.executable}
    res = subprocess.run(
        ["bash", str(ROOT / "runtime/cpp/build.sh"), str(build)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return build / "etspec_runner"
