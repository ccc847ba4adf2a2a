"""etspec: lossless EAGLE-style speculative decoding for on-device LLMs, built on ExecuTorch.

The package maps the repository's top-level folders into one namespace:
``etspec.models`` (exportable model definitions and loaders), ``etspec.export``
(checkpoint -> ``.pte``) and ``etspec.runtime`` (everything that runs an artifact).
``etspec.contract`` names every key of the artifact contract once.
"""

from etspec.errors import EtspecError

__version__ = "0.1.0"
__all__ = ["EtspecError", "__version__"]
