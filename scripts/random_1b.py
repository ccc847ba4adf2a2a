"""Thin wrapper of ``python -m etspec.tools.random_1b`` (the same arguments)."""

from etspec.tools.random_1b import main

if __name__ == "__main__":
    main()
