"""Small shared helpers for tests: programs from test cases, references from transformers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

from etspec.contract import MASK_MIN
from etspec.models.build import build_target, target_metadata
from etspec.models.methods import target_methods
from etspec.runtime.masks import MaskLayout
from etspec.runtime.program import EagerProgram, PteProgram
from etspec.runtime.speculative.draft_runner import SpeculativeDraftRunner

TOL = 1e-4  # max abs logits difference allowed against transformers (fp32)


def target_program(case, mode: str):  # type: ignore[no-untyped-def]
    """A fresh program (fresh cache) of the given test target, reset like the runtime does."""
    if mode == "pte":
        prog = PteProgram.load(case.pte, expect="target")
    else:
        model = build_target(case.checkpoint, case.opts)
        methods = target_methods(model, case.opts.prefill_chunk, case.opts.verify_widths)
        prog = EagerProgram(
            {k: v[0] for k, v in methods.items()},
            target_metadata(model, case.opts, None),
            model=model,  # tests inspect its caches
        )
    prog.run("target_reset")
    return prog


@torch.no_grad()
def hf_forward(hf, ids: torch.Tensor):  # type: ignore[no-untyped-def]
    return hf(ids[None], output_hidden_states=True)


def hf_taps(out, layers) -> torch.Tensor:  # type: ignore[no-untyped-def]
    """HF ``hidden_states[i]`` is the input of layer i: the same taps etspec exports."""
    return torch.cat([out.hidden_states[i][0] for i in layers], dim=-1)


def causal(program, positions: torch.Tensor) -> torch.Tensor:  # type: ignore[no-untyped-def]
    """The causal mask ``program``'s prefill and decode take for rows at ``positions``."""
    meta = program.metadata
    return MaskLayout(meta.max_context, meta.cache_size).causal(positions)


def decode(program, token: int, position: int):  # type: ignore[no-untyped-def]
    """One ``target_decode`` call of ``token`` at ``position``."""
    from etspec.contract import TARGET_DECODE

    pos = torch.tensor([position])
    mask = causal(program, pos)
    band = MaskLayout.of(program.metadata).band(position, mask.shape[-1])
    return program.run(TARGET_DECODE, torch.tensor([token]), pos, mask, *band)


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.float() - b.float()).abs().max().item()


def tree_mask(
    parents: list[int], committed: int, slots: torch.Tensor, cache_size: int
) -> torch.Tensor:
    """Additive mask: node i sees the committed prefix, its ancestors and itself."""
    k = len(parents)
    mask = torch.full((k, cache_size), MASK_MIN)
    mask[:, :committed] = 0.0
    for i in range(k):
        j = i
        while j >= 0:
            mask[i, slots[j]] = 0.0
            j = parents[j]
    return mask


def tree_children(tree, node: int) -> list[int]:  # type: ignore[no-untyped-def]
    """Rows of ``tree`` (a ``DraftTree``) whose parent is ``node``."""
    rows = (tree.parents == node) & tree.valid
    rows[0] = False  # the root is its own parent, not its own child
    return rows.nonzero().flatten().tolist()


def tree_path(tree, node: int) -> list[int]:  # type: ignore[no-untyped-def]
    """Rows of ``tree`` from the root to ``node``, both included (read off its ancestor
    table, which is what this checks against the parent array elsewhere)."""
    col = tree.ancestor_table[:, node].tolist()
    return col[: int(tree.depth[node]) + 1][::-1]


def path_to(parents: list[int], i: int) -> list[int]:
    path = []
    while i >= 0:
        path.append(i)
        i = parents[i]
    return path[::-1]


def pair_programs(draft_case, mode: str, step_width: int = 1):  # type: ignore[no-untyped-def]
    """(target program, draft program) of a test pair, as .pte or as eager reference."""
    from etspec.runtime.eager import eager_draft, eager_target
    from etspec.runtime.program import load_pair

    if mode == "pte":
        return load_pair(draft_case.target.pte, draft_case.pte)
    opts = draft_case.target.opts
    t = eager_target(
        draft_case.target.checkpoint,
        max_seq=opts.max_seq,
        prefill_chunk=opts.prefill_chunk,
        verify_width=opts.verify_width,
        narrow_verify_widths=opts.verify_widths,
    )
    return t, eager_draft(draft_case.checkpoint, t, step_width=step_width)


