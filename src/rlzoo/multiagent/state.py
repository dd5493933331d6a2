"""The multi-agent side of the agent API: :class:`MultiagentState` and the :class:`Multiagent` protocol.

As in the autonomous-learning-library, a multiagent is handed the state of the agent whose turn it is (its key in
the state) and returns that agent's action; which policy answers, and whether it learns, is its own business. For
an agent whose state is ``done`` (it left the game) it returns None, the action PettingZoo's AEC API expects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from rlzoo.agents.state import State
from rlzoo.multiagent.pettingzoo_envs import split_mask


@dataclass(frozen=True)
class MultiagentState(State):
    """One agent's :class:`State` in a multi-agent env: its key, and the legal actions where the env gives them.

    :param agent: the agent's key (``"player_1"``, ``"agent_0"`` ...).
    :param action_mask: one bool per discrete action, True where it is legal (None: every action is).
    """

    agent: str = ""
    action_mask: np.ndarray | None = None

    @classmethod
    def from_aec(cls, env: Any, agent: str) -> MultiagentState:
        """The state of ``agent`` in an AEC env now (``env.last()``): call it for the key ``agent_iter`` yields.

        A mask in the observation (``{"observation", "action_mask"}``, PettingZoo's classic games) or in the info is
        moved into ``action_mask``; the observation is then the ``observation`` part.
        """
        observation, reward, terminated, truncated, info = env.last()
        observation, mask = split_mask(observation, info)
        return cls(observation, float(reward), bool(terminated), bool(truncated), dict(info), str(agent), mask)

    @classmethod
    def from_parallel(
        cls, result: tuple[Any, ...] | tuple[dict[str, Any], dict[str, dict[str, Any]]]
    ) -> dict[str, MultiagentState]:
        """Every agent's state from a parallel env's ``reset()`` ``(observations, infos)`` or ``step()``
        ``(observations, rewards, terminations, truncations, infos)``, by key."""
        if len(result) == 2:
            observations, infos = result
            rewards: dict[str, Any] = {}
            terminations: dict[str, Any] = {}
            truncations: dict[str, Any] = {}
        else:
            observations, rewards, terminations, truncations, infos = result
        states = {}
        for key, raw in observations.items():
            info = dict(infos.get(key, {}))
            observation, mask = split_mask(raw, info)
            states[key] = cls(
                observation,
                float(rewards.get(key, 0.0)),
                bool(terminations.get(key, False)),
                bool(truncations.get(key, False)),
                info,
                str(key),
                mask,
            )
        return states

    def legal(self, action: Any) -> bool:
        """Whether ``action`` (a discrete action) is allowed by the mask."""
        return self.action_mask is None or bool(self.action_mask[int(action)])


@runtime_checkable
class Multiagent(Protocol):
    """Takes the state of the agent whose turn it is, returns that agent's action (None for a ``done`` state)."""

    def act(self, state: MultiagentState) -> Any:
        """The action of ``state.agent`` for ``state``."""
        ...
