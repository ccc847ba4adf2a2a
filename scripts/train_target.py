"""Thin wrapper of ``python -m etspec.training.train_target`` (the same arguments)."""

from etspec.training.train_target import main

if __name__ == "__main__":
    main()
