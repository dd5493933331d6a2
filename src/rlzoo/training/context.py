"""What one run holds while it lasts, for the skeleton of :func:`rlzoo.training.run.run`: the envs it closes, the run
clock, the run dir claimed only once the learners are built, SB3's loggers and the W&B run, the guard that turns a
failed write into one line, and Slurm's warning (SIGUSR2: :mod:`rlzoo.training.requeue`). The same for every kind of
run."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, ExitStack
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from omegaconf import OmegaConf

from rlzoo.loggers.outputs import make_logger, start_wandb
from rlzoo.loggers.wandb_state import WandbState, finish
from rlzoo.provenance import cpu_seconds
from rlzoo.rundir import RunDir
from rlzoo.training.budget import RunClock
from rlzoo.training.faults import run_writes
from rlzoo.training.requeue import RequeueSignal
from rlzoo.training.resume import check_still_planned, open_run_dir

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm

    from rlzoo.training.kind import KindPlan, Learning

T = TypeVar("T")


class RunContext:
    """The plumbing of one run (a context manager: everything it opened is closed on the way out).

    :param plan: the run's plan (any kind's: it says where to write, how to log and where a resume starts).
    """

    def __init__(self, plan: KindPlan) -> None:
        self.plan = plan
        point = plan.resume_point
        self.clock = RunClock.resumed(point.elapsed if point is not None else 0.0)
        self.started = time.perf_counter()
        self.cpu_started = cpu_seconds()
        self.requeue = RequeueSignal()
        self._cleanup = ExitStack()

    def __enter__(self) -> RunContext:
        self.plan.hardware.apply()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._cleanup.__exit__(kind, error, trace)

    def on_exit(self, callback: Callable[..., Any], *args: Any) -> None:
        """Call ``callback(*args)`` when the run ends (envs to close ...)."""
        self._cleanup.callback(callback, *args)

    def enter(self, context: AbstractContextManager[T]) -> T:
        """Enter ``context`` until the run ends."""
        return self._cleanup.enter_context(context)

    def claim(self, learning: Learning) -> None:
        """Lock and claim the run dir (fresh, or cut back to the resume point), guard writes, open the kind's logs
        and log every model's training (SB3's logger per learner; W&B when configured)."""
        plan = self.plan
        fresh = not plan.run.path.exists()
        self._cleanup.enter_context(plan.run.locked())  # one process at a time in a run dir
        check_still_planned(plan.run, plan.resume_point, plan.config)
        wandb_run = None
        if plan.logging.wandb is not None:  # before anything is written: a failing wandb.init leaves no run behind
            if fresh:
                self._cleanup.callback(_remove_if_unused, plan.run)
            wandb_run = start_wandb(plan.logging.wandb, plan.run, OmegaConf.to_container(plan.config))  # type: ignore[arg-type]
        open_run_dir(plan.run, plan.resume_point, plan.config)
        self._cleanup.enter_context(run_writes(plan.run))  # a full disk ...: one line, naming what survived
        learning.open_logs()
        state = None
        if plan.logging.wandb is not None and wandb_run is not None:  # one W&B record for every learner
            state = WandbState.of(plan.run, offline=plan.logging.wandb.mode == "offline")
            state.continue_offline(wandb_run)  # the points before the resume point again, in this process's folder
            self._cleanup.callback(state.close)
        models = learning.models
        for name, model in models.items():
            folder = RunDir(plan.run.models().learner(name).path) if name else plan.run
            folder.path.mkdir(parents=True, exist_ok=True)
            prefix = f"{name}/" if name else ""
            model.set_logger(
                make_logger(folder, plan.logging.formats, wandb_run, wandb_prefix=prefix, wandb_state=state)
            )
        self._cleanup.callback(self._close_logging, models, wandb_run)
        if plan.settings.checkpoint_freq:  # Slurm's warning: a checkpoint, then the requeue (rlzoo.training.requeue)
            self.requeue.arm()
            self._cleanup.callback(self.requeue.disarm)

    def _close_logging(self, models: Mapping[str, BaseAlgorithm], wandb_run: object) -> None:
        for model in models.values():
            model.logger.close()
        if wandb_run is not None:
            if self.plan.run.is_finished():
                wandb_run.summary.update(self.plan.run.read_metrics())  # type: ignore[attr-defined]
            finish(wandb_run)

    def seconds(self) -> float:
        """Wall seconds since the run started (this process)."""
        return time.perf_counter() - self.started

    def cpu_seconds(self) -> float:
        """User + system CPU seconds of this process since the run started (:func:`rlzoo.provenance.cpu_seconds`)."""
        return cpu_seconds() - self.cpu_started


def _remove_if_unused(run: RunDir) -> None:
    """Remove a run dir this run made and never wrote its config to (W&B failed to start): nothing half-written."""
    if not run.config.exists():
        shutil.rmtree(run.path, ignore_errors=True)
