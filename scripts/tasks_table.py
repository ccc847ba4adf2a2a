"""Thin wrapper of ``python -m etspec.tools.tasks_table``."""

from etspec.tools.tasks_table import main

if __name__ == "__main__":
    main()
