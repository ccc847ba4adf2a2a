"""Target export: numerics against transformers, tree verify, commit, shared KV cache."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from helpers import (
    TOL,
    decode,
    hf_forward,
    hf_taps,
    max_diff,
    path_to,
    target_program,
    tree_mask,
)
from tiny import EXPORT_OPTIONS, GEMMA, make_hf_target

from etspec.contract import (
    MASK_MIN,
    TARGET_COMMIT,
    TARGET_DECODE,
    TARGET_PREFILL,
    TARGET_RESET,
    TARGET_VERIFY,
)
from etspec.export.export_target import TargetExportOptions, build_target, target_metadata
from etspec.export.lowering import lower
from etspec.models.methods import target_methods
from etspec.runtime.masks import MaskLayout
from etspec.runtime.prefill import prefill_target
from etspec.runtime.program import PteProgram

# Quantized recipes are not transformers' model; tests/models/test_quantize.py holds them to theirs.
NAMES = [name for name, opts in EXPORT_OPTIONS.items() if opts.dtype == "fp32"]
MODES = ["eager", "pte"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", NAMES)
def test_prefill_and_decode_match_transformers(artifacts, name: str, mode: str) -> None:
    case = artifacts.target(name)
    prog = target_program(case, mode)
    layers = prog.metadata.hidden_state_layers
    gen = torch.Generator().manual_seed(1)
    vocab = prog.metadata.vocab_size
    # 13 tokens = one full prefill chunk of 8 plus a padded chunk of 5.
    seq = torch.randint(0, vocab, (13,), generator=gen)
    ref = hf_forward(case.hf, seq)
    res = prefill_target(prog, seq)
    assert max_diff(res.logits[0], ref.logits[0, -1]) < TOL
    assert max_diff(res.hidden, hf_taps(ref, layers)) < TOL
    for _ in range(6):
        tok = torch.randint(0, vocab, (1,), generator=gen)
        logits, hidden = decode(prog, int(tok), seq.numel())
        seq = torch.cat([seq, tok])
        ref = hf_forward(case.hf, seq)
        assert max_diff(logits[0], ref.logits[0, -1]) < TOL
        assert max_diff(hidden[0], hf_taps(ref, layers)[-1]) < TOL


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", NAMES)
def test_greedy_tokens_match_generate(artifacts, name: str, mode: str) -> None:
    """32 greedy tokens after an 11-token prompt; 64 for Gemma, whose sliding layers then
    run far past their 12-token window."""
    case = artifacts.target(name)
    prog = target_program(case, mode)
    n = 64 if name in GEMMA else 32
    prompt = torch.randint(
        0, prog.metadata.vocab_size, (11,), generator=torch.Generator().manual_seed(2)
    )
    case.hf.generation_config.eos_token_id = None  # generate exactly n tokens, like we do
    with torch.no_grad():
        expected = case.hf.generate(
            prompt[None],
            attention_mask=torch.ones(1, 11, dtype=torch.long),
            do_sample=False,
            max_new_tokens=n,
            pad_token_id=0,
        )[0, 11:].tolist()
    logits = prefill_target(prog, prompt).logits
    out: list[int] = []
    for i in range(n):
        tok = int(logits[0].argmax())
        out.append(tok)
        if i < n - 1:
            logits, _ = decode(prog, tok, 11 + i)
    assert out == expected


def random_tree(n: int, gen: torch.Generator) -> list[int]:
    """Parents of an n-node tree rooted at node 0 (parent -1); parent index < child index."""
    return [-1] + [int(torch.randint(0, i, (1,), generator=gen)) for i in range(1, n)]


@dataclass
class VerifiedTree:
    prompt: torch.Tensor
    parents: list[int]
    tokens: torch.Tensor
    depth: torch.Tensor
    slots: torch.Tensor
    logits: torch.Tensor
    hidden: torch.Tensor


def verify_random_tree(prog, layout: str, seed: int, prompt_len: int) -> VerifiedTree:  # type: ignore[no-untyped-def]
    """Prefill a random prompt, then verify a random tree of ``verify_width`` nodes.

    ``position-overwrite`` writes the nodes right after the committed prefix; ``scratch``
    writes them to the scratch slots past ``max_context``.
    """
    meta = prog.metadata
    k = meta.verify_width
    gen = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, meta.vocab_size, (prompt_len,), generator=gen)
    prefill_target(prog, prompt)
    parents = random_tree(k, gen)
    tokens = torch.randint(0, meta.vocab_size, (k,), generator=gen)
    depth = torch.tensor([len(path_to(parents, i)) - 1 for i in range(k)])
    base = prompt_len if layout == "position-overwrite" else meta.max_context
    slots = torch.arange(base, base + k)
    mask = tree_mask(parents, prompt_len, slots, meta.cache_size)
    band = MaskLayout.of(meta).band(prompt_len, mask.shape[-1])  # sliding layers' slots
    logits, hidden = prog.run(TARGET_VERIFY, tokens, prompt_len + depth, slots, mask, *band)
    return VerifiedTree(prompt, parents, tokens, depth, slots, logits, hidden)


@pytest.mark.parametrize("mode", MODES)
def test_a_narrow_mask_attends_what_the_full_mask_shows(artifacts, mode: str) -> None:
    """The mask width is dynamic: a decode whose causal mask covers only the committed
    slots it needs (plus scratch) gives the logits of the same decode under a full-width
    mask, for every width in between, so a call's cost can follow its context."""
    from etspec.models.layers import causal_mask, column_slots

    case = artifacts.target(NAMES[0])
    prog = target_program(case, mode)
    meta = prog.metadata
    layout = MaskLayout(meta.max_context, meta.cache_size)
    prompt = torch.arange(3, 14)
    prefill_target(prog, prompt)
    position = torch.tensor([prompt.numel()])
    outs = []
    for width in (layout.width(prompt.numel() + 1), meta.cache_size - 1, meta.cache_size):
        columns = column_slots(width, meta.max_context, meta.cache_size)
        mask = causal_mask(position, columns, MASK_MIN)
        outs.append(prog.run(TARGET_DECODE, torch.tensor([5]), position, mask)[0])
    assert outs[0].shape == outs[2].shape
    assert max_diff(outs[0], outs[2]) < TOL and max_diff(outs[1], outs[2]) < TOL
    ref = hf_forward(case.hf, torch.cat([prompt, torch.tensor([5])])).logits[0, -1]
    assert max_diff(outs[0][0], ref) < TOL


