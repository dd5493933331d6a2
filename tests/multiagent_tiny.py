"""A tiny PettingZoo env whose agents leave at different times, for the multi-agent tests (``env.id=multiagent_tiny``).

Two agents see a one-hot target (Box(0, 1, (2,))) and score 1 for playing it (Discrete(2)); ``short`` leaves
(terminated) after 2 of its moves, ``long`` after 6, so for 4 moves only ``long`` plays.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv
from pettingzoo.utils.conversions import parallel_to_aec

LIVES = {"short": 2, "long": 6}


class LeavingEnv(ParallelEnv):
    metadata = {"name": "leaving_v0", "render_modes": []}  # noqa: RUF012 (PettingZoo's convention)

    def __init__(self, render_mode: str | None = None) -> None:
        self.possible_agents = list(LIVES)
        self.render_mode = render_mode
        self._rng = np.random.default_rng()
        self._t = 0
        self._targets: dict[str, int] = {}

    def observation_space(self, agent: str) -> spaces.Space:
        return spaces.Box(0.0, 1.0, (2,), np.float32)

    def action_space(self, agent: str) -> spaces.Space:
        return spaces.Discrete(2)

    def _observe(self) -> dict[str, np.ndarray]:
        self._targets = {a: int(self._rng.integers(2)) for a in self.agents}
        return {a: np.eye(2, dtype=np.float32)[t] for a, t in self._targets.items()}

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[dict, dict]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents, self._t = list(self.possible_agents), 0
        return self._observe(), {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        self._t += 1
        rewards = {a: float(int(actions[a]) == self._targets[a]) for a in self.agents}
        terminations = {a: self._t >= LIVES[a] for a in self.agents}
        truncations = {a: False for a in self.agents}
        observations = self._observe()
        infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        self.agents = [a for a in self.agents if not terminations[a]]
        return observations, rewards, terminations, truncations, infos


def parallel_env(**kwargs: Any) -> LeavingEnv:
    return LeavingEnv(**kwargs)


def env(**kwargs: Any) -> Any:
    return parallel_to_aec(parallel_env(**kwargs))
