"""The one assembly of a planned run: training vec env, frozen test/replay env, normaliser and model.

``train``, presets and agents, replay (``load_run``/``enjoy``), collection with an agent and the benchmarks all build
through :class:`RunBuilder`; nothing else calls ``gymnasium.make`` for a run. It makes exactly the envs asked for:
``n_envs`` training envs, ``test_envs`` test envs, one bare env for an agent's spaces.
"""

from __future__ import annotations

import functools
import io
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecFrameStack, VecNormalize

from rlzoo.algos.factory import check_action_space
from rlzoo.any_env import making
from rlzoo.any_env.spec import EnvSpec
from rlzoo.any_env.wrappers import EpisodeSeeds, StepCap
from rlzoo.errors import ConfigError
from rlzoo.rundir import RunDir
from rlzoo.srl.pixels import rendered_pixels
from rlzoo.srl.representation import Representation
from rlzoo.training.finetune import check_spaces, init_model
from rlzoo.training.monitor import PerEnvMonitor
from rlzoo.training.normalization import FrozenNormalization, running_normalization
from rlzoo.training.plan import RunPlan
from rlzoo.training.resume import resume_model
from rlzoo.training.settings import TEST_EPISODE_FLOOR, TEST_STEPS_PER_TRAINING_STEP, RunSettings

VEC_ENV_CLASSES: dict[str, type[DummyVecEnv] | type[SubprocVecEnv]] = {"dummy": DummyVecEnv, "subproc": SubprocVecEnv}
TEST_SEED_OFFSET = 10_000  # test episodes are not training episodes


def make_env(
    spec: EnvSpec, representation: Representation, render_mode: str | None = None, *, training: bool = False
) -> gym.Env:
    """One env as the representation reads it (its make kwargs; ``render_mode`` may add one) with rlzoo's env keys
    applied (:func:`rlzoo.any_env.making.make`: action repeat, Atari preprocessing, flattening), without the
    representation's wrappers. ``training``: a training env (Atari: life-loss episodes, clipped rewards)."""
    kwargs = {**spec.kwargs, **representation.make_kwargs}
    if render_mode is not None:
        wanted = kwargs.setdefault("render_mode", render_mode)
        if wanted != render_mode:
            raise ConfigError(
                f"render_mode={render_mode!r} conflicts with srl_model={representation.name}, which needs "
                f"render_mode={wanted!r}"
            )
    if kwargs.get("render_mode") is not None:
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame-rendered envs: no display needed
    return making.make(spec.with_kwargs(**kwargs), training=training)


def _env_maker(
    spec: EnvSpec,
    representation: Representation,
    seed: int,
    render_mode: str | None,
    training: bool = False,
    step_cap: int | None = None,
    episode_seeds: int | None = None,
    budget_cap: int | None = None,
) -> Callable[[], gym.Env]:
    def make() -> gym.Env:
        env = make_env(spec, representation, render_mode, training=training)
        if step_cap is not None:
            env = StepCap(env, step_cap)
        if budget_cap is not None:
            env = StepCap(env, budget_cap, "test_steps", warn=False)
        if episode_seeds is not None:
            env = EpisodeSeeds(env, episode_seeds)
        env.action_space.seed(seed)
        return env

    return make


def represent(
    envs: Sequence[Callable[[], gym.Env]] | VecEnv,
    representation: Representation,
    frame_stack: int = 1,
    *,
    kind: str = "dummy",
    normalization: FrozenNormalization | None = None,
) -> VecEnv:
    """The one place a run's representation is applied, around real envs or held ones (the agent API): the per-env
    wrapper (pixels resized from renders ...) on each env, the vec env of ``kind``, the vec-env wrapper (a learned
    encoder on the whole batch), ``env.frame_stack`` consecutive states, and the frozen ``normalization`` (test,
    replay and held envs; a training run's running statistics wrap its monitor instead: :meth:`RunBuilder.normalizer`).

    :param envs: env makers, or a vec env that already observes as the representation reads (``vec_env=batched``).
    """
    if isinstance(envs, VecEnv):
        venv = envs
    else:
        wrapper = representation.observation_wrapper
        makers = [envs_maker if wrapper is None else _wrapped(envs_maker, wrapper) for envs_maker in envs]
        venv = VEC_ENV_CLASSES[kind](makers)
    if representation.vec_wrapper is not None:  # a learned encoder reads single images
        venv = representation.vec_wrapper(venv)
    if frame_stack > 1:  # env.frame_stack (Atari: 4): consecutive states, after the representation
        venv = VecFrameStack(venv, frame_stack)
    return normalization.wrap(venv) if normalization is not None else venv