@pytest.mark.parametrize("layout", ["position-overwrite", "scratch"])
@pytest.mark.parametrize("mode", MODES)
def test_tree_verify_equals_sequential_paths(artifacts, mode: str, layout: str) -> None:
    case = artifacts.target("llama_gqa_rope3")
    prog = target_program(case, mode)
    assert prog.metadata.verify_width == 16
    t = verify_random_tree(prog, layout, seed=3, prompt_len=10)
    assert int(t.depth.max()) >= 3  # a real tree, not a star
    for i in range(16):
        seq = torch.cat([t.prompt, t.tokens[path_to(t.parents, i)]])
        ref = hf_forward(case.hf, seq)
        assert max_diff(t.logits[i], ref.logits[0, -1]) < TOL, f"node {i}"
        assert max_diff(t.hidden[i], hf_taps(ref, prog.metadata.hidden_state_layers)[-1]) < TOL


@pytest.mark.parametrize("layout", ["position-overwrite", "scratch"])
@pytest.mark.parametrize("mode", MODES)
def test_commit_moves_accepted_path_home(artifacts, mode: str, layout: str) -> None:
    """After verify + commit of one tree path, the cache continues as if decoded sequentially."""
    case = artifacts.target("llama_gqa_rope3")
    prog = target_program(case, mode)
    meta = prog.metadata
    k = meta.verify_width
    t = verify_random_tree(prog, layout, seed=4, prompt_len=9)
    prompt, parents, tokens, depth, slots = t.prompt, t.parents, t.tokens, t.depth, t.slots
    committed = prompt.numel()
    base = int(slots[0])
    gen = torch.Generator().manual_seed(40)
    path = path_to(parents, int(depth.argmax()))  # deepest node: a non-trivial move
    src = torch.arange(k) + base  # unused rows copy a scratch slot onto itself
    dst = src.clone()
    src[: len(path)] = slots[path]
    dst[: len(path)] = torch.arange(committed, committed + len(path))
    # The padding rows must not collide with real destinations.
    keep = torch.ones(k, dtype=torch.bool)
    keep[len(path) :] = ~torch.isin(dst[len(path) :], dst[: len(path)])
    prog.run(TARGET_COMMIT, torch.where(keep, src, src[0]), torch.where(keep, dst, dst[0]))
    accepted = torch.cat([prompt, tokens[path]])
    nxt = torch.randint(0, meta.vocab_size, (1,), generator=gen)
    logits, _ = decode(prog, int(nxt), accepted.numel())
    ref = hf_forward(case.hf, torch.cat([accepted, nxt]))
    assert max_diff(logits[0], ref.logits[0, -1]) < TOL
    if mode == "eager":
        # Tensor-level check: committed KV equals that of sequential decoding.
        seq_prog = target_program(case, "eager")
        prefill_target(seq_prog, prompt)
        for i, tok in enumerate(tokens[path].tolist()):
            decode(seq_prog, tok, committed + i)
        n = accepted.numel()
        for a, b in zip(prog.model.caches(), seq_prog.model.caches(), strict=True):
            assert max_diff(a.k[:, :n], b.k[:, :n]) < 1e-5
            assert max_diff(a.v[:, :n], b.v[:, :n]) < 1e-5


