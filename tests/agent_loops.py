"""A loaded agent in a plain Gymnasium loop, episode after episode, against ``rlzoo.enjoy``'s episodes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rlzoo import State, load_agent
from rlzoo.playback.loading import load_run, run_episodes


def plain_loop_actions(run: Path, episodes: int = 2, seed: int = 0) -> list[np.ndarray]:
    """Each episode's actions of ``load_agent(run)`` on ``agent.make_env()`` in a plain Gymnasium loop that never
    hands the agent an episode's last state nor calls ``agent.reset()``: ``State.from_reset`` starts each episode."""
    agent = load_agent(run)
    env = agent.make_env()
    played = []
    for episode in range(episodes):
        state, actions = State.from_reset(env.reset(seed=seed + episode)), []
        while True:
            action = agent.act(state)
            actions.append(np.asarray(action))
            state = State.from_step(env.step(action))
            if state.done:
                break
        played.append(np.stack(actions))
    env.close()
    return played


def assert_plays_as_enjoy(run: Path, episodes: int = 2) -> None:
    """The plain loop's actions equal, step by step, those of ``rlzoo.enjoy``'s episodes (seeds 0, 1, ...)."""
    replayed = run_episodes(load_run(run), episodes)
    played = plain_loop_actions(run, episodes)
    assert [len(a) for a in played] == [e.length for e in replayed]
    for mine, theirs in zip(played, replayed, strict=True):
        np.testing.assert_allclose(mine.reshape(theirs.actions.shape), theirs.actions, rtol=1e-5, atol=1e-6)
