"""Systems etspec is compared with, each behind ``TextLLMRunner``'s ``generate`` so the bench
harness runs them like its own: transformers on the same weights, llama.cpp on a GGUF, and
the C++ runner as a subprocess."""