def _decode_error_after_prefill(prog, hf) -> float:  # type: ignore[no-untyped-def]
    """Logits error of a decode that must read the KV written by prefill."""
    prompt = torch.arange(3, 14)
    prefill_target(prog, prompt)
    logits, _ = decode(prog, 5, prompt.numel())
    return max_diff(logits[0], hf_forward(hf, torch.cat([prompt, torch.tensor([5])])).logits[0, -1])


def test_methods_share_kv_cache(artifacts, tmp_path) -> None:
    """Decode reads what prefill wrote, and every method places each cache buffer in one
    arena of its own; the same checks flag a program exported unshared."""
    case = artifacts.target("llama_gqa_rope3")
    assert _decode_error_after_prefill(target_program(case, "pte"), case.hf) < TOL
    assert _cache_is_shared(case.pte.read_bytes())

    # A minimal model exported with share_mutable_buffers off. The Python runtime happens to
    # give its methods one cache anyway (since cache writes are in place and outside the
    # delegate, for XNNPACK too), so decode reads right there; the C++ runtime does not.
    # What tells them apart for every runtime is the memory plan itself.
    ckpt = tmp_path / "mini"
    hf = make_hf_target("mistral_tied", ckpt, num_hidden_layers=2)
    opts = TargetExportOptions(
        backend="xnnpack", max_seq=32, prefill_chunk=8, verify_width=2, hidden_layers=(1, 2)
    )
    model = build_target(ckpt, opts)
    meta = target_metadata(model, opts, None)
    methods = target_methods(model, 8, (2,))
    needed = {name: methods[name] for name in (TARGET_PREFILL, TARGET_DECODE, TARGET_RESET)}
    for share in (False, True):
        data = lower(needed, meta.constant_methods(), "xnnpack", "t", share_cache=share)
        pte = tmp_path / f"share_{share}.pte"
        pte.write_bytes(data)
        assert _cache_is_shared(data) == share, f"share_cache={share}"
        prog = PteProgram.load(pte)
        prog.run(TARGET_RESET)
        err = _decode_error_after_prefill(prog, hf)
        if share:
            assert err < TOL, f"decode error {err}"