def _wrapped(maker: Callable[[], gym.Env], wrapper: Callable[[gym.Env], gym.Env]) -> Callable[[], gym.Env]:
    return lambda: wrapper(maker())


def _batched(spec: EnvSpec, representation: Representation, n_envs: int, seed: int) -> VecEnv:
    """``vec_env=batched``: the envs stepped as one array operation (ground truth or native pixels)."""
    wrapper = representation.observation_wrapper
    pixels = isinstance(wrapper, functools.partial) and wrapper.func is rendered_pixels
    if wrapper is not None and not pixels:
        raise ConfigError(
            f"vec_env=batched observes the ground truth or rendered pixels, not srl_model={representation.name}'s "
            "per-env wrapper: use vec_env=dummy"
        )
    try:
        venv = making.batched_vec_env(spec.id, n_envs, seed, pixels, **spec.kwargs, **representation.make_kwargs)
    except ValueError as error:
        raise ConfigError(f"vec_env=batched: {error}") from None
    size = (wrapper.keywords.get("height"), wrapper.keywords.get("width")) if pixels else None  # type: ignore[union-attr]
    if size is not None and size != venv.observation_space.shape[:2]:  # type: ignore[index]
        venv.close()
        raise ConfigError(f"vec_env=batched renders {spec.id} at env.render_size, not at {size}: use vec_env=dummy")
    return venv


def vec_env(
    spec: EnvSpec,
    representation: Representation,
    n_envs: int,
    seed: int,
    kind: str = "dummy",
    render_mode: str | None = None,
    training: bool = False,
    step_cap: int | None = None,
    normalization: FrozenNormalization | None = None,
    seed_episodes: bool = False,
    budget_cap: int | None = None,
) -> VecEnv:
    """``n_envs`` envs (env ``rank`` seeded ``seed + rank`` at its first reset) with the representation applied
    (:func:`represent`).

    :param kind: ``dummy``, ``subproc`` or ``batched``.
    :param training: training envs (Atari: life-loss episodes and clipped rewards); else test or replay envs.
    :param step_cap: end episodes after this many steps, with a warning (test and replay envs without a step limit).
    :param normalization: frozen observation statistics (test and replay envs).
    :param seed_episodes: seed every episode, not only the first (test and replay envs): env ``rank``'s episode ``k``
        is seeded ``seed + rank + k * n_envs``, so that episode ``i`` of the envs taken in turn is seeded ``seed + i``
        whatever ``n_envs`` is (:class:`~rlzoo.any_env.wrappers.EpisodeSeeds`; not for ``batched``).
    :param budget_cap: end episodes after this many steps, without a warning (the test phase's step budget: the test
        phase reports the episodes it cut, :func:`test_cut_warning`).
    """
    stack = spec.options.frame_stack
    if kind == "batched":
        return represent(
            _batched(spec, representation, n_envs, seed), representation, stack, normalization=normalization
        )
    stride = n_envs if seed_episodes else None
    makers = [
        _env_maker(spec, representation, seed + rank, render_mode, training, step_cap, stride, budget_cap)
        for rank in range(n_envs)
    ]
    venv = represent(makers, representation, stack, kind=kind, normalization=normalization)
    venv.seed(seed)
    return venv


def load_model(algo_class: type[BaseAlgorithm], path: Path, **kwargs: Any) -> BaseAlgorithm:
    """A saved model on the CPU (or ``device=``); a file that is not one fails with one message."""
    try:
        return algo_class.load(path, **{"device": "cpu", **kwargs})
    except Exception as error:  # a truncated zip, a foreign file, an incompatible pickle ...
        raise ConfigError(f"{path} cannot be loaded as {algo_class.__name__}: {error}") from None


def test_cut_warning(env_id: str, settings: RunSettings, lengths: Sequence[int]) -> str | None:
    """The warning for the test episodes cut at their share of the test phase's step budget (``test_steps``), or
    None when none was."""
    cap = settings.test_episode_cap
    cut = sum(length >= cap for length in lengths) if cap is not None else 0
    if not cut:
        return None
    auto = f" (auto: {TEST_STEPS_PER_TRAINING_STEP} x total_timesteps)" if settings.test_steps == "auto" else ""
    return (
        f"{env_id}: {cut} of {len(lengths)} test episodes were cut at {cap} steps: test_steps="
        f"{settings.test_step_budget}{auto} shared by test_episodes={settings.test_episodes}, at least "
        f"{TEST_EPISODE_FLOOR} steps each; test_steps=null plays whole episodes"
    )


