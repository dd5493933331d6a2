"""One worker of a study: check everything, open the shared study, run trials until it holds ``n_trials``.

Several workers (``-m hardware=local_parallel tune.workers=N``, or a Slurm array with ``hardware=slurm_cpu``) run this
at the same time on one journal file; each asks the study for its next trial, so together they run ``n_trials``.
A killed worker loses only its running trial: the study is in the journal, and the next worker to start marks that
trial lost (failed, not counted) and runs another in its place.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

import optuna
from omegaconf import DictConfig
from optuna.trial import TrialState

from rlzoo.config import resolved_values
from rlzoo.errors import ConfigError
from rlzoo.tune.outputs import StudyFiles, pair_usage, write_outputs
from rlzoo.tune.settings import TuneSettings
from rlzoo.tune.space import SearchSpace
from rlzoo.tune.study import StudyRecord, counted, fail_lost_trials, next_trial, open_study
from rlzoo.tune.trial import TrialOutcome, check_space, result_keys, run_trial, trial_base


@dataclass(frozen=True)
class TuneResult:
    """What a worker ran, and the study's files as it left them."""

    study: optuna.Study
    outcomes: list[TrialOutcome]
    files: StudyFiles


def tune(
    cfg: DictConfig, launch: str | None = None, train_command: str | None = None, log: Callable[[str], None] = print
) -> TuneResult:
    """Run one worker of the study that the tune config ``cfg`` describes (composed from ``conf/tune.yaml``).

    Every input is checked (tune keys, search space, every bound of every entry planned as a run, the study's
    config when it exists) before the study folder or the journal is written.

    :param launch: shared by the workers of one command, which then join one new study (default: this call only).
    :param train_command: ``python -m rlzoo.train algo=.. env=..`` as the tuned pair's comment shows how to use it.
    """
    values = resolved_values(cfg)
    settings = TuneSettings.from_values(values)
    base = trial_base(values, settings)
    space = SearchSpace.from_values(values.get("search_space"), base)
    check_space(space, base, settings.study_dir)
    record = StudyRecord(result_keys(base), space.describe())
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = open_study(settings, record, launch or uuid.uuid4().hex)
    usage = pair_usage(settings, train_command or "python -m rlzoo.train <the study's algo and env>")
    lost = fail_lost_trials(study)
    if lost:
        log(f"rlzoo.tune: trials {', '.join(map(str, lost))} were lost with a stopped worker (marked failed)")
    outcomes: list[TrialOutcome] = []
    try:
        while (drawn := next_trial(study, settings, lambda t: space.sample(t, base))) is not None:
            trial, values = drawn
            position = f"trial {counted(study)} of {settings.n_trials} (number {trial.number})"
            log(f"rlzoo.tune: {settings.name} worker {settings.worker}: {position}")
            outcomes.append(run_trial(study, trial, values, base, settings))
            log(f"rlzoo.tune: {_describe(outcomes[-1])}")
            write_outputs(study, settings, space, base, usage)
    except ConfigError:  # the search space is used up: trials.csv shows the duplicates skipped
        write_outputs(study, settings, space, base, usage)
        raise
    if not outcomes:
        log(f"rlzoo.tune: the study {settings.name!r} holds {counted(study)} trials (n_trials={settings.n_trials})")
    finished = not study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))  # the last worker plots
    files = write_outputs(study, settings, space, base, usage, plots=settings.plots and finished)
    return TuneResult(study, outcomes, files)


def _describe(outcome: TrialOutcome) -> str:
    what = {
        TrialState.COMPLETE: f"mean return {outcome.value:.2f}" if outcome.value is not None else "complete",
        TrialState.PRUNED: f"pruned at {outcome.steps} steps",
        TrialState.FAIL: f"failed: {outcome.error}",
    }.get(outcome.state, outcome.state.name)
    return f"trial {outcome.number}: {what}"