def _cache_is_shared(data: bytes) -> bool:
    """Whether every method places each named cache buffer at the same spot of an arena
    that holds nothing else: ExecuTorch's shared mutable-buffer arena. Unshared, the caches
    sit in each method's own activation arena (same offsets, different memory)."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    pte = deserialize_pte_binary(data)
    program = getattr(pte, "program", pte)
    places: dict[str, set[tuple[int, int]]] = {}
    other_arenas: set[int] = set()
    for plan in program.execution_plan:
        for value in plan.values:
            t = value.val
            alloc = getattr(t, "allocation_info", None)
            if alloc is None:
                continue
            info = getattr(t, "extra_tensor_info", None)
            name = getattr(info, "fully_qualified_name", None) if info is not None else None
            if name and ".cache." in name:
                places.setdefault(name, set()).add((alloc.memory_id, alloc.memory_offset_low))
            else:
                other_arenas.add(alloc.memory_id)
    arenas = {arena for spots in places.values() for arena, _ in spots}
    return (
        bool(places) and all(len(s) == 1 for s in places.values()) and not (arenas & other_arenas)
    )


def test_default_context_is_the_trained_one_capped() -> None:
    from etspec.contract import DEFAULT_MAX_SEQ
    from etspec.export.export_target import default_context

    assert default_context({"max_position_embeddings": 32768}) == DEFAULT_MAX_SEQ == 4096
    assert default_context({"max_position_embeddings": 512}) == 512
    assert default_context({}) == DEFAULT_MAX_SEQ


def test_a_large_tied_table_is_stored_once_a_small_one_packed(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Above ``TIED_TABLE_SHARED_ABOVE`` a tied fp32 table is one constant that the lookup
    and the lm_head (outside the delegate) both read; at or below it the delegate packs the
    lm_head's copy. Both files compute transformers' logits; the shared one is smaller by
    about the table."""
    import etspec.models.build as build
    from etspec.export.export_target import export_target

    ckpt = tmp_path / "tied"
    hf = make_hf_target("mistral_tied", ckpt, num_hidden_layers=2)
    opts = TargetExportOptions(
        backend="xnnpack", max_seq=32, prefill_chunk=8, verify_width=2, hidden_layers=(1, 2)
    )
    table = hf.config.vocab_size * hf.config.hidden_size * 4
    sizes = {}
    for shared_above in (table, table - 1):  # packed, then stored once
        monkeypatch.setattr(build, "TIED_TABLE_SHARED_ABOVE", shared_above)
        pte = tmp_path / f"t{shared_above}.pte"
        export_target(ckpt, pte, opts)
        sizes[shared_above] = pte.stat().st_size
        prog = PteProgram.load(pte)
        prog.run(TARGET_RESET)
        seq = torch.arange(11) % hf.config.vocab_size
        res = prefill_target(prog, seq)
        assert max_diff(res.logits[0], hf_forward(hf, seq).logits[0, -1]) < TOL
    saved = sizes[table] - sizes[table - 1]
    assert 0.9 * table <= saved <= 1.1 * table, (saved, table)


def test_methods_preprocessed_in_parallel_give_the_serial_program(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """XNNPACK's preprocess of each method runs in a worker forked once the method is
    partitioned, beside the next method's lowering (ETSPEC_EXPORT_WORKERS=1: in the
    exporting process): the program is byte for byte the one-process one, and the work did
    run outside the parent."""
    import os

    from executorch.backends.xnnpack.xnnpack_preprocess import XnnpackBackend

    ckpt = tmp_path / "mini"
    make_hf_target("mistral_tied", ckpt, num_hidden_layers=2)
    opts = TargetExportOptions(
        backend="xnnpack", max_seq=32, prefill_chunk=8, verify_width=2, hidden_layers=(1, 2)
    )
    model = build_target(ckpt, opts)
    meta = target_metadata(model, opts, None)
    methods = target_methods(model, 8, (2,))
    pids = tmp_path / "pids"
    original = XnnpackBackend.preprocess  # a staticmethod

    def recorded(program, specs):  # type: ignore[no-untyped-def]
        with pids.open("a") as f:
            f.write(f"{os.getpid()}\n")
        return original(program, specs)

    monkeypatch.setattr(XnnpackBackend, "preprocess", staticmethod(recorded))
    programs = {}
    for workers in ("1", "2"):
        monkeypatch.setenv("ETSPEC_EXPORT_WORKERS", workers)
        pids.write_text("")
        programs[workers] = lower(methods, meta.constant_methods(), "xnnpack", "t")
        ran_in = set(pids.read_text().split())
        assert (ran_in == {str(os.getpid())}) == (workers == "1"), (workers, ran_in)
    assert programs["1"] == programs["2"]
