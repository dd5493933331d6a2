"""The run-directory format: the one place that knows the core's file names and what is written when.

A run directory holds::

    config.yaml            the resolved config (written before training starts)
    model.zip              final model, loadable with plain ``stable_baselines3.<ALGO>.load``
    obs_norm.npz           final observation-normalisation statistics (when ``normalize`` is on)
    checkpoints/<steps>/   periodic model.zip (+ obs_norm.npz) and resume state (:mod:`rlzoo.checkpoint_format`)
    replay/                an off-policy run's replay buffer chunks (:mod:`rlzoo.checkpoint_format`)
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
    models/<learner>/      a run of several learners' model.zip (+ progress.csv) per learner (an agent key, or
                           ``shared``); models.json once every final model is saved (:mod:`rlzoo.model_files`)
    provenance.json        commit, command, platform, threads, precisions (``rlzoo.provenance``); written before metrics
    metrics.json           summary; written last, so its presence means the run finished
    .lock                  held (flock) by the process training here, with its pid; removed when it ends

The parts above the ground floor declare their own files: a kind's (the multi-agent per-agent curves and test
returns, :mod:`rlzoo.multiagent.run_files`; a kind's logs reach :meth:`RunDir.log_files` through ``kind_logs``),
W&B's (``wandb.json``, ``wandb_history.jsonl``: :mod:`rlzoo.loggers.wandb_state`) and replay's (``enjoy/``:
:mod:`rlzoo.playback.loading`).
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlzoo.checkpoint_format import CHECKPOINTS
from rlzoo.confined import open_plain, read_json, read_text, stream_lines
from rlzoo.errors import ConfigError, Refused
from rlzoo.files import atomic_write_text, locked, write_pid
from rlzoo.model_files import (  # noqa: F401  (MODEL ... load_obs_norm: the model files, read through rundir too)
    LEARNERS,
    MODEL,
    OBS_NORM,
    ModelFolder,
    ObsNorm,
    has_model,
    load_obs_norm,
    save_model,
    save_models,
    save_obs_norm,
)
from rlzoo.untrusted import read_yaml

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
RESUMES = "resumes.csv"
ERROR = "error.txt"
# The checkpoint vocabulary (``checkpoint=``, ``init_from=<run dir>:``, ``load_agent(checkpoint=)``, the report), one
# meaning each: see RunDir.find_model.
FINAL = "final"  # the model saved when training ended (model.zip)
LATEST = "latest"  # the model written last: the final one when training ended, else the newest checkpoint
BEST = "best"  # keep-best evaluation's best evaluated model: best/model.zip (+ obs_norm.npz)
CHECKPOINT_CHOICES = f"{FINAL}, {LATEST}, {BEST} or the steps of a checkpoint"
EVALUATIONS = "evaluations.csv"
LOCK = ".lock"


class RunDirInUse(ConfigError):
    """Another process trains in this run dir: the refused one writes nothing there (not even its ``error.txt``)."""


def _lock_holder(run_dir: Path) -> str:
    """What the lock file of ``run_dir`` says (``<pid> <host>``), or "" where it is not a small plain file."""
    try:
        return read_text(run_dir, LOCK, cap=256).strip()
    except (OSError, ConfigError):
        return ""


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
    """Paths of one run directory and the writes that define its format.

    :param kind_logs: glob patterns (relative to the run dir) of the logs a kind of run appends to beside the core's,
        declared by the kind (a multi-agent run's per-agent curves): a resume cuts them back (:meth:`log_files`).
    """

    path: Path
    kind_logs: tuple[str, ...] = ()

    @property
    def config(self) -> Path:
        return self.path / CONFIG

    def models(self, steps: int | None = None) -> ModelFolder:
        """The folder of the final model(s), or of the checkpoint at ``steps``."""
        return ModelFolder(self.path if steps is None else self.checkpoint(steps))

    @property
    def model(self) -> Path:
        return self.models().model

    @property
    def obs_norm(self) -> Path:
        return self.models().obs_norm

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

    def best_model_folder(self) -> ModelFolder:
        """The folder of the best model, or one :class:`ConfigError` saying that the run kept none."""
        best = ModelFolder(self.best_dir)
        if not best.model.is_file():
            raise ConfigError(
                f"checkpoint=best: the run {self.path} has no best model ({best.model} is missing); only runs trained "
                "with keep-best evaluation (eval_freq > 0) keep one; allowed: final, latest or a checkpoint's steps"
            )
        return best

    def available_models(self) -> str:
        """The models this run has, in the checkpoint vocabulary (``final, 64, 128``), for messages."""
        names = ([FINAL] if self.model.is_file() else []) + [folder.name for folder in self.checkpoints()]
        return ", ".join(names) if names else f"none (no {MODEL} and no checkpoints/ yet)"

    def find_model(
        self, checkpoint: int | str | None = FINAL, choose: str = "checkpoint="
    ) -> tuple[ModelFolder, int | None]:
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
            return self.models(), None
        if checkpoint == LATEST:
            if self.model.is_file():
                return self.models(), None
            checkpoints = self.checkpoints()
            if not checkpoints:
                raise ConfigError(f"run {self.path} has no model yet: no {MODEL} and no complete checkpoints/")
            return ModelFolder(checkpoints[-1]), int(checkpoints[-1].name)
        if isinstance(checkpoint, str) and checkpoint.isdigit():
            checkpoint = int(checkpoint)
        if isinstance(checkpoint, bool) or not isinstance(checkpoint, int):
            raise ConfigError(f"{choose}{checkpoint!r}; allowed: {CHECKPOINT_CHOICES}")
        if not self.models(checkpoint).holds_model():
            raise ConfigError(
                f"{choose}{checkpoint} not found in run {self.path}; available: {self.available_models()}"
            )
        return self.models(checkpoint), checkpoint

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
    def tensorboard_dir(self) -> Path:
        return self.path / "tb"

    @property
    def checkpoints_dir(self) -> Path:
        return self.path / CHECKPOINTS

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
        with open_plain(path, "a") as stream:
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
        """Training ended here: the final model is saved (several learners': :meth:`ModelFolder.trained`)."""
        return self.models().trained()

    def log_files(self) -> list[Path]:
        """The core's and the kind's logs a run appends to while it trains (what a resume cuts back, with W&B's copy
        of its points: :func:`rlzoo.training.resume.appended_logs`): monitor files, returns100, the kind's
        (:attr:`kind_logs`), progress.csv (per learner too) and evaluations.csv."""
        kind = [path for pattern in self.kind_logs for path in sorted(self.path.glob(pattern))]
        learners = sorted((self.path / LEARNERS).glob(f"*/{PROGRESS}"))
        return [*self.monitor_files(), self.returns100, *kind, self.progress, *learners, self.evaluations]

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
            holder = _lock_holder(self.path)
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


def record_failure(run_dir: Path, error: BaseException) -> None:
    """Write a failed job's traceback to its run dir's ``error.txt`` (what the summary reads); a job refused because
    another process trains in its dir, or whose dir holds a finished run, writes nothing there."""
    if isinstance(error, RunDirInUse | RunDirFinished):
        return
    atomic_write_text(RunDir(run_dir).error, "".join(traceback.format_exception(error)))
