"""Exportable model definitions and checkpoint loaders.

Models here take every piece of step state explicitly (token ids, RoPE positions, cache
slots, additive attention mask) and keep their KV caches as buffers, so that each ExecuTorch
method is a thin wrapper around the same module and all methods share one cache.
"""
