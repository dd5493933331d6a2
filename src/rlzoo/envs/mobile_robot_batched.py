"""The MobileRobot family as one SB3 ``VecEnv`` that steps all robots with numpy array operations.

SB3's ``DummyVecEnv`` steps each env in Python, wraps it in ``Monitor`` and deep-copies the infos every step: for an env
as cheap as MobileRobot that is most of its time (``benchmarks/env_speed.py``: with 8 envs, about 12 % of tuned PPO
training's time, against about 7 % here). :class:`BatchedMobileRobot` keeps the state of all robots in arrays and
applies the rules that :mod:`rlzoo.envs.mobile_robot` defines for floats and arrays alike (walls, rewards, target
changes, ground truth), so its steps are those of the single envs, bit for bit. Resets, rendering and ``env_method``
go through one instance of the env class per robot, which keeps their sampling, reset options, seeding and renderer.
It has no per-env ``Monitor``: :class:`rlzoo.training.monitor.PerEnvMonitor` does that job for every vec env of a run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvObs, VecEnvStepReturn

from rlzoo.envs import ENV_IDS
from rlzoo.envs.mobile_robot import EPS, STEP, MobileRobotEnv, checked_state, inside_walls, next_target, step_reward
from rlzoo.envs.mobile_robot_variants import MobileRobot1DEnv, MobileRobot2TargetEnv, MobileRobotLineTargetEnv

# The env classes whose every rule has an array form here; a subclass may change a rule, so it is not accepted.
SUPPORTED_CLASSES: tuple[type[MobileRobotEnv], ...] = (
    MobileRobotEnv,
    MobileRobot1DEnv,
    MobileRobotLineTargetEnv,
    MobileRobot2TargetEnv,
)


def make_unwrapped(env_id: str, **env_kwargs: Any) -> MobileRobotEnv:
    """:return: ``gymnasium.make(env_id, **env_kwargs).unwrapped`` (its ``spec`` set).
    :raises ValueError: when it is not one of :data:`SUPPORTED_CLASSES` without a registered step limit."""
    env = gym.make(env_id, **env_kwargs)
    if type(env.unwrapped) not in SUPPORTED_CLASSES or env.spec is None or env.spec.max_episode_steps is not None:
        env.close()
        raise ValueError(
            f"the batched vec env steps the MobileRobot family only ({', '.join(ENV_IDS)}), not {env_id}: "
            "use vec_env=dummy or vec_env=subproc"
        )
    return env.unwrapped  # type: ignore[return-value]


class BatchedMobileRobot(VecEnv):
    """``n_envs`` robots of one MobileRobot task, stepped together (a drop-in for ``DummyVecEnv`` over ``gym.make``).

    Same dynamics, rewards, truncation after ``max_steps``, reset options, info keys and seeds as the single env (env
    ``rank`` is seeded ``seed + rank`` at the first reset, as ``make_vec_env`` does); SB3's vec-env conventions:
    auto-reset, ``info["terminal_observation"]``, ``info["TimeLimit.truncated"]``, ``reset_infos``, ``seed()``,
    ``set_options()``. Settings such as ``shape_reward`` are read from the first env at each step, so ``set_attr`` of
    a setting must apply to all envs. Episode statistics come from :class:`PerEnvMonitor`.

    :param env_id: a registered MobileRobot-family id, e.g. ``rlzoo/MobileRobot-v0``
    :param n_envs: number of robots
    :param seed: seeds env ``rank`` with ``seed + rank`` at the next reset (and its action space), None: random
    :param pixels: observe the rendered image (``env_kwargs`` must set ``render_mode="rgb_array"``), as
        :func:`rlzoo.srl.pixels.rendered_pixels` does at the env's native ``render_size``; else the ground truth
    :param env_kwargs: keyword arguments of the env class (``continuous``, ``random_target`` ...)
    """

    def __init__(
        self, env_id: str, n_envs: int, seed: int | None = None, pixels: bool = False, **env_kwargs: Any
    ) -> None:
        self.envs = [make_unwrapped(env_id, **env_kwargs) for _ in range(n_envs)]
        first = self.envs[0]
        if pixels and first.render_mode != "rgb_array":
            raise ValueError(f"pixel observations need render_mode='rgb_array', got {first.render_mode!r}")
        self.pixels = pixels
        self._rows = np.arange(n_envs)
        self._robots = np.zeros((n_envs, 2))
        self._targets = np.zeros((n_envs, len(first.default_targets), 2))
        self._current = np.zeros(n_envs, dtype=np.int64)
        self._steps = np.zeros(n_envs, dtype=np.int64)
        self._actions: NDArray[Any] = np.zeros(0)
        for rank in range(n_envs):
            self._pull(rank)
        size = first.render_size
        observation_space = (
            spaces.Box(0, 255, shape=(size, size, 3), dtype=np.uint8) if pixels else first.observation_space
        )
        super().__init__(n_envs, observation_space, first.action_space)
        if seed is not None:
            for rank, env in enumerate(self.envs):
                env.action_space.seed(seed + rank)
            self.seed(seed)

    # --- state shared with the per-robot env instances (resets, rendering, attributes) -----------------------------
    def _pull(self, rank: int) -> None:
        """Copy env ``rank``'s state into the arrays (after its reset or an ``env_method``)."""
        env = self.envs[rank]
        self._robots[rank] = env._robot
        self._targets[rank] = env._targets
        self._current[rank] = env._current
        self._steps[rank] = env._steps

    def _push(self, rank: int) -> MobileRobotEnv:
        """:return: env ``rank`` with the state of the arrays (before it renders or is inspected)."""
        env = self.envs[rank]
        env._robot = self._robots[rank].copy()
        env._targets = self._targets[rank].copy()
        env._current = int(self._current[rank])
        env._steps = int(self._steps[rank])
        return env

    def _reset_env(self, rank: int, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        """Reset env ``rank`` by its own ``reset`` (sampling, options); :return: its observation."""
        env = self.envs[rank]
        obs, self.reset_infos[rank] = env.reset(seed=seed, options=options or None)
        self._pull(rank)
        return env.render() if self.pixels else obs

    # --- a checkpoint's state (the Stateful protocol of rlzoo.stateful) ----------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """Every robot's episode (the arrays, the truth of the per-robot envs; their generators are theirs)."""
        return {"robot": self._robots.copy(), "targets": self._targets.copy(), "current": self._current.copy(),
                "steps": self._steps.copy()}  # fmt: skip

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Put back a state from :meth:`get_state` of a vec env of the same config (checked: ``ValueError``)."""
        found = checked_state(state, self.get_state(), self._targets.shape[1])
        self._robots, self._targets = found["robot"], found["targets"]
        self._current, self._steps = found["current"], found["steps"]

    # --- the VecEnv interface ---------------------------------------------------------------------------------------
    def reset(self) -> VecEnvObs:
        obs = np.stack([self._reset_env(i, self._seeds[i], self._options[i]) for i in range(self.num_envs)])
        self._reset_seeds()
        self._reset_options()
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = np.asarray(actions)

    def _displacements(self, actions: NDArray[Any]) -> NDArray[np.float64]:
        """:return: the (n_envs, 2) moves of the actions, as :meth:`MobileRobotEnv._displacement` for each."""
        first = self.envs[0]
        if first.continuous:
            return np.clip(np.asarray(actions, dtype=np.float64).reshape(self.num_envs, 2), -1.0, 1.0) * STEP
        indices = np.asarray(actions, dtype=np.int64).reshape(self.num_envs)
        try:
            if indices.min() >= 0:
                return first._ACTION_STEPS.take(indices, axis=0)
        except IndexError:
            pass
        raise ValueError(f"invalid actions {actions.tolist()}: expected integers in [0, {first.n_actions})")

    def step_wait(self) -> VecEnvStepReturn:
        first, rows = self.envs[0], self._rows
        moved = self._robots + self._displacements(self._actions)
        bumped = ~inside_walls(moved[:, 0], moved[:, 1])
        self._robots = np.where(bumped[:, None], self._robots, moved)
        self._steps += 1
        distances = first._distances(self._robots, self._targets[rows, self._current])
        on_target = distances <= first.reward_radius + EPS
        rewards = step_reward(distances, on_target, bumped, first.shape_reward).astype(np.float32)
        last = self._targets.shape[1] - 1
        if last:  # the target may have changed: the observation and info are about the new one
            self._current = next_target(self._current, on_target, last + 1)
            distances = first._distances(self._robots, self._targets[rows, self._current])
        success = (distances <= first.reward_radius + EPS) & (self._current == last)
        dones = self._steps >= first.max_steps
        obs = self._observations()

        current: list[int] = self._current.tolist()
        flags = zip(success.tolist(), bumped.tolist(), dones.tolist(), strict=True)
        infos = []
        for i, (is_success, is_bumped, done) in enumerate(flags):
            info = first._make_info(self._robots[i], self._targets[i], current[i], is_success, is_bumped)
            info["TimeLimit.truncated"] = done  # never terminated: done means truncated
            infos.append(info)
        for i in np.flatnonzero(dones).tolist() if dones.any() else ():
            infos[i]["terminal_observation"] = obs[i].copy()
            obs[i] = self._reset_env(i)
        return obs, rewards, dones, infos

    def _observations(self) -> NDArray[Any]:
        if self.pixels:
            return np.stack(self.get_images())  # type: ignore[arg-type]
        targets = self._targets[self._rows, self._current]
        return self.envs[0]._ground_truths(self._robots, targets).astype(np.float32)

    def close(self) -> None:
        for env in self.envs:
            env.close()

    def get_images(self) -> Sequence[np.ndarray | None]:
        if self.render_mode != "rgb_array":
            gym.logger.warn(f"the render mode is {self.render_mode}: get_images() needs 'rgb_array'")
            return [None for _ in self.envs]
        return [self._push(i).render() for i in range(self.num_envs)]

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return [getattr(self._push(i), attr_name) for i in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        for i in self._get_indices(indices):
            setattr(self._push(i), attr_name, value)
            self._pull(i)

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        results = []
        for i in self._get_indices(indices):
            results.append(getattr(self._push(i), method_name)(*method_args, **method_kwargs))
            self._pull(i)
        return results

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return [False for _ in self._get_indices(indices)]
