"""One training run: what ``python -m rlzoo.train`` (and ``rlzoo.train.train``) does with a composed config.

plan (every input checked, nothing written) → training envs → run dir (fresh, or cut back to its resume point) →
normaliser and model → learn with callbacks → save → test episodes → metrics.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import Any

from omegaconf import DictConfig, OmegaConf
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.utils import set_random_seed
from stable_baselines3.common.vec_env import VecNormalize

from rlzoo.experiment.budget import RunClock, episodes_logged, learn
from rlzoo.experiment.build import RunBuilder
from rlzoo.experiment.callbacks import Checkpoint, Returns100
from rlzoo.experiment.episodes import play_episodes, summarize
from rlzoo.experiment.faults import building, run_writes
from rlzoo.experiment.live_plot import LivePlot
from rlzoo.experiment.loggers import make_logger, start_wandb
from rlzoo.experiment.normalization import FrozenNormalization
from rlzoo.experiment.plan import RunPlan, plan_run
from rlzoo.experiment.resume import open_run_dir
from rlzoo.experiment.rundir import save_model

# Extra callbacks for one run, made from its builder (``rlzoo.tune``: intermediate evaluations that may stop training).
CallbackFactory = Callable[[RunBuilder], Sequence[BaseCallback]]


def train_run(
    cfg: DictConfig, overrides: Sequence[str] = (), extra_callbacks: CallbackFactory | None = None
) -> dict[str, float]:
    """Train, save and test one agent as ``cfg`` describes; return its metrics (``test/mean_return`` ...).

    Every input is checked before the run dir is written to; ``metrics.json`` is written last.

    :param overrides: the command line's overrides (checked against a saved config for ``resume=<run dir>``).
    :param extra_callbacks: makes callbacks that learn with the run's own (one returning False stops training).
    """
    started = time.perf_counter()
    plan = plan_run(cfg, overrides)
    build = RunBuilder(plan)
    plan.hardware.apply()
    set_random_seed(plan.seed)
    with ExitStack() as cleanup:
        venv = build.training_env()
        cleanup.callback(venv.close)
        clock = RunClock.resumed(plan.resume_point.elapsed if plan.resume_point is not None else 0.0)
        monitor = build.monitored(venv, None, clock.start)
        normalizer = build.normalizer(monitor)
        with building(f"the {plan.factory.name} model"):  # its policy too: before the run dir is claimed
            model = build.model(normalizer or monitor, normalizer)
        open_run_dir(plan.run, plan.resume_point, plan.config)
        cleanup.enter_context(run_writes(plan.run))  # a full disk ...: one line, naming what survived
        monitor.open_files(plan.run.monitor_dir, override_existing=plan.resume_point is None)
        cleanup.callback(monitor.close_files)
        cleanup.enter_context(_RunLogging(plan, model))
        _learn(plan, model, normalizer, extra_callbacks(build) if extra_callbacks is not None else (), clock)
        metrics = {"train/timesteps": float(model.num_timesteps), "time/train_seconds": time.perf_counter() - started}
        save_model(plan.run.path, model, normalizer)
        metrics |= _test(build, model, normalizer)
        metrics["time/total_seconds"] = time.perf_counter() - started
        plan.run.write_metrics(metrics)
    return metrics


class _RunLogging:
    """SB3's logger (and a W&B run) for ``model`` while the run lasts; W&B gets the final metrics."""

    def __init__(self, plan: RunPlan, model: BaseAlgorithm) -> None:
        self.plan, self.model, self.wandb_run = plan, model, None

    def __enter__(self) -> None:
        wandb = self.plan.logging.wandb
        if wandb is not None:
            self.wandb_run = start_wandb(wandb, self.plan.run, OmegaConf.to_container(self.plan.config))  # type: ignore[arg-type]
        self.model.set_logger(make_logger(self.plan.run, self.plan.logging.formats, self.wandb_run))

    def __exit__(self, *exc: object) -> None:
        self.model.logger.close()
        if self.wandb_run is not None:
            if self.plan.run.is_finished():
                self.wandb_run.summary.update(self.plan.run.read_metrics())
            self.wandb_run.finish()


def _learn(
    plan: RunPlan,
    model: BaseAlgorithm,
    normalizer: VecNormalize | None,
    extra: Sequence[BaseCallback] = (),
    clock: RunClock | None = None,
) -> None:
    """Learn up to ``total_timesteps`` or ``total_episodes`` (a resumed run: what is left) with the run's callbacks
    and ``extra``."""
    point, settings = plan.resume_point, plan.settings
    clock = clock or RunClock.resumed()
    returns100 = Returns100(plan.run.returns100, pending=point.pending_returns if point else ())
    callbacks: list[Any] = [returns100]
    if settings.checkpoint_freq:
        callbacks.append(Checkpoint(plan.run, settings.checkpoint_freq, normalizer, returns100, clock))
    if plan.logging.visdom is not None:  # logger=visdom: live plots
        callbacks.append(LivePlot(plan.logging.visdom, plan.run.path))
    callbacks.extend(extra)
    done = episodes_logged(plan.run.monitor_files()) if point is not None and settings.total_episodes else 0
    learn(model, settings, callbacks, resumed=point is not None, clock=clock, episodes_done=done)


def _test(build: RunBuilder, model: BaseAlgorithm, normalizer: VecNormalize | None) -> dict[str, float]:
    """Test episodes with learning off on one env of their own; their results go to ``test_returns.csv``."""
    settings = build.plan.settings
    results = []
    if settings.test_episodes:
        frozen = FrozenNormalization.snapshot(normalizer) if normalizer is not None else None
        test_env = build.test_env(frozen)
        try:
            results = play_episodes(model, test_env, settings.test_episodes, deterministic=settings.deterministic_test)
        finally:
            test_env.close()
    build.plan.run.write_test_returns([r.ret for r in results], [r.length for r in results])
    return summarize(results) if results else {}
