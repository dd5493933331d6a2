"""The MobileRobot environments: API checks, dynamics, rewards, episode length, seeding and the renderer."""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import rlzoo.envs
from rlzoo.envs import MobileRobotEnv, render

ENV_2D = "rlzoo/MobileRobot-v0"
ENV_1D = "rlzoo/MobileRobot1D-v0"
ENV_LINE = "rlzoo/MobileRobotLineTarget-v0"
ENV_2TARGET = "rlzoo/MobileRobot2Target-v0"
CONTINUOUS = {ENV_2D: True, ENV_1D: False, ENV_LINE: True, ENV_2TARGET: False}
CHECK_CASES = [
    (env_id, continuous, relative)
    for env_id, allowed in CONTINUOUS.items()
    for continuous in ([False, True] if allowed else [False])
    for relative in (True, False)
]


def make(env_id: str = ENV_2D, **kwargs: Any) -> MobileRobotEnv:
    env = gym.make(env_id, **kwargs).unwrapped
    assert isinstance(env, MobileRobotEnv)
    return env


def place(env: MobileRobotEnv, robot: tuple[float, ...], target: Any = (3.6, 3.0)) -> None:
    env.reset(seed=0, options={"robot_position": robot, "target_position": target})


# --- API ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("env_id", "continuous", "relative"), CHECK_CASES)
def test_gymnasium_and_sb3_checkers_pass(env_id: str, continuous: bool, relative: bool) -> None:
    kwargs = {"continuous": continuous, "relative_ground_truth": relative, "render_mode": "rgb_array"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any checker warning fails the test
        gym_check_env(make(env_id, render_size=32, **kwargs))
        sb3_check_env(make(env_id, render_size=32, **kwargs))


def test_registration_is_idempotent_and_has_a_single_step_limit() -> None:
    rlzoo.envs.register_envs()
    rlzoo.envs.register_envs()
    for env_id in rlzoo.envs.ENV_IDS:
        assert gym.spec(env_id).max_episode_steps is None  # the env truncates by itself


@pytest.mark.parametrize("env_id", [ENV_1D, ENV_2TARGET])
def test_discrete_only_variants_refuse_continuous(env_id: str) -> None:
    with pytest.raises(ValueError, match="discrete actions only"):
        gym.make(env_id, continuous=True)


def test_observation_layouts() -> None:
    robot, target = (1.0, 1.5), (3.0, 2.5)
    expected = {
        (ENV_2D, True): [-2.0, -1.0],
        (ENV_2D, False): [1.0, 1.5, 3.0, 2.5],
        (ENV_2TARGET, False): [1.0, 1.5, 3.0, 2.5],
        (ENV_LINE, True): [-2.0, 1.5],
        (ENV_LINE, False): [1.0, 1.5, 3.0],
        (ENV_1D, True): [-2.0],
        (ENV_1D, False): [1.0, 3.0],
    }
    for (env_id, relative), values in expected.items():
        env = make(env_id, relative_ground_truth=relative)
        fixed_y = env.fixed_y is not None or env_id == ENV_LINE
        options = {
            "robot_position": (robot[0], 2.0) if env_id == ENV_1D else robot,
            "target_position": target[0] if fixed_y else target,
        }
        obs, info = env.reset(seed=0, options=options)
        assert obs.dtype == np.float32 and obs in env.observation_space
        np.testing.assert_allclose(obs, values, atol=1e-6, err_msg=f"{env_id} relative={relative}")
        assert set(info) >= {"robot_position", "target_position", "is_success", "bumped"}


def test_seeding_gives_identical_trajectories() -> None:
    def rollout(seed: int) -> list[Any]:
        env = gym.make(ENV_2D, random_target=True)
        env.action_space.seed(seed)
        steps: list[Any] = [env.reset(seed=seed)[0].tolist()]
        for _ in range(30):
            obs, reward, *_ = env.step(env.action_space.sample())
            steps.append((obs.tolist(), reward))
        steps.append(env.reset()[0].tolist())  # the next reset continues the seeded stream
        return steps

    assert rollout(3) == rollout(3)
    assert rollout(3) != rollout(4)


# --- dynamics and rewards -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("robot", "action"), [((0.45, 2.0), 0), ((3.55, 2.0), 1), ((2.0, 0.25), 2), ((2.0, 3.75), 3)])
def test_a_move_into_a_wall_is_undone_and_costs_one(robot: tuple[float, float], action: int) -> None:
    env = make()
    place(env, robot)
    _, reward, terminated, truncated, info = env.step(action)
    assert reward == -1.0 and info["bumped"] and not terminated and not truncated
    np.testing.assert_array_equal(info["robot_position"], robot)


@pytest.mark.parametrize(
    ("robot", "action", "limit"),
    [
        ((0.525, 2.0), 0, (0.425, 2.0)),
        ((3.475, 2.0), 1, (3.575, 2.0)),
        ((2.0, 0.3), 2, (2.0, 0.2)),
        ((2.0, 3.7), 3, (2.0, 3.8)),
    ],
)
def test_moves_onto_the_wall_limits_are_allowed(
    robot: tuple[float, float], action: int, limit: tuple[float, float]
) -> None:
    env = make()
    place(env, robot)
    _, reward, _, _, info = env.step(action)
    assert reward == 0.0 and not info["bumped"]
    np.testing.assert_allclose(info["robot_position"], limit)


def test_bump_takes_precedence_over_the_target_reward() -> None:
    env = make()
    place(env, (3.55, 3.0))  # 0.05 from the target (3.6, 3.0), against the black wall
    assert env.step(1)[1] == -1.0
    assert env.step(0)[1] == 1.0  # moving away from the wall, still on the target


def test_reward_is_one_within_radius_and_zero_just_outside() -> None:
    env = make()
    place(env, (2.5, 3.0), target=(3.0, 3.0))
    _, reward, _, _, info = env.step(1)  # robot at 2.6: distance 0.4
    assert reward == 1.0 and info["is_success"]
    place(env, (2.49, 3.0), target=(3.0, 3.0))
    _, reward, _, _, info = env.step(1)  # robot at 2.59: distance 0.41
    assert reward == 0.0 and not info["is_success"]


def test_pushing_into_the_wall_beside_the_target_is_no_success() -> None:
    """MobileRobot1D's target (x = 3.6) lies past the robot's wall limit (3.575): a policy that keeps pushing right
    bumps on every step inside the target radius, earns -1 a step, and never reads as a success."""
    env = gym.make(ENV_1D)
    env.reset(seed=0, options={"robot_position": (3.2, 2.0)})
    rewards, successes = [], []
    for _ in range(250):
        _, reward, _, _, info = env.step(1)
        rewards.append(reward)
        successes.append(info["is_success"])
    assert sum(rewards) < -240 and not any(successes[4:]) and not successes[-1]
    env.reset(seed=0, options={"robot_position": (3.5, 2.0)})
    assert env.step(0)[4]["is_success"]  # stepping back inside the radius: +1, a success


def test_reaching_the_target_does_not_end_the_episode_and_truncation_is_at_exactly_250_steps() -> None:
    env = gym.make(ENV_2D)
    env.reset(seed=0, options={"robot_position": (3.3, 3.0)})
    for step in range(1, 251):
        _, reward, terminated, truncated, _ = env.step(step % 2)  # shuffle on the target
        assert reward == 1.0 and not terminated
        assert truncated == (step == 250)


def test_max_steps_is_configurable() -> None:
    env = gym.make(ENV_1D, max_steps=5)
    env.reset(seed=0)
    assert [env.step(0)[3] for _ in range(5)] == [False] * 4 + [True]


def test_shape_reward_is_minus_distance() -> None:
    env = make(shape_reward=True)
    place(env, (0.45, 3.0), target=(3.6, 3.0))
    assert env.step(0)[1] == pytest.approx(-3.15)  # a bump is not penalised with the shaped reward


def test_continuous_actions_are_clipped_and_scaled() -> None:
    env = make(continuous=True)
    place(env, (2.0, 2.0))
    _, _, _, _, info = env.step(np.array([0.5, -0.3], dtype=np.float32))
    np.testing.assert_allclose(info["robot_position"], [2.05, 1.97], atol=1e-7)
    _, _, _, _, info = env.step(np.array([5.0, -7.0], dtype=np.float32))
    np.testing.assert_allclose(info["robot_position"], [2.15, 1.87], atol=1e-7)


def test_random_target_is_redrawn_at_every_reset_within_bounds() -> None:
    env = make(random_target=True)
    targets = np.array([env.reset(seed=seed)[1]["target_position"] for seed in range(50)])
    assert len({tuple(t) for t in targets}) == 50
    assert np.all((targets >= 0.4) & (targets <= 3.6))
    fixed = make()
    assert all(np.array_equal(fixed.reset(seed=seed)[1]["target_position"], [3.6, 3.0]) for seed in range(5))


def test_reset_options_are_validated() -> None:
    env = make()
    with pytest.raises(ValueError, match="robot_position"):
        env.reset(options={"robot_position": (0.3, 2.0)})
    with pytest.raises(ValueError, match="keeps y"):
        make(ENV_1D).reset(options={"robot_position": (2.0, 3.0)})


def test_1d_moves_along_x_only() -> None:
    env = make(ENV_1D)
    place(env, (3.0,), target=3.6)
    _, reward, _, _, info = env.step(1)
    np.testing.assert_allclose(info["robot_position"], [3.1, 2.0])
    assert reward == 0.0  # |dx| = 0.5
    assert env.step(1)[1] == 1.0  # |dx| = 0.4


def test_line_target_rewards_a_band_of_half_width_0_1() -> None:
    env = make(ENV_LINE)
    place(env, (2.8, 0.5), target=3.0)
    assert env.step(1)[1] == 1.0  # |dx| = 0.1, whatever y
    assert env.step(1)[1] == 1.0  # |dx| = 0
    assert env.step(1)[1] == 1.0  # |dx| = 0.1 on the other side
    assert env.step(1)[1] == 0.0  # |dx| = 0.2


def test_two_targets_are_reached_in_turn() -> None:
    env = make(ENV_2TARGET)
    env.reset(seed=0, options={"robot_position": (2.5, 2.0), "target_positions": [(2.7, 2.0), (1.5, 2.0)]})
    obs, reward, _, _, info = env.step(0)  # at 2.4, 0.3 from the first target
    assert reward == 1.0 and info["current_target"] == 1 and not info["is_success"]
    np.testing.assert_allclose(obs, [2.4 - 1.5, 0.0], atol=1e-6)
    assert env.step(1)[1] == 0.0  # the first target no longer pays
    rewards = [env.step(0)[1] for _ in range(6)]  # back to 1.9, then on to the second target
    assert rewards[-1] == 1.0 and env.step(0)[4]["is_success"]


# --- rendering ------------------------------------------------------------------------------------------------------
def colour_at(image: np.ndarray, env: MobileRobotEnv, x: float, y: float) -> tuple[int, ...]:
    return tuple(int(c) for c in image[env._renderer.pixel(x, y)])


@pytest.mark.parametrize("size", [32, 64, 224])
def test_render_shape_and_a_new_array_each_call(size: int) -> None:
    env = make(render_mode="rgb_array", render_size=size)
    env.reset(seed=0)
    first, second = env.render(), env.render()
    assert first is not None and second is not None
    assert first.shape == (size, size, 3) and first.dtype == np.uint8 and env.render_size == size
    assert first is not second and not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, second)


