"""The batched MobileRobot vec env: the same steps as the single envs under SB3's vec-env conventions."""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecEnv
from tests.conftest import TINY_ON_POLICY, TINY_RUN, Compose

from rlzoo.envs.mobile_robot_batched import BatchedMobileRobot
from rlzoo.errors import ConfigError
from rlzoo.results.runs import read_monitor
from rlzoo.rundir import RunDir
from rlzoo.srl.pixels import rendered_pixels
from rlzoo.train import train
from rlzoo.training.build import vec_env
from rlzoo.training.monitor import PerEnvMonitor
from rlzoo.training.plan import plan_run

CASES: list[tuple[str, dict[str, Any]]] = [
    ("rlzoo/MobileRobot-v0", {"random_target": True}),
    ("rlzoo/MobileRobot-v0", {"continuous": True, "shape_reward": True, "relative_ground_truth": False}),
    ("rlzoo/MobileRobot1D-v0", {"random_target": True, "relative_ground_truth": False}),
    ("rlzoo/MobileRobotLineTarget-v0", {"continuous": True, "random_target": True}),
    ("rlzoo/MobileRobot2Target-v0", {"random_target": True, "relative_ground_truth": False}),
]
N_ENVS = 3


def batched(env_id: str = "rlzoo/MobileRobot-v0", n_envs: int = N_ENVS, seed: int = 0, **kwargs: Any) -> VecEnv:
    return PerEnvMonitor(BatchedMobileRobot(env_id, n_envs, seed, **kwargs))


def wall_seeking_actions(venv: VecEnv, steps: int) -> list[np.ndarray]:
    """Random actions with runs of one direction, so that robots reach the walls and the targets."""
    venv.action_space.seed(1)
    actions = []
    for t in range(steps):
        action = np.array([venv.action_space.sample() for _ in range(venv.num_envs)])
        if t % 40 < 15:
            action[:] = venv.action_space.high if isinstance(venv.action_space, gym.spaces.Box) else t // 40 % 2
        actions.append(action)
    return actions


def assert_same_info(expected: dict[str, Any], actual: dict[str, Any], shaped: bool) -> None:
    assert expected.keys() == actual.keys()
    for key, value in expected.items():
        if key == "episode":  # float32 rewards summed: shaped returns agree to ~1e-6
            assert actual[key]["l"] == value["l"]
            assert actual[key]["r"] == (pytest.approx(value["r"], abs=1e-4) if shaped else value["r"])
        else:
            assert type(actual[key]) is type(value), key
            np.testing.assert_array_equal(actual[key], value, err_msg=key)


@pytest.mark.parametrize(("env_id", "kwargs"), CASES)
def test_steps_equal_the_single_envs_of_dummy_vec_env(env_id: str, kwargs: dict[str, Any]) -> None:
    """Seeds, observations, rewards, truncation, auto-reset, terminal observations and infos, bit for bit."""
    kwargs = {**kwargs, "max_steps": 30}
    single = make_vec_env(env_id, n_envs=N_ENVS, seed=5, env_kwargs=kwargs)
    venv = batched(env_id, seed=5, **kwargs)
    assert venv.observation_space == single.observation_space and venv.action_space == single.action_space
    np.testing.assert_array_equal(venv.reset(), single.reset())
    assert venv.unwrapped.reset_infos[1].keys() == single.reset_infos[1].keys()
    dones, bumps, successes = 0, 0, 0
    for actions in wall_seeking_actions(single, 100):
        expected, actual = single.step(actions), venv.step(actions)
        for want, got in zip(expected[:3], actual[:3], strict=True):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
        for want_info, got_info in zip(expected[3], actual[3], strict=True):
            assert_same_info(want_info, got_info, kwargs.get("shape_reward", False))
            bumps += want_info["bumped"]
            successes += want_info["is_success"]
        dones += int(expected[2].sum())
    assert dones == 3 * N_ENVS  # truncated at exactly max_steps, then auto-reset
    assert bumps and successes  # the walls and the targets were reached


