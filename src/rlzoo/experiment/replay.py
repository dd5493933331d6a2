"""Load a trained agent back from its run dir alone: model, env, representation and frozen normalisation.

Everything comes from the run dir (:mod:`rlzoo.experiment.rundir`): the resolved ``config.yaml`` names the env, the
representation and the algorithm class; ``model.zip`` (+ ``obs_norm.npz``) or ``checkpoints/<steps>/`` hold the weights
and the statistics, which are frozen at replay.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hydra.utils
import numpy as np
import torch
from gymnasium import spaces
from omegaconf import DictConfig
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

import rlzoo  # noqa: F401  (registers the rlzoo/ env ids a run may use)
from rlzoo.errors import ConfigError
from rlzoo.experiment import environment as envs
from rlzoo.experiment.rundir import MODEL, OBS_NORM, RunDir, load_obs_norm

FINAL = "final"
LATEST = "latest"


def open_run(run_dir: str | Path) -> RunDir:
    """The run dir at ``run_dir``, or a ConfigError saying why it is not one."""
    run = RunDir(Path(run_dir).expanduser())
    if not run.path.is_dir():
        raise ConfigError(f"run={run_dir}: no such folder; pass the folder a training run wrote (with config.yaml)")
    if not run.is_run():
        raise ConfigError(
            f"run={run_dir} is not a run dir (it has no config.yaml); pass the folder a training run wrote, "
            "e.g. outputs/<date>/<time>_<algo>_<env>"
        )
    return run


def checkpoint_steps(run: RunDir) -> list[int]:
    """Steps of the complete checkpoints of ``run``, oldest first."""
    return [int(folder.name) for folder in run.checkpoints()]


def _available(run: RunDir) -> str:
    names = ([FINAL] if run.model.is_file() else []) + [str(s) for s in checkpoint_steps(run)]
    return ", ".join(names) if names else "none (no model.zip and no checkpoints/ yet)"


def model_folder(run: RunDir, checkpoint: int | str | None = None) -> tuple[Path, int | None]:
    """Resolve ``checkpoint`` to the folder holding ``model.zip`` (+ ``obs_norm.npz``).

    :param checkpoint: None or ``"final"``: the final model; an int (or digit string): ``checkpoints/<steps>/``;
        ``"latest"``: the newest checkpoint or the final model, whichever was written last.
    :return: the folder and the checkpoint's steps (None for the final model).
    """
    if checkpoint is None or checkpoint == FINAL:
        if not run.model.is_file():
            raise ConfigError(
                f"run {run.path} has no final {MODEL} (still training, or stopped early); "
                f"available: {_available(run)}; choose one with checkpoint=<steps> or checkpoint={LATEST}"
            )
        return run.path, None
    if checkpoint == LATEST:
        candidates: list[tuple[Path, int | None]] = [(f / MODEL, int(f.name)) for f in run.checkpoints()]
        if run.model.is_file():
            candidates.append((run.model, None))
        if not candidates:
            raise ConfigError(f"run {run.path} has no model yet: no {MODEL} and no complete checkpoints/")
        newest, steps = max(candidates, key=lambda c: (c[0].stat().st_mtime, c[1] is None))
        return newest.parent, steps
    if isinstance(checkpoint, str) and checkpoint.isdigit():
        checkpoint = int(checkpoint)
    if isinstance(checkpoint, bool) or not isinstance(checkpoint, int):
        raise ConfigError(f"checkpoint={checkpoint!r}; allowed: {FINAL}, {LATEST} or the steps of a checkpoint")
    if checkpoint not in checkpoint_steps(run):
        raise ConfigError(f"checkpoint={checkpoint} not found in run {run.path}; available: {_available(run)}")
    return run.checkpoint(checkpoint), checkpoint


def algorithm_class(config: DictConfig) -> type[BaseAlgorithm]:
    """The algorithm class the run's config names (``algo._target_``); its module must be importable."""
    target = str(config.algo.get("_target_", ""))
    try:
        algo_class = hydra.utils.get_class(target)
    except Exception as error:  # Hydra wraps import errors of any kind
        raise ConfigError(f"algo._target_={target!r} of the run cannot be imported ({error})") from None
    if not (isinstance(algo_class, type) and issubclass(algo_class, BaseAlgorithm)):
        raise ConfigError(f"algo._target_={target!r} is not a Stable-Baselines3 algorithm class")
    return algo_class


