"""The :class:`~rlzoo.stateful.Stateful` view of a part of a run's envs: the part itself when it implements the
protocol (rlzoo's envs, wrappers and vec envs), else an adapter for the third-party parts whose state is known here:

- Gymnasium's classic control envs (:data:`PLAIN_STATE_MODULES`): their whole state is plain attributes;
- a Gymnasium wrapper: its plain attributes (a time limit's step count, an order check's flag);
- SB3's ``DummyVecEnv``: no state of its own (its envs hold it); SB3's ``VecFrameStack``: its stacked observations.

Any other env or vec env has no view (None): a resumed run resets it, saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack

from rlzoo.stateful import PlainAttributes, State, Stateful, implements

# Envs whose whole state is plain attributes and their generator.
PLAIN_STATE_MODULES = ("gymnasium.envs.classic_control",)


class NoState:
    """A part that holds nothing a resumed run needs (SB3's ``DummyVecEnv``: its envs hold it)."""

    def get_state(self) -> State:
        return {}

    def set_state(self, state: Mapping[str, Any]) -> None:
        pass


class FrameStackState:
    """SB3's ``VecFrameStack``: the stacked observations (None: a dict observation's stacks, not saved)."""

    def __init__(self, stack: VecFrameStack) -> None:
        self.stack = stack

    def get_state(self) -> State | None:
        stacked = getattr(self.stack.stacked_obs, "stacked_obs", None)
        return {"stacked": stacked.copy()} if isinstance(stacked, np.ndarray) else None

    def set_state(self, state: Mapping[str, Any]) -> None:
        held = self.stack.stacked_obs
        saved = state.get("stacked")
        if not isinstance(saved, np.ndarray) or saved.shape != held.stacked_obs.shape:
            raise ValueError("stacked: expected the stacked observations of the frame stack")
        held.stacked_obs = saved.astype(held.stacked_obs.dtype)


def stateful(part: Any) -> Stateful | None:
    """``part``'s state view: the part itself, an adapter, or None (its state cannot be saved)."""
    if implements(part):
        found: Stateful = part
        return found
    if isinstance(part, VecFrameStack):
        return FrameStackState(part)
    if isinstance(part, DummyVecEnv):
        return NoState()
    if isinstance(part, gym.Wrapper) or type(part).__module__.startswith(PLAIN_STATE_MODULES):
        return PlainAttributes(part)
    return None
