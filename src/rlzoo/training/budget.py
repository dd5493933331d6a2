"""A run's budget and clock: steps or episodes, a progress bar, and time that goes on across resumes.

- ``total_episodes``: training stops once that many training episodes have ended (summed over envs); the schedules
  (learning rate, exploration ...) still run over ``total_timesteps`` and hold their end values past it.
- ``progress_bar``: steps (or episodes) done, steps/s and ETA, on stderr: a bar on a terminal, a line every 10 s when
  stderr is a file (:mod:`rlzoo.progress_lines`).
- ``max_train_seconds``: training also stops once the run has trained this many wall seconds (the schedules still
  run over ``total_timesteps``).
- :class:`RunClock`: the time a run has trained, continued by a resumed run (monitor ``t``, ``time/time_elapsed``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm

from rlzoo.confined import count_lines
from rlzoo.errors import ConfigError
from rlzoo.progress_lines import Mode, ProgressLines, progress_mode
from rlzoo.training.settings import RunSettings

# learn()'s step budget when training stops at an episode count instead.
UNBOUNDED_STEPS = 2**62


def check_budget(settings: RunSettings, overrides: Sequence[str]) -> None:
    """Refuse two budgets: ``total_episodes`` with ``total_timesteps`` given on the command line."""
    if settings.total_episodes is None:
        return
    keys = {o.split("=", 1)[0].lstrip("+~") for o in overrides}
    if "total_timesteps" in keys:
        raise ConfigError(
            f"total_timesteps={settings.total_timesteps} and total_episodes={settings.total_episodes} are two budgets; "
            "give one (with total_episodes, total_timesteps — the default or a tuned pair's — is only the horizon "
            "of the schedules)"
        )


def episodes_in(infos: list[dict[str, Any]] | None) -> int:
    """How many episodes ended in one vec-env step (the Monitor's ``info["episode"]``)."""
    return sum("episode" in info for info in infos or ())


class EpisodeBudget(BaseCallback):
    """Stop training once ``total`` training episodes have ended (``done``: episodes before a resume)."""

    def __init__(self, total: int, done: int = 0) -> None:
        super().__init__()
        self.total, self.done, self._before = total, done, done

    def _on_step(self) -> bool:
        infos = self.locals.get("infos")
        if infos is None:  # algorithms that run whole episodes internally: read the Monitor
            self.done = sum(len(r) for r in self.training_env.get_attr("episode_returns")) + self._before
        else:
            self.done += episodes_in(infos)
        return self.done < self.total

    def _on_training_start(self) -> None:
        self._before = self.done


class ProgressBar(BaseCallback):
    """A tqdm bar on stderr: steps (or episodes) done of the budget, their rate and the time left."""

    def __init__(self, total: int, done: int = 0, unit: str = "steps") -> None:
        super().__init__()
        self.total, self.done, self.unit = total, done, unit
        self._bar: Any = None

    def _on_training_start(self) -> None:
        from tqdm import tqdm

        self._bar = tqdm(
            total=self.total, initial=self.done, unit=" " + self.unit, unit_scale=True, dynamic_ncols=True,
            smoothing=0.05, file=sys.stderr,
        )  # fmt: skip

    def _on_step(self) -> bool:
        count = self.num_timesteps if self.unit == "steps" else self.done + episodes_in(self.locals.get("infos"))
        if count != self.done:
            self._bar.update(min(count, self.total) - min(self.done, self.total))
            self.done = count
        return True

    def _on_training_end(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class LineProgress(BaseCallback):
    """Progress lines of training (:class:`~rlzoo.progress_lines.ProgressLines`): the clock is read once every
    :attr:`CHECK_EVERY` vec-env steps, so that the lines cost nothing measurable, and before each policy update (a
    line then when one would fall due during the update, as long as the last one).

    :param count: the units done so far (steps or episodes).
    """

    CHECK_EVERY = 16

    def __init__(self, lines: ProgressLines, count: Callable[[], int]) -> None:
        super().__init__()
        self.lines, self.count = lines, count
        self.update_seconds = 0.0  # the last policy update's length
        self._update_began: float | None = None

    def _on_step(self) -> bool:
        if self.n_calls % self.CHECK_EVERY == 0:
            self.lines.update(self.count())
        return True

    def _on_rollout_end(self) -> None:  # a policy update follows, writing nothing: a line first if one falls due
        self._update_began = self.lines.clock()
        self.lines.before_pause(self.count(), self.update_seconds)

    def _on_rollout_start(self) -> None:
        if self._update_began is not None:
            self.update_seconds = self.lines.clock() - self._update_began

    def _on_training_end(self) -> None:
        self.lines.finish(self.count())


def progress_of(setting: bool | str) -> Mode:
    """``progress_bar``: true (a bar), false (nothing), or auto (a bar on an interactive terminal, not in a sweep;
    progress lines otherwise)."""
    from rlzoo.cli import in_multirun

    return progress_mode(setting, sweep=setting == "auto" and in_multirun())


def show_progress(setting: bool | str) -> bool:
    """Whether ``progress_bar`` asks for a bar (:func:`progress_of`)."""
    return progress_of(setting) == "bar"


@dataclass(frozen=True)
class RunClock:
    """The clock of a run's training time: ``start`` is when it would have started had it never stopped."""

    start: float

    @classmethod
    def resumed(cls, elapsed: float = 0.0) -> RunClock:
        """A clock that reads ``elapsed`` seconds now (0: a fresh run)."""
        return cls(time.time() - elapsed)

    def elapsed(self) -> float:
        return time.time() - self.start


class TimeBudget(BaseCallback):
    """Stop training once the run's ``clock`` reads ``seconds`` (``max_train_seconds``; a resumed run counts the
    time it trained before)."""

    def __init__(self, clock: RunClock, seconds: float) -> None:
        super().__init__()
        self.clock, self.seconds = clock, seconds

    def _on_step(self) -> bool:
        return self.clock.elapsed() < self.seconds


class ContinueClock(BaseCallback):
    """SB3's ``time/time_elapsed`` (and ``time/fps``, over the whole run) read ``clock`` in a resumed run."""

    def __init__(self, clock: RunClock) -> None:
        super().__init__()
        self.clock = clock

    def _on_training_start(self) -> None:
        self.model.start_time = int(self.clock.start * 1e9)
        self.model._num_timesteps_at_start = 0

    def _on_step(self) -> bool:
        return True


@contextmanager
def schedule_horizon(model: BaseAlgorithm, horizon: int) -> Iterator[None]:
    """While training for an episode budget, schedules run over ``horizon`` steps (not over ``learn()``'s unbounded
    budget) and hold their end values past it.

    SB3 computes the schedules' progress from ``learn()``'s ``total_timesteps``; the model's class is swapped for a
    subclass that uses ``horizon`` instead, for the duration of ``learn()`` only (the saved model is unchanged).
    """
    base = type(model)

    def progress(self: BaseAlgorithm, num_timesteps: int, total_timesteps: int) -> None:
        base._update_current_progress_remaining(self, min(num_timesteps, horizon), horizon)

    namespace = {"_update_current_progress_remaining": progress, "__module__": base.__module__}
    model.__class__ = type(base.__name__, (base,), namespace)
    try:
        yield
    finally:
        model.__class__ = base


@contextmanager
def iterations_from(model: BaseAlgorithm, done: int) -> Iterator[None]:
    """While a resumed on-policy run learns, ``time/iterations`` counts on from the ``done`` iterations before its
    checkpoint (SB3 counts from 0 in every ``learn()``); the model's class is swapped for ``learn()`` only, as in
    :func:`schedule_horizon`."""
    base: Any = type(model)  # an on-policy class: its dump_logs takes the iteration

    def dump_logs(self: BaseAlgorithm, iteration: int = 0) -> None:
        base.dump_logs(self, iteration + done)

    model.__class__ = type(base.__name__, (base,), {"dump_logs": dump_logs, "__module__": base.__module__})
    try:
        yield
    finally:
        model.__class__ = base


def iterations_done(model: BaseAlgorithm) -> int:
    """The rollouts an on-policy model has collected (0 for other algorithms): checkpoints are taken at rollout
    starts, so a resumed run's step counter is a whole number of rollouts."""
    if not isinstance(model, OnPolicyAlgorithm):
        return 0
    return int(model.num_timesteps) // (model.n_steps * model.n_envs)


def episodes_logged(monitor_files: Sequence[Path]) -> int:
    """Training episodes already in a run's monitor files (a resumed run's, cut back to its checkpoint)."""
    total = 0
    for path in monitor_files:  # through the confined layer: plain files, no link, capped
        total += max(count_lines(path.parent, path.name) - 2, 0)  # a JSON and a CSV header line
    return total


def learn(
    model: BaseAlgorithm,
    settings: RunSettings,
    callbacks: Sequence[BaseCallback],
    *,
    resumed: bool,
    clock: RunClock,
    episodes_done: int = 0,
) -> None:
    """``model.learn()`` within the run's budget (the steps left, or episodes), with a progress bar when wanted and,
    in a resumed run, SB3's clock going on from the run's."""
    extra: list[BaseCallback] = [ContinueClock(clock)] if resumed else []
    if settings.max_train_seconds is not None:
        if clock.elapsed() >= settings.max_train_seconds:
            return
        extra.append(TimeBudget(clock, settings.max_train_seconds))
    horizon: int | None = None
    if settings.total_episodes is not None:
        if episodes_done >= settings.total_episodes:
            return
        budget = EpisodeBudget(settings.total_episodes, episodes_done)
        extra.append(budget)
        steps, horizon = UNBOUNDED_STEPS, settings.total_timesteps
        total, done, unit, count = settings.total_episodes, episodes_done, "episodes", lambda: budget.done
    else:
        steps = settings.total_timesteps - model.num_timesteps
        if steps <= 0:
            return
        total, done, unit, count = settings.total_timesteps, model.num_timesteps, "steps", lambda: model.num_timesteps
    mode = progress_of(settings.progress_bar)
    if mode == "bar":
        extra.append(ProgressBar(total, done, unit))
    elif mode == "lines" and settings.verbose > 0:
        extra.append(LineProgress(ProgressLines("training", total, unit, done=done), count))
    iterations = iterations_done(model) if resumed else 0
    with (
        schedule_horizon(model, horizon) if horizon is not None else nullcontext(),
        iterations_from(model, iterations) if iterations else nullcontext(),
    ):
        model.learn(steps, callback=[*callbacks, *extra], progress_bar=False, reset_num_timesteps=not resumed)
