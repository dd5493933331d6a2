"""The memory a config asks for, bounded before anything is built: a replay buffer's rows and a network's weights
estimated from the algorithm's keywords alone (a lower bound: one float32 per observation value and at least one
value per observation), refused in one line above the memory budget (:func:`rlzoo.confined.memory_budget`: the run
key ``memory_budget_gb`` or ``$RLZOO_MEMORY_BUDGET_GB`` on the command line, never from a config)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping
from typing import Any

from rlzoo.confined import RAISE_BUDGET, memory_budget
from rlzoo.errors import ConfigError

FLOAT = 4  # bytes of a float32
BUFFER_ROW = 2 * FLOAT  # a transition keeps at least an observation and the next one, one value each
NETWORK_COPIES = 4  # weights, a target copy or a second critic, and Adam's two moments


def _layers(net_arch: Any) -> Iterator[list[int]]:
    """Every list of layer widths in ``net_arch`` (a list, or a mapping of lists: ``pi``, ``vf``, ``qf``)."""
    if isinstance(net_arch, Mapping):
        for value in net_arch.values():
            yield from _layers(value)
    elif isinstance(net_arch, list | tuple):
        widths = [int(w) for w in net_arch if isinstance(w, int | float) and not isinstance(w, bool)]
        if widths:
            yield widths
        for item in net_arch:
            if isinstance(item, Mapping):
                yield from _layers(item)


def network_bytes(policy_kwargs: Mapping[str, Any]) -> int:
    """A lower bound on the bytes of a policy's weights (and their copies) from its ``net_arch``."""
    total = 0
    for widths in _layers(policy_kwargs.get("net_arch")):
        total += sum(a * b + b for a, b in itertools.pairwise(widths))
    return total * FLOAT * NETWORK_COPIES


def buffer_bytes(kwargs: Mapping[str, Any]) -> int:
    """A lower bound on the bytes of the replay buffer ``buffer_size`` asks for."""
    size = kwargs.get("buffer_size")
    if isinstance(size, bool) or not isinstance(size, int | float) or not math.isfinite(size):
        return 0
    return int(size) * BUFFER_ROW


def check_memory(algo: str, kwargs: Mapping[str, Any]) -> None:
    """Refuse, in one line, an algorithm's keywords whose replay buffer or networks exceed the memory budget."""
    budget = memory_budget()
    policy_kwargs = kwargs.get("policy_kwargs") or {}
    for key, needed in (
        (f"algo.buffer_size={kwargs.get('buffer_size')}", buffer_bytes(kwargs)),
        (f"algo.policy_kwargs.net_arch={policy_kwargs.get('net_arch')}", network_bytes(policy_kwargs)),
    ):
        if needed > budget:
            raise ConfigError(
                f"{algo}: {key} needs at least {needed / 2**30:.3g} GiB, over the memory budget of "
                f"{budget / 2**30:.3g} GiB; lower it, or {RAISE_BUDGET}"
            )