@dataclass
class LoadedRun:
    """A trained agent with everything needed to act as it did in training and test.

    :param path: the run dir.
    :param config: the run's resolved ``config.yaml``.
    :param spec: the env as trained (the action type is fixed in ``config.env.continuous``).
    :param representation: the srl_model's wrappers.
    :param model: the algorithm, loaded on the CPU.
    :param obs_rms: the frozen observation statistics (None when the run did not normalise).
    :param clip_obs: clipping of normalised observations.
    :param epsilon: added to the variance before the square root.
    :param checkpoint: the checkpoint's steps, None for the final model.
    """

    path: Path
    config: DictConfig
    spec: envs.EnvSpec
    representation: envs.Representation
    model: BaseAlgorithm
    obs_rms: RunningMeanStd | None
    clip_obs: float = 10.0
    epsilon: float = 1e-8
    checkpoint: int | None = None

    @property
    def label(self) -> str:
        """``final`` or ``checkpoint_<steps>`` (used to name replay outputs)."""
        return FINAL if self.checkpoint is None else f"checkpoint_{self.checkpoint}"

    def normalize_observation(self, obs: np.ndarray) -> np.ndarray:
        """Normalise ``obs`` as the frozen ``VecNormalize`` does; identity when the run did not normalise."""
        if self.obs_rms is None:
            return obs
        scaled = (obs - self.obs_rms.mean) / np.sqrt(self.obs_rms.var + self.epsilon)
        return np.clip(scaled, -self.clip_obs, self.clip_obs).astype(np.float32)

    def make_env(self, n_envs: int = 1, seed: int = 0, render_mode: str | None = None) -> VecEnv:
        """The run's env with its representation and frozen normalisation (as in the test episodes).

        :param n_envs: number of envs (seeds ``seed + rank``).
        :param seed: seed of the first env.
        :param render_mode: e.g. ``"rgb_array"`` to record frames with ``venv.render()``.
        """
        kwargs = dict(self.spec.kwargs)
        if render_mode is not None:
            wanted = self.representation.make_kwargs.get("render_mode", render_mode)
            if wanted != render_mode:
                raise ConfigError(
                    f"render_mode={render_mode!r} conflicts with srl_model={self.representation.name}, "
                    f"which needs render_mode={wanted!r}"
                )
            kwargs["render_mode"] = render_mode
        venv = envs.make_env(envs.EnvSpec(self.spec.id, kwargs), self.representation, n_envs=n_envs, seed=seed)
        if self.obs_rms is None:
            return venv
        frozen = VecNormalize(
            venv, training=False, norm_obs=True, norm_reward=False, clip_obs=self.clip_obs, epsilon=self.epsilon
        )
        frozen.obs_rms = copy.deepcopy(self.obs_rms)  # type: ignore[arg-type]
        return frozen


