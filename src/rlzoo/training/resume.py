"""Resuming a run in its own run dir: from its newest checkpoint, with its logs cut back to that checkpoint.

A checkpoint folder (its format: :mod:`rlzoo.checkpoint_format`) holds the model (with its step counter), the
normalisation statistics and ``state.json``: how many lines each log file had at that moment and the training-episode
returns not yet written to ``returns100.csv``. Resuming truncates the logs to those lengths through the confined file
layer (episodes finished after the checkpoint are trained again, so they are not counted twice), then appends. The
checkpoint's run state (generators, envs, SB3's runtime state) and replay chunks are restored by
:mod:`rlzoo.training.exact_resume`; a checkpoint whose chunks are not all there is passed over for the one before it.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from rlzoo.checkpoint_format import CheckpointState, chunks_problem, cut_logs, read_checkpoint_state
from rlzoo.confined import MEMORY_KEY
from rlzoo.errors import ConfigError
from rlzoo.loggers.wandb_state import history_file
from rlzoo.model_files import ModelFolder
from rlzoo.rundir import RunDir, RunDirFinished
from rlzoo.training.safe_load import restore_weights
from rlzoo.training.shared_config import shared_config
from rlzoo.untrusted import check_links

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.vec_env import VecNormalize

LOG = logging.getLogger("rlzoo")
# Keys that may differ between a run and its resumption: where it is, how chatty, how long a test episode may be and
# on how many envs the test episodes run.
NOT_COMPARED = (
    "run_dir", "resume", "verbose", "progress_bar", "max_test_steps", "test_steps", "test_envs", "trusted",
    "checkpoint_buffer",
)  # fmt: skip
# Keys a run dir written before they existed lacks: not compared when the saved config has none.
ADDED_KEYS = ("total_episodes", "max_train_seconds", "max_test_steps", "test_steps", "test_envs", "env.observation")


@dataclass(frozen=True)
class ResumePoint:
    """Where a run continues from: a checkpoint folder (or the final model) and its log state."""

    folder: Path
    timesteps: int
    log_lines: dict[str, int] = field(default_factory=dict)  # run-dir relative path -> lines to keep
    pending_returns: list[float] = field(default_factory=list)  # returns100's episodes not yet written
    elapsed: float = 0.0  # seconds the run had trained (its clock: monitor t, time/time_elapsed go on from here)
    kind_state: dict[str, Any] = field(default_factory=dict)  # what the kind of run keeps of its own (multi-agent)

    @property
    def models(self) -> ModelFolder:
        """The model(s) the run continues from (the checkpoint's, or the final ones)."""
        return ModelFolder(self.folder)


def appended_logs(run: RunDir) -> list[Path]:
    """Every log a run appends to while it trains (what a resume cuts back): the run dir's and its kind's
    (:meth:`RunDir.log_files`), and the copy of the points logged to W&B offline."""
    return [*run.log_files(), history_file(run)]


def log_state(
    run: RunDir, pending_returns: list[float], elapsed: float | None = None, kind: dict[str, Any] | None = None
) -> CheckpointState:
    """The resume state of ``run``'s logs now: line counts of its logs (:func:`appended_logs`), the returns not yet
    in returns100, ``elapsed`` (the seconds the run has trained) and what the kind of run keeps of its own."""
    return CheckpointState.of_logs(run.path, appended_logs(run), pending_returns, elapsed, kind)


def _differences(saved: DictConfig, current: DictConfig) -> list[str]:
    """Dotted keys whose values differ between two resolved configs (keys in :data:`NOT_COMPARED` ignored)."""

    def flat(node: Any, prefix: str = "") -> dict[str, Any]:
        if isinstance(node, dict):
            out: dict[str, Any] = {}
            for key, value in node.items():
                out |= flat(value, f"{prefix}{key}.")
            return out
        return {prefix.rstrip("."): node}

    a = flat(OmegaConf.to_container(saved, resolve=True))
    b = flat(OmegaConf.to_container(current, resolve=True))
    keys = sorted((a.keys() | b.keys()) - set(NOT_COMPARED) - (set(ADDED_KEYS) - a.keys()))
    return [f"{k}: saved {a.get(k, '<absent>')!r}, now {b.get(k, '<absent>')!r}" for k in keys if a.get(k) != b.get(k)]


def find_resume_point(run: RunDir, cfg: DictConfig, warn: bool = True) -> ResumePoint | None:
    """Check that ``cfg`` may train in ``run``; return where to continue from, or None for a fresh start.

    A fresh dir, or one with only a config identical to ``cfg`` (a run stopped before its first checkpoint), starts
    afresh. An unfinished run with the same config continues from its newest checkpoint (or, when training had ended,
    from its final model). A finished run, or a run with another config, is refused: rlzoo never overwrites a run.
    A checkpoint whose replay chunks are not all there is passed over (:func:`newest_complete`; ``warn``: say so).
    """
    if run.is_finished():
        same = run.config.is_file() and not _differences(run.read_config(), cfg)
        raise RunDirFinished(
            f"run_dir {run.path} holds a finished run (metrics.json)"
            + (" of this config: nothing to train" if same else "; choose another run_dir"),
            same_run=same,
        )
    if not run.config.is_file():
        if run.trained() or run.checkpoints():
            raise ConfigError(f"run_dir {run.path} holds a model but no config.yaml; choose another run_dir")
        return None
    check_links(run.path)  # trusted or not: a resume writes into the run dir only
    differences = _differences(run.read_config(), cfg)
    if differences:
        raise ConfigError(
            f"run_dir {run.path} holds a run with another config ({'; '.join(differences[:5])}); choose another "
            "run_dir, or continue that run as it was configured with resume=<run dir>"
        )
    if run.trained():  # training ended; the test phase did not
        return ResumePoint(run.path, timesteps=-1, kind_state=run.models().learners_state())
    checkpoints = run.checkpoints()
    if not checkpoints:
        return None
    newest = newest_complete(run, checkpoints, bool(cfg.get("checkpoint_buffer", True)), warn)
    state = read_checkpoint_state(run.path, newest)
    elapsed = state.elapsed if state.elapsed is not None else 0.0
    return ResumePoint(newest, int(newest.name), state.log_lines, state.pending_returns, elapsed, state.kind)


def newest_complete(run: RunDir, checkpoints: list[Path], keep_buffer: bool, warn: bool = True) -> Path:
    """The newest checkpoint whose replay buffer can be rebuilt (every chunk there, of its recorded size), saying in
    one line which it passed over; none: one line naming the file (never a half-restored buffer)."""
    if not keep_buffer:
        return checkpoints[-1]
    problems: list[str] = []
    for folder in reversed(checkpoints):
        problem = chunks_problem(run.path, folder)
        if problem is None:
            if problems and warn:
                LOG.warning(f"checkpoint {checkpoints[-1].name} of {run.path} is incomplete ({problems[0]}): the run "
                            f"resumes from checkpoint {folder.name}, the newest complete one")  # fmt: skip
            return folder
        problems.append(problem)
    raise ConfigError(
        f"run_dir {run.path}: no checkpoint can rebuild the replay buffer (checkpoint {checkpoints[-1].name}: "
        f"{problems[0]}); checkpoint_buffer=false resumes with an empty buffer"
    )


def training_seed(seed: int, point: ResumePoint | None) -> int:
    """The seed training starts from: a resumed run offsets it by the steps done, so that it plays new episodes."""
    return seed + max(point.timesteps, 0) if point is not None else seed


def open_run_dir(run: RunDir, point: ResumePoint | None, config: DictConfig) -> None:
    """Make ``run`` ready to train from ``point`` (None: afresh): logs cut back to it, the resume recorded, the
    config written. Called once the run is planned and its envs are built, so a rejected run writes nothing. A run
    stopped before its first checkpoint starts over, saying so in one line."""
    if point is None and run.config.is_file():
        LOG.warning(f"run_dir {run.path} holds no checkpoint yet: the run starts over from step 0")
    run.path.mkdir(parents=True, exist_ok=True)
    truncate_logs(run, point)
    if point is not None:
        run.record_resume(point.timesteps)
        LOG.info(
            f"resuming {run.path} from its checkpoint at step {point.timesteps:,}"
            if point.timesteps >= 0
            else f"resuming {run.path}: training had ended; the test episodes run"
        )
    run.write_config(config)


def interrupted_line(run: RunDir, keep_buffer: bool = True) -> str:
    """What a run stopped by Ctrl-C keeps, and the command that continues it (one line)."""
    command = f"python -m rlzoo.train resume={shlex.quote(str(run.path))}"
    if not run.config.is_file():
        return "nothing was written"
    if run.is_finished():
        return f"the run in {run.path} had finished"
    if run.trained():
        return f"training had ended, the test episodes had not; {command} runs them"
    checkpoints = run.checkpoints()
    try:
        newest = newest_complete(run, checkpoints, keep_buffer, warn=False) if checkpoints else None
    except ConfigError:
        newest = None
    if newest is None:
        return f"no checkpoint yet in {run.path}; {command} starts it over"
    return f"checkpoint kept at step {int(newest.name):,} in {run.path}; resume with: {command}"


def check_still_planned(run: RunDir, point: ResumePoint | None, config: DictConfig) -> None:
    """Under the run dir's lock, before the first write: the dir must still be as it was planned (another process
    may have trained in it between planning and the lock)."""
    if find_resume_point(run, config, warn=False) != point:
        raise ConfigError(
            f"run_dir {run.path} changed while this run was being planned (another process wrote to it); "
            "run the command again to continue from what it holds now"
        )


def truncate_logs(run: RunDir, point: ResumePoint | None) -> None:
    """Cut every log back to its length at ``point``, TensorBoard's to its step (a fresh start in a used dir: remove
    the old logs)."""
    from rlzoo.loggers.tensorboard import cut_event_files  # torch's TensorBoard writer: only when a run resumes

    if point is None or point.timesteps >= 0:
        cut_event_files(run.tensorboard_dir, None if point is None else point.timesteps)
    if point is None:
        for path in appended_logs(run):
            path.unlink(missing_ok=True)
        return
    cut_logs(run.path, point.log_lines)


def resume_config(run_dir: Path, composed: DictConfig, overrides: list[str]) -> DictConfig:
    """The saved config of ``run_dir`` for ``resume=<run dir>``; command-line ``overrides`` must agree with it.

    :param composed: the config composed from the command line (the run's saved config wins everywhere).
    :param overrides: the command line's ``key=value`` overrides; each must leave the saved value unchanged.
    """
    run = RunDir(run_dir)
    if not run.config.is_file():
        raise ConfigError(f"resume={str(run_dir)!r} is not a run dir (no config.yaml); give a run dir to continue")
    saved = run.read_config()
    if not composed.get("trusted"):
        saved = shared_config(saved, run.config)
    conflicts = []
    for override in overrides:
        key = override.split("=", 1)[0].lstrip("+~")
        if key in NOT_COMPARED or key == MEMORY_KEY or key.startswith("hydra"):  # the budget: the caller's
            continue
        ours, theirs = OmegaConf.select(composed, key), OmegaConf.select(saved, key)
        if isinstance(ours, DictConfig):
            ours = OmegaConf.to_container(ours, resolve=True)
            theirs = OmegaConf.to_container(theirs, resolve=True) if isinstance(theirs, DictConfig) else theirs
        if ours != theirs:
            conflicts.append(f"{override} (the run has {key}={theirs!r})")
    if conflicts:
        raise ConfigError(f"resume={run_dir}: overrides conflict with the run's saved config: {'; '.join(conflicts)}")
    saved.run_dir = str(run_dir)
    saved.resume = None
    saved.trusted = bool(composed.get("trusted"))  # the caller's word, never the run's
    for key in ("verbose", "progress_bar", "max_test_steps", "test_steps", "test_envs", "checkpoint_buffer"):
        if any(o.split("=", 1)[0] == key for o in overrides):
            saved[key] = composed[key]
    return saved


def resume_model(
    algo_class: type[BaseAlgorithm],
    point: ResumePoint,
    normalizer: VecNormalize | None,
    fresh: Callable[[], BaseAlgorithm] | None = None,
    **kwargs: Any,
) -> BaseAlgorithm:
    """Load the model of ``point`` to continue training (its step counter included) and restore ``normalizer``'s
    statistics from it.

    :param fresh: builds the model from the run's checked config; the checkpoint's weights and counters go into it
        without unpickling anything (:func:`rlzoo.training.safe_load.restore_weights`). None (``trusted=true``):
        SB3's own ``load``.
    :param kwargs: ``env``, ``device`` and attributes to set (``verbose``), as for ``BaseAlgorithm.load``.
    """
    point.models.restore_obs_norm(normalizer)
    if fresh is None:
        return algo_class.load(point.models.model, **kwargs)
    model = fresh()
    restore_weights(model, point.models.model)
    return model
