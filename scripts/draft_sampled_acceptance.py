"""Thin wrapper of ``python -m etspec.training.acceptance`` (the same arguments)."""

from etspec.training.acceptance import main

if __name__ == "__main__":
    main()
