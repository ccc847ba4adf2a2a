"""The C++ runner binary (``runtime/cpp``) as a benchmark system.

``etspec bench --cpp-runner build/cpp/etspec_runner`` times the binary beside the Python
runtime on the same prompts and artifacts: one process per generation, fed token ids, read
back as ``--json`` (the stats share the Python runtime's field names). Its timings are the
binary's own (from the first prefill call to the last token), so process start and ``.pte``
loading are not in them, as they are not in the Python systems' either.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from etspec.contract import TargetMetadata
from etspec.errors import EtspecError
from etspec.runtime.runner import GenerationResult, TextLLMRunner
from etspec.runtime.sampling import SamplingConfig
from etspec.runtime.speculative.dispatcher import TreeSettings
from etspec.runtime.stats import GenerationStats

_STATS_FIELDS = {f.name for f in dataclasses.fields(GenerationStats) if not f.name.startswith("_")}


class CppRunner:
    """One configuration of the binary: target-only, or speculative with ``tree_args``
    (``--tree chain --num-spec-tokens 3``, ``--tree static --static-tree N7``, ...)."""

    generator = None  # failure dumps describe it by name

    def __init__(
        self,
        binary: Path,
        target: Path,
        base: TextLLMRunner,
        draft: Path | None = None,
        tree_args: Sequence[str] = (),
        kv_strategy: str = "position-overwrite",
        draft_method: str = "eagle3",
    ) -> None:
        if not binary.is_file():
            raise EtspecError(
                f"{binary}: no C++ runner there; build it with `bash runtime/cpp/build.sh`"
            )
        self.binary, self.target, self.draft = binary, target, draft
        self.tree_args, self.kv_strategy = list(tree_args), kv_strategy
        # gemma4-assistant drafts with the assistant inside the target (no draft file).
        self.draft_method = draft_method
        self.base = base
        self.meta: TargetMetadata = base.meta

    @staticmethod
    def tree_args_for(name: str, settings: TreeSettings) -> list[str] | None:
        """The binary's arguments for a bench tree name (a mode or a shape name), or None
        for what it does not run (auto, dynamic trees)."""
        chain = re.fullmatch(r"chain(\d+)", name)
        if chain or name == "chain":
            length = chain.group(1) if chain else str(settings.num_spec_tokens)
            return ["--tree", "chain", "--num-spec-tokens", length]
        if re.fullmatch(r"N\d+|D\d+xBF\d+", name):
            return ["--tree", "static", "--static-tree", name]
        if name == "static":
            extra = ["--static-tree", settings.static_tree] if settings.static_tree else []
            return ["--tree", "static", *extra]
        return None

    def encode(self, prompt: str | Sequence[int]) -> list[int]:
        return self.base.encode(prompt)

    def command(
        self, ids: Sequence[int], max_new_tokens: int, sampling: SamplingConfig
    ) -> list[str]:
        """The binary's command line for one generation."""
        cmd = [str(self.binary), "--target", str(self.target), "--json"]
        cmd += ["--prompt-ids", ",".join(map(str, ids)), "--max-new-tokens", str(max_new_tokens)]
        if self.draft_method == "gemma4-assistant":
            cmd += ["--draft-method", self.draft_method]
            cmd += [*self.tree_args, "--kv", self.kv_strategy]
        elif self.draft is not None:
            cmd += ["--draft", str(self.draft), *self.tree_args, "--kv", self.kv_strategy]
        if sampling.temperature > 0:
            cmd += ["--temperature", repr(sampling.temperature)]
            cmd += ["--top-k", str(sampling.top_k), "--top-p", repr(sampling.top_p)]
            if sampling.seed is not None:
                cmd += ["--seed", str(sampling.seed)]
        return cmd

    def generate(
        self,
        prompt: str | Sequence[int],
        max_new_tokens: int = 128,
        sampling: SamplingConfig | None = None,
        *,
        trace: bool = False,
    ) -> GenerationResult:
        """One generation by the binary (``trace`` is accepted and ignored: the binary
        reports totals, not per-step traces)."""
        ids = self.encode(prompt)
        cmd = self.command(ids, max_new_tokens, sampling or SamplingConfig())
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            lines = res.stderr.strip().splitlines() or [f"exit status {res.returncode}"]
            raise EtspecError(f"the C++ runner failed: {lines[-1]}")
        out = json.loads(res.stdout.splitlines()[-1])
        stats = GenerationStats(**{k: v for k, v in out["stats"].items() if k in _STATS_FIELDS})
        new = out["token_ids"]
        text = self.base.tokenizer.decode(new) if self.base.tokenizer is not None else ""
        return GenerationResult(
            token_ids=new, text=text, stop_reason=out["stop_reason"], stats=stats
        )
