"""Test episodes: the agent acts with learning off, on envs of its own."""

from __future__ import annotations

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecEnv


def run_test_episodes(
    model: BaseAlgorithm, venv: VecEnv, episodes: int, deterministic: bool = True
) -> tuple[list[float], list[int]]:
    """Run ``episodes`` complete episodes (spread evenly over the envs of ``venv``).

    :return: the undiscounted return and the length of every episode.
    """
    returns, lengths = evaluate_policy(
        model,
        venv,
        n_eval_episodes=episodes,
        deterministic=deterministic,
        return_episode_rewards=True,
        warn=False,
    )
    return [float(r) for r in returns], [int(n) for n in lengths]  # type: ignore[union-attr]


def summarize(returns: list[float]) -> dict[str, float]:
    """Mean, std, min and max of the test returns under ``test/``."""
    values = np.asarray(returns, dtype=float)
    return {
        "test/mean_return": float(values.mean()),
        "test/std_return": float(values.std()),
        "test/min_return": float(values.min()),
        "test/max_return": float(values.max()),
        "test/episodes": float(values.size),
    }
