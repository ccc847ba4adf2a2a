"""``python scripts/bench.py ...`` is ``etspec bench ...`` (same options; see ``--help``)."""

from etspec.cli import bench

if __name__ == "__main__":
    bench(prog_name="scripts/bench.py")