@pytest.mark.parametrize("size", [64, 224])
def test_render_shows_walls_target_and_robot_in_place(size: int) -> None:
    env = make(render_mode="rgb_array", render_size=size)
    place(env, (1.0, 1.0), target=(3.0, 3.2))
    image = env.render()
    assert image is not None
    assert colour_at(image, env, 2.0, 0.02) == render.WALL_Y0  # red, bottom
    assert colour_at(image, env, 3.98, 2.0) == render.WALL_X4  # black, right
    assert colour_at(image, env, 2.0, 3.98) == render.WALL_Y4  # green, top
    assert colour_at(image, env, 0.02, 2.0) == render.WALL_X0  # blue, left
    assert colour_at(image, env, 3.0, 3.2) == render.TARGET
    assert colour_at(image, env, 1.0, 1.0) == render.ROBOT
    assert colour_at(image, env, 2.0, 2.0) == render.GROUND
    env.step(1)
    moved = env.render()
    assert moved is not None and colour_at(moved, env, 1.3, 1.0) == render.ROBOT  # robot right edge now at 1.425


def test_render_variants() -> None:
    line = make(ENV_LINE, render_mode="rgb_array", render_size=64)
    place(line, (1.0, 1.0), target=2.5)
    image = line.render()
    assert image is not None
    assert colour_at(image, line, 2.5, 0.5) == colour_at(image, line, 2.5, 3.5) == render.TARGET

    two = make(ENV_2TARGET, render_mode="rgb_array", render_size=64)
    two.reset(seed=0, options={"robot_position": (2.0, 1.0), "target_positions": [(2.0, 1.5), (1.0, 3.0)]})
    image = two.render()
    assert image is not None
    assert colour_at(image, two, 2.0, 1.5) == render.TARGET
    assert colour_at(image, two, 1.0, 3.0) == render.SECOND_TARGET
    two.step(3)  # reach the first target: it is no longer drawn
    image = two.render()
    assert image is not None and colour_at(image, two, 2.0, 1.5) == render.GROUND


def test_render_without_render_mode_returns_none() -> None:
    env = make()
    env.reset(seed=0)
    with pytest.warns(UserWarning, match="render_mode"):
        assert env.render() is None