def test_reset_options_and_the_dynamics_of_one_step() -> None:
    venv = batched(n_envs=3)
    venv.set_options(
        [
            {"robot_position": (0.45, 2.0), "target_position": (0.8, 2.0)},  # at the left wall, on the target
            {"robot_position": (2.0, 2.0), "target_position": (2.0, 2.5)},  # 0.5 away: moving up reaches it
            {"robot_position": (2.0, 3.0)},  # the default target (3.6, 3.0)
        ]
    )
    obs = venv.reset()
    np.testing.assert_allclose(obs, [[-0.35, 0.0], [0.0, -0.5], [-1.6, 0.0]], atol=1e-6)
    obs, rewards, dones, infos = venv.step(np.array([0, 3, 1]))
    np.testing.assert_array_equal(rewards, [-1.0, 1.0, 0.0])  # the bump takes precedence over the target
    assert [info["bumped"] for info in infos] == [True, False, False]
    assert [info["is_success"] for info in infos] == [False, True, False]  # on the target, but a bump: no success
    np.testing.assert_allclose(infos[0]["robot_position"], (0.45, 2.0))  # the move into the wall is undone
    np.testing.assert_allclose(infos[2]["robot_position"], (2.1, 3.0))
    np.testing.assert_allclose(obs[1], [0.0, -0.4], atol=1e-6)
    assert not dones.any()
    venv.reset()
    assert venv.unwrapped.reset_infos[0]["robot_position"].tolist() != [0.45, 2.0]  # options are used once
    with pytest.raises(ValueError, match="robot_position must lie"):
        venv.set_options({"robot_position": (0.1, 2.0)})
        venv.reset()