def runners(target, draft_runner=None, k=3, kv: str = "position-overwrite", verifier=None):  # type: ignore[no-untyped-def]
    """(target-only runner, speculative runner) sharing ``target``; reference checks on eager.

    ``k`` is a chain length or any ``TreePolicy`` (a shape, or the dispatcher)."""
    from etspec.runtime.runner import TextLLMRunner
    from etspec.runtime.speculative.generator import SpeculativeTokenGenerator

    base = TextLLMRunner(target)
    if draft_runner is None:
        return base, None
    gen = SpeculativeTokenGenerator(draft_runner, target.metadata, k, kv, verifier)
    return base, TextLLMRunner(target, gen)


def random_prompts(count: int, vocab: int, longest: int, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    lengths = [1 + (i * 5) % longest for i in range(count)]
    return [torch.randint(0, vocab, (n,), generator=g).tolist() for n in lengths]


class ScriptedDraftRunner(SpeculativeDraftRunner):
    """A test draft that proposes a known continuation, corrupted on a schedule.

    ``continuation(history) -> the target's greedy tokens after history``. At step s it
    corrupts draft position ``schedule(s)`` (no corruption when that is >= the budget), so a
    test chooses all-accepted, all-rejected or mixed steps. ``on_accept`` sees every
    ``Acceptance`` (tests check the committed KV there, after every step).
    """

    hidden_spec = None
    branching = False

    def __init__(self, continuation, vocab: int, schedule, on_accept=None) -> None:  # type: ignore[no-untyped-def]
        self.continuation = continuation
        self.vocab = vocab
        self.schedule = schedule
        self.on_accept = on_accept
        self.history: list[int] = []
        self.step = 0

    def check_target(self, target) -> None:  # type: ignore[no-untyped-def]
        return None

    def memory(self) -> dict[str, int]:
        return {}

    def programs(self) -> tuple:  # type: ignore[type-arg]
        return ()

    def reset(self) -> None:
        self.history, self.step = [], 0

    def prefill(self, prompt, first_token, hidden) -> int:  # type: ignore[no-untyped-def]
        self.history = [*prompt, first_token]
        return 0

    def check_shape(self, shape) -> None:  # type: ignore[no-untyped-def]
        return None

    def propose(self, shape, max_height, sampler):  # type: ignore[no-untyped-def]
        from etspec.runtime.speculative.step import Proposal

        max_tokens = min(shape.cost.max_nodes, max_height)
        tokens = list(self.continuation(self.history)[:max_tokens])
        bad = self.schedule(self.step)
        if bad < len(tokens):
            tokens[bad] = (tokens[bad] + 1) % self.vocab
        self.step += 1
        return Proposal.chain(tokens)

    def accept(self, acceptance) -> int:  # type: ignore[no-untyped-def]
        self.history.extend([*acceptance.tokens[1:], acceptance.next_token])
        if self.on_accept is not None:
            self.on_accept(acceptance)
        return 0


class OracleExpander:
    """An ``Expander`` that knows the target's continuation ``truth``: on the true path the
    true next token gets draft rank ``rank`` (rank >= vocab: last), elsewhere a fixed
    ordering. Any ``TreeShape`` grown over it yields a scripted tree."""

    def __init__(self, truth: list[int], vocab: int, rank: int) -> None:
        self.truth = truth
        self.vocab_size = vocab
        self.target_ids = torch.arange(vocab)
        self.target_id_of = self.target_ids.tolist()
        self.rank = rank
        self.calls = 0
        self.paths: list[tuple[int, ...]] = [()]

    def _logits(self, path: tuple[int, ...]) -> torch.Tensor:
        d = len(path)
        order = sorted(range(self.vocab_size), key=lambda t: (t * 7 + 3 * d) % self.vocab_size)
        if d < len(self.truth) and list(path) == self.truth[:d]:
            true = self.truth[d]
            order.remove(true)
            order.insert(min(self.rank, self.vocab_size - 1), true)
        logits = torch.empty(self.vocab_size)
        logits[torch.tensor(order)] = -torch.arange(self.vocab_size, dtype=torch.float32)
        return logits

    def root(self) -> torch.Tensor:
        return self._logits(())

    def expand(self, parents, tokens) -> torch.Tensor:  # type: ignore[no-untyped-def]
        self.calls += 1
        out = []
        for p, t in zip(parents, tokens, strict=True):
            self.paths.append((*self.paths[p], int(t)))
            out.append(self._logits(self.paths[-1]))
        return torch.stack(out)


class ScriptedTreeDraftRunner(ScriptedDraftRunner):
    """Grows any tree shape over an ``OracleExpander``: at step s the target's continuation
    sits at draft rank ``schedule(s)`` (0: the first branch, deepest acceptance; 1: a
    later sibling; >= vocab: never drafted, only the root's token is emitted)."""

    branching = True

    def propose(self, shape, max_height, sampler):  # type: ignore[no-untyped-def]
        expander = OracleExpander(
            list(self.continuation(self.history)), self.vocab, self.schedule(self.step)
        )
        self.step += 1
        return shape.grow(expander, max_height, sampler)


def oracle(prompt: list[int], reference: list[int]):  # type: ignore[no-untyped-def]
    """``continuation`` for ScriptedDraftRunner from a target-only run of ``prompt``."""
    full = [*prompt, *reference]

    def continuation(history: list[int]) -> list[int]:
        return full[len(history) :]

    return continuation


class Truth:
    """A scripted draft's ``continuation`` that follows the prompt being checked."""

    def __init__(self) -> None:
        self.continuation = oracle([], [])

    def __call__(self, history: list[int]) -> list[int]:
        return self.continuation(history)


def check_greedy_equivalence(label: str, base, spec, prompts, budgets, truth=None, near_ties=False):  # type: ignore[no-untyped-def]
    """Greedy speculative == target-only per prompt, bit-identical (``near_ties``: or
    differing only where the target's top-2 logits are within ``validate.TIE_GAP``, as
    ``validate`` passes them); odd prompts run past EOS so budgets are reached too. Returns
    (output, comparison) pairs."""
    from etspec.tools.validate import compare

    results = []
    for i, (prompt, budget) in enumerate(zip(prompts, budgets, strict=True)):
        ignore = i % 2 == 1
        ref = base.generate(prompt, budget, record_logits=True, ignore_eos=ignore)
        if truth is not None:
            truth.continuation = oracle(prompt, ref.token_ids)
        out = spec.generate(prompt, budget, ignore_eos=ignore)
        result = compare(i, ref.token_ids, out.token_ids, ref.logits)
        ok = result.passed if near_ties else result.diverge_at is None
        allowed = "beyond a near-tie" if near_ties else "not bit-identical"
        assert ok, (
            f"{label} prompt {i}: {allowed}, diverged at token {result.diverge_at} "
            f"(top-2 gap {result.gap}): {ref.token_ids} vs {out.token_ids}"
        )
        results.append((out, result))
    return results


def committed_kv_check(target, sequential, full: list[int], checked: list[int], atol: float = 1e-5):  # type: ignore[no-untyped-def]
    """An ``on_accept`` hook: after every step the live committed caches of ``target`` equal
    ``sequential`` decoding of the committed tokens of ``full`` (tensors, within ``atol``:
    verify vs decode summation order); appends each committed length to ``checked``."""
    from etspec.contract import TARGET_RESET

    def check(acc) -> None:  # type: ignore[no-untyped-def]
        committed = acc.position + len(acc.tokens)
        sequential.run(TARGET_RESET)
        for pos, tok in enumerate(full[:committed]):
            decode(sequential, tok, pos)
        for live, want in zip(target.cache_tensors(), sequential.cache_tensors(), strict=True):
            torch.testing.assert_close(live[:, :committed], want[:, :committed], atol=atol, rtol=0)
        checked.append(committed)

    return check


def gguf_value_type(value: Any) -> Any:
    """The GGUF type a test writes a metadata value as."""
    import gguf

    T = gguf.GGUFValueType
    if isinstance(value, bool):
        return T.BOOL
    if isinstance(value, str):
        return T.STRING
    if isinstance(value, float):
        return T.FLOAT32
    if isinstance(value, list):
        return T.ARRAY
    return T.INT32 if value < 0 else T.UINT32 if value < 1 << 32 else T.UINT64


def assert_one_line_error(result, *words: str, code: int = 1) -> None:  # type: ignore[no-untyped-def]
    """A click ``result``: exit ``code``, one ``error:`` line holding ``words``, no traceback."""
    assert result.exit_code == code, result.output
    lines = [ln for ln in result.output.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    for w in words:
        assert w in lines[0], lines[0]


SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def run_script(name: str, *args: object) -> subprocess.CompletedProcess[str]:
    """``python scripts/NAME.py ARGS`` in its own process, as a user runs a measurement
    script (the tests import no module from scripts/)."""
    cmd = [sys.executable, str(SCRIPTS / f"{name}.py"), *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True)
