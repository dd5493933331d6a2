"""Intermediate evaluations during a trial's training: each feeds the pruner, which may stop training at once."""

from __future__ import annotations

import math
import time
from typing import Protocol

from stable_baselines3.common.callbacks import BaseCallback

from rlzoo.training.build import RunBuilder
from rlzoo.training.episodes import play_episodes
from rlzoo.training.normalization import FrozenNormalization

HEARTBEAT_EVERY_S = 60.0


class PrunableTrial(Protocol):
    """What the callback needs of an ``optuna.Trial``."""

    def report(self, value: float, step: int) -> None:
        """Record an intermediate value at ``step``."""

    def should_prune(self) -> bool:
        """Whether the pruner stops the trial now."""

    def set_user_attr(self, key: str, value: object) -> None:
        """Store a value with the trial."""


class EvaluateAndPrune(BaseCallback):
    """Every ``every`` agent steps before ``budget``, play ``episodes`` deterministic episodes with the model as it is
    (on a test env built by the run's builder, with a snapshot of the training normalisation), report their mean
    return to the trial, and stop training when the pruner says so. The final evaluation is the run's own test
    episodes. Also writes the trial's heartbeat (see :func:`rlzoo.tune.study.fail_lost_trials`).

    :raise FloatingPointError: an evaluation whose mean return is not finite (the trial then fails).
    """

    def __init__(
        self, build: RunBuilder, trial: PrunableTrial, every: int, episodes: int, budget: int, heartbeat: str
    ) -> None:
        super().__init__()
        self.build, self.trial = build, trial
        self.every, self.episodes, self.budget = every, episodes, budget
        self.heartbeat_key = heartbeat
        self.pruned_at: int | None = None
        self.evaluations: dict[int, float] = {}
        self._next = every
        self._beat = time.monotonic()

    def _on_training_start(self) -> None:
        self._next = (self.num_timesteps // self.every + 1) * self.every

    def _on_step(self) -> bool:
        if time.monotonic() - self._beat > HEARTBEAT_EVERY_S:
            self._heartbeat()
        if self.num_timesteps < self._next or self.num_timesteps >= self.budget:
            return True
        self._next = (self.num_timesteps // self.every + 1) * self.every
        value = self.evaluate()
        if not math.isfinite(value):
            raise FloatingPointError(f"the evaluation at {self.num_timesteps} steps returned {value}")
        self.evaluations[self.num_timesteps] = value
        self.trial.report(value, self.num_timesteps)
        self._heartbeat()
        if self.trial.should_prune():
            self.pruned_at = self.num_timesteps
            return False  # SB3 ends learn() here
        return True

    def evaluate(self) -> float:
        """The mean return of ``episodes`` deterministic episodes with the current weights."""
        normalizer = self.model.get_vec_normalize_env()
        frozen = FrozenNormalization.snapshot(normalizer) if normalizer is not None else None
        venv = self.build.test_env(frozen, n_envs=min(self.build.plan.settings.test_envs, self.episodes))
        try:
            results = play_episodes(self.model, venv, self.episodes, deterministic=True)
        finally:
            venv.close()
        return sum(r.ret for r in results) / len(results)

    def _heartbeat(self) -> None:
        self._beat = time.monotonic()
        self.trial.set_user_attr(self.heartbeat_key, time.time())
