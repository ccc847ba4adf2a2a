"""Thin wrapper of ``python -m etspec.training.train_draft`` (the same arguments)."""

from etspec.training.train_draft import main

if __name__ == "__main__":
    main()
