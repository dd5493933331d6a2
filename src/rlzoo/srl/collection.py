"""Collecting an SRL dataset: a policy drives an env that renders; every frame keeps the image, the action, the
reward, the episode start, the ground truth and the target. Episodes run in parallel workers, each with its own seed.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Generator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rlzoo.any_env.making import make
from rlzoo.any_env.spec import EnvSpec
from rlzoo.errors import ConfigError
from rlzoo.srl.pixels import rendered_pixels

ROBOT, TARGET, STATE = "robot_position", "target_position", "env_observation"


class Policy(Protocol):
    """Chooses the action of a collection episode from the frame's info (positions, env observation)."""

    def __call__(self, info: dict[str, Any], action_space: gym.Space, rng: np.random.Generator) -> Any: ...


@dataclass(frozen=True)
class RandomPolicy:
    """Uniform random actions (the S-RL Toolbox's default for datasets)."""

    def __call__(self, info: dict[str, Any], action_space: gym.Space, rng: np.random.Generator) -> Any:
        return action_space.sample()


@dataclass(frozen=True)
class TowardTarget:
    """Move toward the target along the axis with the larger distance; a random action with ``random_fraction``.

    Needs an env whose info carries ``robot_position`` and ``target_position`` (the MobileRobot family) and the
    MobileRobot action layout (discrete 0: -x, 1: +x, 2: -y, 3: +y; or continuous (dx, dy)).

    :param random_fraction: probability of a uniform random action instead.
    """

    random_fraction: float = 0.2

    def __post_init__(self) -> None:
        if not 0.0 <= self.random_fraction <= 1.0:
            raise ConfigError(f"collect_policy.random_fraction={self.random_fraction!r} must lie in [0, 1]")

    def __call__(self, info: dict[str, Any], action_space: gym.Space, rng: np.random.Generator) -> Any:
        if rng.random() < self.random_fraction:
            return action_space.sample()
        error = np.asarray(info[TARGET], dtype=np.float64) - np.asarray(info[ROBOT], dtype=np.float64)
        if error.shape != (2,):
            raise ConfigError(
                f"collect_policy=toward_target moves a MobileRobot in (x, y), but the env reports "
                f"{error.size}-D positions; with an arm env (rlzoo/Kuka*-v0) use collect_policy=toward_button"
            )
        dx, dy = error
        if isinstance(action_space, spaces.Box):
            return np.clip(np.array([dx, dy]) / 0.1, -1.0, 1.0).astype(action_space.dtype)
        n = int(action_space.n)  # type: ignore[attr-defined]
        if n < 4 or abs(dx) >= abs(dy):
            return int(dx > 0)  # 0: -x, 1: +x
        return 2 + int(dy > 0)  # 2: -y, 3: +y


class KeepObservation(gym.Wrapper):
    """Put the env's own observation into ``info`` (raw pixels replace it), for envs that report no positions."""

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return obs, {**info, STATE: obs}

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {**info, STATE: obs}


@dataclass(frozen=True)
class EpisodeTask:
    """One collection episode, picklable for a worker process: the env as ``rlzoo.train`` makes it (``spec``: id,
    make keywords and rlzoo's env keys such as ``frame_skip``)."""

    spec: EnvSpec
    image_size: int
    policy: Policy
    seed: int
    max_frames: int


@dataclass
class Frames:
    """The frames of one or more episodes, as lists of per-frame values."""

    images: list[np.ndarray] = field(default_factory=list)
    actions: list[Any] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    episode_starts: list[bool] = field(default_factory=list)
    ground_truth: list[np.ndarray] = field(default_factory=list)
    target_positions: list[np.ndarray] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.images)

    def extend(self, other: Frames, limit: int) -> None:
        """Append at most ``limit`` frames of ``other``."""
        for name in self.__dataclass_fields__:
            getattr(self, name).extend(getattr(other, name)[:limit])

    def arrays(self) -> dict[str, np.ndarray]:
        arrays = {
            "images": np.stack(self.images).astype(np.uint8),
            "actions": np.asarray(self.actions),
            "rewards": np.asarray(self.rewards, dtype=np.float32),
            "episode_starts": np.asarray(self.episode_starts, dtype=bool),
            "ground_truth": np.stack(self.ground_truth).astype(np.float32),
        }
        if arrays["actions"].dtype.kind in "iu":
            arrays["actions"] = arrays["actions"].astype(np.int64)
        else:
            arrays["actions"] = arrays["actions"].astype(np.float32).reshape(len(self), -1)
        if self.target_positions:
            arrays["target_positions"] = np.stack(self.target_positions).astype(np.float32)
        return arrays


