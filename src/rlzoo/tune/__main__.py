"""``python -m rlzoo.tune``: see :mod:`rlzoo.tune.command`."""

from rlzoo.tune.command import main

if __name__ == "__main__":
    main()
