"""Speculative decoding: draft runners, draft trees, verifier, KV manager, token generator."""
