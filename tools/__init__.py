"""Tooling around the runtime: benchmarks, plots, validation, quality scores and the outside
peers they compare with (transformers, llama.cpp, the C++ runner). A deployment runs
``etspec.runtime`` alone; nothing there imports this package."""
