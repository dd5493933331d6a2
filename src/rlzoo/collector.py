"""Python's cyclic garbage collector around a run: off while a command starts up, on (start-up objects frozen) while
it trains.

Starting a run (importing torch, SB3, Hydra and rlzoo, composing the config, building envs and the model) makes about
350,000 long-lived objects and little cyclic garbage, yet the collector ran six full collections over them (0.41 s of
a 2.3 s start-up, measured with ``gc.callbacks``). ``python -m rlzoo.train`` turns it off before its imports
(:func:`pause`); :func:`collecting` turns it on again for training, with the objects made so far frozen (left out of
every later collection, as ``gc.freeze`` documents), and unfreezes them when training ends, so that the objects of
a finished run (in a sweep, the next job runs in the same process) are freed as usual.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


def pause() -> None:
    """Turn the cyclic collector off (reference counting still frees every object outside a cycle)."""
    gc.disable()


def resume() -> None:
    """Turn the cyclic collector on (again)."""
    gc.enable()


@contextmanager
def collecting() -> Iterator[None]:
    """The collector on, without the objects that exist now; they are collectable again afterwards."""
    gc.freeze()
    resume()
    try:
        yield
    finally:
        gc.unfreeze()
