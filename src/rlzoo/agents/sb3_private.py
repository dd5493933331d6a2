"""Every private member of an SB3 algorithm that rlzoo's training agents use, in one place.

Training agents (:mod:`rlzoo.agents.training_agent`, the multi-agent learners) run the body of SB3's
``collect_rollouts`` one step at a time, so they call what SB3's ``learn()`` calls: members whose names start with
``_`` and that an SB3 release may change without notice. Each is reached through a function here, and
:data:`CONTRACT` lists them with the parameters rlzoo passes; :func:`contract_problems` (run by
``tests/test_sb3_private.py`` on every SB3 version ``pyproject.toml`` allows) names any that an SB3 release moved.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm

# Methods: (class, name, the parameters rlzoo passes, in order). Attributes: set on a model by _setup_learn.
CONTRACT_METHODS: tuple[tuple[type, str, tuple[str, ...]], ...] = (
    (BaseAlgorithm, "_setup_learn", ("total_timesteps", "callback", "reset_num_timesteps")),
    (BaseAlgorithm, "_update_info_buffer", ("infos", "dones")),
    (BaseAlgorithm, "_update_current_progress_remaining", ("num_timesteps", "total_timesteps")),
    (OffPolicyAlgorithm, "_on_step", ()),
    (OffPolicyAlgorithm, "_sample_action", ("learning_starts", "action_noise", "n_envs")),
    (
        OffPolicyAlgorithm,
        "_store_transition",
        ("replay_buffer", "buffer_action", "new_obs", "reward", "dones", "infos"),
    ),
)
CONTRACT_ATTRIBUTES = ("_last_obs", "_last_episode_starts", "_total_timesteps", "_episode_num")
CONTRACT = (*(f"{cls.__name__}.{name}" for cls, name, _ in CONTRACT_METHODS), *CONTRACT_ATTRIBUTES)


def contract_problems(model: BaseAlgorithm | None = None) -> list[str]:
    """What of :data:`CONTRACT` the installed SB3 lacks or changed: a missing method, a renamed parameter, and (given
    a ``model`` after :func:`setup_learn`) a missing attribute; empty when all is as rlzoo uses it."""
    problems = []
    for cls, name, parameters in CONTRACT_METHODS:
        method = getattr(cls, name, None)
        if method is None:
            problems.append(f"{cls.__name__}.{name} is gone")
            continue
        found = tuple(p for p in inspect.signature(method).parameters if p != "self")
        if found[: len(parameters)] != parameters:
            problems.append(f"{cls.__name__}.{name} takes ({', '.join(found)}), rlzoo passes ({', '.join(parameters)})")
    for name in CONTRACT_ATTRIBUTES if model is not None else ():
        if not hasattr(model, name):
            problems.append(f"{type(model).__name__}.{name} is not set by _setup_learn")
    return problems


def setup_learn(model: BaseAlgorithm, total_timesteps: int, reset_num_timesteps: bool) -> None:
    """What ``learn()`` does first: counters, the logger, the env's first observations (``last_observation``)."""
    model._setup_learn(total_timesteps, None, reset_num_timesteps)


def update_info_buffer(model: BaseAlgorithm, infos: list[dict[str, Any]], dones: np.ndarray) -> None:
    """Record the episodes' returns and successes for the ``rollout/`` logs."""
    model._update_info_buffer(infos, dones)


def update_progress(model: BaseAlgorithm) -> None:
    """Move the schedules (learning rate, clip range, exploration) to the model's step count."""
    model._update_current_progress_remaining(model.num_timesteps, model._total_timesteps)


def on_step(model: OffPolicyAlgorithm) -> None:
    """The algorithm's own per-step bookkeeping (DQN: target updates and exploration)."""
    model._on_step()


def last_observation(model: BaseAlgorithm) -> Any:
    """The observations the model acts on next (set by :func:`setup_learn`, moved on by :func:`set_last`)."""
    return model._last_obs


def episode_starts(model: BaseAlgorithm) -> Any:
    """Which envs began an episode with :func:`last_observation`."""
    return model._last_episode_starts


def set_last(model: BaseAlgorithm, observations: Any, starts: np.ndarray) -> None:
    """The observations the model acts on next, and which of them begin episodes."""
    model._last_obs, model._last_episode_starts = observations, starts


def sample_action(model: OffPolicyAlgorithm, n_envs: int) -> tuple[np.ndarray, np.ndarray]:
    """The actions to step the envs with and the (scaled) ones to store, random before ``learning_starts``."""
    return model._sample_action(model.learning_starts, model.action_noise, n_envs)


def store_transition(
    model: OffPolicyAlgorithm, buffer_actions: np.ndarray, new_obs: Any, rewards: np.ndarray, dones: np.ndarray,
    infos: list[dict[str, Any]],
) -> None:  # fmt: skip
    """Store one vec-env step in the replay buffer (terminal observations and normalisation as SB3 does)."""
    assert model.replay_buffer is not None
    model._store_transition(model.replay_buffer, buffer_actions, new_obs, rewards, dones, infos)


def count_episode(model: OffPolicyAlgorithm) -> int:
    """Count one finished episode (what ``log_interval`` counts); return the count."""
    model._episode_num += 1
    return model._episode_num
