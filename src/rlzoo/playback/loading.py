"""Load a trained agent back from its run dir alone: model, env, representation and frozen normalisation.

Everything comes from the run dir (:mod:`rlzoo.rundir`): the resolved ``config.yaml`` names the env, the
representation and the algorithm class; ``model.zip`` (+ ``obs_norm.npz``) or ``checkpoints/<steps>/`` hold the weights
and the statistics (a :class:`~rlzoo.model_files.ModelFolder`), which are frozen at replay. Replays write their
videos, plots and returns into the run dir's ``enjoy/`` (:func:`enjoy_dir`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from omegaconf import DictConfig, OmegaConf
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.vec_env import VecEnv

import rlzoo  # noqa: F401  (registers the rlzoo/ env ids a run may use)
from rlzoo.any_env.options import observation_label
from rlzoo.any_env.spec import EnvSpec
from rlzoo.errors import ConfigError
from rlzoo.model_files import ModelFolder
from rlzoo.rundir import BEST, FINAL, MODEL, OBS_NORM, RunDir
from rlzoo.srl.representation import Representation
from rlzoo.training.build import RunBuilder, load_model
from rlzoo.training.episodes import EpisodeResult, Progress, play_episodes
from rlzoo.training.kind import SINGLE_AGENT, kind_entry, open_run
from rlzoo.training.normalization import FrozenNormalization
from rlzoo.training.plan import RunPlan, plan_run
from rlzoo.training.safe_load import load_untrusted
from rlzoo.training.shared_config import shared_config

ENJOY = "enjoy"


def enjoy_dir(run: RunDir) -> Path:
    """Where replays (``rlzoo.enjoy``) write their videos, plots and returns."""
    return run.path / ENJOY


def checkpoint_steps(run: RunDir) -> list[int]:
    """Steps of the complete checkpoints of ``run``, oldest first."""
    return [int(folder.name) for folder in run.checkpoints()]


def model_folder(run: RunDir, checkpoint: int | str | None = None) -> tuple[ModelFolder, int | None]:
    """The folder holding ``checkpoint``'s model (+ ``obs_norm.npz``) and its steps: :meth:`RunDir.find_model`
    (``final``, ``latest``, ``best`` or a checkpoint's steps)."""
    return run.find_model(checkpoint)


@dataclass
class LoadedRun:
    """A trained agent with everything needed to act as it did in training and test.

    :param path: the run dir.
    :param plan: the run's saved config, planned again (the env as trained, its representation, the algorithm).
    :param model: the algorithm, loaded on the CPU.
    :param normalization: the frozen observation statistics (None when the run did not normalise).
    :param checkpoint: the checkpoint's steps, None for the final (or the best) model.
    :param best: the best evaluated model (``checkpoint=best``).
    """

    path: Path
    plan: RunPlan
    model: BaseAlgorithm
    normalization: FrozenNormalization | None = None
    checkpoint: int | None = None
    best: bool = False

    @property
    def config(self) -> DictConfig:
        return self.plan.config

    @property
    def spec(self) -> EnvSpec:
        return self.plan.spec

    @property
    def representation(self) -> Representation:
        return self.plan.representation

    @property
    def observations(self) -> str:
        """The representation as titles name it: ``images`` for the env's own image observations (Atari ...)."""
        return observation_label(self.representation.name, self.plan.spec.options.observation)

    @property
    def label(self) -> str:
        """``final``, ``best`` or ``checkpoint_<steps>`` (used to name replay outputs)."""
        if self.best:
            return BEST
        return FINAL if self.checkpoint is None else f"checkpoint_{self.checkpoint}"

    def normalize_observation(self, obs: np.ndarray) -> np.ndarray:
        """Normalise ``obs`` with the frozen statistics; identity when the run did not normalise."""
        return obs if self.normalization is None else self.normalization(obs)

    def make_env(self, seed: int = 0, render_mode: str | None = None, n_envs: int = 1) -> VecEnv:
        """Envs of the run with its representation and frozen normalisation (as in the test episodes).

        :param seed: the seed of the first episode (episode ``i`` is seeded ``seed + i``).
        :param render_mode: e.g. ``"rgb_array"`` to record frames with ``venv.render()``.
        :param n_envs: envs that play episodes at once.
        """
        return RunBuilder(self.plan).test_env(self.normalization, seed, render_mode, n_envs)


def plan_saved_run(config: DictConfig) -> RunPlan:
    """The plan of a run's saved config, on the CPU and without reading its run dir's state."""
    on_cpu = OmegaConf.merge(config, {"hardware": {"device": "cpu"}})
    assert isinstance(on_cpu, DictConfig)
    return plan_run(on_cpu, run_dir_state=False)


def load_run(
    run_dir: str | Path, checkpoint: int | str | None = None, *, trusted: bool = False, allow: Sequence[str] = ()
) -> LoadedRun:
    """Load the agent of a run dir (see :func:`model_folder` for ``checkpoint``), on the CPU.

    :param trusted: load with SB3's own ``load`` (it unpickles) and any ``_target_``; by default the config is checked
        against the allowlist and the model rebuilt from it (:mod:`rlzoo.training.safe_load`).
    :param allow: module names whose ``_target_`` entries the caller trusts (their own algorithm module).
    :raise ConfigError: not a run dir, missing or corrupt model, unknown checkpoint, a ``_target_`` outside the
        allowlist.
    """
    run = open_run(run_dir)
    config = run.read_config()
    if (kind := kind_entry(config).name) != SINGLE_AGENT:
        raise ConfigError(f"{run.path} is a {kind} run: load its agent with rlzoo.load_agent (load_run: one model)")
    folder, steps = model_folder(run, checkpoint)
    if not trusted:
        config = shared_config(config, run.config, allow)
    plan = plan_saved_run(config)
    model = load_model(plan.factory.algo_class, folder.model) if trusted else _load_untrusted(plan, folder.model)
    normalization = None
    if folder.obs_norm.is_file():
        normalization = FrozenNormalization.load(folder.obs_norm)
    elif plan.settings.normalize:
        raise ConfigError(f"{folder.path} has {MODEL} but no {OBS_NORM}, although the run normalised observations")
    return LoadedRun(run.path, plan, model, normalization, steps, best=checkpoint == BEST)


def _load_untrusted(plan: RunPlan, path: Path) -> BaseAlgorithm:
    """The model rebuilt from ``plan`` on one env of the run (for its spaces), with the weights of ``path``."""
    venv = RunBuilder(plan).test_env(None)
    try:
        model = load_untrusted(plan.factory, plan.policy, path, venv, device="cpu", verbose=0)
    finally:
        venv.close()
    model.env = None  # as SB3's load without an env: the model acts on what it is given
    return model


def describe(loaded: LoadedRun) -> dict[str, Any]:
    """What was loaded, for messages: run, checkpoint, algorithm, env, srl_model, steps."""
    return {
        "run": str(loaded.path),
        "checkpoint": loaded.label,
        "algo": type(loaded.model).__name__,
        "env": loaded.spec.id,
        "srl_model": loaded.observations,
        "steps": int(loaded.model.num_timesteps),
    }


@dataclass
class Episode:
    """One replayed episode.

    :param ret: the undiscounted return (the Monitor's, as in training).
    :param length: number of agent steps.
    :param actions: the actions taken, one row per step (empty when the episodes were played on several envs at once,
        with nothing recorded but returns and lengths).
    :param probabilities: per step, the policy's probability of each discrete action (None when not recorded).
    :param robot: ``info["robot_position"]`` at reset and after every step (None when not recorded).
    :param targets: ``info["target_position"]`` likewise.
    :param frames: one ``rgb_array`` render per step, taken before the agent acts (empty when not recorded).
    """

    ret: float
    length: int
    actions: np.ndarray
    probabilities: np.ndarray | None = None
    robot: np.ndarray | None = None
    targets: np.ndarray | None = None
    frames: list[np.ndarray] = field(default_factory=list)


def action_probabilities(model: BaseAlgorithm, obs: np.ndarray) -> np.ndarray | None:
    """The policy's probability of each action for the (already normalised) ``obs`` of one env.

    :return: an array of ``n`` probabilities, or None for policies without an action distribution (DQN's greedy
        Q-network, ARS, recurrent policies) and for non-discrete action spaces.
    """
    policy = model.policy
    if not isinstance(model.action_space, spaces.Discrete) or isinstance(policy, RecurrentActorCriticPolicy):
        return None
    get_distribution = getattr(policy, "get_distribution", None)
    if get_distribution is None:
        return None
    with torch.no_grad():
        obs_tensor, _ = policy.obs_to_tensor(obs)
        probs = get_distribution(obs_tensor).distribution.probs
    return probs.cpu().numpy()[0]


class _EpisodeRecorder:
    """Records what :func:`run_episodes` is asked for, step by step (a :class:`rlzoo.training.episodes.Recorder`)."""

    def __init__(self, model: BaseAlgorithm, frames: bool, positions: bool, probabilities: bool, env_id: str) -> None:
        self.model, self.frames, self.positions, self.probabilities, self.env_id = (
            model, frames, positions, probabilities, env_id
        )  # fmt: skip
        self.episodes: list[Episode] = []
        self._infos: list[dict[str, Any]] = []
        self._actions: list[np.ndarray] = []
        self._probs: list[np.ndarray | None] = []
        self._images: list[np.ndarray] = []

    def start(self, reset_info: dict[str, Any]) -> None:
        if self.positions and "robot_position" not in reset_info:
            raise ConfigError(
                f"the trajectory plot needs ground-truth positions in info['robot_position'] (and "
                f"info['target_position']); {self.env_id} does not put them there (the rlzoo/MobileRobot envs do)"
            )
        self._infos, self._actions, self._probs, self._images = [reset_info], [], [], []

    def before_action(self, venv: VecEnv, observation: Any) -> None:
        if self.frames:
            self._images.append(np.asarray(venv.render()))
        if self.probabilities:
            self._probs.append(action_probabilities(self.model, observation))

    def after_step(self, action: np.ndarray, reward: float, info: dict[str, Any]) -> None:
        self._actions.append(action)
        self._infos.append(info)

    def finish(self, result: EpisodeResult) -> None:
        episode = Episode(result.ret, len(self._actions), np.stack(self._actions), frames=self._images)
        if self.probabilities and self._probs and self._probs[0] is not None:
            episode.probabilities = np.stack([p for p in self._probs if p is not None])
        if self.positions:
            episode.robot = np.stack([info["robot_position"] for info in self._infos])
            if "target_position" in self._infos[0]:
                episode.targets = np.stack([info["target_position"] for info in self._infos])
        self.episodes.append(episode)


def run_episodes(
    loaded: LoadedRun,
    episodes: int,
    *,
    deterministic: bool = True,
    seed: int = 0,
    frames: bool = False,
    positions: bool = False,
    probabilities: bool = False,
    envs: int = 1,
    progress: Progress | None = None,
) -> list[Episode]:
    """Replay ``episodes`` episodes one after the other on one env, recording what is asked for; or, when nothing is
    recorded but returns and lengths, on ``envs`` envs at once (the same episodes: each is seeded ``seed + i``).

    :param frames: record an ``rgb_array`` frame per step (the env is made with that render mode).
    :param positions: record ``info["robot_position"]`` and ``info["target_position"]``.
    :param probabilities: record the discrete action probabilities (see :func:`action_probabilities`).
    :param progress: how to show the episodes played (a bar, progress lines; None: nothing).
    :raise ConfigError: ``positions`` for an env whose info has no ``robot_position``.
    """
    if not (frames or positions or probabilities) and min(envs, episodes) > 1:
        venv = loaded.make_env(seed, n_envs=min(envs, episodes))
        try:
            results = play_episodes(loaded.model, venv, episodes, deterministic=deterministic, progress=progress)
        finally:
            venv.close()
        return [Episode(r.ret, r.length, np.empty((0,))) for r in results]
    recorder = _EpisodeRecorder(loaded.model, frames, positions, probabilities, loaded.spec.id)
    venv = loaded.make_env(seed, render_mode="rgb_array" if frames else None)
    try:
        play_episodes(loaded.model, venv, episodes, deterministic=deterministic, recorder=recorder, progress=progress)
        return recorder.episodes
    finally:
        venv.close()
