"""The run-directory format: the one place that knows file names and what is written when.

A run directory holds::

    config.yaml            the resolved config (written before training starts)
    model.zip              final model, loadable with plain ``stable_baselines3.<ALGO>.load``
    obs_norm.npz           final observation-normalisation statistics (when ``normalize`` is on)
    checkpoints/<steps>/   periodic model.zip (+ obs_norm.npz) + state.json (log lengths, for resume) + run_state.json
                           and run_state.npz (generators, envs, SB3's runtime state, the replay chunk list); atomic
    replay/<steps>.npz     the rows an off-policy run's replay buffer gained up to checkpoint <steps> (plain arrays)
    replay/<key>/<steps>.npz  a multi-agent run's: each learning key's rows, up to <steps> of that key's own
    monitor/<rank>.monitor.csv   per-env episode logs (SB3 Monitor; ``.monitor.csv.gz`` in a result record)
    returns100.csv         frame,mean,std,max,min over non-overlapping 100-episode windows (+ final partial)
    progress.csv, tb/      SB3 metrics as CSV and TensorBoard events
    test_returns.csv       one row per test episode: episode,return,length
    test_returns_sampled.csv  the same episodes with sampled actions (sampled_test=true)
    evaluations.csv        keep-best evaluations (eval_freq > 0): steps,mean_return,std_return,min_return,max_return,
                           best (one row each)
    best/                  the best evaluated model.zip (+ obs_norm.npz): ``checkpoint=best``
    resumes.csv            one row per resume: time,steps (the checkpoint it continued from)
    error.txt              the error of a sweep job that failed
    models/<learner>/      a multi-agent run's model.zip (+ progress.csv) per learner (an agent key, or ``shared``)
    models.json            a multi-agent run's steps trained, written once every learner's final model is saved
    returns100/<agent>.csv a multi-agent run's returns100 per agent key (returns100.csv: the learners' return)
    test_returns_agents.csv  a multi-agent run's test episodes: episode,<agent>,... (test_returns.csv: the learners')
    provenance.json        commit, command, platform, threads, precisions (``rlzoo.provenance``); written before metrics
    metrics.json           summary; written last, so its presence means the run finished
    .lock                  held (flock) by the process training here, with its pid; removed when it ends
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from rlzoo.confined import read_json, stream_lines
from rlzoo.errors import ConfigError, Refused
from rlzoo.files import atomic_folder, atomic_write_text, locked, write_pid
from rlzoo.model_files import (  # noqa: F401  (MODEL ... load_obs_norm: the model files, read through rundir too)
    LEARNERS,
    MODEL,
    OBS_NORM,
    ObsNorm,
    has_model,
    load_obs_norm,
    save_model,
    save_models,
    save_obs_norm,
)
from rlzoo.untrusted import read_yaml

if TYPE_CHECKING:  # SB3 (and torch) are imported where runs train, not where run dirs are read
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.vec_env import VecNormalize

CONFIG = "config.yaml"
METRICS = "metrics.json"
PROVENANCE = "provenance.json"
TEST_RETURNS = "test_returns.csv"
SAMPLED_TEST_RETURNS = "test_returns_sampled.csv"
RETURNS100 = "returns100.csv"
RETURNS100_HEADER = "frame,mean,std,max,min"
MONITOR_SUFFIX = ".monitor.csv"
GZIP_SUFFIX = ".gz"
PROGRESS = "progress.csv"
CHECKPOINT_STATE = "state.json"
RUN_STATE = "run_state.json"  # a checkpoint's generators, env and SB3 runtime state (training/run_state.py)
RUN_STATE_ARRAYS = "run_state.npz"
REPLAY = "replay"  # replay buffer chunks (training/buffer_chunks.py)
RESUMES = "resumes.csv"
ERROR = "error.txt"
ENJOY = "enjoy"
# The checkpoint vocabulary (``checkpoint=``, ``init_from=<run dir>:``, ``load_agent(checkpoint=)``, the report), one
# meaning each: see RunDir.find_model.
FINAL = "final"  # the model saved when training ended (model.zip)
LATEST = "latest"  # the model written last: the final one when training ended, else the newest checkpoint
BEST = "best"  # keep-best evaluation's best evaluated model: best/model.zip (+ obs_norm.npz)
CHECKPOINT_CHOICES = f"{FINAL}, {LATEST}, {BEST} or the steps of a checkpoint"
EVALUATIONS = "evaluations.csv"
LEARNERS_STATE = "models.json"  # multi-agent runs: written once every learner's final model is saved
AGENT_RETURNS100 = "returns100"  # multi-agent runs: returns100/<agent>.csv
AGENT_TEST_RETURNS = "test_returns_agents.csv"
LOCK = ".lock"
WANDB_STATE = "wandb.json"  # the W&B run id and the last step W&B has (loggers/wandb_state.py)
WANDB_HISTORY = "wandb_history.jsonl"  # every point logged to an offline W&B run, replayed on resume (the same)


class RunDirInUse(ConfigError):
    """Another process trains in this run dir: the refused one writes nothing there (not even its ``error.txt``)."""


class RunDirFinished(ConfigError):
    """The run dir holds a finished run: the refused process writes nothing there (not even its ``error.txt``).

    :param same_run: the finished run has the refused one's config (a sweep job that ran twice: a requeue, a
        second launch), so there is nothing left to do.
    """

    def __init__(self, message: str, *, same_run: bool) -> None:
        super().__init__(message)
        self.same_run = same_run


@dataclass(frozen=True)
class RunDir:
    """Paths of one run directory and the writes that define its format."""

    path: Path

    @property
    def config(self) -> Path:
        return self.path / CONFIG

    @property
    def model(self) -> Path:
        return self.path / MODEL

    @property
    def obs_norm(self) -> Path:
        return self.path / OBS_NORM

    @property
    def metrics(self) -> Path:
        return self.path / METRICS

    @property
    def returns100(self) -> Path:
        return self.path / RETURNS100

    @property
    def monitor_dir(self) -> Path:
        return self.path / "monitor"

    @property
    def test_returns(self) -> Path:
        return self.path / TEST_RETURNS

    @property
    def best_dir(self) -> Path:
        """Where keep-best evaluation keeps the best model so far (``checkpoint=best``)."""
        return self.path / BEST

    @property
    def evaluations(self) -> Path:
        return self.path / EVALUATIONS

    def best_model_folder(self) -> Path:
        """The folder of the best model, or one :class:`ConfigError` saying that the run kept none."""
        model = self.best_dir / MODEL
        if not model.is_file():
            raise ConfigError(
                f"checkpoint=best: the run {self.path} has no best model ({model} is missing); only runs trained "
                "with keep-best evaluation (eval_freq > 0) keep one; allowed: final, latest or a checkpoint's steps"
            )
        return self.best_dir

    def available_models(self) -> str:
        """The models this run has, in the checkpoint vocabulary (``final, 64, 128``), for messages."""
        names = ([FINAL] if self.model.is_file() else []) + [folder.name for folder in self.checkpoints()]
        return ", ".join(names) if names else f"none (no {MODEL} and no checkpoints/ yet)"

    def find_model(self, checkpoint: int | str | None = FINAL, choose: str = "checkpoint=") -> tuple[Path, int | None]:
        """The folder holding the model (``model.zip`` + ``obs_norm.npz``) that ``checkpoint`` names, and its steps
        (None for the final and the best model).

        :param checkpoint: :data:`FINAL` (or None), :data:`LATEST`, :data:`BEST`, or the steps of a checkpoint (an
            int or a digit string).
        :param choose: how the caller's user names a checkpoint (``checkpoint=``, ``init_from=<run dir>:``), for the
            hint of the message.
        :raise ConfigError: an unknown name, or a model the run does not have (one line listing those it has).
        """
        if checkpoint == BEST:
            return self.best_model_folder(), None
        if checkpoint is None or checkpoint == FINAL:
            if not self.model.is_file():
                raise ConfigError(
                    f"run {self.path} has no final {MODEL} (still training, or stopped early); available: "
                    f"{self.available_models()}; choose one with {choose}<steps> or {choose}{LATEST}"
                )
            return self.path, None
        if checkpoint == LATEST:
            if self.model.is_file():
                return self.path, None
            checkpoints = self.checkpoints()
            if not checkpoints:
                raise ConfigError(f"run {self.path} has no model yet: no {MODEL} and no complete checkpoints/")
            return checkpoints[-1], int(checkpoints[-1].name)
        if isinstance(checkpoint, str) and checkpoint.isdigit():
            checkpoint = int(checkpoint)
        if isinstance(checkpoint, bool) or not isinstance(checkpoint, int):
            raise ConfigError(f"{choose}{checkpoint!r}; allowed: {CHECKPOINT_CHOICES}")
        if not has_model(self.checkpoint(checkpoint)):
            raise ConfigError(
                f"{choose}{checkpoint} not found in run {self.path}; available: {self.available_models()}"
            )
        return self.checkpoint(checkpoint), checkpoint

    @property
    def enjoy_dir(self) -> Path:
        """Where replay (``rlzoo.enjoy``) writes its videos and plots."""
        return self.path / ENJOY

    def monitor_files(self) -> list[Path]:
        """The SB3 Monitor CSVs, one per env rank."""
        if not self.monitor_dir.is_dir():
            return []
        return sorted(self.monitor_dir.glob(f"*{MONITOR_SUFFIX}"))

    def episode_logs(self) -> list[Path]:
        """The files holding the training episodes, one per env rank: the Monitor CSVs, or in a result record
        (``rlzoo.results.records``) the same CSVs gzipped."""
        if not self.monitor_dir.is_dir():
            return []
        return self.monitor_files() or sorted(self.monitor_dir.glob(f"*{MONITOR_SUFFIX}{GZIP_SUFFIX}"))

    @property
    def wandb_state(self) -> Path:
        return self.path / WANDB_STATE

    @property
    def wandb_history(self) -> Path:
        return self.path / WANDB_HISTORY

    @property
    def tensorboard_dir(self) -> Path:
        return self.path / "tb"

    @property
    def checkpoints_dir(self) -> Path:
        return self.path / "checkpoints"

    @property
    def progress(self) -> Path:
        return self.path / PROGRESS

    @property
    def error(self) -> Path:
        return self.path / ERROR

    def resumes(self) -> list[int]:
        """The step counts this run was resumed from, in order (empty for a run that never resumed)."""
        path = self.path / RESUMES
        if not path.is_file():
            return []
        rows = [line.split(",") for line in stream_lines(self.path, RESUMES)[1:]]
        return [int(row[1]) for row in rows if len(row) == 2 and row[1].strip().lstrip("-").isdigit()]  # -1: final

    def record_resume(self, steps: int) -> None:
        path = self.path / RESUMES
        new = not path.is_file()
        with path.open("a") as stream:
            stream.write(("time,steps\n" if new else "") + f"{datetime.now().isoformat(timespec='seconds')},{steps}\n")

    def checkpoint(self, steps: int) -> Path:
        return self.checkpoints_dir / str(steps)

    def checkpoints(self) -> list[Path]:
        """Complete checkpoint folders, oldest first."""
        if not self.checkpoints_dir.is_dir():
            return []
        folders = [p for p in self.checkpoints_dir.iterdir() if p.name.isdigit() and has_model(p)]
        return sorted(folders, key=lambda p: int(p.name))

    def trained(self) -> bool:
        """Training ended here: the final model is saved (a multi-agent run: ``models.json``, written once
        every learner's model is in place)."""
        return self.model.is_file() or (self.path / LEARNERS_STATE).is_file()

    def log_files(self) -> list[Path]:
        """Every log a run appends to while it trains (what a resume cuts back): monitor files, returns100 (a
        multi-agent run's per agent too), progress.csv (per learner too), evaluations.csv and the copy of the points
        logged to W&B offline."""
        learners = sorted((self.path / LEARNERS).glob(f"*/{PROGRESS}"))
        agents = list(self.agent_returns100_files().values())
        logs = [*self.monitor_files(), self.returns100, *agents, self.progress, *learners, self.evaluations]
        return [*logs, self.wandb_history]

    def save_final(self, models: Mapping[str, BaseAlgorithm], state: dict[str, Any]) -> None:
        """Save a multi-agent run's final learners (beside the logs already in ``models/<name>/``), then ``state``
        (``models.json``: the steps trained), which marks the run trained (:meth:`trained`)."""
        for name, model in models.items():
            save_model(self.learner_dir(name), model, None)
        atomic_write_text(self.path / LEARNERS_STATE, json.dumps(state) + "\n")

    def final_state(self) -> dict[str, Any]:
        """What :meth:`save_final` recorded beside a multi-agent run's final models (empty otherwise)."""
        path = self.path / LEARNERS_STATE
        values = read_json(self.path, LEARNERS_STATE) if path.is_file() else {}
        if not isinstance(values, dict):
            raise Refused(f"{path} does not hold a mapping")
        return values

    def is_finished(self) -> bool:
        return self.metrics.is_file()

    def is_run(self) -> bool:
        """A run dir is any folder holding the resolved ``config.yaml`` (written before training starts)."""
        return self.config.is_file()

    def read_config(self) -> DictConfig:
        """The saved config; YAML tags or broken YAML are one line (:func:`rlzoo.untrusted.read_yaml`)."""
        return read_yaml(self.config)

    def claim(self) -> None:
        """Make sure this run may be written: refuse to overwrite a run that already trained here."""
        if self.model.exists() or self.is_finished() or self.checkpoints():
            raise ConfigError(
                f"run_dir {self.path} already holds a trained run (model, checkpoints or metrics); "
                "choose another run_dir — rlzoo never overwrites a run"
            )
        self.path.mkdir(parents=True, exist_ok=True)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold this run dir for one process (made if missing): a second process that would write here while the
        first trains is refused with one line naming the first's pid, whatever it would have written. The lock is
        the kernel's (``flock``), so a killed process frees it; on a file system without locks, runs are unguarded."""
        lock_path = self.path / LOCK
        held = ExitStack()
        try:
            lock_file = held.enter_context(locked(lock_path, wait=False))
        except BlockingIOError:
            holder = lock_path.read_text().strip() if lock_path.is_file() else ""
            raise RunDirInUse(
                f"run_dir {self.path} is in use: another rlzoo process (pid {holder or 'unknown'}) is training there; "
                "wait for it to end, or choose another run_dir"
            ) from None
        with held:
            write_pid(lock_file)
            try:
                yield
            finally:
                lock_path.unlink(missing_ok=True)  # while still held, so no one locks a file about to go

    def write_config(self, cfg: DictConfig) -> None:
        atomic_write_text(self.config, OmegaConf.to_yaml(cfg, resolve=True))

    def save_checkpoint(
        self,
        steps: int,
        model: BaseAlgorithm | Mapping[str, BaseAlgorithm],
        normalizer: VecNormalize | None,
        state: dict[str, Any] | None = None,
        write_more: Callable[[Path], None] | None = None,
    ) -> Path:
        """Write a checkpoint folder that appears complete or not at all (``state``: JSON-able resume state;
        ``model`` a mapping: a multi-agent run's learners, each in ``models/<name>/``; ``write_more``: writes more
        files into the folder before it appears)."""
        final = self.checkpoint(steps)
        self.checkpoints_dir.mkdir(parents=True, exist_ok=True)
        with atomic_folder(final) as staging:
            save_models(staging, model, normalizer)
            if state is not None:
                (staging / CHECKPOINT_STATE).write_text(json.dumps(state, indent=1) + "\n")
            if write_more is not None:
                write_more(staging)
        return final

    def write_test_returns(self, returns: Sequence[float], lengths: Sequence[int], sampled: bool = False) -> None:
        """Write one row per test episode: ``episode,return,length`` (``sampled``: the sampled-action replay)."""
        rows = ["episode,return,length"] + [
            f"{i},{ret:.6g},{length}" for i, (ret, length) in enumerate(zip(returns, lengths, strict=True))
        ]
        name = SAMPLED_TEST_RETURNS if sampled else TEST_RETURNS
        atomic_write_text(self.path / name, "\n".join(rows) + "\n")

    @property
    def provenance(self) -> Path:
        return self.path / PROVENANCE

    def write_provenance(self, values: dict[str, Any]) -> None:
        """Record where the run was trained: the source commit, the command, the platform (a resumed run: those that
        finished it; :func:`rlzoo.training.run.provenance`)."""
        atomic_write_text(self.provenance, json.dumps(values, indent=1, sort_keys=True) + "\n")

    def write_metrics(self, metrics: dict[str, float]) -> None:
        """Write the metrics summary, last: it marks the run finished."""
        atomic_write_text(self.metrics, json.dumps(metrics, indent=2, sort_keys=True) + "\n")

    def read_metrics(self) -> dict[str, float]:
        values = read_json(self.path, METRICS)
        if not isinstance(values, dict):
            raise Refused(f"{self.metrics} does not hold a mapping of metrics")
        return values

    def learner_dir(self, name: str, steps: int | None = None) -> Path:
        """A multi-agent run's folder of learner ``name`` (final, or in the checkpoint at ``steps``)."""
        return (self.path if steps is None else self.checkpoint(steps)) / LEARNERS / name

    def learner_model(self, name: str, steps: int | None = None) -> Path:
        return self.learner_dir(name, steps) / MODEL

    def agent_returns100(self, agent: str) -> Path:
        """A multi-agent run's returns100 of one agent key."""
        return self.path / AGENT_RETURNS100 / f"{agent}.csv"

    def agent_returns100_files(self) -> dict[str, Path]:
        """Every agent key's returns100 file (empty for a single-agent run)."""
        folder = self.path / AGENT_RETURNS100
        return {p.stem: p for p in sorted(folder.glob("*.csv"))} if folder.is_dir() else {}

    def write_agent_test_returns(self, returns: dict[str, Sequence[float]]) -> None:
        """Write one row per test episode of a multi-agent run: ``episode,<agent>,...``."""
        keys = list(returns)
        rows = [",".join(["episode", *keys])] + [
            ",".join([str(i)] + [f"{returns[k][i]:.6g}" for k in keys])
            for i in range(len(returns[keys[0]]) if keys else 0)
        ]
        atomic_write_text(self.path / AGENT_TEST_RETURNS, "\n".join(rows) + "\n")


def record_failure(run_dir: Path, error: BaseException) -> None:
    """Write a failed job's traceback to its run dir's ``error.txt`` (what the summary reads); a job refused because
    another process trains in its dir, or whose dir holds a finished run, writes nothing there."""
    if isinstance(error, RunDirInUse | RunDirFinished):
        return
    atomic_write_text(RunDir(run_dir).error, "".join(traceback.format_exception(error)))
