"""One trial: its values sampled, its config made, trained as a normal rlzoo run dir, its outcome told to the study.

A trial trains through :func:`rlzoo.single_agent.kind.train_run` (the skeleton and single-agent kind of ``rlzoo.train``)
with one extra callback, :class:`~rlzoo.tune.pruning.EvaluateAndPrune`. Its value is the mean return of the run's test
episodes (``tune.eval_episodes``, deterministic) after training; a pruned trial stops training at once, and its run
dir is finished as usual (model, test episodes, ``metrics.json`` with the steps it reached). A trial that raises, or
whose value is not finite, is recorded as failed (its traceback in the run dir's ``error.txt``); the study goes on.
"""

from __future__ import annotations

import json
import math
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from omegaconf import DictConfig, OmegaConf
from optuna.trial import TrialState

from rlzoo.errors import ConfigError
from rlzoo.files import atomic_write_text
from rlzoo.rundir import RunDir
from rlzoo.training.build import RunBuilder
from rlzoo.training.plan import plan_run
from rlzoo.tune.pruning import EvaluateAndPrune
from rlzoo.tune.settings import TUNE_KEYS, TuneSettings
from rlzoo.tune.space import SearchSpace, with_values
from rlzoo.tune.study import HEARTBEAT

TRIAL_FILE = "trial.json"
# Trial user attributes.
CONFIG, RUN_DIR, STEPS, ERROR = "config", "run_dir", "steps", "error"
# The trial config's keys that decide its results: a resumed study must have the same.
RESULT_KEYS = (
    "algo",
    "env",
    "srl_model",
    "seed",
    "total_timesteps",
    "max_train_seconds",
    "n_envs",
    "vec_env",
    "normalize",
    "test_episodes",
)


def trial_base(values: Mapping[str, Any], settings: TuneSettings) -> dict[str, Any]:
    """The config every trial starts from: the train config of a (resolved, plain) tune config, with the budget as
    ``total_timesteps`` and ``tune.eval_episodes`` deterministic test episodes."""
    base = {k: v for k, v in values.items() if k not in TUNE_KEYS}
    base |= {
        "total_timesteps": settings.budget,
        "test_episodes": settings.eval_episodes,
        "deterministic_test": True,
        "progress_bar": False,
        "resume": None,
    }
    if base.get("total_episodes") is not None:
        raise ConfigError(
            f"total_episodes={base['total_episodes']}: rlzoo.tune gives every trial a budget of agent steps "
            "(tune.budget); leave total_episodes out"
        )
    return base


def result_keys(base: Mapping[str, Any]) -> dict[str, Any]:
    """The part of the base config that decides results (stored with the study)."""
    return {k: base[k] for k in RESULT_KEYS if k in base}


def trial_config(base: Mapping[str, Any], values: Mapping[str, Any], run_dir: Path) -> DictConfig:
    """The run config of one trial: ``base`` with the trial's ``values`` and its own run dir."""
    return OmegaConf.create(with_values({**base, "run_dir": str(run_dir)}, values))


def check_space(space: SearchSpace, base: Mapping[str, Any], directory: Path) -> None:
    """Plan a run with each bound of each entry in turn (nothing is written or trained), so that an unknown keyword
    or a value of the wrong type fails now, naming the entry, instead of failing every trial.

    :raise ConfigError: ``search_space.<path>: <what plan_run says>``.
    """
    for path, value in space.bounds():
        try:
            plan_run(trial_config(base, {path: value}, directory / "check"), run_dir_state=False)
        except ConfigError as error:
            raise ConfigError(f"search_space.{path} (at {value!r}): {error}") from None


@dataclass
class TrialOutcome:
    """What one trial ended with."""

    number: int
    state: TrialState
    value: float | None
    steps: int
    error: str = ""


def run_trial(
    study: optuna.Study, trial: optuna.Trial, values: dict[str, Any], base: Mapping[str, Any], settings: TuneSettings
) -> TrialOutcome:
    """Train and tell one trial with its sampled ``values``; failures are told as failed, not raised."""
    from rlzoo.single_agent.kind import train_run  # torch and SB3: only where trials train

    run_dir = settings.trials_dir / str(trial.number)
    trial.set_user_attr(RUN_DIR, str(run_dir))
    callbacks: list[EvaluateAndPrune] = []

    def evaluate_and_prune(build: RunBuilder) -> list[EvaluateAndPrune]:
        every, episodes = settings.evaluation_interval, settings.eval_episodes
        callbacks.append(EvaluateAndPrune(build, trial, every, episodes, settings.budget, HEARTBEAT))
        return callbacks

    try:
        trial.set_user_attr(CONFIG, values)
        metrics = train_run(trial_config(base, values, run_dir), extra_callbacks=evaluate_and_prune)
    except Exception as error:  # a diverging network, a NaN, a combination the algorithm refuses
        return _failed(study, trial, run_dir, error)
    steps = int(metrics["train/timesteps"])
    trial.set_user_attr(STEPS, steps)
    pruned = bool(callbacks) and callbacks[0].pruned_at is not None
    value = metrics.get("test/mean_return", math.nan)
    if pruned:
        outcome = TrialOutcome(trial.number, TrialState.PRUNED, None, steps)
    elif not math.isfinite(value):
        return _failed(study, trial, run_dir, FloatingPointError(f"the final mean return is {value}"))
    else:
        outcome = TrialOutcome(trial.number, TrialState.COMPLETE, value, steps)
    study.tell(trial, outcome.value, state=outcome.state)
    _write_trial_file(run_dir, study, trial.number)
    return outcome


def _failed(study: optuna.Study, trial: optuna.Trial, run_dir: Path, error: BaseException) -> TrialOutcome:
    message = f"{type(error).__name__}: {error}".splitlines()[0][:500]
    trial.set_user_attr(ERROR, message)
    if run_dir.is_dir():
        atomic_write_text(RunDir(run_dir).error, "".join(traceback.format_exception(error)))
    study.tell(trial, state=TrialState.FAIL)
    _write_trial_file(run_dir, study, trial.number)
    return TrialOutcome(trial.number, TrialState.FAIL, None, 0, message)


def _write_trial_file(run_dir: Path, study: optuna.Study, number: int) -> None:
    """``trial.json`` in the trial's run dir: its number, state, value, values and intermediate evaluations."""
    if not run_dir.is_dir():
        return
    frozen = next(t for t in study.get_trials(deepcopy=False) if t.number == number)
    record = {
        "study": study.study_name,
        "number": number,
        "state": frozen.state.name,
        "value": frozen.value,
        "config": frozen.user_attrs.get(CONFIG, {}),
        "intermediate": {str(step): value for step, value in sorted(frozen.intermediate_values.items())},
        "steps": frozen.user_attrs.get(STEPS),
        "error": frozen.user_attrs.get(ERROR),
    }
    atomic_write_text(run_dir / TRIAL_FILE, json.dumps(record, indent=1) + "\n")
