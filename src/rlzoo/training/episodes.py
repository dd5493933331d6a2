"""The one episode runner: test episodes after training, replay (``rlzoo.enjoy``) and collection with an agent.

Episodes are played one after the other on a one-env vec env built by the run builder (representation and frozen
normalisation applied), with learning off; a :class:`Recorder` sees every step, for videos and plots.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.vec_env import VecEnv


@dataclass(frozen=True)
class EpisodeResult:
    """The undiscounted return of one episode (the Monitor's when the env has one), its length, and whether it
    succeeded: ``info["is_success"]`` of its last step (SB3's convention; None for envs whose info has no such key)."""

    ret: float
    length: int
    success: bool | None = None


class Recorder(Protocol):
    """What a replay records, step by step."""

    def start(self, reset_info: dict[str, Any]) -> None:
        """A new episode begins (``reset_info``: the info of its reset)."""

    def before_action(self, venv: VecEnv, observation: Any) -> None:
        """The agent is about to act on ``observation`` (the env is in the state it observes)."""

    def after_step(self, action: np.ndarray, reward: float, info: dict[str, Any]) -> None:
        """The env stepped with ``action``."""

    def finish(self, result: EpisodeResult) -> None:
        """The episode ended."""


def play_episodes(
    model: BaseAlgorithm,
    venv: VecEnv,
    episodes: int,
    *,
    deterministic: bool = True,
    recorder: Recorder | None = None,
) -> list[EpisodeResult]:
    """Play ``episodes`` complete episodes with ``model`` on the single env of ``venv``.

    Recurrent policies get their hidden state carried and reset at episode starts.
    """
    if venv.num_envs != 1:
        raise ValueError(f"episodes are played on a one-env vec env, got {venv.num_envs} envs")
    results: list[EpisodeResult] = []
    observation: Any = venv.reset()
    hidden, starts = None, np.ones((1,), dtype=bool)
    for _ in range(episodes):
        if recorder is not None:
            recorder.start(dict(venv.unwrapped.reset_infos[0]))  # updated in place at every reset
        total, length, done = 0.0, 0, False
        info: dict[str, Any] = {}
        while not done:
            if recorder is not None:
                recorder.before_action(venv, observation)
            action, hidden = model.predict(observation, state=hidden, episode_start=starts, deterministic=deterministic)
            observation, rewards, dones, infos = venv.step(action)
            starts, done, info = dones, bool(dones[0]), infos[0]
            total, length = total + float(rewards[0]), length + 1
            if recorder is not None:
                recorder.after_step(np.asarray(action[0]), float(rewards[0]), info)
        monitored, success = info.get("episode"), info.get("is_success")
        ret = float(monitored["r"]) if monitored else total
        results.append(EpisodeResult(ret, length, None if success is None else bool(success)))
        if recorder is not None:
            recorder.finish(results[-1])
    return results


def summarize(results: list[EpisodeResult]) -> dict[str, float]:
    """Mean, std, min and max of the test returns under ``test/``, and ``test/success_rate`` (the fraction of
    episodes that ended with ``info["is_success"]``) for envs that report success."""
    values = np.asarray([r.ret for r in results], dtype=float)
    summary = {
        "test/mean_return": float(values.mean()),
        "test/std_return": float(values.std()),
        "test/min_return": float(values.min()),
        "test/max_return": float(values.max()),
        "test/episodes": float(values.size),
    }
    successes = [r.success for r in results if r.success is not None]
    if successes:
        summary["test/success_rate"] = float(np.mean(successes))
    return summary
