"""What one training run holds while it lasts, beside the pipeline of :func:`rlzoo.training.run.train_run`: the
envs it closes, the run clock, the run dir claimed only once the model is built, monitor files, SB3's logger and the
W&B run, and the guard that turns a failed write into one line."""

from __future__ import annotations

import shutil
import time
from contextlib import ExitStack
from types import TracebackType

from omegaconf import OmegaConf
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from rlzoo.loggers.outputs import make_logger, start_wandb
from rlzoo.rundir import RunDir
from rlzoo.training.budget import RunClock
from rlzoo.training.build import RunBuilder
from rlzoo.training.faults import building, run_writes
from rlzoo.training.monitor import PerEnvMonitor
from rlzoo.training.resume import check_still_planned, open_run_dir


class RunContext:
    """The plumbing of one run (a context manager: everything it opened is closed on the way out).

    :param build: the run's builder (its plan says what to build and where to write).
    """

    def __init__(self, build: RunBuilder) -> None:
        self.build, self.plan = build, build.plan
        point = self.plan.resume_point
        self.clock = RunClock.resumed(point.elapsed if point is not None else 0.0)
        self.started = time.perf_counter()
        self._cleanup = ExitStack()
        self._monitor: PerEnvMonitor | None = None

    def __enter__(self) -> RunContext:
        self.plan.hardware.apply()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._cleanup.__exit__(kind, error, trace)

    def training_env(self) -> tuple[VecEnv, VecNormalize | None]:
        """The ``n_envs`` training envs, monitored (files opened by :meth:`claim`) and normalised when the run
        normalises: the env the model learns on, and the normaliser (None when off). Nothing is written."""
        venv = self.build.training_env()
        self._cleanup.callback(venv.close)
        self._monitor = self.build.monitored(venv, None, self.clock.start)
        normalizer = self.build.normalizer(self._monitor)
        return normalizer or self._monitor, normalizer

    def model(self, env: VecEnv, normalizer: VecNormalize | None) -> BaseAlgorithm:
        """The model on ``env`` (fresh, resumed or fine-tuned); an error building it is one line, before any write."""
        with building(f"the {self.plan.factory.name} model"):
            return self.build.model(env, normalizer)

    def claim(self, model: BaseAlgorithm) -> None:
        """Lock and claim the run dir (fresh, or cut back to the resume point), open the monitor files, guard writes
        and log ``model``'s training (SB3's logger, and W&B when configured)."""
        plan = self.plan
        assert self._monitor is not None, "training_env() comes first"
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
        self._monitor.open_files(plan.run.monitor_dir, override_existing=plan.resume_point is None)
        self._cleanup.callback(self._monitor.close_files)
        model.set_logger(make_logger(plan.run, plan.logging.formats, wandb_run))
        self._cleanup.callback(self._close_logging, model, wandb_run)

    def _close_logging(self, model: BaseAlgorithm, wandb_run: object) -> None:
        model.logger.close()
        if wandb_run is not None:
            if self.plan.run.is_finished():
                wandb_run.summary.update(self.plan.run.read_metrics())  # type: ignore[attr-defined]
            wandb_run.finish()  # type: ignore[attr-defined]

    def seconds(self) -> float:
        """Wall seconds since the run started (this process)."""
        return time.perf_counter() - self.started


def _remove_if_unused(run: RunDir) -> None:
    """Remove a run dir this run made and never wrote its config to (W&B failed to start): nothing half-written."""
    if not run.config.exists():
        shutil.rmtree(run.path, ignore_errors=True)
