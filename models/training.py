"""Full-sequence forwards for training, over the very modules (and weights) that export.

The exported methods run one call's rows against a static cache; training wants a batch of
whole sequences at once. These functions reuse the layers' parameters with batched
attention, so a trained checkpoint is exactly the model that exports.

``draft_ttt_forward`` unrolls EAGLE-3's training-time test with the attention pattern the
runtime's drafting uses: at unroll step k, the row for draft position j (fed the target's
state at j and the token at j + 1 at step 0) is fed the token at j + k + 1 and its own
output state of step k - 1, sits at RoPE position j + k, and sees the step-0 keys of
positions 0..j plus its own keys of steps 1..k. That is exactly a depth-k chain node in
``Eagle3DraftRunner`` after committing j + 1 rows (``tests/models/test_training.py`` checks it).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from etspec.contract import MASK_MIN
from etspec.models.eagle3 import Eagle3Draft
from etspec.models.gemma import GemmaTarget
from etspec.models.layers import Attention, causal_mask
from etspec.models.llama import LlamaTarget
from etspec.models.rope import apply_rope
from etspec.models.target import TargetModel


def _qkv(
    attn: Attention, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """[B, T, in] -> q [B, Hq, T, D], k and v [B, Hq, T, D] (KV heads repeated as HF does)."""
    b, t, _ = x.shape
    d, hq, hkv = attn.head_dim, attn.num_heads, attn.num_kv_heads
    q = apply_rope(attn.q_proj(x).view(b, t, hq, d).transpose(1, 2), cos, sin)
    k = apply_rope(attn.k_proj(x).view(b, t, hkv, d).transpose(1, 2), cos, sin)
    v = attn.v_proj(x).view(b, t, hkv, d).transpose(1, 2)
    if hq != hkv:
        k = k.repeat_interleave(hq // hkv, dim=1)
        v = v.repeat_interleave(hq // hkv, dim=1)
    return q, k, v


def _merge(attn: Attention, out: torch.Tensor) -> torch.Tensor:
    b, _, t, _ = out.shape
    return attn.o_proj(out.transpose(1, 2).reshape(b, t, -1))


def target_forward(model: TargetModel, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal forward of ``tokens`` [B, T] from position 0.

    Returns logits [B, T, V] and the tapped hidden states [B, T, taps * H] in the order of
    ``model.hidden_spec`` (what ``target_prefill`` returns row by row). Llama runs batched;
    other families (the target is frozen while a draft trains) run each sequence through
    their exported ``body`` over the model's own cache, in fp32.
    """
    if isinstance(model, GemmaTarget) and not model.cfg.per_layer_input_size:
        return _gemma_forward(model, tokens)
    if not isinstance(model, LlamaTarget):
        return _forward_through_body(model, tokens)
    t = tokens.shape[1]
    cos, sin = model.rope_cos[:t], model.rope_sin[:t]
    x = model.embed_tokens(tokens)
    taps: dict[int, torch.Tensor] = {}
    wanted = set(model.hidden_spec.layers)
    for i, layer in enumerate(model.layers):
        if i in wanted:
            taps[i] = x
        q, k, v = _qkv(layer.self_attn, layer.input_layernorm(x), cos, sin)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + _merge(layer.self_attn, attn)
        x = x + layer.mlp(layer.post_attention_layernorm(x))
    taps[len(model.layers)] = x
    hidden = torch.cat([taps[i] for i in model.hidden_spec.layers], dim=-1)
    return model.lm_head(model.norm(x)), hidden


