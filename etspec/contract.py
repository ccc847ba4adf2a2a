"""The artifact contract: every metadata key of a target or draft ``.pte``, named once.

Export writes these values as ExecuTorch *constant methods* (a method that returns a value);
the runtime reads every one of them at load and fails loudly when one is missing or has the
wrong type. Method names of the programs are defined here too, so export, the Python runtime
and the C++ runner agree on one list: ``python -m etspec.contract OUT.h`` writes the same
definitions (method names, metadata fields and types, pair checks, error messages) as a C++
header, which the runner's build generates from this file rather than keeping a copy.

Hidden-state descriptor: ``hidden_state_point`` says where in the target the states are
tapped, ``hidden_state_layers`` which layers, in the order they are concatenated in the
``hidden`` output of every target method. ``layer_input``: the residual stream entering
decoder layer ``i``; ``i == num_layers`` is the final pre-norm state. ``final_norm`` (layers
``(num_layers,)``): the final state after the output norm, what Gemma 4's assistant reads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from etspec.errors import ArtifactError, MetadataMismatchError

# 2: draft_extend per verify width; 3: integrity trailer; 4: layer types; 5: every attending
# method takes a mask of dynamic width (the slots it attends)
FORMAT_VERSION = 6

#: The largest sampling seed: seeds are unsigned 64-bit, as torch and the C++ runner read them.
SEED_MAX = (1 << 64) - 1

# Export appends a trailer to the ExecuTorch program: SHA-256 of the program bytes, their
# length (u64 little-endian), then TRAILER_MAGIC, so the file ends with the magic. Runtimes
# check it before ExecuTorch parses anything: its loader trusts offsets inside the file and
# can crash on a damaged one, and a flipped weight byte would otherwise load silently.
# ExecuTorch ignores bytes after the program it describes.
TRAILER_MAGIC = b"ETSPSHA1"
TRAILER_SIZE = 32 + 8 + len(TRAILER_MAGIC)

# Every artifact's first two constant methods: what it is ("target" or "draft") and the
# format it was written in (read before the rest of the metadata).
ARTIFACT_KIND = "artifact_kind"
FORMAT_VERSION_FIELD = "format_version"
TARGET_KIND, DRAFT_KIND = "target", "draft"

# Method names of a target program.
TARGET_PREFILL = "target_prefill"
TARGET_DECODE = "target_decode"
TARGET_VERIFY = "target_verify"
TARGET_COMMIT = "target_commit"
TARGET_RESET = "target_reset"
TARGET_METHODS = (TARGET_PREFILL, TARGET_DECODE, TARGET_VERIFY, TARGET_COMMIT, TARGET_RESET)


def width_method(base: str, width: int, widest: int) -> str:
    """A method compiled at several widths: the widest is ``base``, narrower ones
    ``base_<width>`` (``target_verify_4``, ``draft_extend_2``)."""
    return base if width == widest else f"{base}_{width}"


def verify_method_name(width: int, widest: int) -> str:
    """``target_verify`` is the widest verify method; narrower ones are ``target_verify_<K>``."""
    return width_method(TARGET_VERIFY, width, widest)


# A drafter exported into the target program (it reads the target's caches): one drafting
# call, ``(tokens[W], states[W, Hb], position[1]) -> (logits[W, V], states_out[W, Hb])``.
ASSISTANT_STEP = "assistant_step"

# Method names of an EAGLE-3 draft program.
DRAFT_PREFILL = "draft_prefill"
DRAFT_EXTEND = "draft_extend"
DRAFT_STEP = "draft_step"
DRAFT_RESET = "draft_reset"
DRAFT_D2T = "draft_d2t"
DRAFT_METHODS = (DRAFT_PREFILL, DRAFT_EXTEND, DRAFT_STEP, DRAFT_RESET)


def extend_method_name(width: int, widest: int) -> str:
    """``draft_extend`` is the widest extend method; narrower ones are ``draft_extend_<K>``."""
    return width_method(DRAFT_EXTEND, width, widest)


# ``draft_method`` of an EAGLE-3 draft program; ``assistant`` of a target holding Gemma 4's.
EAGLE3 = "eagle3"
GEMMA4_ASSISTANT = "gemma4_assistant"
# ``--draft-method`` names the C++ runner takes too (runtime/speculative/gemma4_assistant.py,
# prompt_lookup.py); EAGLE-3's is ``EAGLE3``.
GEMMA4_ASSISTANT_METHOD = "gemma4-assistant"
PROMPT_LOOKUP_METHOD = "prompt-lookup"
# An EAGLE-3 draft and prompt lookup, chosen per step (runtime/speculative/combined.py).
COMBINED_METHOD = "combined"
# The statistics' shape name of a step the combined drafter's prompt lookup proposed.
LOOKUP_LABEL = "lookup"
# Prompt lookup's longest n-gram without --max-ngram: this, or --min-ngram if larger.
DEFAULT_MAX_NGRAM = 3

# Optional constant method holding the UTF-8 bytes of the HF ``tokenizer.json``.
TOKENIZER_JSON = "tokenizer_json"
# Optional constant method holding the checkpoint's chat template as UTF-8 JSON:
# {"template": the Jinja text, "bos_token": ..., "eos_token": ...} (runtime/chat.py).
CHAT_TEMPLATE = "chat_template"

POSITION_OVERWRITE, SCRATCH_COMMIT = "position-overwrite", "scratch-commit"
KV_STRATEGIES = (POSITION_OVERWRITE, SCRATCH_COMMIT)
HIDDEN_POINTS = ("layer_input", "final_norm")
# ``--backend`` names (export/backends.py registers what each one is).
BACKENDS = ("xnnpack", "portable", "openvino")
# Export recipes (``--dtype``, models/quantize.py: which weights at which width).
DTYPES = ("fp32", "8da4w", "8da8w", "8da4w-mixed", "8da8w-e4", "8da4w-mlp")
# What `etspec export` writes when --dtype is not given, on XNNPACK: the smallest recipe that
# keeps Gemma 3 270M (>= 90% top-1 agreement with fp32, held-out perplexity within 10%, the
# copy test; README "Gemma 3 270M"). The portable backend runs fp32 only.
DEPLOYMENT_DTYPE = "8da8w-e4"
# Recipes that quantize activations per row at run time (int8 dynamic). A tree's nodes
# attend over the context in another column order than a decode does (their ancestors sit
# at other rows), so float sums round differently in the last bit; these recipes amplify
# such a bit into another int8 step, and a tree step can flip a greedy token (Gemma 3 270M:
# 4 of 7 tree shapes diverged from target-only on one of 32 prompts; chains, which keep
# the decode's column order, never did). Scratch-commit's rows sit in scratch columns, so
# it flips them as well. `--tree auto` grows only chains on them; an explicit tree shape
# for a drafter that branches, or `--kv scratch-commit`, is refused ("inexact_tree",
# "inexact_kv").
ROW_QUANTIZED_DTYPES = tuple(d for d in DTYPES if d.startswith("8da"))
# The context `export target` gives a checkpoint without --max-seq: its trained context
# (max_position_embeddings), at most this. Calls cost what their actual context costs
# (every mask has a dynamic width), so a larger context costs KV memory only.
DEFAULT_MAX_SEQ = 4096
# Verify methods an export compiles unless told (trees of up to 15 draft nodes; small trees
# and chains use the narrow ones), each cut to what the model serves exactly: its sliding
# window and its context (models/build.py TargetExportOptions.resolved).
DEFAULT_VERIFY_WIDTHS = (4, 8, 16)

# Additive mask value for "not attended". Finite on purpose: a fully masked (padded) query
# row then yields finite garbage instead of NaN, and NaN written into a cache slot would
# poison every later query through 0 * NaN in probs @ V even where that slot is masked.
MASK_MIN = -1.0e9

# A method's mask has one column per slot it attends: committed slots [0, n), then the
# scratch slots (models/layers.column_slots). Callers round n up to a multiple of
# MASK_GRANULE so the XNNPACK runtimes re-plan their shapes once per MASK_GRANULE tokens
# rather than at every token.
MASK_GRANULE = 64


def mask_width(needed: int, max_context: int, cache_size: int) -> int:
    """Columns of a mask that must show committed slots ``[0, needed)`` (and the scratch)."""
    n = min(max_context, max(1, -(-needed // MASK_GRANULE) * MASK_GRANULE))
    return n + cache_size - max_context


def band_start(lowest: int, committed: int, window: int) -> int:
    """First committed slot of a sliding layer's band (``models/layers.band_mask``) for a
    call whose lowest query position is ``lowest`` and whose mask covers ``committed``
    slots: where that query's window begins, rounded down to ``MASK_GRANULE`` (so the
    band's length, a dynamic dimension, changes once per granule), leaving at least two
    committed slots in the band (the dimension's minimum)."""
    lo = max(0, lowest - window + 1) // MASK_GRANULE * MASK_GRANULE
    return max(0, min(lo, committed - 2))


# One-line errors about artifacts, worded once for the Python runtime and the C++ runner.
MESSAGES = {
    "no_file": "{path}: no such file",
    "bad_header": "{path}: not an ExecuTorch .pte file (bad header)",
    "truncated": "{path}: truncated ({size} bytes, its header says {expected}); copy or "
    "export it again",
    "no_trailer": "{path}: not an etspec artifact of format version {expected} (no integrity "
    "trailer); export it with this etspec's `etspec export`",
    "damaged": "{path}: damaged ({what}); copy or export it again",
    # The {what} of "damaged".
    "damage_trailer": "no integrity trailer at its end",
    "damage_sizes": "its size fields disagree",
    "damage_digest": "SHA-256 mismatch: its bytes changed after export",
    "cannot_load": "{path}: ExecuTorch cannot load this file ({error})",
    "not_etspec": "{path}: not an etspec artifact (no etspec metadata); export it with "
    "`etspec export`",
    "unknown_kind": "{path}: unknown etspec artifact kind '{kind}'",
    "wrong_kind": "{path} is an etspec {kind} artifact, but a {expected} was expected",
    "no_version": "{path}: etspec metadata has no format_version",
    "wrong_format_version": "{path} has etspec format version {version}, this etspec reads version "
    "{expected}; re-export it with this etspec",
    "missing_metadata": "artifact is missing metadata '{name}'; re-export it with this etspec",
    "bad_metadata": "artifact metadata '{name}' has an unexpected value {value}",
    "stdout_failed": "cannot write the output: stdout is closed or its disk is full",
    "metadata_range": "artifact metadata '{name}' is {value}, outside {least}..{most}; the "
    "artifact is damaged or forged: re-export it with this etspec",
    "metadata_widths": "artifact metadata '{name}' {value} must ascend to '{widest}' {most}; the "
    "artifact is damaged or forged: re-export it with this etspec",
    "metadata_logits": "artifact metadata '{name}' is {value} but {method} returns {width} "
    "logits per row; the artifact is damaged or forged: re-export it with this etspec",
    "width_exceeded": "{rows} rows exceed the widest compiled {method} width {widest}",
    "pair_mismatch": "draft/target mismatch: the draft expects target {what} {expected}, the "
    "target has {actual}; export the draft against this target",
    "tokenizer_mismatch": "draft/target mismatch: the draft was exported for a target with "
    "tokenizer {expected}, the target has {actual}; export the draft against this target",
    # Sampling from target logits nothing can be drawn from (the Python runtime's
    # SamplingError, the C++ runner's Sampler::target_probs).
    "target_logits_nan": "the target logits hold NaN or a row without a finite value; nothing "
    "can be sampled from them (the model or its export is broken: check it with etspec "
    "validate)",
    # A draft program whose d2t table does not map into the target vocabulary.
    "d2t_size": "{path}: draft_d2t does not match the draft vocabulary",
    "d2t_range": "{path}: draft_d2t maps outside the target vocabulary; export the draft "
    "against this target",
    "assistant_with_draft": "--draft-method gemma4-assistant drafts with the assistant inside "
    "the target .pte (etspec export target --assistant); drop --draft",
    "no_assistant": "this target artifact holds no Gemma 4 assistant; export it with "
    "`etspec export target DIR --assistant ASSISTANT_DIR`",
    # Text in and out (runtime/tokenizer.py, the C++ Tokenizer).
    "tokenizer_unreadable": "the artifact's tokenizer cannot be read ({reason})",
    # Chat templates (runtime/chat.py, the C++ chat.cpp).
    "chat_template_unreadable": "the artifact's chat template cannot be read ({reason})",
    "chat_template_not_text": "the artifact's chat template is not text",
    "chat_template_syntax": "the chat template does not parse ({reason})",
    "chat_template_refused": "the chat template refused these messages: {reason}",
    "messages_not_list": 'messages must be a non-empty list of objects, each with a "role" '
    'and a "content"',
    "message_no_role": 'message {index} must be an object with a "role" (a string)',
    "message_bad_content": 'message {index}: "content" must be text (or a list of parts), '
    "got {kind}",
    "no_chat_template": "this target artifact carries no chat template (its checkpoint has "
    "none: a base model); pass a plain prompt, or export an instruct checkpoint",
    "no_tokenizer": "this target artifact carries no tokenizer; pass token ids instead "
    "(--prompt-ids 1,2,3)",
    "prompt_not_utf8": "the prompt is not UTF-8 text (byte 0x{byte} at offset {offset}); "
    "pass UTF-8 text",
    "prompt_file_not_utf8": "{path}: not UTF-8 text (byte 0x{byte} at offset {offset}); save "
    "the prompt as UTF-8",
    "prompt_file_unreadable": "{path}: the prompt file cannot be read ({reason})",
    "prompt_file_too_large": "{path}: larger than {limit} MiB, more than any context holds; "
    "give a shorter prompt",
    "request_too_long": "request line longer than {limit} MiB, more than any context holds; "
    "send a shorter prompt",
    "one_prompt": "give exactly one of {choices}",
    # --serve request lines (the C++ runner), checked against SERVE_REQUEST.
    "serve_not_json": "request line is not JSON ({reason}); send one JSON object per line",
    "serve_not_object": "a request is one JSON object per line, with a prompt or prompt_ids "
    "field; got {value}",
    "serve_unknown_field": "unknown request field '{field}'; the fields are {fields}",
    "serve_field_kind": "request field '{field}' must be {kind}, got {value}",
    "serve_one_prompt": "a request needs exactly one of the fields prompt, prompt_ids and messages",
    "auto_no_candidates": "--tree auto has no candidate shape for this artifact",
    # Request checks (runtime/runner.py, the C++ Runner::generate), before any state changes.
    "empty_prompt": "empty prompt: give at least one token",
    "token_outside_vocab": "prompt token id {token} is outside the vocabulary [0, {vocab})",
    "max_new_tokens_low": "max_new_tokens must be at least 1, got {value}",
    "prompt_fills_context": "prompt of {tokens} tokens does not fit the context of {limit} (it "
    "needs room for at least one new token); shorten it or export with a larger --max-seq",
    "prompt_exceeds_context": "prompt of {tokens} tokens + max_new_tokens {max_new} exceeds "
    "the context of {limit}; lower max_new_tokens to at most {room} or export with a larger "
    "--max-seq",
    "unknown_choice": "unknown {what} '{value}'; choose one of {choices}",
    "kv_strategy_unsupported": "this target artifact does not support KV strategy "
    "'{strategy}' (it supports {supported}); pick another --kv",
    # Refused on ROW_QUANTIZED_DTYPES targets, whose outputs they would not keep exact.
    "inexact_tree": "the {name} tree is not lossless on this {dtype} target (its int8 "
    "activations round a tree's rows apart from a decode's); use --tree auto or --tree chain, "
    "or a target exported with --dtype fp32",
    "inexact_kv": "--kv {strategy} is not lossless on this {dtype} target (its int8 "
    "activations round scratch rows apart from a decode's); use --kv position-overwrite, or "
    "a target exported with --dtype fp32",
    # OpenVINO's precision (runtime/openvino.py), checked before an OpenVINO method loads.
    "openvino_bf16": "{path} runs on OpenVINO in fp32, but OpenVINO already computes in bf16 "
    "in this process ({isa_env}={isa}); unset {isa_env} (or set it to {fp32_isa}) before "
    "OpenVINO first runs, or set {env}=bf16 to accept bf16",
    # Sampling settings (runtime/sampling.py, the C++ Sampler).
    "temperature": "temperature must be a finite number >= 0 (0 means greedy), got {value}",
    "top_k": "top-k must be an integer >= 0 (0 disables it), got {value}",
    "seed": "seed must be an integer from 0 to {max} (64 bits), got {value}",
    "top_p": "top-p must be in (0, 1], got {value}",
    "repetition_penalty": "repetition penalty must be a finite number > 0 (1 disables it), "
    "got {value}",
    "knob_needs_mode": "{option} shapes --tree {mode} only; add --tree {mode} or drop {option}",
    "option_needs_method": "{option} applies to --draft-method {owner}; add --draft-method "
    "{owner} or drop {option}",
    "setting_minimum": "{option} must be at least {minimum}, got {value}",
    "no_command": "no command given; one of {commands} (see `{path} --help`)",
    # Tree shapes and what the programs can hold of them.
    "chain_length": "--num-spec-tokens (chain length) must be at least 1, got {value}",
    "tree_too_wide": "tree {name} has up to {nodes} draft tokens and needs a verify width of "
    "{need}; the target was exported with {width}. Use a smaller tree (--num-spec-tokens, "
    "--total-tokens, --static-tree) or re-export the target with a larger --verify-width",
    "draft_scratch": "tree {name} feeds {fed} draft nodes per step, the draft artifact has "
    "{scratch} scratch slots (step width {step_width}); use a smaller tree or re-export the "
    "draft with --scratch {need}",
    "draft_window": "draft window must be at least 1 token, got {value}",
    "window_needs_draft": "--draft-window truncates an EAGLE-3 draft's attention; give --draft",
    "ngram_range": "prompt lookup needs 1 <= min_ngram <= max_ngram",
    "lookup_with_draft": "--draft-method prompt-lookup uses no draft file; drop --draft",
    "scratch_exhausted": "tree needs more than the draft's {scratch} scratch slots",
    "static_tree_empty": "a static tree needs at least one node",
    "knob_twice": "give {first} or {second}, not both (both set the dynamic tree's {knob}; "
    "num_steps = depth + 1)",
    "dynamic_knobs": "dynamic tree needs depth >= 0, topk >= 1 and total_tokens >= 2 (got depth "
    "{depth}, topk {topk}, total_tokens {total})",
    "draft_nan": "the draft produced NaN logits; cannot build a tree from them",
    "tree_neg_inf": "a selected tree candidate has score -inf (the draft gave it probability 0)",
    "rerank_orphan": "reranking kept a node without its parent (scores not monotone)",
    "tree_choice_ranks": "tree choice {path} must be a non-empty list of ranks >= 0",
    "tree_choice_parent": "tree choice {path} has no parent {parent}",
    "full_tree": "a full tree needs depth >= 1 and branching >= 1",
    "pruned_tree": "a pruned tree needs at least 1 node, got {nodes}",
    "static_tree_unreadable": "cannot read static tree '{spec}': use D<depth>xBF<branching> "
    "(e.g. D3xBF2), N<nodes> (e.g. N8) or a JSON list of rank paths (e.g. [[0],[1],[0,0]])",
}


def quote(text: str) -> str:
    """``text`` cut to ``QUOTE_MAX`` characters for an error message."""
    return text if len(text) <= QUOTE_MAX else text[:QUOTE_MAX] + "..."


def message(key: str, **fields: Any) -> str:
    """``MESSAGES[key]`` with its ``{field}`` placeholders filled in."""
    return MESSAGES[key].format(**fields)


# Facts of a generation both runtimes report (runtime/stats.py, the C++ runner's Stats).
# Where a generation's time goes (``stage_s``), in report order.
STAGES = ("prefill", "decode", "draft", "tensorize", "verify", "accept", "commit")
# A generation's stats as JSON (``etspec generate --json``, the bench harness, the C++
# runner's ``--json``), in order: (field, "counted" | "derived"). Derived fields are computed
# from counted ones (a property in Python, a method in C++).
STATS_FIELDS: tuple[tuple[str, str], ...] = (
    ("prompt_tokens", "counted"),
    ("cached_tokens", "counted"),  # leading prompt tokens whose KV an earlier request left
    ("generated_tokens", "counted"),
    ("prefill_calls", "counted"),
    ("decode_calls", "counted"),
    ("verify_calls", "counted"),
    ("draft_calls", "counted"),
    ("commit_calls", "counted"),
    ("drafted_tokens", "counted"),
    ("accepted_tokens", "counted"),
    ("rejected_tokens", "derived"),
    ("acceptance_rate", "derived"),
    ("accept_length", "derived"),
    ("tpc", "derived"),
    ("accept_pos", "counted"),
    ("proposed_pos", "counted"),
    ("shape_steps", "counted"),
    ("shape_drafted", "counted"),
    ("shape_accepted", "counted"),
    ("stage_s", "counted"),
    ("ttft_s", "counted"),
    ("tpot_s", "derived"),
    ("total_s", "counted"),
    ("tokens_per_s", "derived"),
    ("memory", "counted"),
)
# Why a generation stopped: an EOS token, the budget, a callback that returned False,
# ``stop()`` from another thread.
STOP_EOS, STOP_BUDGET, STOP_CALLBACK, STOP_REQUESTED = "eos", "max_new_tokens", "callback", "stop"
# The C++ runner's --serve requests (one JSON object per line) and the error answer, as
# tools/peers/cpp_runner.py writes and reads them: field names by role.
SERVE_FIELDS = {
    "Prompt": "prompt",
    "PromptIds": "prompt_ids",
    "Messages": "messages",
    "MaxNewTokens": "max_new_tokens",
    "Temperature": "temperature",
    "TopK": "top_k",
    "TopP": "top_p",
    "Seed": "seed",
    "IgnoreEos": "ignore_eos",
    "ReusePrefix": "reuse_prefix",
    "Error": "error",
    # In an answer of a runner under --tree auto: what it measured per candidate so far.
    "PolicyReport": "policy_report",
}
# What each request field must hold, checked before the request runs (unknown fields are
# refused: a misspelled "temperture" must not run greedy). Ranges the runner checks itself
# (temperature, top-p, ids within the vocabulary) are its own messages.
SERVE_KINDS = {
    "text": "a string",
    "ids": "a list of integer token ids",
    "count": "an integer >= 1",
    "natural": "an integer >= 0",
    "number": "a number",
    "flag": "true or false",
    "seed": "an integer from 0 to 2^64 - 1, or null",
    "messages": 'a list of {"role": ..., "content": ...} objects',
}
SERVE_REQUEST = {
    "prompt": "text",
    "prompt_ids": "ids",
    "messages": "messages",  # rendered by the target's chat template
    "max_new_tokens": "count",
    "temperature": "number",
    "top_k": "natural",
    "top_p": "number",
    "seed": "seed",
    "ignore_eos": "flag",
    "reuse_prefix": "flag",  # prefill only what follows what the KV cache holds of it
}
assert set(SERVE_REQUEST) == set(SERVE_FIELDS.values()) - {
    SERVE_FIELDS["Error"],
    SERVE_FIELDS["PolicyReport"],
}
assert set(SERVE_REQUEST.values()) <= set(SERVE_KINDS)
# A user's value quoted in an error (a request field, a static tree spec) is cut to this many
# characters: an error line stays one readable line.
QUOTE_MAX = 40
# ``memory`` keys: what each program holds, as stored.
TARGET_WEIGHTS_BYTES, TARGET_KV_BYTES = "target_weights_bytes", "target_kv_bytes"
DRAFT_WEIGHTS_BYTES, DRAFT_KV_BYTES = "draft_weights_bytes", "draft_kv_bytes"

# Defaults both runtimes apply when an option is not given.
DEFAULT_KV_STRATEGY = POSITION_OVERWRITE
DEFAULT_CHAIN_LENGTH = 3  # --num-spec-tokens
DEFAULT_MAX_NEW_TOKENS = 128  # or what the context leaves, if less
# ``--tree static`` without ``--static-tree``: the best-first pruned tree filling the widest
# verify, at most this many nodes (acceptance past 15 nodes rarely pays for the verify).
STATIC_TREE_MAX_NODES = 15
# Prior acceptance of a draft's rank-r candidate (r = 0, 1, ...; later ranks reuse the last),
# which orders a pruned static tree's nodes best-first (Medusa/EAGLE-style sparse trees).
DEFAULT_RANK_ACCEPT = (0.7, 0.15, 0.06, 0.03)
# Temperatures below this are greedy (vLLM's _SAMPLING_EPS): logits divided by a smaller
# one overflow float32 (5e-324 is 0 as a float), and the distribution is one-hot anyway.
SAMPLING_EPS = 1e-5
# Top-p without a full sort: the kept tokens lie within the first threshold set {(logit -
# max) / temperature >= -c} holding top_p of the mass, tried at these c in turn (the whole
# vocabulary after the last). The set at 8 holds 0.95 of most rows; past 32 a 262k vocabulary
# holds under 4e-9 of the mass, so the last step is almost never reached.
TOP_P_CUTOFFS = (8.0, 16.0, 32.0)
# The set found is narrowed by bisection (at most this many rounds) while it holds more than
# this many tokens: sorting a few thousand entries costs less than another pass over them.
TOP_P_SORT_SIZE = 2048
TOP_P_BISECTIONS = 16
# A token whose (logit - max) / temperature is below this has no mass: its exp leaves
# float32's normal range (the samplers keep the tokens above it only).
EXP_UNDERFLOW = -87.0
# ``--tree dynamic`` without --draft-topk: candidates kept per expanded node.
DEFAULT_DYNAMIC_TOPK = 4
# ``--tree auto`` (the dispatcher, runtime/speculative/dispatcher.py and its C++ twin):
# acceptance decays with depth, so past this a longer chain only costs more (EAGLE's depth);
AUTO_MAX_CHAIN = 7
# ``--tree auto``'s step that drafts nothing: the target decodes one token, as without a
# draft, and no draft call runs. It is a candidate whenever speculating costs more than it
# gains (sampling a base model that does not repeat itself, a draft that rarely agrees), so
# auto is never slower than target-only by more than what its probes cost.
NO_DRAFT_SHAPE = "none"
# The dispatcher (runtime/speculative/dispatcher.py and its C++ twin) rates each way a step
# can go by optimistic tokens per step over predicted seconds. Optimism: this many standard
# errors over each acceptance estimate, so a way seen on a few unlucky steps is tried again.
AUTO_Z = 1.0
# At each step of a way (a chain length's depth, a lookup evidence, a tree), what it saw
# before weighs this much less (its counts are multiplied by it): the text at hand outweighs
# earlier text, and a way that stops paying loses its optimism's cover in a few dozen steps.
AUTO_DECAY = 0.98
# Every step, every way's counts are multiplied by this: one written off regains its
# optimism slowly and is probed again (after several hundred steps), so a draft that stopped
# paying is noticed when it pays again, at the cost of a probe now and then.
AUTO_FORGET = 0.998
# At the start of each request, every way's counts are multiplied by this: what earlier
# requests taught is a prior the new text soon outweighs (a draft that paid on one kind of
# prompt is judged again on the next).
AUTO_REQUEST_DECAY = 0.5
# At the start of each request, every way's counts (a lookup evidence's, the model's chain
# acceptance pooled and per context, a tree's) are also cut to at most this many steps'
# worth (the acceptance kept): what earlier requests taught must not keep a way that fails
# on the new text above a decode for dozens of its steps. Sampled summaries: a 1-gram match
# that paid half its verifies on one answer (hundreds of passed-over offers scored, decayed
# only by AUTO_FORGET) and 4% on the next; a draft whose acceptance moves from request to
# request (a sampled text's own draw), whose halved counts were still worth about 20 steps.
# The new text's own steps, and the offers scored beside them, outweigh it in a few.
# Two, not four: on synthetic requests (scripts/dispatch_sim.py, docs/results.md) a request
# drafting at 0.15 a depth after requests at 0.6-0.75 ran 8-13 chain steps still "sure" on
# four steps of the earlier rate (its deep depths barely observed) before the draft was
# written off; at two, no such request fell below 0.95x a decode (15-23 of 800 at four),
# for about 0.5% of a mid-acceptance request's speed.
AUTO_REQUEST_PRIOR_STEPS = 2.0
# A probe is a step whose way is chosen on its optimism alone (its mean rate is below the
# best mean rate: a way written off, or never run). What probes lose (their seconds beyond
# what the best way would have taken for the tokens they emitted) may reach this share of
# all step time and no more: a probe runs only while that account is not in debt, else the
# best way by its mean runs. A draft that never pays then costs at most this share.
AUTO_PROBE_SHARE = 0.01
# A step whose choice is a decode settles the steps after it: each of them the drafter
# offers nothing for decodes unrated, as many as the decode's lead over every other way's
# optimistic rate allows at AUTO_SETTLED_DRIFT of its rate a step (at most
# AUTO_SETTLED_STEPS). The ratings move by AUTO_FORGET and a window's median a step, so a
# rival 5% behind is not ahead within 5 steps; a draft that never pays then costs no rating
# on most steps (in Python, rating every way was about 1% of a Gemma 3 270M decode step).
AUTO_SETTLED_DRIFT = 0.01
AUTO_SETTLED_STEPS = 8
# A chain's mean (what decides whether its step is a probe, and what runs while the account
# is in debt) is what was seen: each depth's acceptance is drawn toward the shallower one's
# (depth 1: toward none) with this many steps' weight, not the two steps of the optimistic
# estimate's even prior. A draft never seen to agree is then never sure to pay, so every
# step it runs is a probe the account charges, while a draft seen on dozens of steps keeps
# a mean within a few percent of its own rate.
AUTO_MEAN_PRIOR_STEPS = 0.5
# The probe account's credit stops growing at what this many steps earn (about a request's
# worth): a long stretch without probes does not buy a burst of them.
AUTO_PROBE_CREDIT_STEPS = 128
# A method's cost is the median of its last this-many observed calls, and so is each kind
# of step's host work beside its calls: a few slow calls do not move it, and a short window
# follows a machine that slows down (background load) or a context that grows.
AUTO_COST_WINDOW = 16
# A call's cost comes from steps once this many steps made it; before, from the probe's
# time scaled as the target's other calls compare with theirs (runtime/speculative/costs.py).
AUTO_COST_MIN_CALLS = 3
# A call's time counts for this many steps, and a kind of step not run for this many
# forgets its host work: a method with too few recent calls (a verify width the choice
# avoids, the decode while speculating pays) costs its probe time scaled as the calls steps
# make now compare with theirs, with no program call. A cost measured in a bad moment must
# not keep its method out of later choices: at 512, counted from a call's last use, a 7-row
# verify's calls from a slow stretch priced it 6.1 ms for the rest of a bundled run (its
# calls over the run: median 4.35 ms).
AUTO_STALE_STEPS = 128
# The dispatcher's cost model (runtime/speculative/costs.py) names the calls a step makes
# ("decode", "draft": one draft level, "extend": the draft's catch-up over what the target
# committed since its last proposal, "verify" + the width) and the kinds of step it keeps
# the host work of (a decode, a chain, a tree).
COST_DECODE, COST_DRAFT, COST_VERIFY = "decode", "draft", "verify"
COST_EXTEND = "extend"
STEP_DECODE, STEP_CHAIN, STEP_TREE = "decode", "chain", "tree"
# A seeded sampling request is reproduced by coupled sampling (runtime/sampling.py), not by
# its dispatcher: it is timed and chosen like any other.
# The largest prompt file either runtime reads (checked before reading it whole: a
# /dev/zero or a stray binary must not fill memory); no context holds a prompt that long.
PROMPT_FILE_MAX_BYTES = 8 << 20
# A tokenizer digest in messages: its first this-many hex digits.
DIGEST_SHOWN = 12
# Coupled sampling (drafter-invariant speculative sampling; Daliri et al. 2024, "Coupling
# without communication"): the token at sequence index t is the x with the largest
# p(x) / E(x), E(x) = -ln u(key, t, x), a race of exponential clocks (the Gumbel-max trick),
# which draws x with probability p(x). u is a counter hash of (key, t, x) (SplitMix64's
# mixer), so the target, the draft and target-only decoding race the same clocks at the same
# index: a seed gives the same text whatever proposes it. COUPLING_GAMMA is SplitMix64's
# increment, COUPLING_MIX its two multipliers.
COUPLING_GAMMA = 0x9E3779B97F4A7C15
COUPLING_MIX = (0xBF58476D1CE4E5B9, 0x94D049BB133111EB)
_MASK64 = (1 << 64) - 1


def coupling_mix(z: int) -> int:
    """SplitMix64's finalizer of a 64-bit integer."""
    z &= _MASK64
    z = ((z ^ (z >> 30)) * COUPLING_MIX[0]) & _MASK64
    z = ((z ^ (z >> 27)) * COUPLING_MIX[1]) & _MASK64
    return z ^ (z >> 31)


def coupling_base(key: int, index: int) -> int:
    """The per-(key, index) half of the counter hash; a token x then hashes
    ``coupling_mix(base + (x + 1) * COUPLING_GAMMA)`` to ``u = (z >> 11 + 0.5) / 2**53``."""
    return coupling_mix(coupling_mix(key + COUPLING_GAMMA) ^ (index & _MASK64))


def default_dynamic_depth(width: int) -> int:
    """``--tree dynamic``'s expansion passes without --depth, for a ``width``-row verify:
    deeper for wider budgets (2..5)."""
    return min(5, max(2, width.bit_length() - 2))


def hidden_spec_text(point: str, layers: Sequence[int]) -> str:
    """How a hidden-state descriptor is written in messages: ``layer_input[2, 4, 6]``."""
    return f"{point}[{', '.join(str(i) for i in layers)}]"


# XNNPACK's load-time option that packs each weight once for every method of a program
# (runtime/xnnpack.py; the C++ runner passes it when it loads a program), and the
# environment variable that turns it off in both runtimes.
XNNPACK_BACKEND = "XnnpackBackend"
XNNPACK_WEIGHT_CACHE = "weight_cache_enabled"
WEIGHT_CACHE_ENV = "ETSPEC_XNNPACK_WEIGHT_CACHE"

# OpenVINO's inference precision (runtime/openvino.py; the C++ runner's Program). ExecuTorch's
# OpenVINO backend imports each delegate with no properties and OpenVINO keeps no precision
# hint across export and import, so its CPU plugin computes matmuls in bf16 wherever the CPU
# has bf16 (AVX512-BF16, AMX), which flips greedy tokens. Before the first OpenVINO method
# loads, both runtimes cap oneDNN's ISA below bf16 (fp32, the default) unless
# OPENVINO_PRECISION_ENV asks for bf16; an ONEDNN_ISA_ENV already set is left as it is.
OPENVINO = "openvino"  # ``backend`` of an OpenVINO artifact
OPENVINO_PRECISION_ENV = "ETSPEC_OPENVINO_PRECISION"
OPENVINO_PRECISIONS = ("fp32", "bf16")
ONEDNN_ISA_ENV = "ONEDNN_MAX_CPU_ISA"
OPENVINO_FP32_ISA = "AVX512_CORE_VNNI"  # the widest x86 ISA without bf16

# The ``--tree`` modes (runtime/speculative/settings.py builds each one's policy).
TREE_MODES = ("chain", "static", "dynamic", "auto")
# ``--draft-method`` without one: with a draft, the draft and prompt lookup combined (on
# Gemma 3 270M it beat the draft alone on every prompt set, docs/results.md); without one,
# target-only, as every method with a draft program of its own.
DEFAULT_DRAFT_METHOD = COMBINED_METHOD


@dataclass(frozen=True)
class RunSetting:
    """One option of a run: what ``etspec generate``/``validate``/``bench`` and the C++
    runner take, declared once. ``RUN_SETTINGS`` generates the click options
    (etspec/cli/runner_options.py), the C++ runner's flag table (the generated header), the
    checks of ``runtime/spec.py``'s ``RunnerSpec`` and ``TreeSettings`` and the flags the
    Python bench passes to the C++ runner."""

    flag: str
    #: Where the value lives: ``tree.<field>`` (TreeSettings), ``spec.<field>``
    #: (RunnerSpec), ``method.<name>`` (``RunnerSpec.options``: a draft method's own, read
    #: by the methods that own it) or ``sampling.<field>`` (SamplingConfig).
    field: str
    #: int, float, text, choice (of ``choices``), method (a registered draft method),
    #: flag (no value; sets the field to ``flag_value``) or seed (0 .. SEED_MAX).
    kind: str
    help: str
    default: Any = None  # None: unset; the owner's default applies (the help says which)
    minimum: int | None = None  # int kinds: refused below this (``setting_minimum``)
    choices: tuple[str, ...] = ()
    #: The ``--tree`` modes it shapes; empty: every mode. Refused with another
    #: (``knob_needs_mode``): it would be ignored without a word.
    tree_modes: tuple[str, ...] = ()
    #: The draft methods that read it; empty: every method (``option_needs_method``).
    draft_methods: tuple[str, ...] = ()
    flag_value: Any = None

    @property
    def group(self) -> str:
        return self.field.split(".")[0]

    @property
    def name(self) -> str:
        """The field's name in its settings object."""
        return self.field.split(".")[1]

    @property
    def dest(self) -> str:
        """The click parameter name (the flag in snake case)."""
        return self.flag.lstrip("-").replace("-", "_")


RUN_SETTINGS = (
    RunSetting(
        "--draft-method", "spec.draft_method", "method", "How to draft.",
        default=DEFAULT_DRAFT_METHOD,
    ),
    RunSetting(
        "--min-ngram", "method.min_ngram", "int",
        "Prompt lookup: shortest n-gram matched [default: 1].",
        minimum=1, draft_methods=(PROMPT_LOOKUP_METHOD, COMBINED_METHOD),
    ),
    RunSetting(
        "--max-ngram", "method.max_ngram", "int",
        f"Prompt lookup: longest n-gram matched [default: {DEFAULT_MAX_NGRAM}, or "
        "--min-ngram if larger].",
        minimum=1, draft_methods=(PROMPT_LOOKUP_METHOD, COMBINED_METHOD),
    ),
    RunSetting(
        "--draft-window", "method.draft_window", "int",
        "The EAGLE-3 draft attends to its last N positions only (an ablation, EAGLE-Pangu "
        "Table 3) [default: all].",
        minimum=1, draft_methods=(EAGLE3, COMBINED_METHOD),
    ),
    RunSetting(
        "--tree", "tree.mode", "choice",
        "Proposal shape; auto picks one from measured costs and acceptance.",
        default="auto", choices=TREE_MODES,
    ),
    RunSetting(
        "--num-spec-tokens", "tree.num_spec_tokens", "int",
        "Chain length (draft tokens per step).",
        default=DEFAULT_CHAIN_LENGTH, minimum=1,
    ),
    RunSetting(
        "--static-tree", "tree.static_tree", "text",
        "Static tree: D3xBF2 (full), N8 (pruned to 8 nodes) or JSON rank paths [default: the "
        f"pruned tree filling the widest verify, at most {STATIC_TREE_MAX_NODES} nodes].",
        tree_modes=("static",),
    ),
    RunSetting(
        "--depth", "tree.depth", "int",
        "Dynamic tree expansion passes (EAGLE's depth; trees are depth+1 deep) [default: "
        "from the verify width].",
        minimum=0, tree_modes=("dynamic",),
    ),
    RunSetting(
        "--num-steps", "tree.num_steps", "int",
        "Dynamic tree height (SGLang's num_steps; same as --depth N-1).",
        minimum=1, tree_modes=("dynamic",),
    ),
    RunSetting(
        "--draft-topk", "tree.topk", "int",
        "Dynamic tree: draft candidates kept per expanded node (EAGLE top-k; not sampling's "
        f"--top-k) [default: {DEFAULT_DYNAMIC_TOPK}].",
        minimum=1, tree_modes=("dynamic",),
    ),
    RunSetting(
        "--total-tokens", "tree.total_tokens", "int",
        "Dynamic tree size incl. the root (EAGLE total_token, SGLang num_draft_tokens) "
        "[default: the widest verify].",
        minimum=2, tree_modes=("dynamic",),
    ),
    RunSetting(
        "--kv", "spec.kv_strategy", "choice", "How verify's rejected rows leave the KV cache.",
        default=DEFAULT_KV_STRATEGY, choices=KV_STRATEGIES,
    ),
    RunSetting(
        "--no-weight-cache", "spec.weight_cache", "flag",
        "Let XNNPACK pack weights per method instead of once (more memory; the cache is on "
        f"by default, {WEIGHT_CACHE_ENV}=0 turns it off too).",
        flag_value=False,
    ),
    RunSetting("--temperature", "sampling.temperature", "float", "0 is greedy.", default=0.0),
    RunSetting("--top-k", "sampling.top_k", "int", "0 disables.", default=0),
    RunSetting("--top-p", "sampling.top_p", "float", "1 disables.", default=1.0),
    RunSetting("--seed", "sampling.seed", "seed", "Sampling seed [default: random]."),
)  # fmt: skip


def run_setting(flag: str) -> RunSetting:
    """The ``RUN_SETTINGS`` entry of ``flag`` (our name, not an alias)."""
    return next(s for s in RUN_SETTINGS if s.flag == flag)


# Names users bring from other runtimes, accepted beside ours (ours stay the documented
# ones): our option -> (alias, where the name comes from). `etspec` (export, generate,
# validate, bench), the C++ runner (through the generated header) and the README's table
# all read this one table.
OPTION_ALIASES: dict[str, tuple[tuple[str, str], ...]] = {
    "--num-spec-tokens": (
        ("--num-speculative-tokens", "vLLM `num_speculative_tokens`"),
        ("--draft-max", "llama.cpp `--draft-max`"),
    ),
    "--draft-topk": (
        ("--speculative-eagle-topk", "SGLang `--speculative-eagle-topk`"),
        ("--topk", "etspec, short form (not sampling's `--top-k`)"),
        ("--top-k-draft", "etspec, long form"),
    ),
    "--num-steps": (("--speculative-num-steps", "SGLang `--speculative-num-steps`"),),
    "--total-tokens": (
        ("--speculative-num-draft-tokens", "SGLang `--speculative-num-draft-tokens`"),
        ("--num-draft-tokens", "SGLang, short form"),
    ),
    "--max-ngram": (("--prompt-lookup-max", "vLLM `prompt_lookup_max`"),),
    "--min-ngram": (("--prompt-lookup-min", "vLLM `prompt_lookup_min`"),),
    "--max-seq": (
        ("--max-context-length", "ExecuTorch `max_context_length`"),
        ("--ctx-size", "llama.cpp `--ctx-size`"),
    ),
    "--max-new-tokens": (
        ("--max-tokens", "vLLM / OpenAI `max_tokens`"),
        ("--n-predict", "llama.cpp `--n-predict`"),
    ),
    "--temperature": (("--temp", "llama.cpp `--temp`"),),
    "--prompt-file": (("--file", "llama.cpp `--file`"),),
}


def alias_names(option: str) -> tuple[str, ...]:
    """The aliases accepted for ``option`` (none for an option without any)."""
    return tuple(a for a, _ in OPTION_ALIASES.get(option, ()))


# What the hidden-state descriptor check is called in ``pair_mismatch``.
HIDDEN_SPEC_CHECK = "hidden-state descriptor"
# Draft expectation checked against the target at pairing: (what, draft field, target field).
PAIR_CHECKS = (
    ("hidden size", "target_hidden_size", "hidden_size"),
    ("vocabulary size", "target_vocab_size", "vocab_size"),
)


@dataclass(frozen=True)
class HiddenStateSpec:
    """Which target hidden states an artifact exports (target) or expects (draft)."""

    point: str
    layers: tuple[int, ...]

    def __str__(self) -> str:
        return hidden_spec_text(self.point, self.layers)

    def check(self, num_layers: int) -> None:
        if self.point not in HIDDEN_POINTS:
            raise ArtifactError(
                f"unknown hidden-state point {self.point!r}; supported: {', '.join(HIDDEN_POINTS)}"
            )
        if self.point == "final_norm" and self.layers != (num_layers,):
            raise ArtifactError(
                f"hidden-state point final_norm has layers ({num_layers},) for a "
                f"{num_layers}-layer target, not {list(self.layers)}"
            )
        bad = [i for i in self.layers if not 0 <= i <= num_layers]
        if bad or not self.layers:
            raise ArtifactError(
                f"hidden-state layers {list(self.layers)} must be non-empty and within "
                f"[0, {num_layers}] for a {num_layers}-layer target"
            )


def default_eagle3_layers(num_layers: int) -> tuple[int, ...]:
    """The EAGLE-3 taps used by the EAGLE repo and vLLM: inputs of layers 2, L//2, L-3."""
    return (2, num_layers // 2, num_layers - 3)


@dataclass(frozen=True)
class _Metadata:
    """Base: fields map one-to-one onto constant methods of the same name."""

    KIND: ClassVar[str] = ""

    def constant_methods(self) -> dict[str, Any]:
        out: dict[str, Any] = {ARTIFACT_KIND: self.KIND}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def read(cls, get: Callable[[str], list[Any]]) -> _Metadata:
        """Build from ``get(name) -> list of returned values`` (one constant method each)."""
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            try:
                raw = get(f.name)
            except KeyError:
                raise ArtifactError(message("missing_metadata", name=f.name)) from None
            values[f.name] = _coerce(f.name, f.type, raw)
        meta = cls(**values)
        check_metadata(meta, TARGET_RANGES if cls.KIND == TARGET_KIND else DRAFT_RANGES)
        return meta

    def hidden_spec(self) -> HiddenStateSpec:
        return HiddenStateSpec(self.hidden_state_point, tuple(self.hidden_state_layers))  # type: ignore[attr-defined]


# Each integer metadata field's accepted range, checked when an artifact loads, by both
# runtimes alike (a forged target with `prefill_chunk` 0 or `vocab_size` 10^9 behind a valid
# integrity trailer crashed the C++ runner and gave Python tracebacks): (least, most), each
# bound a number or (another field, offset), inclusive. A tuple field's every element is
# held to it. The limits are far past any model etspec exports, and small enough that no
# size computed from them overflows or allocates without bound.
Bound = int | tuple[str, int]
TARGET_RANGES: dict[str, tuple[Bound, Bound]] = {
    "vocab_size": (1, 1 << 21),
    "hidden_size": (1, 1 << 16),
    "num_layers": (1, 1024),
    "max_context": (1, 1 << 22),
    "cache_size": (("max_context", 0), ("max_context", 1 << 16)),
    "sliding_window": (0, 1 << 24),  # may exceed a short export's cache (Gemma's 512)
    "prefill_chunk": (1, ("max_context", 0)),
    "verify_width": (1, 4096),
    "verify_widths": (1, ("verify_width", 0)),
    "hidden_state_layers": (0, ("num_layers", 0)),
    "bos_token_id": (-1, ("vocab_size", -1)),
    "eos_token_ids": (0, ("vocab_size", -1)),
    "kv_cache_bytes": (0, 1 << 40),
    "assistant_step_width": (0, 4096),
}
DRAFT_RANGES: dict[str, tuple[Bound, Bound]] = {
    "target_vocab_size": (1, 1 << 21),
    "draft_vocab_size": (1, ("target_vocab_size", 0)),
    "hidden_size": (1, 1 << 16),
    "target_hidden_size": (1, 1 << 16),
    "max_context": (1, 1 << 22),
    "cache_size": (("max_context", 0), ("max_context", 1 << 16)),
    "prefill_chunk": (1, ("max_context", 0)),
    "extend_width": (1, 4096),
    "extend_widths": (1, ("extend_width", 0)),
    "step_width": (1, 4096),
    "hidden_state_layers": (0, 1024),
    "kv_cache_bytes": (0, 1 << 40),
}
# Width lists that must ascend strictly and end at their widest: (list, widest).
METADATA_WIDTHS = (("verify_widths", "verify_width"), ("extend_widths", "extend_width"))


def check_metadata(meta: Any, ranges: dict[str, tuple[Bound, Bound]]) -> None:
    """Refuse metadata outside ``ranges`` or with widths that do not ascend to their widest
    (``TARGET_RANGES``; the C++ runtime's ``check_metadata`` is the same)."""

    def bound(b: Bound) -> int:
        return b if isinstance(b, int) else int(getattr(meta, b[0])) + b[1]

    for name, (lo, hi) in ranges.items():
        least, most = bound(lo), bound(hi)
        value = getattr(meta, name)
        for v in value if isinstance(value, tuple) else (value,):
            if not least <= v <= most:
                raise ArtifactError(
                    message("metadata_range", name=name, value=v, least=least, most=most)
                )
    for name, widest in METADATA_WIDTHS:
        if not hasattr(meta, name):
            continue
        widths, most = getattr(meta, name), getattr(meta, widest)
        if not widths or list(widths) != sorted(set(widths)) or widths[-1] != most:
            raise ArtifactError(
                message("metadata_widths", name=name, value=list(widths), widest=widest, most=most)
            )


def _coerce(name: str, type_name: Any, raw: list[Any]) -> Any:
    t = str(type_name)
    try:
        if t.startswith("tuple"):
            return tuple(int(v) for v in raw)
        (value,) = raw
        if t == "int":
            return int(value)
        if t == "str":
            return str(value)
        if t == "float":
            return float(value)
    except (TypeError, ValueError):
        pass
    raise ArtifactError(message("bad_metadata", name=name, value=repr(raw)))


@dataclass(frozen=True)
class TargetMetadata(_Metadata):
    """Everything the runtime needs to drive a target program."""

    KIND: ClassVar[str] = TARGET_KIND

    format_version: int
    model_family: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    layer_types: str  # "full" or "sliding" per layer, comma-separated
    sliding_window: int  # keys a sliding layer sees, its own included; 0: no sliding layers
    max_context: int
    cache_size: int
    prefill_chunk: int
    verify_width: int  # the widest verify method, ``target_verify``
    verify_widths: tuple[int, ...]  # every compiled verify width, ascending
    hidden_state_point: str
    hidden_state_layers: tuple[int, ...]
    bos_token_id: int
    eos_token_ids: tuple[int, ...]
    kv_strategies: str
    kv_cache_bytes: int
    dtype: str
    backend: str
    tokenizer_sha256: str
    assistant: str  # a drafter inside this program ("gemma4_assistant"), or ""
    assistant_step_width: int  # rows of ``assistant_step``; 0 without an assistant

    @property
    def hidden_state_width(self) -> int:
        return self.hidden_size * len(self.hidden_state_layers)

    @property
    def row_quantized(self) -> bool:
        """Whether the recipe quantizes activations per row (``ROW_QUANTIZED_DTYPES``): a
        row's logits then depend on its attention's column order, so only rows laid out
        as a decode's reproduce its tokens (no branching trees, no scratch rows)."""
        return self.dtype in ROW_QUANTIZED_DTYPES

    def verify_method(self, width: int) -> str:
        """The method verifying ``width`` rows (one of ``verify_widths``)."""
        return verify_method_name(width, self.verify_width)

    def verify_width_for(self, rows: int) -> int:
        """The narrowest compiled verify width that holds ``rows`` rows."""
        return narrowest_width(self.verify_widths, rows, TARGET_VERIFY)


@dataclass(frozen=True)
class DraftMetadata(_Metadata):
    """Everything the runtime needs to drive a draft program, and what it expects of its target."""

    KIND: ClassVar[str] = DRAFT_KIND

    format_version: int
    draft_method: str
    draft_vocab_size: int
    hidden_size: int
    max_context: int
    cache_size: int
    prefill_chunk: int
    extend_width: int  # the widest extend method, ``draft_extend``
    extend_widths: tuple[int, ...]  # every compiled extend width, ascending
    step_width: int
    target_vocab_size: int
    target_hidden_size: int
    hidden_state_point: str
    hidden_state_layers: tuple[int, ...]
    target_tokenizer_sha256: str
    kv_cache_bytes: int
    dtype: str
    backend: str

    def extend_method(self, width: int) -> str:
        """The method extending ``width`` rows (one of ``extend_widths``)."""
        return extend_method_name(width, self.extend_width)

    def extend_width_for(self, rows: int) -> int:
        """The narrowest compiled extend width that holds ``rows`` rows."""
        return narrowest_width(self.extend_widths, rows, DRAFT_EXTEND)


def narrowest_width(widths: tuple[int, ...], rows: int, what: str) -> int:
    """The first of the ascending compiled ``widths`` that holds ``rows`` rows."""
    for width in widths:
        if width >= rows:
            return width
    raise ArtifactError(message("width_exceeded", rows=rows, method=what, widest=widths[-1]))


def check_format(kind: str, version: int, path: str) -> None:
    if version != FORMAT_VERSION:
        raise ArtifactError(
            message("wrong_format_version", path=path, version=version, expected=FORMAT_VERSION)
        )


def check_pair(target: TargetMetadata, draft: DraftMetadata) -> None:
    """Reject a draft whose expectations do not match the target, naming both values."""
    checks = [(what, getattr(draft, d), getattr(target, t)) for what, d, t in PAIR_CHECKS]
    checks.append((HIDDEN_SPEC_CHECK, str(draft.hidden_spec()), str(target.hidden_spec())))
    for what, expected, actual in checks:
        if expected != actual:
            raise MetadataMismatchError(
                message("pair_mismatch", what=what, expected=expected, actual=actual)
            )
    if (
        draft.target_tokenizer_sha256
        and target.tokenizer_sha256
        and draft.target_tokenizer_sha256 != target.tokenizer_sha256
    ):
        raise MetadataMismatchError(
            message(
                "tokenizer_mismatch",
                expected=draft.target_tokenizer_sha256[:DIGEST_SHOWN],
                actual=target.tokenizer_sha256[:DIGEST_SHOWN],
            )
        )


# The C++ twins of width_method, mask_width, band_start, default_dynamic_depth and
# hidden_spec_text above, written
# into the generated header next to the values they read (tests/test_contract.py runs both
# on a grid of inputs).
_CPP_FUNCTIONS = r"""
inline std::string width_method(const char* base, int64_t width, int64_t widest) {
  return width == widest ? base : std::string(base) + "_" + std::to_string(width);
}
inline int64_t mask_width(int64_t needed, int64_t max_context, int64_t cache_size) {
  const int64_t g = kMaskGranule;
  const int64_t n = std::min(max_context, std::max<int64_t>(1, (needed + g - 1) / g * g));
  return n + cache_size - max_context;
}
inline int64_t default_dynamic_depth(int64_t width) {
  const int64_t bits = width > 0 ? 64 - __builtin_clzll(static_cast<unsigned long long>(width)) : 0;
  return std::min<int64_t>(5, std::max<int64_t>(2, bits - 2));
}
inline int64_t band_start(int64_t lowest, int64_t committed, int64_t window) {
  const int64_t lo = std::max<int64_t>(0, lowest - window + 1) / kMaskGranule * kMaskGranule;
  return std::max<int64_t>(0, std::min(lo, committed - 2));
}
inline uint64_t coupling_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * kCouplingMix[0];
  z = (z ^ (z >> 27)) * kCouplingMix[1];
  return z ^ (z >> 31);
}
inline uint64_t coupling_base(uint64_t key, int64_t index) {
  return coupling_mix(coupling_mix(key + kCouplingGamma) ^ static_cast<uint64_t>(index));
}
inline double coupling_uniform(uint64_t base, int64_t token) {
  const uint64_t z = coupling_mix(base + static_cast<uint64_t>(token + 1) * kCouplingGamma);
  return (static_cast<double>(z >> 11) + 0.5) * 0x1p-53;
}
inline std::string hidden_spec_text(const std::string& point, const std::vector<int64_t>& layers) {
  std::string s = point + "[";
  for (size_t i = 0; i < layers.size(); ++i) s += (i ? ", " : "") + std::to_string(layers[i]);
  return s + "]";
}
"""


def cpp_header() -> str:
    """This contract as a C++17 header for ``runtime/cpp`` (generated at build time)."""

    def q(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    def cpp_bound(b: Bound) -> str:
        if isinstance(b, int):
            return f"{{nullptr, {b}}}"
        return f"{{{q(b[0])}, {b[1]}}}"

    def fields(cls: type[_Metadata]) -> str:
        kinds = {"int": "INT", "str": "STR", "float": "FLOAT"}
        rows = []
        for f in dataclasses.fields(cls):
            t = str(f.type)
            rows.append(f"  X({f.name}, {'INTS' if t.startswith('tuple') else kinds[t]})")
        return " \\\n".join(rows)

    names = {
        "TARGET_PREFILL": TARGET_PREFILL,
        "TARGET_DECODE": TARGET_DECODE,
        "TARGET_VERIFY": TARGET_VERIFY,
        "TARGET_COMMIT": TARGET_COMMIT,
        "TARGET_RESET": TARGET_RESET,
        "DRAFT_PREFILL": DRAFT_PREFILL,
        "DRAFT_EXTEND": DRAFT_EXTEND,
        "DRAFT_STEP": DRAFT_STEP,
        "DRAFT_RESET": DRAFT_RESET,
        "DRAFT_D2T": DRAFT_D2T,
        "ASSISTANT_STEP": ASSISTANT_STEP,
        "TOKENIZER_JSON": TOKENIZER_JSON,
        "CHAT_TEMPLATE": CHAT_TEMPLATE,
    }

    def camel(name: str) -> str:
        return "".join(part.capitalize() for part in name.split("_"))

    def strings(values: Sequence[str]) -> str:
        return "{" + ", ".join(q(v) for v in values) + "}"

    facts = {
        "StopEos": STOP_EOS,
        "StopBudget": STOP_BUDGET,
        "StopCallback": STOP_CALLBACK,
        "StopRequested": STOP_REQUESTED,
        "TargetWeightsBytes": TARGET_WEIGHTS_BYTES,
        "TargetKvBytes": TARGET_KV_BYTES,
        "DraftWeightsBytes": DRAFT_WEIGHTS_BYTES,
        "DraftKvBytes": DRAFT_KV_BYTES,
        "PositionOverwrite": POSITION_OVERWRITE,
        "ScratchCommit": SCRATCH_COMMIT,
        "DefaultKvStrategy": DEFAULT_KV_STRATEGY,
        "Eagle3": EAGLE3,
        "Gemma4AssistantMethod": GEMMA4_ASSISTANT_METHOD,
        "PromptLookupMethod": PROMPT_LOOKUP_METHOD,
        "CombinedMethod": COMBINED_METHOD,
        "LookupLabel": LOOKUP_LABEL,
        "ArtifactKind": ARTIFACT_KIND,
        "FormatVersionField": FORMAT_VERSION_FIELD,
        "TargetKind": TARGET_KIND,
        "DraftKind": DRAFT_KIND,
        "Gemma4Assistant": GEMMA4_ASSISTANT,
        "HiddenSpecCheck": HIDDEN_SPEC_CHECK,
        **{f"Serve{role}": name for role, name in SERVE_FIELDS.items()},
    }
    out = [
        "// Generated from etspec/contract.py by `python -m etspec.contract`; do not edit.",
        "#pragma once",
        "#include <algorithm>",
        "#include <cstdint>",
        "#include <string>",
        "#include <utility>",
        "#include <vector>",
        "namespace etspec::contract {",
        f"inline constexpr int kFormatVersion = {FORMAT_VERSION};",
        f"inline constexpr char kTrailerMagic[] = {q(TRAILER_MAGIC.decode())};",
        f"inline constexpr int kTrailerSize = {TRAILER_SIZE};",
        f"inline constexpr float kMaskMin = {MASK_MIN!r}f;",
        f"inline constexpr long kMaskGranule = {MASK_GRANULE};",
        # char arrays: BackendOptions::set_option takes its key as one.
        f"inline constexpr char kXnnpackBackend[] = {q(XNNPACK_BACKEND)};",
        f"inline constexpr char kXnnpackWeightCache[] = {q(XNNPACK_WEIGHT_CACHE)};",
        f"inline constexpr char kWeightCacheEnv[] = {q(WEIGHT_CACHE_ENV)};",
        f"inline constexpr char kOpenvino[] = {q(OPENVINO)};",
        f"inline constexpr char kOpenvinoPrecisionEnv[] = {q(OPENVINO_PRECISION_ENV)};",
        f"inline constexpr const char* kOpenvinoPrecisions[] = {strings(OPENVINO_PRECISIONS)};",
        f"inline constexpr char kOnednnIsaEnv[] = {q(ONEDNN_ISA_ENV)};",
        f"inline constexpr char kOpenvinoFp32Isa[] = {q(OPENVINO_FP32_ISA)};",
        *(f"inline constexpr const char* k{k} = {q(v)};" for k, v in names.items()),
        f"inline constexpr const char* kKvStrategies[] = {strings(KV_STRATEGIES)};",
        f"inline constexpr const char* kRowQuantizedDtypes[] = {strings(ROW_QUANTIZED_DTYPES)};",
        f"inline constexpr const char* kStages[] = {strings(STAGES)};",
        *(f"inline constexpr const char* kStage{camel(v)} = {q(v)};" for v in STAGES),
        *(f"inline constexpr const char* k{k} = {q(v)};" for k, v in facts.items()),
        f"inline constexpr long kDefaultChainLength = {DEFAULT_CHAIN_LENGTH};",
        f"inline constexpr long kDefaultMaxNgram = {DEFAULT_MAX_NGRAM};",
        f"inline constexpr long kDefaultDynamicTopk = {DEFAULT_DYNAMIC_TOPK};",
        f"inline constexpr long kAutoMaxChain = {AUTO_MAX_CHAIN};",
        f"inline constexpr const char* kNoDraftShape = {q(NO_DRAFT_SHAPE)};",
        f"inline constexpr double kSamplingEps = {SAMPLING_EPS!r};",
        f"inline constexpr float kExpUnderflow = {EXP_UNDERFLOW!r}f;",
        f"inline constexpr long kTopPSortSize = {TOP_P_SORT_SIZE};",
        f"inline constexpr int kTopPBisections = {TOP_P_BISECTIONS};",
        "inline constexpr double kTopPCutoffs[] = {"
        + ", ".join(repr(c) for c in TOP_P_CUTOFFS)
        + "};",
        f"inline constexpr double kAutoZ = {AUTO_Z!r};",
        f"inline constexpr char kCostDecode[] = {q(COST_DECODE)};",
        f"inline constexpr char kCostDraft[] = {q(COST_DRAFT)};",
        f"inline constexpr char kCostExtend[] = {q(COST_EXTEND)};",
        f"inline constexpr char kCostVerify[] = {q(COST_VERIFY)};",
        f"inline constexpr char kStepDecode[] = {q(STEP_DECODE)};",
        f"inline constexpr char kStepChain[] = {q(STEP_CHAIN)};",
        f"inline constexpr char kStepTree[] = {q(STEP_TREE)};",
        f"inline constexpr double kAutoDecay = {AUTO_DECAY!r};",
        f"inline constexpr double kAutoForget = {AUTO_FORGET!r};",
        f"inline constexpr double kAutoRequestDecay = {AUTO_REQUEST_DECAY!r};",
        f"inline constexpr double kAutoRequestPriorSteps = {AUTO_REQUEST_PRIOR_STEPS!r};",
        f"inline constexpr double kAutoProbeShare = {AUTO_PROBE_SHARE!r};",
        f"inline constexpr long kAutoProbeCreditSteps = {AUTO_PROBE_CREDIT_STEPS};",
        f"inline constexpr double kAutoSettledDrift = {AUTO_SETTLED_DRIFT!r};",
        f"inline constexpr long kAutoSettledSteps = {AUTO_SETTLED_STEPS};",
        f"inline constexpr double kAutoMeanPriorSteps = {AUTO_MEAN_PRIOR_STEPS!r};",
        f"inline constexpr size_t kAutoCostWindow = {AUTO_COST_WINDOW};",
        f"inline constexpr size_t kAutoCostMinCalls = {AUTO_COST_MIN_CALLS};",
        f"inline constexpr long kAutoStaleSteps = {AUTO_STALE_STEPS};",
        f"inline constexpr long kPromptFileMaxBytes = {PROMPT_FILE_MAX_BYTES};",
        f"inline constexpr long kDefaultMaxNewTokens = {DEFAULT_MAX_NEW_TOKENS};",
        f"inline constexpr long kStaticTreeMaxNodes = {STATIC_TREE_MAX_NODES};",
        f"inline constexpr size_t kDigestShown = {DIGEST_SHOWN};",
        f"inline constexpr uint64_t kCouplingGamma = {COUPLING_GAMMA:#x}ULL;",
        "inline constexpr uint64_t kCouplingMix[] = {"
        + ", ".join(f"{m:#x}ULL" for m in COUPLING_MIX)
        + "};",
        "inline constexpr double kDefaultRankAccept[] = {"
        + ", ".join(repr(a) for a in DEFAULT_RANK_ACCEPT)
        + "};",
        _CPP_FUNCTIONS.strip(),
        f"inline constexpr const char* kTreeModes[] = {strings(TREE_MODES)};",
        f"inline constexpr const char* kDefaultDraftMethod = {q(DEFAULT_DRAFT_METHOD)};",
        "// RUN_SETTINGS: flag, field, kind, default (text; empty: unset), minimum (if",
        "// has_minimum), choices, tree modes and draft methods owning it (comma-separated;",
        "// empty: all).",
        "struct RunSetting {",
        "  const char* flag;",
        "  const char* field;",
        "  const char* kind;",
        "  const char* default_value;",
        "  bool has_minimum;",
        "  long minimum;",
        "  const char* choices;",
        "  const char* tree_modes;",
        "  const char* draft_methods;",
        "};",
        "inline constexpr RunSetting kRunSettings[] = {",
        *(
            f"    {{{q(r.flag)}, {q(r.field)}, {q(r.kind)}, "
            f"{q('' if r.default is None else str(r.default))}, "
            f"{'true' if r.minimum is not None else 'false'}, {r.minimum or 0}, "
            f"{q(','.join(r.choices))}, {q(','.join(r.tree_modes))}, "
            f"{q(','.join(r.draft_methods))}}},"
            for r in RUN_SETTINGS
        ),
        "};",
        "// alias -> our option name (OPTION_ALIASES).",
        "inline constexpr std::pair<const char*, const char*> kOptionAliases[] = {",
        *(f"    {{{q(a)}, {q(o)}}}," for o, aliases in OPTION_ALIASES.items() for a, _ in aliases),
        "};",
        "// --serve request field -> its kind (SERVE_REQUEST); kind -> its wording.",
        "inline constexpr std::pair<const char*, const char*> kServeRequest[] = {",
        *(f"    {{{q(n)}, {q(k)}}}," for n, k in SERVE_REQUEST.items()),
        "};",
        "inline constexpr std::pair<const char*, const char*> kServeKinds[] = {",
        *(f"    {{{q(k)}, {q(w)}}}," for k, w in SERVE_KINDS.items()),
        "};",
        f"inline constexpr size_t kQuoteMax = {QUOTE_MAX};",
        "inline constexpr std::pair<const char*, const char*> kMessages[] = {",
        *(f"    {{{q(k)}, {q(v)}}}," for k, v in MESSAGES.items()),
        "};",
        "// Metadata ranges (TARGET_RANGES, DRAFT_RANGES): a bound is `value` plus, when",
        "// `field` is not null, that field's value.",
        "struct MetadataBound { const char* field; int64_t value; };",
        "struct MetadataRange { const char* name; MetadataBound least, most; };",
        *(
            f"inline constexpr MetadataRange k{kind}Ranges[] = {{"
            + ", ".join(
                f"{{{q(n)}, {cpp_bound(lo)}, {cpp_bound(hi)}}}" for n, (lo, hi) in r.items()
            )
            + "};"
            for kind, r in (("Target", TARGET_RANGES), ("Draft", DRAFT_RANGES))
        ),
        "inline constexpr std::pair<const char*, const char*> kMetadataWidths[] = {"
        + ", ".join(f"{{{q(a)}, {q(b)}}}" for a, b in METADATA_WIDTHS)
        + "};",
        "}  // namespace etspec::contract",
        "// X(name, INT | STR | FLOAT | INTS): one constant method per metadata field.",
        "#define ETSPEC_TARGET_FIELDS(X) \\\n" + fields(TargetMetadata),
        "#define ETSPEC_DRAFT_FIELDS(X) \\\n" + fields(DraftMetadata),
        "// X(field, COUNTED | DERIVED): the stats JSON in order; DERIVED ones are methods.",
        "#define ETSPEC_STATS_FIELDS(X) \\\n"
        + " \\\n".join(f"  X({n}, {kind.upper()})" for n, kind in STATS_FIELDS),
        "// X(what, draft field, target field): equal in a valid pair.",
        "#define ETSPEC_PAIR_CHECKS(X) \\\n"
        + " \\\n".join(f"  X({q(w)}, {d}, {t})" for w, d, t in PAIR_CHECKS),
    ]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 2:
        sys.exit("usage: python -m etspec.contract OUT.h")
    with open(sys.argv[1], "w", encoding="utf-8") as fh:
        fh.write(cpp_header())
