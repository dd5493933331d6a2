"""python -m rlzoo.collect: the dataset format, seeds and workers, policies, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rlzoo.any_env.spec import EnvSpec
from rlzoo.config import compose_config
from rlzoo.errors import ConfigError
from rlzoo.srl.collection import EpisodeTask, RandomPolicy, collect_frames
from rlzoo.srl.dataset import find_dataset, load_dataset
from rlzoo.train import train
from srl_helpers import make_dataset


def test_dataset_round_trip(tmp_path: Path) -> None:
    data = load_dataset(make_dataset(tmp_path / "data") / "dataset.npz")
    meta = data.metadata
    assert len(data) == meta["n_samples"] == 400 and meta["n_episodes"] == 2 and meta["episode_seeds"] == [0, 1]
    assert data.images.shape == (400, 16, 16, 3) and data.images.dtype == np.uint8
    assert data.actions.dtype == np.int64 and set(np.unique(data.actions)) <= {0, 1, 2, 3}
    assert np.flatnonzero(data.episode_starts).tolist() == [0, 250]  # 250 steps, the final observation dropped
    assert len(data.pair_indices()) == meta["n_pairs"] == 398
    assert meta["env_kwargs"]["render_size"] == 16 and meta["env_kwargs"]["continuous"] is False
    gt, names = data.metric_ground_truth()
    assert names == ["robot_x", "robot_y", "target_x", "target_y"] and gt.shape == (400, 4)
    assert meta["positive_rewards"] == int(np.sum(data.rewards > 0))

    # The frames are the env's: replay episode 1 (seed 1) with the recorded actions.
    env = gym.make("rlzoo/MobileRobot-v0", random_target=True, render_mode="rgb_array", render_size=16)
    _, info = env.reset(seed=1)
    for t in range(250, 260):
        assert np.array_equal(env.render(), data.images[t])
        assert np.allclose(info["robot_position"], data.ground_truth[t])
        assert np.allclose(info["target_position"], data.target_positions[t])  # type: ignore[index]
        _, reward, *_, info = env.step(int(data.actions[t]))
        assert reward == data.rewards[t]


def test_episode_budget_collects_whole_episodes(tmp_path: Path) -> None:
    """``n_episodes``: whole episodes, whichever of the two budgets comes first."""
    data = load_dataset(make_dataset(tmp_path / "e", ["n_episodes=3", "n_samples=1000"]) / "dataset.npz")
    assert data.metadata["n_episodes"] == 3 and len(data) == 750  # MobileRobot: 250 frames an episode
    capped = load_dataset(make_dataset(tmp_path / "f", ["n_episodes=3", "n_samples=300"]) / "dataset.npz")
    assert capped.metadata["n_episodes"] == 2 and len(capped) == 300


def test_episode_steps_cut_episodes_as_the_envs_own_limit(tmp_path: Path) -> None:
    """``episode_steps``: more, shorter episodes in the same frames, bit for bit those of an env that ends sooner."""
    cut = load_dataset(make_dataset(tmp_path / "cut", ["n_samples=200", "episode_steps=50"]) / "dataset.npz")
    assert cut.metadata["n_episodes"] == 4 and cut.metadata["episode_steps"] == 50
    assert np.flatnonzero(cut.episode_starts).tolist() == [0, 50, 100, 150]
    assert len(np.unique(cut.target_positions, axis=0)) == 4  # type: ignore[arg-type]  # a target per episode
    short_env = load_dataset(make_dataset(tmp_path / "env", ["n_samples=200", "+env.max_steps=50"]) / "dataset.npz")
    for name in ("images", "actions", "rewards", "episode_starts", "ground_truth", "target_positions"):
        assert np.array_equal(getattr(cut, name), getattr(short_env, name)), name


def test_workers_do_not_change_the_dataset_and_latest_finds_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    serial = load_dataset(make_dataset(tmp_path / "outputs" / "a", ["n_samples=300"]))
    parallel = load_dataset(make_dataset(tmp_path / "outputs" / "b", ["n_samples=300", "n_workers=2"]))
    for name in ("images", "actions", "rewards", "episode_starts", "ground_truth"):
        assert np.array_equal(getattr(serial, name), getattr(parallel, name)), name
    monkeypatch.chdir(tmp_path)
    assert find_dataset("latest") == (tmp_path / "outputs" / "b").resolve()


@dataclass(frozen=True)
class FailingPolicy:
    """A policy that raises in the worker that runs it (picklable: spawned workers import this module)."""

    def __call__(self, info: dict[str, Any], action_space: gym.Space, rng: np.random.Generator) -> Any:
        raise RuntimeError("policy failed in a worker")


def _cartpole_task(failing: int | None = None, interrupt: int | None = None) -> Any:
    """Tasks of 20-frame CartPole episodes: episode ``failing`` raises in its worker, making task ``interrupt`` raises
    KeyboardInterrupt in this process (as Ctrl-C would, with episodes in flight)."""
    spec = EnvSpec.from_values({"id": "CartPole-v1"})

    def task(index: int) -> EpisodeTask:
        if index == interrupt:
            raise KeyboardInterrupt
        return EpisodeTask(spec, 8, FailingPolicy() if index == failing else RandomPolicy(), index, 20)

    return task


@pytest.mark.timeout(240)  # three pools of two spawned workers: ~20 s idle, ~60 s on a loaded 2-core machine
def test_worker_pool_shuts_down_on_every_path() -> None:
    """A worker's exception and a KeyboardInterrupt reach the caller after the pool shut down; stopping after one
    episode (the generator closed with a round still queued) returns without a hang (a hang fails by the timeout)."""
    with pytest.raises(RuntimeError, match="policy failed in a worker"):
        collect_frames(_cartpole_task(failing=1), n_samples=1000, n_workers=2)
    with pytest.raises(KeyboardInterrupt):
        collect_frames(_cartpole_task(interrupt=5), n_samples=1000, n_workers=2)
    frames, episodes = collect_frames(_cartpole_task(failing=1), n_samples=5, n_workers=2)
    assert (len(frames), episodes) == (5, 1)


def test_toward_target_reaches_the_target_more_often(tmp_path: Path) -> None:
    random = load_dataset(make_dataset(tmp_path / "r"))
    toward = load_dataset(make_dataset(tmp_path / "t", ["collect_policy=toward_target"]))
    assert np.sum(toward.rewards > 0) > 2 * np.sum(random.rewards > 0)
    assert toward.metadata["policy"]["random_fraction"] == 0.2


def test_any_env_that_renders(tmp_path: Path) -> None:
    data = load_dataset(make_dataset(tmp_path / "c", ["n_samples=50"], env=["env=CartPole"]))
    assert data.images.shape == (50, 16, 16, 3) and data.target_positions is None
    assert data.metadata["ground_truth_names"] == ["state_0", "state_1", "state_2", "state_3"]
    assert data.ground_truth.shape == (50, 4)


def test_agent_policy(tmp_path: Path) -> None:
    run = tmp_path / "agent"
    tiny = ["algo.n_steps=32", "algo.batch_size=32", "algo.n_epochs=1", "+algo.policy_kwargs.net_arch=[8]"]
    train(
        compose_config(
            ["env=MobileRobot", "total_timesteps=32", "test_episodes=0", "verbose=0", "logger.formats=[csv]", *tiny],
            run_dir=run,
        )
    )
    policy = ["collect_policy=agent", f"collect_policy.run={run}", "collect_policy.deterministic=true"]
    data = load_dataset(make_dataset(tmp_path / "d", [*policy, "n_samples=30"], env=["env=MobileRobot"]))
    assert len(data) == 30 and data.metadata["policy"]["run"] == str(run)


@pytest.mark.parametrize(
    ("env", "overrides", "message"),
    [
        (["env=MobileRobot"], ["n_samples=0"], "n_samples=0 must be ≥ 1"),
        (["env=MobileRobot"], ["n_episodes=0"], "n_episodes=0 must be ≥ 1"),
        (["env=MobileRobot"], ["episode_steps=0"], "episode_steps=0 must be ≥ 1"),
        (["env=CartPole"], ["collect_policy=toward_target"], r"needs info\['target_position'\]"),
        (["env=MobileRobot"], ["collect_policy=toward_target", "collect_policy.random_fraction=2"], "fraction=2"),
        (["env=MobileRobot"], ["collect_policy=agent", "collect_policy.run=/nonexistent"], "no such folder"),
    ],
)
def test_bad_input(tmp_path: Path, env: list[str], overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_dataset(tmp_path / "bad", overrides, env=env)
    assert not (tmp_path / "bad" / "config.yaml").exists()


def test_never_overwrites_and_cli_error(tmp_path: Path) -> None:
    make_dataset(tmp_path / "d", ["n_samples=10"])
    with pytest.raises(ConfigError, match="already holds a dataset"):
        make_dataset(tmp_path / "d", ["n_samples=10"])
    done = subprocess.run(
        [sys.executable, "-m", "rlzoo.collect", "image_size=4", f"hydra.run.dir={tmp_path / 'cli'}"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == ["rlzoo.collect: error: image_size=4 must be ≥ 8"]
    assert json.loads((tmp_path / "d" / "dataset.json").read_text())["n_samples"] == 10
