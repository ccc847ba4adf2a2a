"""Thin wrapper of ``python -m etspec.training.data`` (the same arguments)."""

from etspec.training.data import cli

if __name__ == "__main__":
    cli()
