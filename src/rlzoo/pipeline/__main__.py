"""``python -m rlzoo.pipeline``: see :mod:`rlzoo.pipeline.command`."""

from rlzoo.pipeline.command import cli

if __name__ == "__main__":
    cli()