def _gemma_forward(model: GemmaTarget, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Batched Gemma 3 forward (every layer owns its KV; no per-layer inputs): the exported
    layers' parameters with causal attention, sliding layers narrowed to their window."""
    x, taps = _gemma_body(model, tokens)
    normed = model.norm(x)
    return model.logits(normed), model.hidden_output(taps, normed)


KVCache = list[tuple[torch.Tensor, torch.Tensor]]


def _gemma_body(
    model: GemmaTarget,
    tokens: torch.Tensor,
    cache: KVCache | None = None,
    pad: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[int, torch.Tensor]]:
    """The layers over ``tokens`` [B, T], which follow the slots ``cache`` holds (none: they
    start at 0); appends their keys and values to ``cache`` when one is given. ``pad`` [B]
    left-pads rows: row b's first ``pad[b]`` slots hold no token (no query attends them, and
    its positions start at 0 after them). Returns the last layer's output [B, T, H] (before
    the final norm) and the tapped inputs."""
    t = tokens.shape[1]
    start = cache[0][0].shape[2] if cache else 0
    positions = torch.arange(start, start + t, device=tokens.device)
    keys = torch.arange(start + t, device=tokens.device)
    causal = keys[None, :] <= positions[:, None]
    window = model.cfg.sliding_window
    band = causal & (keys[None, :] > positions[:, None] - window) if window else causal
    rows = positions  # the rotary positions: per row where rows are padded
    if pad is not None:
        real = keys[None, None, :] >= pad[:, None, None]  # [B, 1, S]
        # A padding slot's query sees itself alone: a row of no keys would be NaN.
        itself = keys[None, :] == positions[:, None]
        causal = ((causal & real) | itself)[:, None]
        band = ((band & real) | itself)[:, None]
        rows = (positions[None, :] - pad[:, None]).clamp(min=0)
    x = model.embed_tokens(tokens) * model.embed_scale
    taps: dict[int, torch.Tensor] = {}
    wanted = set(model.hidden_spec.layers)
    for i, layer in enumerate(model.layers):
        if i in wanted:
            taps[i] = x
        attn = layer.self_attn
        assert attn.k_proj is not None and attn.v_proj is not None
        b, d, hq, hkv = x.shape[0], attn.head_dim, attn.num_heads, attn.num_kv_heads
        cos, sin = model.rope.at(layer.sliding, d, rows)
        if pad is not None:
            cos, sin = cos[:, None], sin[:, None]  # [B, 1, T, D] over the heads
        h = layer.input_layernorm(x)
        q = apply_rope(attn.q_norm(attn.q_proj(h).view(b, t, hq, d)).transpose(1, 2), cos, sin)
        k = apply_rope(attn.k_norm(attn.k_proj(h).view(b, t, hkv, d)).transpose(1, 2), cos, sin)
        v = attn.v_proj(h).view(b, t, hkv, d).transpose(1, 2)
        if cache is not None:
            if i < len(cache):
                k, v = torch.cat([cache[i][0], k], 2), torch.cat([cache[i][1], v], 2)
                cache[i] = (k, v)
            else:
                cache.append((k, v))
        if hq != hkv:
            k = k.repeat_interleave(hq // hkv, dim=1)
            v = v.repeat_interleave(hq // hkv, dim=1)
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=band if layer.sliding else causal, scale=attn.scale
        )
        x = x + layer.post_attention_layernorm(attn.o_proj(out.transpose(1, 2).reshape(b, t, -1)))
        x = x + layer.post_feedforward_layernorm(layer.mlp(layer.pre_feedforward_layernorm(x)))
    taps[len(model.layers)] = x
    return x, taps


@torch.no_grad()
def continue_batch(
    model: TargetModel,
    prompts: torch.Tensor,
    new_tokens: int,
    pick: Callable[[torch.Tensor], torch.Tensor],
    pad: torch.Tensor | None = None,
) -> torch.Tensor:
    """``new_tokens`` tokens after each of ``prompts`` [B, L] (left-padded by ``pad`` [B]
    slots where rows differ in length), each chosen by ``pick`` from the next-token logits
    [B, V] (fp32): the frozen target decoding a batch over a growing KV cache, for
    self-distillation data where a GPU makes batches cheap. Gemma 3 targets only (what
    ``_gemma_forward`` runs). Returns [B, new_tokens]; the caller cuts each row at its first
    end-of-sequence token."""
    if not isinstance(model, GemmaTarget) or model.cfg.per_layer_input_size:
        raise ValueError(f"batched continuation runs Gemma 3 targets, not {type(model).__name__}")
    cache: KVCache = []
    x, _ = _gemma_body(model, prompts, cache, pad)
    out = []
    for step in range(new_tokens):
        nxt = pick(model.logits(model.norm(x[:, -1:]))[:, 0].float())
        out.append(nxt)
        if step + 1 < new_tokens:
            x, _ = _gemma_body(model, nxt[:, None], cache, pad)
    return torch.stack(out, 1)


@torch.no_grad()
def _forward_through_body(
    model: TargetModel, tokens: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    t = tokens.shape[1]
    if t > model.cache_size:
        raise ValueError(f"{t} tokens exceed the model's {model.cache_size} cache slots")
    positions = torch.arange(t, device=tokens.device)
    mask = causal_mask(positions, torch.arange(model.cache_size, device=tokens.device), MASK_MIN)
    logits, hidden = [], []
    # The caches are fp32 buffers: writes under autocast would mix dtypes.
    with torch.autocast(tokens.device.type, enabled=False):
        for row in tokens:
            h, taps = model.body(row, positions, positions, mask)
            logits.append(model.logits(h))
            hidden.append(taps)
    return torch.stack(logits), torch.stack(hidden)


def draft_ttt_forward(
    model: Eagle3Draft, tokens: torch.Tensor, target_hidden: torch.Tensor, steps: int
) -> list[torch.Tensor]:
    """Unrolled EAGLE-3 training-time test; returns draft logits [B, T, Vd] per step.

    ``tokens`` [B, T] and ``target_hidden`` [B, T, taps * Ht] are aligned (the target's
    state at position j was computed with tokens 0..j). Row j of step k predicts the token
    at position j + k + 2; rows whose inputs run past the sequence are fed token 0 and must
    be masked out of the loss by the caller.
    """
    t = tokens.shape[1]
    layer = model.midlayer
    attn = layer.self_attn
    scale = attn.head_dim**-0.5
    causal = torch.ones(t, t, dtype=torch.bool, device=tokens.device).tril()
    state = model.fuse(target_hidden)
    keys: list[tuple[torch.Tensor, torch.Tensor]] = []
    outputs = []
    for k in range(steps):
        ids = F.pad(tokens[:, k + 1 :], (0, k + 1))
        pos = torch.arange(k, t + k, device=tokens.device).clamp(max=model.rope_cos.shape[0] - 1)
        x = torch.cat(
            (layer.input_layernorm(model.embed_tokens(ids)), layer.hidden_norm(state)), -1
        )
        q, key, value = _qkv(attn, x, model.rope_cos[pos], model.rope_sin[pos])
        keys.append((key, value))
        if k == 0:
            out = F.scaled_dot_product_attention(q, key, value, attn_mask=causal)
        else:
            k0, v0 = keys[0]
            scores = torch.matmul(q, k0.transpose(-1, -2)) * scale
            scores = scores.masked_fill(~causal, float("-inf"))
            # Own chain: the diagonal of each later step's keys (one entry per step).
            diag = [(q * ks).sum(-1, keepdim=True) * scale for ks, _ in keys[1:]]
            probs = torch.softmax(torch.cat([scores, *diag], dim=-1), dim=-1)
            out = torch.matmul(probs[..., :t], v0)
            for s, (_, vs) in enumerate(keys[1:]):
                out = out + probs[..., t + s : t + s + 1] * vs
        h = state + _merge(attn, out)
        state = h + layer.mlp(layer.post_attention_layernorm(h))
        outputs.append(model.logits(state))
    return outputs
