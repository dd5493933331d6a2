"""The Optuna study that every worker shares: a journal file, checked before anything is written, and the trial count.

A journal file (``JournalStorage`` with a file backend) is an append-only log guarded by a lock file made with
``symlink``/``link``, which works on NFS and other shared filesystems: workers on a laptop's cores or on a cluster's
nodes share it without a database server. SQLite needs a local disk (its locks break on NFS) and serialises writers;
it is fine on one machine only, so rlzoo uses the journal everywhere.
"""

from __future__ import annotations

import json
import os
import socket
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock
from optuna.trial import TrialState

from rlzoo.confined import read_json
from rlzoo.errors import ConfigError
from rlzoo.files import atomic_write_text
from rlzoo.tune.settings import TuneSettings

STUDY_FILE = "study.json"
# Trial user attributes.
WORKER, HEARTBEAT, LOST = "worker", "heartbeat", "lost"
DUPLICATE = "duplicate_of"  # a sample that repeated the parameters of this trial: not trained, not counted
# Samples in a row that may repeat earlier trials before a worker gives up (the search space is used up).
MAX_DUPLICATES = 100
# A running trial whose worker has not written for this long is taken as lost (its worker was killed).
STALE_AFTER_S = 600.0
# Study user attribute: what the workers started by one command share; written last when a study is created.
LAUNCH = "launch"
# How long a worker waits for the worker that created the study to record it.
RECORD_WAIT_S = 10.0


@dataclass(frozen=True)
class StudyRecord:
    """What a study was started with; a worker joining or resuming it must bring the same.

    :param base: the trial config's values that decide results (algorithm, env, representation, budget ...).
    :param space: the search space (:meth:`~rlzoo.tune.space.SearchSpace.describe`).
    """

    base: dict[str, Any]
    space: dict[str, Any]

    def differences(self, stored: Mapping[str, Any]) -> list[str]:
        """``key: stored → given`` for every value that differs from ``stored`` (a study's user attributes)."""
        given = _flat({"config": self.base, "search_space": self.space})
        saved = _flat({"config": stored.get("base", {}), "search_space": stored.get("space", {})})
        changed = sorted((k for k in set(given) | set(saved) if given.get(k) != saved.get(k)), key=_first_the_names)
        return [f"{k}: {saved.get(k, '(none)')} → {given.get(k, '(none)')}" for k in changed]


def _first_the_names(key: str) -> tuple[bool, str]:
    """Differences in the algorithm, env or representation first: they say most."""
    return key not in ("config.algo._target_", "config.env.id", "config.srl_model.name"), key


