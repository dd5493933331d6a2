"""How a single-agent run learns (its kind: :mod:`rlzoo.single_agent.kind`): one SB3 model on ``n_envs`` Gymnasium envs,
learning with ``model.learn()`` and the run's callbacks (returns100, checkpoints, live plots, keep-best evaluation),
tested on envs of its own."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from rlzoo.checkpoint_format import BUFFER
from rlzoo.gc_tuning import collect_from_here
from rlzoo.loggers.live_plot import LivePlot
from rlzoo.rundir import BEST, save_model
from rlzoo.training.budget import RunClock, episodes_logged, learn, progress_of
from rlzoo.training.build import RunBuilder, test_cut_warning
from rlzoo.training.callbacks import Checkpoint, Returns100
from rlzoo.training.episodes import Progress, play_episodes, summarize
from rlzoo.training.exact_resume import RunStateWriter, finish_restore, restore_run_state
from rlzoo.training.faults import building
from rlzoo.training.keep_best import KeepBest, load_best
from rlzoo.training.kind import Resources
from rlzoo.training.monitor import PerEnvMonitor
from rlzoo.training.normalization import FrozenNormalization
from rlzoo.training.plan import RunPlan
from rlzoo.training.run_state import MISSING, Snapshot

LOG = logging.getLogger("rlzoo")
EVAL_SEED_OFFSET = 20_000  # keep-best evaluation episodes are neither training nor test episodes

# Extra callbacks for one run, made from its builder (``rlzoo.tune``: intermediate evaluations that may stop training).
CallbackFactory = Callable[[RunBuilder], Sequence[BaseCallback]]


def build_single_agent(
    plan: RunPlan, context: Resources, extra_callbacks: CallbackFactory | None = None
) -> SingleAgentLearning:
    """The training envs (monitored, normalised) and the model (fresh, resumed or fine-tuned): nothing written; an
    error building the model is one line.

    :param extra_callbacks: makes callbacks that learn with the run's own (one returning False stops training).
    """
    build = RunBuilder(plan)
    venv = build.training_env()
    context.on_exit(venv.close)
    monitor = build.monitored(venv, None, context.clock.start)
    normalizer = build.normalizer(monitor)
    env: VecEnv = normalizer or monitor
    with building(f"the {plan.factory.name} model"):
        model = build.model(env, normalizer)
    point, restored = plan.resume_point, None
    if point is not None and point.timesteps >= 0:  # the envs, the model's runtime state, the replay buffer
        restored = restore_run_state(point.folder, plan.run.path, model, plan.settings.checkpoint_buffer)
        _say_empty_buffer(model, restored, plan.settings.checkpoint_buffer)
    learning = SingleAgentLearning(build, context, monitor, normalizer, model, extra_callbacks)
    learning.restored = restored
    return learning


def _say_empty_buffer(model: BaseAlgorithm, restored: Snapshot | None, keep: bool) -> None:
    """A resumed off-policy run whose replay buffer is not restored says, in one line, that it starts empty."""
    kept = keep and restored is not None and restored.get(BUFFER) is not MISSING
    if kept or not isinstance(model, OffPolicyAlgorithm):
        return
    why = "checkpoint_buffer=false" if not keep else "the checkpoint holds none"
    LOG.warning(f"resuming with an empty replay buffer ({why}): it fills again from here, so this run will not end "
                "exactly where an uninterrupted one would")  # fmt: skip


class SingleAgentLearning:
    """One model learning on its envs (:class:`rlzoo.training.kind.Learning`)."""

    def __init__(
        self,
        build: RunBuilder,
        context: Resources,
        monitor: PerEnvMonitor,
        normalizer: VecNormalize | None,
        model: BaseAlgorithm,
        extra_callbacks: CallbackFactory | None,
    ) -> None:
        self.build, self.plan, self.context = build, build.plan, context
        self.monitor, self.normalizer, self.model = monitor, normalizer, model
        self.extra_callbacks = extra_callbacks
        self.restored: Snapshot | None = None  # a resumed run's run state, whose generators are set last

    @property
    def models(self) -> Mapping[str, BaseAlgorithm]:
        return {"": self.model}

    @property
    def timesteps(self) -> int:
        return int(self.model.num_timesteps)

    def open_logs(self) -> None:
        run = self.plan.run
        self.monitor.open_files(run.monitor_dir, override_existing=self.plan.resume_point is None)
        self.context.on_exit(self.monitor.close_files)

    def learn(self, clock: RunClock) -> dict[str, float]:
        """Learn up to ``total_timesteps`` or ``total_episodes`` (a resumed run: what is left) with the run's
        callbacks; return the keep-best evaluation's figures (``eval/best_return``; empty when ``eval_freq=0``)."""
        plan, point, settings = self.plan, self.plan.resume_point, self.plan.settings
        returns100 = Returns100(plan.run.returns100, pending=point.pending_returns if point else ())
        callbacks: list[Any] = [returns100]
        if settings.checkpoint_freq:
            every, requeue = settings.checkpoint_freq, self.context.requeue
            writer = RunStateWriter(plan.run, settings.checkpoint_buffer, self.restored)
            callbacks.append(Checkpoint(plan.run, every, self.normalizer, returns100, clock, requeue, writer))
        if plan.logging.visdom is not None:  # logger=visdom: live plots
            callbacks.append(LivePlot(plan.logging.visdom, plan.run.path))
        keep = _keep_best(plan, self.normalizer) if settings.eval_freq else None
        callbacks.extend([keep] if keep is not None else [])
        callbacks.extend(self.extra_callbacks(self.build) if self.extra_callbacks is not None else ())
        done = episodes_logged(plan.run.monitor_files()) if point is not None and settings.total_episodes else 0
        try:
            collect_from_here()
            finish_restore(self.restored, self.model)  # the generators last: nothing draws from them before learn()
            learn(self.model, settings, callbacks, resumed=point is not None, clock=clock, episodes_done=done)
        finally:
            if keep is not None:
                keep.eval_env.close()
        if keep is None:
            return {}
        return {"eval/best_return": keep.best_return, "eval/best_steps": float(keep.best_steps or -1)}

    def save(self) -> None:
        save_model(self.plan.run.path, self.model, self.normalizer)

    def test(self) -> dict[str, float]:
        """The test episodes, played by the final model or (``test_checkpoint=best``) the best evaluated one."""
        model = self.model
        if self.plan.settings.test_checkpoint == BEST:
            into = None if self.plan.settings.trusted else model  # untrusted: the best weights only, no unpickling
            model = load_best(self.plan.run, self.plan.factory.algo_class, self.normalizer, into)
        return play_test(self.build, model, self.normalizer)


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


def play_test(build: RunBuilder, model: BaseAlgorithm, normalizer: VecNormalize | None) -> dict[str, float]:
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
        test_env = build.test_env(frozen, n_envs=min(settings.test_envs, settings.test_episodes), test_phase=True)
        try:
            mode = progress_of(settings.progress_bar)
            progress = Progress("test episodes", bar=mode == "bar", lines=mode == "lines" and settings.verbose > 0)
            results = play_episodes(model, test_env, settings.test_episodes, deterministic=deterministic,
                                    progress=progress)  # fmt: skip
        finally:
            test_env.close()
        cut = test_cut_warning(build.plan.spec.id, settings, [r.length for r in results])
        if cut is not None:
            LOG.warning(cut)
    build.plan.run.write_test_returns([r.ret for r in results], [r.length for r in results], sampled=sampled_file)
    return summarize(results) if results else {}