def make_collection_env(spec: EnvSpec, image_size: int) -> gym.Env:
    """The env whose observation is its render at ``image_size`` (as ``srl_model=raw_pixels`` sees it), made by the
    same factory as a run's envs (:func:`rlzoo.any_env.making.make`)."""
    env = make(spec.with_kwargs(render_mode="rgb_array"))
    return rendered_pixels(KeepObservation(env), image_size, image_size)


def ground_truth_of(info: dict[str, Any]) -> np.ndarray:
    """The robot position when the env reports it, else the env's own observation, flattened."""
    value = info[ROBOT] if ROBOT in info else info[STATE]
    return np.asarray(value, dtype=np.float32).reshape(-1)


def run_episode(task: EpisodeTask) -> Frames:
    """Run one episode (seeded by ``task.seed``), at most ``task.max_frames`` frames; drop its final observation."""
    env = make_collection_env(task.spec, task.image_size)
    frames = Frames()
    try:
        rng = np.random.default_rng(task.seed)
        env.action_space.seed(task.seed)
        image, info = env.reset(seed=task.seed)
        done = False
        while not done and len(frames) < task.max_frames:
            action = task.policy(info, env.action_space, rng)
            frames.images.append(image)
            frames.actions.append(action)
            frames.episode_starts.append(len(frames.episode_starts) == 0)
            frames.ground_truth.append(ground_truth_of(info))
            if TARGET in info:
                frames.target_positions.append(np.asarray(info[TARGET], dtype=np.float32))
            image, reward, terminated, truncated, info = env.step(action)
            frames.rewards.append(float(reward))
            done = terminated or truncated
    finally:
        env.close()
    return frames


def collect_frames(
    make_task: Callable[[int], EpisodeTask],
    n_samples: int,
    n_workers: int,
    on_episode: Callable[[int], None] | None = None,
    max_episodes: int | None = None,
) -> tuple[Frames, int]:
    """Run episodes 0, 1, 2 ... (``make_task(index)`` describes each) until ``n_samples`` frames are gathered or
    ``max_episodes`` episodes have ended, whichever comes first.

    Episodes are kept in index order, whatever the worker that ran them, so the dataset does not depend on
    ``n_workers``; the last episode is cut at ``n_samples`` frames.

    :return: the frames and the number of episodes they come from.
    """
    frames = Frames()
    episodes = 0
    # closing(): the worker pool shuts down here, on a break or an error, not whenever the generator is collected.
    with closing(_episodes(make_task, n_workers)) as results:
        for result in results:
            if len(result) == 0:
                raise ConfigError("the env ended an episode before its first step; no frame could be collected")
            frames.extend(result, n_samples - len(frames))
            episodes += 1
            if on_episode is not None:
                on_episode(len(frames))
            if len(frames) >= n_samples or episodes == max_episodes:
                break
    return frames, episodes


def _episodes(make_task: Callable[[int], EpisodeTask], n_workers: int) -> Generator[Frames, None, None]:
    """Episode results in index order: in this process (``n_workers`` ≤ 1) or in rounds over a worker pool.

    The pool is a :class:`~concurrent.futures.ProcessPoolExecutor` (spawned workers), not a ``multiprocessing.Pool``:
    ``Pool.terminate`` can deadlock joining its task thread when workers die with tasks still queued (seen here as a
    15-minute stall). Whatever ends the iteration (the last episode, a worker's exception, KeyboardInterrupt, the
    generator closed early), the episodes not yet started are cancelled and the running ones finish, so the shutdown
    waits at most one episode per worker; a worker that dies fails the others' futures instead of hanging them.
    """
    index = 0
    if n_workers <= 1:
        while True:
            yield run_episode(make_task(index))
            index += 1
    pool = ProcessPoolExecutor(n_workers, mp_context=multiprocessing.get_context("spawn"))
    try:
        while True:
            round_tasks: list[Future[Frames]] = [
                pool.submit(run_episode, make_task(index + i)) for i in range(2 * n_workers)
            ]
            for future in round_tasks:
                yield future.result()
            index += len(round_tasks)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