def snapshot(model: BaseAlgorithm) -> BaseAlgorithm:
    """A copy of ``model``'s weights as they are now, on the CPU (ALL's ``test_agent()``): it does not change when
    ``model`` goes on training. Made through SB3's own save format, so it works for any algorithm."""
    buffer = io.BytesIO()
    model.save(buffer)
    buffer.seek(0)
    return type(model).load(buffer, device="cpu")


class RunBuilder:
    """Builds the parts of one planned run."""

    def __init__(self, plan: RunPlan) -> None:
        self.plan = plan

    def training_env(self) -> VecEnv:
        """The ``n_envs`` training envs (not yet monitored), checked against the algorithm: nothing is written."""
        settings = self.plan.settings
        venv = vec_env(
            self.plan.spec, self.plan.representation, settings.n_envs, self.plan.seed, settings.vec_env, training=True
        )
        try:
            check_action_space(self.plan.factory.algo_class, venv.action_space)
            if self.plan.init_point is not None:  # fine-tuning: the saved model's spaces
                check_spaces(self.plan.init_point, venv)
        except ConfigError:
            venv.close()
            raise
        return venv

    def monitored(self, venv: VecEnv, run: RunDir | None, t_start: float | None = None) -> PerEnvMonitor:
        """``venv`` with its episodes logged in ``run``'s monitor files (appended to when the run resumes; None: files
        opened later with :meth:`PerEnvMonitor.open_files`, once the run dir is claimed). Atari training envs report
        whole games. ``t_start``: the run clock's start (a resumed run's ``t`` goes on)."""
        append = self.plan.resume_point is not None
        return PerEnvMonitor(
            venv, run.monitor_dir if run is not None else None, self.plan.spec.id, override_existing=not append,
            t_start=t_start, game_episodes=self.plan.spec.options.atari is not None,
        )  # fmt: skip

    def normalizer(self, venv: VecEnv) -> VecNormalize | None:
        """The running observation normalisation, when the run normalises."""
        return running_normalization(venv) if self.plan.settings.normalize else None

    def model(self, env: VecEnv, normalizer: VecNormalize | None) -> BaseAlgorithm:
        """The model on ``env``: fresh, resumed from the plan's resume point, or fresh with the weights of the
        plan's init point (``init_from``: fine-tuning); ``normalizer``'s statistics restored in the last two cases."""
        plan = self.plan
        kwargs: dict[str, Any] = {"env": env, "device": plan.hardware.device, "verbose": plan.settings.verbose}
        if plan.resume_point is not None:  # untrusted (the default): rebuilt from the checked config, no pickle
            fresh = None if plan.settings.trusted else functools.partial(plan.factory, policy=plan.policy, **kwargs)
            model = resume_model(plan.factory.algo_class, plan.resume_point, normalizer, fresh, **kwargs)
            model.seed = plan.settings.seed  # the run's own seed in the saved model (not reseeded: state is restored)
            return model
        model = plan.factory(policy=plan.policy, seed=plan.seed, **kwargs)
        return init_model(model, plan.init_point, normalizer) if plan.init_point is not None else model

    def test_env(
        self,
        normalization: FrozenNormalization | None,
        seed: int | None = None,
        render_mode: str | None = None,
        n_envs: int = 1,
        test_phase: bool = False,
    ) -> VecEnv:
        """``n_envs`` envs for test episodes or replay, with the frozen ``normalization``; an env without a step limit
        ends its episodes at ``max_test_steps``. Episode ``i`` (in the order of
        :func:`~rlzoo.training.episodes.play_episodes`) is seeded ``seed + i`` (seed: the run's test seed), so the
        episodes do not depend on ``n_envs``.

        :param test_phase: envs of the run's test phase: an episode is also cut at its share of ``test_steps``.
        """
        settings = self.plan.settings
        seed = settings.seed + TEST_SEED_OFFSET if seed is None else seed
        cap = making.step_cap(self.plan.spec, settings.max_test_steps)
        budget = settings.test_episode_cap if test_phase else None
        return vec_env(
            self.plan.spec, self.plan.representation, n_envs, seed, render_mode=render_mode, step_cap=cap,
            normalization=normalization, seed_episodes=True, budget_cap=budget,
        )  # fmt: skip

    def check_action_space(self) -> None:
        """Make one env and check its action space against the algorithm (a check ahead of the run, for callers
        that plan several runs before any trains)."""
        env = self.bare_env()
        try:
            check_action_space(self.plan.factory.algo_class, env.action_space)
        finally:
            env.close()

    def bare_env(self) -> gym.Env:
        """One env without the representation's wrappers: what states handed to an agent carry."""
        return make_env(self.plan.spec, self.plan.representation)