def test_auto_reset_terminal_observation_and_episode_info(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    venv = PerEnvMonitor(BatchedMobileRobot("rlzoo/MobileRobot-v0", 2, 0, max_steps=4), run.monitor_dir, "rlzoo/M")
    venv.set_options({"robot_position": (2.0, 2.0)})
    venv.reset()
    for _ in range(3):
        _, _, dones, infos = venv.step(np.array([1, 1]))
        assert not dones.any() and not infos[0]["TimeLimit.truncated"]
    obs, _, dones, infos = venv.step(np.array([1, 1]))
    assert dones.all() and all(info["TimeLimit.truncated"] for info in infos)
    np.testing.assert_allclose(infos[0]["terminal_observation"], [-1.2, -1.0], atol=1e-6)
    new_robot = venv.unwrapped.envs[0]._robot  # type: ignore[attr-defined]
    np.testing.assert_allclose(obs[0], new_robot - (3.6, 3.0), atol=1e-6)  # already the next episode
    assert infos[1]["episode"]["l"] == 4 and infos[1]["episode"]["r"] == 0.0
    assert venv.get_attr("episode_lengths") == [[4], [4]]
    venv.close()
    files = run.monitor_files()
    assert [f.name for f in files] == ["0.monitor.csv", "1.monitor.csv"]
    returns, lengths = read_monitor(files[1])
    assert returns.tolist() == [0.0] and lengths.tolist() == [4]


def test_seeding_is_per_env_and_deterministic() -> None:
    def first_positions(seed: int, n_envs: int = 3) -> list[list[float]]:
        venv = batched(n_envs=n_envs, seed=seed, random_target=True)
        venv.reset()
        return [
            info["robot_position"].tolist() + info["target_position"].tolist() for info in venv.unwrapped.reset_infos
        ]

    assert first_positions(7) == first_positions(7)
    assert first_positions(7) != first_positions(8)
    assert first_positions(7)[1] == first_positions(8, n_envs=1)[0]  # env rank is seeded seed + rank
    assert len({tuple(p) for p in first_positions(7)}) == 3
    spaces, single = batched(seed=7).get_attr("action_space"), make_vec_env("rlzoo/MobileRobot-v0", N_ENVS, seed=7)
    assert [s.sample() for s in spaces] == [s.sample() for s in single.get_attr("action_space")]  # seed + rank


def test_pixels_render_and_env_attributes() -> None:
    kwargs = {"render_mode": "rgb_array", "render_size": 40, "random_target": True}
    venv = batched("rlzoo/MobileRobot2Target-v0", pixels=True, seed=3, **kwargs)
    single = make_vec_env(
        "rlzoo/MobileRobot2Target-v0",
        n_envs=N_ENVS,
        seed=3,
        env_kwargs=kwargs,
        wrapper_class=functools.partial(rendered_pixels, height=40, width=40),
    )
    assert venv.observation_space == single.observation_space
    np.testing.assert_array_equal(venv.reset(), single.reset())
    for actions in wall_seeking_actions(single, 12):
        np.testing.assert_array_equal(venv.step(actions)[0], single.step(actions)[0])
    images = venv.get_images()
    np.testing.assert_array_equal(np.stack(images), np.stack(single.get_images()))  # type: ignore[arg-type]
    assert venv.render().shape[2] == 3  # type: ignore[union-attr]
    assert venv.get_attr("render_size") == [40, 40, 40]
    np.testing.assert_array_equal(venv.get_attr("_robot", indices=1)[0], single.get_attr("_robot", indices=1)[0])
    venv.env_method("reset", options={"robot_position": (1.0, 1.0)}, indices=[2])  # the state follows the env
    np.testing.assert_allclose(venv.step(np.zeros(3, dtype=np.int64))[3][2]["robot_position"], (0.9, 1.0))


def test_invalid_actions_and_unsupported_envs_fail_clearly() -> None:
    venv = batched("rlzoo/MobileRobot1D-v0")
    venv.reset()
    for actions in ([0, 1, 2], [0, -1, 1]):
        with pytest.raises(ValueError, match="invalid actions"):
            venv.step(np.array(actions))
    with pytest.raises(ValueError, match="MobileRobot family only"):
        BatchedMobileRobot("CartPole-v1", 2)
    with pytest.raises(ValueError, match="render_mode='rgb_array'"):
        BatchedMobileRobot("rlzoo/MobileRobot-v0", 2, pixels=True)


def test_make_env_batched_choice(compose: Compose) -> None:
    def make(overrides: list[str]) -> VecEnv:
        plan = plan_run(compose(overrides))
        return vec_env(plan.spec, plan.representation, n_envs=2, seed=0, kind="batched")

    assert isinstance(make(["env=MobileRobot", "env.continuous=false"]).unwrapped, BatchedMobileRobot)
    pixels = make(["env=MobileRobot", "env.continuous=false", "srl_model=raw_pixels", "srl_model.frame_stack=2"])
    assert pixels.observation_space.shape == (64, 64, 6)
    with pytest.raises(ConfigError, match=r"vec_env=batched: .*MobileRobot family only"):
        make(["env=CartPole"])
    with pytest.raises(ConfigError, match=r"not at \(32, 32\)"):
        make(
            [
                "env=MobileRobot",
                "env.continuous=false",
                "srl_model=raw_pixels",
                "env.render_size=64",
                "srl_model.height=32",
                "srl_model.width=32",
            ]
        )


def test_tiny_ppo_run_with_batched_envs(compose: Compose, tmp_path: Path) -> None:
    overrides = ["algo=ppo", "env=MobileRobot", "vec_env=batched", "n_envs=2", *TINY_ON_POLICY, "algo.n_epochs=1"]
    metrics = train(compose([*overrides, *TINY_RUN, "+env.max_steps=16"]))
    assert metrics["train/timesteps"] == 192
    run = RunDir(tmp_path / "run")
    assert [f.name for f in run.monitor_files()] == ["0.monitor.csv", "1.monitor.csv"]
    assert sum(len(read_monitor(f)[1]) for f in run.monitor_files()) == 192 // 16
    assert (tmp_path / "run" / "returns100.csv").read_text().count("\n") == 2  # header + the final partial window


def test_rlzoo_envs_does_not_import_stable_baselines3() -> None:
    code = (
        "import sys, gymnasium, rlzoo.envs\n"
        "gymnasium.make('rlzoo/MobileRobot-v0')\nassert 'stable_baselines3' not in sys.modules"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