def _flat(node: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted paths to JSON-normalised leaves (tuples become lists, as they come back from the journal)."""
    if isinstance(node, Mapping) and node:
        return {k: v for key, value in node.items() for k, v in _flat(value, f"{prefix}{key}.").items()}
    return {prefix.rstrip("."): json.loads(json.dumps(node))}


def open_study(settings: TuneSettings, record: StudyRecord, launch: str) -> optuna.Study:
    """The study in ``tune.storage``: created for a new study, loaded to resume one or to join the workers of the
    same launch. Everything is checked before the study folder or the journal is written.

    :param launch: what the workers started by one command share (Hydra's sweep dir; a single run's output dir).
    :raise ConfigError: resuming a study that does not exist or that ran another config; a new study where one exists.
    """
    stored = _stored_attrs(settings)
    _check_study_dir(settings, stored is not None)
    if stored is not None and LAUNCH not in stored:  # created by a worker that stopped before recording it
        stored = {}
    if stored is None and settings.resume:
        raise ConfigError(
            f"tune.resume=true but tune.storage={settings.storage} holds no study {settings.name!r}; run without "
            "tune.resume to start it"
        )
    if stored:
        different = record.differences(stored)
        if different:
            raise ConfigError(
                f"the study {settings.name!r} in {settings.storage} was run with another config; it differs in "
                f"{'; '.join(different[:6])}. Give the study's own values, or start a new study in another tune.dir"
            )
        if not settings.resume and stored[LAUNCH] != launch:
            raise ConfigError(
                f"tune.storage={settings.storage} already holds the study {settings.name!r}: tune.resume=true "
                "continues it; another tune.dir starts a new one"
            )
    settings.study_dir.mkdir(parents=True, exist_ok=True)
    _write_study_file(settings)
    storage = _storage(settings.journal)
    study = optuna.create_study(
        storage=storage,
        study_name=settings.name,
        direction="maximize",
        sampler=make_sampler(settings, _trials_held(storage, settings.name) if stored else 0),
        pruner=make_pruner(settings),
        load_if_exists=True,
    )
    if not stored:  # the launch last: a study with one has the others
        for key, value in {"base": record.base, "space": record.space, LAUNCH: launch}.items():
            study.set_user_attr(key, value)
    return study


def _trials_held(storage: JournalStorage, name: str) -> int:
    """The trials a study holds now (every state), for seeding a resumed or joining worker's sampler."""
    return len(storage.get_all_trials(storage.get_study_id_from_name(name), deepcopy=False))


def _storage(journal: Path) -> JournalStorage:
    return JournalStorage(JournalFileBackend(str(journal), lock_obj=JournalFileSymlinkLock(str(journal))))


def _stored_attrs(settings: TuneSettings) -> dict[str, Any] | None:
    """The user attributes of the study in the journal, or None when there is no such study (nothing written)."""
    if not settings.journal.is_file():
        return None
    storage = _storage(settings.journal)
    try:
        study_id = storage.get_study_id_from_name(settings.name)
    except KeyError:
        names = sorted(s.study_name for s in storage.get_all_studies())
        if settings.resume and names:
            raise ConfigError(
                f"tune.storage={settings.storage} holds no study {settings.name!r} (it holds {', '.join(names)}); "
                "set tune.name to resume one of those"
            ) from None
        return None
    attrs = dict(storage.get_study_user_attrs(study_id))
    deadline = time.monotonic() + RECORD_WAIT_S
    while LAUNCH not in attrs and time.monotonic() < deadline:  # a worker of the same launch is creating it
        time.sleep(0.2)
        attrs = dict(storage.get_study_user_attrs(study_id))
    return attrs


def _check_study_dir(settings: TuneSettings, in_storage: bool) -> None:
    """A study folder belongs to one study: refuse to mix the trials of two."""
    path = settings.study_dir / STUDY_FILE
    if os.path.lexists(path):
        saved = read_json(path.parent, path.name)  # through the confined layer: a plain file, capped
        if not isinstance(saved, dict):
            raise ConfigError(f"{path} is not a study record as rlzoo.tune writes it (a mapping)")
        if (saved.get("storage"), saved.get("name")) != (settings.storage, settings.name):
            raise ConfigError(
                f"tune.dir={settings.dir} holds the study {saved.get('name')!r} of {saved.get('storage')}, not "
                f"{settings.name!r} of {settings.storage}; choose another tune.dir (or that study's tune.storage)"
            )
    if not in_storage and settings.trials_dir.is_dir() and any(settings.trials_dir.iterdir()):
        raise ConfigError(
            f"tune.dir={settings.dir} already holds trials of a study that tune.storage={settings.storage} does not "
            "hold; choose another tune.dir"
        )


def _write_study_file(settings: TuneSettings) -> None:
    path = settings.study_dir / STUDY_FILE
    if not path.is_file():
        # atomic: a worker of the same launch may read it while this one writes it
        atomic_write_text(path, json.dumps({"name": settings.name, "storage": settings.storage}, indent=1) + "\n")


def make_sampler(settings: TuneSettings, held: int = 0) -> optuna.samplers.BaseSampler:
    """Seeded TPE (multivariate, grouped for conditional entries; a constant liar with parallel workers), or random.
    Worker ``w`` seeds with ``seed + w``, so parallel workers do not draw the same startup trials; a worker that
    resumes or joins a study holding ``held`` trials seeds from that too, so that it does not draw the start-up samples
    of the workers before it again (:func:`next_trial` still skips any repeat)."""
    seed = settings.seed + settings.worker + 7919 * held
    if settings.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(
            seed=seed,
            n_startup_trials=settings.n_startup_trials,
            multivariate=True,
            group=True,
            constant_liar=settings.workers > 1,
        )


def make_pruner(settings: TuneSettings) -> optuna.pruners.BasePruner:
    """The pruner named by ``tune.pruner``; steps are agent steps."""
    if settings.pruner == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=settings.n_startup_trials, n_warmup_steps=settings.warmup)
    if settings.pruner == "halving":
        first_rung = max(settings.warmup, settings.evaluation_interval)
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=first_rung, reduction_factor=3)
    if settings.pruner == "hyperband":
        first_rung = max(settings.warmup, settings.evaluation_interval)
        return optuna.pruners.HyperbandPruner(min_resource=first_rung, max_resource=settings.budget, reduction_factor=3)
    return optuna.pruners.NopPruner()


