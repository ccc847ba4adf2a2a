"""Thin wrapper of ``python -m etspec.tools.humaneval_syntax`` (the same arguments)."""

from etspec.tools.humaneval_syntax import main

if __name__ == "__main__":
    main()
