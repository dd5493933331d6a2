"""Games against a uniformly random legal player in a plain PettingZoo AEC loop, outside rlzoo's episode code: how
the tic-tac-toe figures of docs/multiagent.md are measured (``benchmarks/tictactoe_table.py``, and the slow check in
``tests/test_multiagent_learning.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rlzoo.multiagent.episodes import DRAW, LOSS, WIN
from rlzoo.multiagent.state import MultiagentState


def play_against_random(env: Any, act: Callable[[Any], Any], seat: str, games: int, seed: int) -> dict[str, int]:
    """``games`` games (game ``i`` reset with ``seed + i``): ``act`` plays ``seat`` (handed the
    :class:`~rlzoo.multiagent.state.MultiagentState` of its turns), a uniformly random legal move (``action_mask``)
    every other seat; outcomes (``win``, ``draw``, ``loss`` of ``seat``) counted by comparing the final returns."""
    rng = np.random.default_rng(seed)
    outcomes = {WIN: 0, DRAW: 0, LOSS: 0}
    for game in range(games):
        env.reset(seed=seed + game)
        returns = dict.fromkeys(env.agents, 0.0)
        for key in env.agent_iter():
            observation, reward, terminated, truncated, _ = env.last()
            returns[key] += reward
            if terminated or truncated:
                env.step(None)
            elif key == seat:
                env.step(act(MultiagentState.from_aec(env, key)))
            else:
                env.step(int(rng.choice(np.flatnonzero(observation["action_mask"]))))
        other = max(r for key, r in returns.items() if key != seat)
        outcomes[WIN if returns[seat] > other else LOSS if returns[seat] < other else DRAW] += 1
    return outcomes
