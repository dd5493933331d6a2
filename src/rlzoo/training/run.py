"""One training run: what ``python -m rlzoo.train`` (and ``rlzoo.train.train``) does with a composed config.

plan (every input checked, nothing written) → training envs → run dir (fresh, or cut back to its resume point) →
normaliser and model → learn with callbacks → save → test episodes → metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from omegaconf import DictConfig
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.utils import set_random_seed
from stable_baselines3.common.vec_env import VecNormalize

from rlzoo.collector import collect_from_here
from rlzoo.loggers.live_plot import LivePlot
from rlzoo.rundir import BEST, save_model
from rlzoo.training.budget import RunClock, episodes_logged, learn, show_progress
from rlzoo.training.build import RunBuilder
from rlzoo.training.callbacks import Checkpoint, Returns100
from rlzoo.training.context import RunContext
from rlzoo.training.episodes import play_episodes, summarize
from rlzoo.training.keep_best import KeepBest, load_best
from rlzoo.training.normalization import FrozenNormalization
from rlzoo.training.plan import RunPlan, plan_run

EVAL_SEED_OFFSET = 20_000  # keep-best evaluation episodes are neither training nor test episodes

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
    plan = plan_run(cfg, overrides)  # every input checked; nothing written, nothing heavy built
    build = RunBuilder(plan)
    with RunContext(build) as run:
        set_random_seed(plan.seed)
        env, normalizer = run.training_env()
        model = run.model(env, normalizer)
        run.claim(model)  # the run dir exists from here on
        extra = extra_callbacks(build) if extra_callbacks is not None else ()
        evaluated = _learn(plan, model, normalizer, extra, run.clock)
        metrics = {"train/timesteps": float(model.num_timesteps), "time/train_seconds": run.seconds(), **evaluated}
        save_model(plan.run.path, model, normalizer)
        if plan.settings.test_checkpoint == BEST:  # the test episodes play the best evaluated model
            model = load_best(plan.run, plan.factory.algo_class, normalizer)
        metrics |= _test(build, model, normalizer)
        metrics["time/total_seconds"] = run.seconds()
        plan.run.write_metrics(metrics)
    return metrics


def _learn(
    plan: RunPlan,
    model: BaseAlgorithm,
    normalizer: VecNormalize | None,
    extra: Sequence[BaseCallback] = (),
    clock: RunClock | None = None,
) -> dict[str, float]:
    """Learn up to ``total_timesteps`` or ``total_episodes`` (a resumed run: what is left) with the run's callbacks
    and ``extra``; return the keep-best evaluation's figures (``eval/best_return``; empty when ``eval_freq=0``)."""
    point, settings = plan.resume_point, plan.settings
    clock = clock or RunClock.resumed()
    returns100 = Returns100(plan.run.returns100, pending=point.pending_returns if point else ())
    callbacks: list[Any] = [returns100]
    if settings.checkpoint_freq:
        callbacks.append(Checkpoint(plan.run, settings.checkpoint_freq, normalizer, returns100, clock))
    if plan.logging.visdom is not None:  # logger=visdom: live plots
        callbacks.append(LivePlot(plan.logging.visdom, plan.run.path))
    keep = _keep_best(plan, normalizer) if settings.eval_freq else None
    callbacks.extend([keep] if keep is not None else [])
    callbacks.extend(extra)
    done = episodes_logged(plan.run.monitor_files()) if point is not None and settings.total_episodes else 0
    try:
        collect_from_here()
        learn(model, settings, callbacks, resumed=point is not None, clock=clock, episodes_done=done)
    finally:
        if keep is not None:
            keep.eval_env.close()
    if keep is None:
        return {}
    return {"eval/best_return": keep.best_return, "eval/best_steps": float(keep.best_steps or -1)}


def _keep_best(plan: RunPlan, normalizer: VecNormalize | None) -> KeepBest:
    """Keep-best evaluation (``eval_freq``): frozen envs of its own (as many as the test's, at most one per episode),
    whose normalisation is a fresh snapshot of the training statistics at each evaluation; every evaluation plays the
    same ``eval_episodes`` episodes, seeded apart from the training and test episodes."""
    settings = plan.settings
    frozen = FrozenNormalization.snapshot(normalizer) if normalizer is not None else None
    seed = settings.seed + EVAL_SEED_OFFSET
    n_envs = min(settings.test_envs, settings.eval_episodes)
    eval_env = RunBuilder(plan).test_env(frozen, seed=seed, n_envs=n_envs)
    run = plan.run
    return KeepBest(eval_env, run.best_dir, run.evaluations, settings.eval_freq, settings.eval_episodes, normalizer,
                    deterministic=settings.deterministic_test, episode_seed=seed)  # fmt: skip


def _test(build: RunBuilder, model: BaseAlgorithm, normalizer: VecNormalize | None) -> dict[str, float]:
    """Test episodes with learning off on ``test_envs`` envs of their own; their results go to ``test_returns.csv``.
    With ``sampled_test`` the same episodes (same seeds) are played again with sampled actions: ``test_sampled/``
    metrics and ``test_returns_sampled.csv``."""
    settings = build.plan.settings
    metrics = _play_test(build, model, normalizer, deterministic=settings.deterministic_test)
    if settings.sampled_test and settings.test_episodes:
        sampled = _play_test(build, model, normalizer, deterministic=False, sampled_file=True)
        metrics |= {key.replace("test/", "test_sampled/", 1): value for key, value in sampled.items()}
    return metrics


def _play_test(
    build: RunBuilder,
    model: BaseAlgorithm,
    normalizer: VecNormalize | None,
    deterministic: bool,
    sampled_file: bool = False,
) -> dict[str, float]:
    """Play the test episodes in one mode, write their returns (``test_returns.csv``, or
    ``test_returns_sampled.csv`` with ``sampled_file``) and summarise them under ``test/``."""
    settings = build.plan.settings
    results = []
    if settings.test_episodes:
        frozen = FrozenNormalization.snapshot(normalizer) if normalizer is not None else None
        test_env = build.test_env(frozen, n_envs=min(settings.test_envs, settings.test_episodes))
        try:
            bar = "test episodes" if show_progress(settings.progress_bar) else None
            results = play_episodes(model, test_env, settings.test_episodes, deterministic=deterministic, progress=bar)
        finally:
            test_env.close()
    build.plan.run.write_test_returns([r.ret for r in results], [r.length for r in results], sampled=sampled_file)
    return summarize(results) if results else {}
