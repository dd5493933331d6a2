"""The one multi-agent episode runner: an AEC loop handing every agent's turn to a multiagent, for training, test
episodes and replay alike. A parallel env runs through PettingZoo's ``parallel_to_aec`` (see the env spec)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlzoo.multiagent.state import Multiagent, MultiagentState


@dataclass(frozen=True)
class MultiagentEpisode:
    """One episode: each agent's undiscounted return and the number of actions taken (all agents)."""

    returns: dict[str, float]
    length: int

    @property
    def total(self) -> float:
        """The return summed over agents."""
        return sum(self.returns.values())

    def return_of(self, seats: tuple[str, ...]) -> float:
        """The return summed over ``seats`` (the learners' seats: a zero-sum game's sum over all agents is 0)."""
        return sum(self.returns.get(seat, 0.0) for seat in seats)

    def won(self, agent: str) -> bool:
        """``agent``'s return is above every other agent's (a win in a two-player zero-sum game)."""
        return all(self.returns[agent] > r for key, r in self.returns.items() if key != agent)

    def lost(self, agent: str) -> bool:
        """Some other agent's return is above ``agent``'s."""
        return any(self.returns.get(agent, 0.0) < r for key, r in self.returns.items() if key != agent)

    def outcome(self, agent: str) -> str:
        """``win``, ``loss`` or ``draw`` for ``agent`` (a game with a winner: two players)."""
        return WIN if agent in self.returns and self.won(agent) else LOSS if self.lost(agent) else DRAW


WIN, DRAW, LOSS = "win", "draw", "loss"
OUTCOMES = (WIN, DRAW, LOSS)


@dataclass
class Budget:
    """When a loop stops: after ``steps`` actions or ``episodes`` episodes (None: no such limit), or at the end of
    the episode in which ``stop()`` turns true (a time budget)."""

    steps: int | None = None
    episodes: int | None = None
    stop: Callable[[], bool] | None = None

    def spent(self, steps: int, episodes: int) -> bool:
        return (
            (self.steps is not None and steps >= self.steps)
            or (self.episodes is not None and episodes >= self.episodes)
            or (self.stop is not None and self.stop())
        )


def play(
    env: Any,
    agent: Multiagent,
    budget: Budget,
    seed: int,
    on_episode: Callable[[MultiagentEpisode, int], None] | None = None,
    on_step: Callable[[int], None] | None = None,
) -> tuple[list[MultiagentEpisode], int]:
    """Play episodes until ``budget`` is spent; an episode cut by a step budget is not reported.

    Episode ``i`` starts with ``env.reset(seed=seed + i)``. Every state ``agent_iter`` yields is handed to ``agent``
    (a done one too, and then stepped with None, as PettingZoo's AEC API wants).

    :param on_episode: called with each finished episode and the steps taken so far.
    :param on_step: called with the step count after each action of a live agent.
    :return: the finished episodes and the number of actions taken.
    """
    episodes: list[MultiagentEpisode] = []
    steps = 0
    while not budget.spent(steps, len(episodes)):
        env.reset(seed=seed + len(episodes))
        returns = {str(key): 0.0 for key in env.agents}
        length = 0
        for key in env.agent_iter():
            state = MultiagentState.from_aec(env, key)
            returns[state.agent] = returns.get(state.agent, 0.0) + state.reward
            action = agent.act(state)
            env.step(None if state.done else action)
            if not state.done:
                length, steps = length + 1, steps + 1
                if on_step is not None:
                    on_step(steps)
                if budget.steps is not None and steps >= budget.steps:
                    return episodes, steps
        episode = MultiagentEpisode(returns, length)
        episodes.append(episode)
        if on_episode is not None:
            on_episode(episode, steps)
    return episodes, steps
