"""Thin wrapper of ``python -m etspec.tools.results_table`` (the same arguments)."""

from etspec.tools.results_table import main

if __name__ == "__main__":
    main()