def counted(study: optuna.Study) -> int:
    """The trials ``n_trials`` counts: every trial but those lost with a stopped worker and skipped duplicates."""
    return sum(
        1 for t in study.get_trials(deepcopy=False) if LOST not in t.user_attrs and DUPLICATE not in t.user_attrs
    )


@contextmanager
def _ask_lock(journal: Path) -> Iterator[None]:
    """Serialise "count, ask, sample, compare" across workers, so that a study never exceeds ``n_trials`` and two
    workers never train the same parameters."""
    target = journal.with_suffix(".ask")
    if not target.exists():  # the lock's target: its age lets a lock left by a killed worker go after 30 s
        target.touch()
    lock = JournalFileSymlinkLock(str(target))
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


def twin_of(study: optuna.Study, trial: optuna.Trial) -> int | None:
    """The number of a trial the study holds (finished, running or failed; not lost, not a duplicate) with exactly
    ``trial``'s parameters, or None."""
    params = trial.params
    for other in study.get_trials(deepcopy=False):
        skipped = {LOST, DUPLICATE} & set(other.user_attrs)
        if other.number != trial.number and not skipped and other.params == params:
            return other.number
    return None


def next_trial(
    study: optuna.Study, settings: TuneSettings, sample: Callable[[optuna.Trial], dict[str, Any]]
) -> tuple[optuna.Trial, dict[str, Any]] | None:
    """A new trial and its sampled values, or None once the study holds ``n_trials``; the trial records its worker
    and a heartbeat. A sample that repeats the parameters of a trial the study holds is not trained: it is recorded
    as a duplicate of that trial (failed, not counted) and another is drawn.

    :raise ConfigError: :data:`MAX_DUPLICATES` samples in a row repeated earlier trials (the space is used up).
    """
    with _ask_lock(settings.journal):
        for _ in range(MAX_DUPLICATES):
            if counted(study) >= settings.n_trials:
                return None
            trial = study.ask()
            trial.set_user_attr(WORKER, {"host": socket.gethostname(), "pid": os.getpid()})  # at once: a live trial
            trial.set_user_attr(HEARTBEAT, time.time())
            values = sample(trial)
            twin = twin_of(study, trial)
            if twin is None:
                return trial, values
            trial.set_user_attr(DUPLICATE, twin)
            study.tell(trial, state=TrialState.FAIL)
    raise ConfigError(
        f"the study {settings.name!r} holds {counted(study)} trials and {MAX_DUPLICATES} samples in a row repeated "
        f"them: the search space has fewer parameter sets than n_trials={settings.n_trials}; lower n_trials or widen "
        "the search space"
    )


def fail_lost_trials(study: optuna.Study, now: float | None = None) -> list[int]:
    """Mark running trials whose worker is gone as failed and lost (not counted by ``n_trials``); return them.

    A worker is gone when it ran on this host and its process no longer exists, or when its trial has not written
    a heartbeat for :data:`STALE_AFTER_S` seconds.
    """
    now = time.time() if now is None else now
    lost = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker = trial.user_attrs.get(WORKER) or {}
        # No heartbeat yet: its worker is between ask() and writing it (next_trial), so it counts from the start.
        started = trial.datetime_start.timestamp() if trial.datetime_start is not None else 0.0
        heartbeat = float(trial.user_attrs.get(HEARTBEAT, started))
        here = worker.get("host") == socket.gethostname()
        if (here and not _alive(int(worker.get("pid", -1)))) or now - heartbeat > STALE_AFTER_S:
            try:
                study._storage.set_trial_user_attr(trial._trial_id, LOST, "its worker stopped")
                study.tell(trial.number, state=TrialState.FAIL)
            except (RuntimeError, ValueError):  # another worker marked it first
                continue
            lost.append(trial.number)
    return lost


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
