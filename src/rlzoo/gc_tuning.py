"""Python's cyclic garbage collector in ``python -m rlzoo.train``: off while the command starts up, on for training
with the start-up's objects frozen.

Starting a run (importing torch, SB3, Hydra and rlzoo, composing the config, building envs and the model) makes about
350,000 long-lived objects and little cyclic garbage, yet the collector ran six full collections over them (0.41 s of
a 2.3 s start-up, measured with ``gc.callbacks``), and the full collection at interpreter exit went over them again.
The command turns the collector off before its imports (:func:`pause_for_start_up`); :func:`collect_from_here` turns
it on for training with every object made so far frozen (``gc.freeze``: left out of every later collection, the exit's
included). A sweep turns the collector on before its first job (``SweepSummary.on_multirun_start``: its launching
process lives as long as the sweep), so its jobs freeze nothing; should another run follow a frozen one in the same
process, :func:`release_previous_run` unfreezes the earlier objects first. Code that calls :func:`rlzoo.train.train`
itself (tests, ``rlzoo.tune``) keeps the collector as it was: nothing is frozen there.

Frozen objects in reference cycles outlive the command. For most that costs nothing, but ale_py's nanobind bindings
report every object still alive at exit as a leak (some 27 ``nanobind: leaked ...`` lines after a successful Atari
run), so when ale_py was imported the command unfreezes and collects once at exit (:func:`free_at_exit`).
"""

from __future__ import annotations

import atexit
import gc
import sys

_paused_by_command = False


def pause_for_start_up() -> None:
    """The command starts: the cyclic collector off (reference counting still frees every object outside a cycle)."""
    global _paused_by_command
    _paused_by_command = True
    gc.disable()
    atexit.register(free_at_exit)


def free_at_exit() -> None:
    """The command ends: if ale_py was imported, free the frozen objects in cycles (its emulators among them) while
    the interpreter still runs, so that nanobind finds no live object to report as leaked."""
    if "ale_py" in sys.modules:
        gc.unfreeze()
        gc.collect()


def collect_from_here() -> None:
    """Training starts: if the command paused the collector, freeze every object made so far and turn it on."""
    if _paused_by_command and not gc.isenabled():
        gc.freeze()
        gc.enable()


def release_previous_run() -> None:
    """A run starts: the objects an earlier run of this command froze become collectable again."""
    if _paused_by_command and gc.get_freeze_count():
        gc.unfreeze()


def resume() -> None:
    """Turn the collector on (a sweep's launching process)."""
    gc.enable()
