"""The ``etspec`` command line, one module per family of commands, each over library
functions: export/convert/inspect (``export.py``), generate/validate (``generate.py``),
quality (``quality.py``), bench/plot (``bench.py``), chat (``chat.py``), serve
(``serve.py``), fetch (``fetch.py``), draft train (``draft.py``).

User-caused errors (``EtspecError``) print one line and exit 1, never a traceback.
"""

from etspec.cli import bench as _bench
from etspec.cli import chat as _chat
from etspec.cli import draft as _draft
from etspec.cli import export as _export
from etspec.cli import fetch as _fetch
from etspec.cli import generate as _generate
from etspec.cli import quality as _quality
from etspec.cli import serve as _serve
from etspec.cli.app import main

bench = _bench.bench
__all__ = ["bench", "main"]
del _chat, _draft, _export, _fetch, _generate, _quality, _serve
