"""``python -m rlzoo.tune``: see :mod:`rlzoo.tune.command`."""

from rlzoo.cli import run_checked
from rlzoo.tune.command import main

if __name__ == "__main__":
    run_checked(main, "rlzoo.tune", "tune")
