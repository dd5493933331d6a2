"""The one episode runner: test episodes after training, replay (``rlzoo.enjoy``) and collection with an agent.

Episodes are played on a vec env built by the run builder (representation and frozen normalisation applied), with
learning off. With ``n`` envs, env ``j`` plays episodes ``j, j + n, j + 2n, ...`` and the results come back in
episode order: with the builder's episode seeds (:meth:`rlzoo.training.build.RunBuilder.test_env`) a deterministic
policy gets the same results on one env as on ``n``, in ``1/n`` of the policy calls. A :class:`Recorder` sees every
step of a one-env run, for videos and plots.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.vec_env import VecEnv

from rlzoo.progress_lines import ProgressLines


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
    progress: Progress | None = None,
) -> list[EpisodeResult]:
    """Play ``episodes`` complete episodes with ``model`` on the envs of ``venv`` (env ``j`` of ``n``: episodes
    ``j, j + n, ...``; a freshly built ``venv``), in episode order.

    Recurrent policies get their hidden state carried and reset at episode starts.

    :param recorder: sees every step (a one-env ``venv`` only).
    :param progress: how to report the episodes done and the steps played so far (a bar, or log lines).
    """
    if recorder is not None and venv.num_envs != 1:
        raise ValueError(f"a recorder follows one env, got {venv.num_envs} envs")
    runner = _Episodes(venv.num_envs, episodes, recorder)
    observation: Any = venv.reset()
    hidden, starts = None, np.ones((venv.num_envs,), dtype=bool)
    runner.start(venv)
    with _EpisodeBar(progress, episodes) as bar:
        while not runner.finished:
            if recorder is not None:
                recorder.before_action(venv, observation)
            action, hidden = model.predict(observation, state=hidden, episode_start=starts, deterministic=deterministic)
            observation, rewards, starts, infos = venv.step(action)
            runner.step(venv, action, rewards, starts, infos)
            bar.show(len(runner.done), venv.num_envs)
    return runner.results()


REFRESH_SECONDS = 0.5


@dataclass(frozen=True)
class Progress:
    """How played episodes report their progress: a tqdm bar on stderr (``bar``: an interactive terminal), or
    progress lines (``lines``: a log file, a Slurm job, CI: :mod:`rlzoo.progress_lines`); episodes done, steps."""

    description: str
    bar: bool = False
    lines: bool = False


class _EpisodeBar:
    """A tqdm bar of episodes done, with the steps played so far (an episode can be long: a bar that moves only when
    episodes end would look stuck), or progress lines; nothing when ``progress`` is None."""

    def __init__(self, progress: Progress | None, episodes: int) -> None:
        self.progress, self.episodes, self.steps, self._done = progress, episodes, 0, 0
        self._shown = time.monotonic()
        self._bar: Any = None
        self._lines: ProgressLines | None = None
        if progress is not None and progress.lines and not progress.bar:
            self._lines = ProgressLines(progress.description, episodes, "episodes")

    def __enter__(self) -> _EpisodeBar:
        if self.progress is not None and self.progress.bar:
            from tqdm import tqdm

            self._bar = tqdm(total=self.episodes, desc=self.progress.description, unit=" episodes",
                             dynamic_ncols=True, file=sys.stderr)  # fmt: skip
        return self

    def show(self, done: int, steps: int) -> None:
        self.steps += steps
        done = min(done, self.episodes)
        now = time.monotonic()
        if self._bar is not None:
            self._redraw(done, now)
        elif self._lines is not None:
            self._done = done
            if now >= self._lines.due:
                self._lines.write(done, now, f"{self.steps:,} steps")

    def _redraw(self, done: int, now: float) -> None:
        self._bar.set_postfix_str(f"{self.steps} steps", refresh=False)
        if done > self._done:
            self._bar.update(done - self._done)
            self._done, self._shown = done, now
        elif now - self._shown >= REFRESH_SECONDS:  # no episode ended: the step count still moves on
            self._bar.refresh()
            self._shown = now

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.close()
        if self._lines is not None:
            self._lines.finish(self._done, f"{self.steps:,} steps")


class _Episodes:
    """The returns and lengths of the episodes being played on ``n`` envs, and those that are done."""

    def __init__(self, n: int, episodes: int, recorder: Recorder | None) -> None:
        self.n, self.episodes, self.recorder = n, episodes, recorder
        self.totals, self.lengths = np.zeros(n), np.zeros(n, dtype=int)
        self.played = np.zeros(n, dtype=int)  # episodes each env has ended
        self.done: dict[int, EpisodeResult] = {}

    @property
    def finished(self) -> bool:
        return len(self.done) >= self.episodes

    def start(self, venv: VecEnv) -> None:
        if self.recorder is not None and not self.finished:
            self.recorder.start(dict(venv.unwrapped.reset_infos[0]))  # updated in place at every reset

    def step(
        self, venv: VecEnv, action: np.ndarray, rewards: np.ndarray, dones: np.ndarray, infos: list[dict[str, Any]]
    ) -> None:
        self.totals += rewards
        self.lengths += 1
        if self.recorder is not None:
            self.recorder.after_step(np.asarray(action[0]), float(rewards[0]), infos[0])
        for env in np.flatnonzero(dones):
            index = env + self.n * self.played[env]
            if index < self.episodes:  # an env past its share plays on until the others finish: not counted
                monitored, success = infos[env].get("episode"), infos[env].get("is_success")
                ret = float(monitored["r"]) if monitored else float(self.totals[env])
                outcome = None if success is None else bool(success)
                self.done[int(index)] = EpisodeResult(ret, int(self.lengths[env]), outcome)
                if self.recorder is not None:
                    self.recorder.finish(self.done[int(index)])
                    self.start(venv)
            self.played[env] += 1
            self.totals[env], self.lengths[env] = 0.0, 0

    def results(self) -> list[EpisodeResult]:
        return [self.done[i] for i in range(self.episodes)]


def return_statistics(returns: Sequence[float], lengths: Sequence[int] | None = None) -> dict[str, float]:
    """The test metrics of every kind of run: mean, std, min and max of the returns, the episode count under
    ``test/`` (and ``test/mean_length`` with ``lengths``)."""
    values = np.asarray(returns, dtype=float)
    summary = {
        "test/mean_return": float(values.mean()),
        "test/std_return": float(values.std()),
        "test/min_return": float(values.min()),
        "test/max_return": float(values.max()),
        "test/episodes": float(values.size),
    }
    if lengths is not None:
        summary["test/mean_length"] = float(np.mean(lengths))
    return summary


def summarize(results: list[EpisodeResult]) -> dict[str, float]:
    """Mean, std, min and max of the test returns under ``test/``, and ``test/success_rate`` (the fraction of
    episodes that ended with ``info["is_success"]``) for envs that report success."""
    summary = return_statistics([r.ret for r in results])
    successes = [r.success for r in results if r.success is not None]
    if successes:
        summary["test/success_rate"] = float(np.mean(successes))
    return summary
