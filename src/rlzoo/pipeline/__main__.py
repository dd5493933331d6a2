"""``python -m rlzoo.pipeline``: see :mod:`rlzoo.pipeline.command`."""

from rlzoo.pipeline.command import main

if __name__ == "__main__":
    main()
