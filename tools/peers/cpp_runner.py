"""The C++ runner binary (``runtime/cpp``) as a benchmark system.

``etspec bench --cpp-runner build/cpp/etspec_runner`` times the binary beside the Python
runtime on the same prompts and artifacts: one ``--serve`` process per configuration, fed
one JSON request of token ids per generation and read back one JSON line (the stats share
the Python runtime's field names). One load serves every prompt, as one Python runner does,
so ``--tree auto`` learns across prompts on both sides. Its timings are the binary's own
(from the first prefill call to the last token), so process start and ``.pte`` loading are
not in them, as they are not in the Python systems' either.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from etspec.contract import SERVE_FIELDS
from etspec.errors import EtspecError
from etspec.runtime.loading import method_of, speculates
from etspec.runtime.runner import GenerationResult, TextLLMRunner
from etspec.runtime.sampling import SamplingConfig
from etspec.runtime.spec import RunnerSpec, TreeSettings
from etspec.runtime.speculative.shapes import TreeShape
from etspec.runtime.stats import GenerationStats
from etspec.tools.peers.base import OutsidePeer

_STATS_FIELDS = {f.name for f in dataclasses.fields(GenerationStats) if not f.name.startswith("_")}


@functools.lru_cache(maxsize=8)
def check_runner(binary: Path) -> None:
    """Refuse a ``--cpp-runner`` that is not the etspec runner (another program would be
    fed our arguments and fail mid-run with its own words): it must answer ``--help`` with
    the runner's usage line."""
    fix = "build it with `bash runtime/cpp/build.sh` (build/cpp/etspec_runner)"
    if not binary.is_file():
        raise EtspecError(f"{binary}: no C++ runner there; {fix}")
    try:
        proc = subprocess.run(
            [str(binary), "--help"], capture_output=True, text=True, errors="replace", timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EtspecError(f"{binary} cannot be run as the C++ runner ({e}); {fix}") from None
    if "usage: etspec_runner" not in proc.stdout + proc.stderr:
        raise EtspecError(f"{binary} is not the etspec C++ runner; {fix}")


def method_args(spec: RunnerSpec) -> list[str] | None:
    """The binary's arguments for ``spec``'s draft and method options (the flags of
    ``RunnerSpec.flags``, from ``contract.RUN_SETTINGS``); None: target-only, or a method the
    C++ runner lacks."""
    if not speculates(spec) or not method_of(spec).in_cpp:
        return None
    return [*(["--draft", str(spec.draft)] if spec.draft is not None else []), *spec.flags()]


def tree_args(tree: TreeSettings | TreeShape) -> list[str] | None:
    """The binary's arguments for a tree mode's settings or a fixed shape (chain3, N7,
    dynamic-d3k4t16); None: the binary cannot be asked for it (the step that drafts
    nothing)."""
    settings = tree if isinstance(tree, TreeSettings) else tree.settings()
    return None if settings is None else settings.flags()


class CppRunner(OutsidePeer):
    """One configuration of the binary: target-only, or speculative with ``method_args`` and
    ``tree_args`` (``--tree chain --num-spec-tokens 3``, ``--tree static --static-tree N7``)."""

    def __init__(
        self,
        binary: Path,
        target: Path,
        base: TextLLMRunner,
        method_args: Sequence[str] = (),
        tree_args: Sequence[str] = (),
    ) -> None:
        """``method_args``: ``method_args(spec)``; none: target-only."""
        check_runner(binary)
        self.binary, self.target = binary, target
        self.method_args, self.tree_args = list(method_args), list(tree_args)
        self._proc: subprocess.Popen[str] | None = None
        self._stderr: IO[str] | None = None
        # What the binary's --tree auto measured per candidate, as of its last answer.
        self.policy_report: dict[str, dict[str, float]] | None = None
        super().__init__(base)

    def command(self) -> list[str]:
        """The binary's command line: one serving process for every generation."""
        cmd = [str(self.binary), "--target", str(self.target), "--serve"]
        if self.method_args:
            cmd += [*self.method_args, *self.tree_args]
        return cmd

    @staticmethod
    def request(
        ids: Sequence[int], max_new_tokens: int, sampling: SamplingConfig, ignore_eos: bool = False
    ) -> dict:  # type: ignore[type-arg]
        """One generation's request line (contract.SERVE_FIELDS)."""
        f = SERVE_FIELDS
        req: dict = {f["PromptIds"]: list(ids), f["MaxNewTokens"]: max_new_tokens}  # type: ignore[type-arg]
        if ignore_eos:
            req[f["IgnoreEos"]] = True
        if sampling.temperature > 0:
            req[f["Temperature"]] = sampling.temperature
            req[f["TopK"]], req[f["TopP"]] = sampling.top_k, sampling.top_p
            if sampling.seed is not None:
                req[f["Seed"]] = sampling.seed
        return req

    def _process(self) -> subprocess.Popen[str]:
        if self._proc is None or self._proc.poll() is not None:
            self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (lives with the process)
            self._proc = subprocess.Popen(
                self.command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=self._stderr, text=True,
            )  # fmt: skip
        return self._proc

    def _failed(self, why: str) -> EtspecError:
        return EtspecError(f"the C++ runner failed: {why}")

    def run(
        self,
        ids: list[int],
        max_new_tokens: int,
        sampling: SamplingConfig,
        ignore_eos: bool = False,
    ) -> GenerationResult:
        """One generation by the serving binary (it reports totals, not per-step traces)."""
        proc = self._process()
        assert proc.stdin is not None and proc.stdout is not None
        request = self.request(ids, max_new_tokens, sampling, ignore_eos)
        try:
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:  # the process died: its last stderr line says why
            proc.wait()
            assert self._stderr is not None
            self._stderr.seek(0)
            lines = self._stderr.read().strip().splitlines()
            raise self._failed(lines[-1] if lines else f"exit status {proc.returncode}")
        out = json.loads(line)
        if SERVE_FIELDS["Error"] in out:
            raise self._failed(out[SERVE_FIELDS["Error"]])
        self.policy_report = out.get(SERVE_FIELDS["PolicyReport"], self.policy_report)
        stats = GenerationStats(**{k: v for k, v in out["stats"].items() if k in _STATS_FIELDS})
        new = out["token_ids"]  # its stats (memory too) are the binary's own process's
        text = self.base.tokenizer.decode(new) if self.base.tokenizer is not None else ""
        return GenerationResult(
            token_ids=new, text=text, stop_reason=out["stop_reason"], stats=stats
        )

    def close(self) -> None:
        """End the serving process (it exits at the end of its input)."""
        if self._proc is not None:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._proc = None
