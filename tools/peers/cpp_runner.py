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
import subprocess
from collections.abc import Sequence
from pathlib import Path

from etspec.contract import DEFAULT_KV_STRATEGY
from etspec.errors import EtspecError
from etspec.runtime.runner import GenerationResult, TextLLMRunner
from etspec.runtime.sampling import SamplingConfig
from etspec.runtime.speculative.dynamic_tree import DynamicTree
from etspec.runtime.speculative.settings import TREE_MODES, TreeSettings, parse_shape
from etspec.runtime.speculative.shapes import ChainShape
from etspec.runtime.speculative.static_tree import StaticTree
from etspec.runtime.stats import GenerationStats
from etspec.tools.peers.base import OutsidePeer

_STATS_FIELDS = {f.name for f in dataclasses.fields(GenerationStats) if not f.name.startswith("_")}


class CppRunner(OutsidePeer):
    """One configuration of the binary: target-only, or speculative with ``tree_args``
    (``--tree chain --num-spec-tokens 3``, ``--tree static --static-tree N7``, ...)."""

    def __init__(
        self,
        binary: Path,
        target: Path,
        base: TextLLMRunner,
        method_args: Sequence[str] = (),
        tree_args: Sequence[str] = (),
        kv_strategy: str = DEFAULT_KV_STRATEGY,
    ) -> None:
        """``method_args``: the draft method's arguments (``DraftMethod.cpp_args``); none:
        target-only."""
        if not binary.is_file():
            raise EtspecError(
                f"{binary}: no C++ runner there; build it with `bash runtime/cpp/build.sh`"
            )
        self.binary, self.target = binary, target
        self.method_args, self.tree_args = list(method_args), list(tree_args)
        self.kv_strategy = kv_strategy
        super().__init__(base)

    @staticmethod
    def tree_args_for(name: str, settings: TreeSettings) -> list[str] | None:
        """The binary's arguments for a bench tree name (a mode or a shape name), or None
        for what it does not run (auto)."""
        if name == "chain":
            return ["--tree", "chain", "--num-spec-tokens", str(settings.num_spec_tokens)]
        if name == "dynamic":
            knobs = {"--depth": settings.depth, "--draft-topk": settings.topk}
            knobs["--total-tokens"] = settings.total_tokens
            return [
                "--tree",
                "dynamic",
                *(a for k, v in knobs.items() if v is not None for a in (k, str(v))),
            ]
        if name == "static":
            extra = ["--static-tree", settings.static_tree] if settings.static_tree else []
            return ["--tree", "static", *extra]
        if name in TREE_MODES:
            return None
        shape = parse_shape(name)
        if isinstance(shape, ChainShape):
            return ["--tree", "chain", "--num-spec-tokens", str(shape.length)]
        if isinstance(shape, StaticTree):
            return ["--tree", "static", "--static-tree", name]
        if isinstance(shape, DynamicTree):
            return [
                "--tree", "dynamic", "--depth", str(shape.depth), "--draft-topk",
                str(shape.topk), "--total-tokens", str(shape.total_tokens),
            ]  # fmt: skip
        return None

    def command(
        self, ids: Sequence[int], max_new_tokens: int, sampling: SamplingConfig
    ) -> list[str]:
        """The binary's command line for one generation."""
        cmd = [str(self.binary), "--target", str(self.target), "--json"]
        cmd += ["--prompt-ids", ",".join(map(str, ids)), "--max-new-tokens", str(max_new_tokens)]
        if self.method_args:
            cmd += [*self.method_args, *self.tree_args, "--kv", self.kv_strategy]
        if sampling.temperature > 0:
            cmd += ["--temperature", repr(sampling.temperature)]
            cmd += ["--top-k", str(sampling.top_k), "--top-p", repr(sampling.top_p)]
            if sampling.seed is not None:
                cmd += ["--seed", str(sampling.seed)]
        return cmd

    def run(
        self, ids: list[int], max_new_tokens: int, sampling: SamplingConfig
    ) -> GenerationResult:
        """One generation by the binary (it reports totals, not per-step traces)."""
        cmd = self.command(ids, max_new_tokens, sampling)
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            lines = res.stderr.strip().splitlines() or [f"exit status {res.returncode}"]
            raise EtspecError(f"the C++ runner failed: {lines[-1]}")
        out = json.loads(res.stdout.splitlines()[-1])
        stats = GenerationStats(**{k: v for k, v in out["stats"].items() if k in _STATS_FIELDS})
        new = out["token_ids"]  # its stats (memory too) are the binary's own process's
        text = self.base.tokenizer.decode(new) if self.base.tokenizer is not None else ""
        return GenerationResult(
            token_ids=new, text=text, stop_reason=out["stop_reason"], stats=stats
        )