def load_run(run_dir: str | Path, checkpoint: int | str | None = None) -> LoadedRun:
    """Load the agent of a run dir (see :func:`model_folder` for ``checkpoint``), on the CPU.

    :raise ConfigError: not a run dir, missing or corrupt model, unknown checkpoint.
    """
    run = open_run(run_dir)
    folder, steps = model_folder(run, checkpoint)
    config = run.read_config()
    spec = envs.EnvSpec.from_config(config.env)
    representation = envs.Representation.from_config(config.srl_model, spec.id)  # the encoder it trained with
    algo_class = algorithm_class(config)
    model_path = folder / MODEL
    try:
        model = algo_class.load(model_path, device="cpu")
    except Exception as error:  # a truncated zip, a foreign file, an incompatible pickle ...
        raise ConfigError(f"{model_path} cannot be loaded as {algo_class.__name__}: {error}") from None
    loaded = LoadedRun(run.path, config, spec, representation, model, obs_rms=None, checkpoint=steps)
    if (folder / OBS_NORM).is_file():
        try:
            loaded.obs_rms, loaded.clip_obs, loaded.epsilon = load_obs_norm(folder / OBS_NORM)
        except Exception as error:  # a truncated or foreign file
            raise ConfigError(f"{folder / OBS_NORM} cannot be read: {error}") from None
    elif bool(config.get("normalize", False)):
        raise ConfigError(f"{folder} has {MODEL} but no {OBS_NORM}, although the run normalised observations")
    return loaded


def describe(loaded: LoadedRun) -> dict[str, Any]:
    """What was loaded, for messages: run, checkpoint, algorithm, env, srl_model, steps."""
    return {
        "run": str(loaded.path),
        "checkpoint": loaded.label,
        "algo": type(loaded.model).__name__,
        "env": loaded.spec.id,
        "srl_model": loaded.representation.name,
        "steps": int(loaded.model.num_timesteps),
    }


@dataclass
class Episode:
    """One replayed episode.

    :param ret: the undiscounted return (the Monitor's, as in training).
    :param length: number of agent steps.
    :param actions: the actions taken, one row per step.
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


def run_episodes(
    loaded: LoadedRun,
    episodes: int,
    *,
    deterministic: bool = True,
    seed: int = 0,
    frames: bool = False,
    positions: bool = False,
    probabilities: bool = False,
) -> list[Episode]:
    """Replay ``episodes`` episodes one after the other on one env, recording what is asked for.

    :param frames: record an ``rgb_array`` frame per step (the env is made with that render mode).
    :param positions: record ``info["robot_position"]`` and ``info["target_position"]``.
    :param probabilities: record the discrete action probabilities (see :func:`action_probabilities`).
    :raise ConfigError: ``positions`` for an env whose info has no ``robot_position``.
    """
    if frames:
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # pygame-rendered envs: no display needed
    venv = loaded.make_env(1, seed, render_mode="rgb_array" if frames else None)
    try:
        obs: Any = venv.reset()
        reset_infos = venv.unwrapped.reset_infos  # updated in place at every (auto-)reset
        if positions and "robot_position" not in reset_infos[0]:
            raise ConfigError(
                f"the trajectory plot needs ground-truth positions in info['robot_position'] (and "
                f"info['target_position']); {loaded.spec.id} does not put them there (the rlzoo/MobileRobot envs do)"
            )
        state, starts = None, np.ones((1,), dtype=bool)
        result = []
        for _ in range(episodes):
            steps: list[dict[str, Any]] = [dict(reset_infos[0])]
            actions, probs, images, total = [], [], [], 0.0
            while len(steps) == 1 or not starts[0]:
                if frames:
                    images.append(np.asarray(venv.render()))
                if probabilities:
                    probs.append(action_probabilities(loaded.model, obs))
                action, state = loaded.model.predict(
                    obs, state=state, episode_start=starts, deterministic=deterministic
                )
                obs, rewards, starts, infos = venv.step(action)
                actions.append(np.asarray(action[0]))
                total += float(rewards[0])
                steps.append(infos[0])
            last = steps[-1]
            episode = Episode(
                float(last["episode"]["r"] if "episode" in last else total), len(actions), np.stack(actions)
            )
            episode.frames = images
            if probabilities and probs[0] is not None:
                episode.probabilities = np.stack([p for p in probs if p is not None])
            if positions:
                episode.robot = np.stack([info["robot_position"] for info in steps])
                if "target_position" in steps[0]:
                    episode.targets = np.stack([info["target_position"] for info in steps])
            result.append(episode)
        return result
    finally:
        venv.close()
