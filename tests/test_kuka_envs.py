"""The arm envs on PyBullet: both env checkers, spaces per action mode, the reward and termination rules through real
physics, seeding, rendering, and no PyBullet client left connected after ``close()``."""

from __future__ import annotations

import subprocess
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env as gym_check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import rlzoo.envs
from extras import require_extra

pybullet = require_extra("pybullet", "arm")

from rlzoo.envs import kuka_camera as camera  # noqa: E402  (after the extra check)
from rlzoo.envs.kuka_button import KukaButtonEnv  # noqa: E402
from rlzoo.envs.kuka_policy import TowardButton  # noqa: E402
from rlzoo.envs.kuka_scene import ArmScene  # noqa: E402
from rlzoo.envs.kuka_variants import KukaRandButtonEnv  # noqa: E402

BUTTON, RAND, TWO, MOVING = (
    f"rlzoo/{name}-v0" for name in ("KukaButton", "KukaRandButton", "Kuka2Button", "KukaMovingButton")
)
MODES = {"discrete": {}, "cartesian": {"continuous": True}, "joints": {"action_joints": True}}
RNG = np.random.default_rng(0)


def make(env_id: str = BUTTON, **kwargs: Any) -> KukaButtonEnv:
    env = gym.make(env_id, **kwargs).unwrapped
    assert isinstance(env, KukaButtonEnv)
    return env


@pytest.fixture
def envs() -> Iterator[list[KukaButtonEnv]]:
    """Envs a test makes (append them): closed afterwards even when the test fails."""
    made: list[KukaButtonEnv] = []
    yield made
    for env in made:
        env.close()


def run(env: KukaButtonEnv, policy: Any, seed: int = 0, options: dict | None = None) -> list[tuple]:
    """:return: (reward, terminated, truncated, info) of every step of one episode driven by ``policy(info)``."""
    _, info = env.reset(seed=seed, options=options)
    steps = []
    while True:
        _, reward, terminated, truncated, info = env.step(policy(info))
        steps.append((reward, terminated, truncated, info))
        if terminated or truncated:
            return steps


def press(env: KukaButtonEnv, **kwargs: Any) -> Any:
    controller = TowardButton(**kwargs)
    return lambda info: controller(info, env.action_space, RNG)


# --- API --------------------------------------------------------------------------------------------------------------
CHECK_CASES = [(BUTTON, mode) for mode in MODES] + [(env_id, "cartesian") for env_id in (RAND, TWO, MOVING)]


@pytest.mark.parametrize(("env_id", "mode"), CHECK_CASES)
def test_gymnasium_and_sb3_checkers_pass(env_id: str, mode: str, envs: list[KukaButtonEnv]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any checker warning fails the test
        for checker in (gym_check_env, sb3_check_env):
            envs.append(make(env_id, render_mode="rgb_array", render_size=16, **MODES[mode]))
            checker(envs[-1])


def test_action_and_observation_spaces_per_mode(envs: list[KukaButtonEnv]) -> None:
    cases = [
        ({}, spaces.Discrete(6), 3),
        ({"continuous": None}, spaces.Discrete(6), 3),
        ({"continuous": True, "relative_ground_truth": False}, spaces.Box(-1, 1, (3,)), 6),
        ({"action_joints": True, "arm_state": "joints"}, spaces.Box(-1, 1, (7,)), 14),
        ({"action_joints": True, "continuous": False, "arm_state": "joints_position"}, spaces.Box(-1, 1, (7,)), 17),
    ]
    for kwargs, action_space, n_obs in cases:
        envs.append(make(**kwargs))
        assert envs[-1].action_space == (
            action_space
            if isinstance(action_space, spaces.Discrete)
            else spaces.Box(-1, 1, action_space.shape, np.float32)
        )
        assert envs[-1].observation_space.shape == (n_obs,)


def test_registration_has_no_step_limit_and_imports_no_torch_or_pybullet() -> None:
    for env_id in (BUTTON, RAND, TWO, MOVING):
        assert gym.spec(env_id).max_episode_steps is None  # the env truncates by itself
    code = "import sys, rlzoo.envs\nassert not {'torch', 'pybullet', 'stable_baselines3'} & set(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_pybullet_names_the_extra() -> None:
    code = (
        "import sys, gymnasium\nsys.modules['pybullet'] = None\nimport rlzoo.envs\n"
        "try:\n    gymnasium.make('rlzoo/KukaButton-v0')\nexcept ModuleNotFoundError as error:\n    print(error)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert 'pip install -e ".[arm]"' in out


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"render_size": 0}, r"render_size must be a positive int, got render_size=0"),
        ({"arm_state": "pixels"}, r"arm_state must be one of ground_truth, joints, joints_position"),
        ({"action_repeat": 0}, r"action_repeat must be a positive int"),
        ({"render_mode": "human"}, r"render_mode must be one of \['rgb_array'\]"),
    ],
)
def test_bad_arguments_fail_in_one_line(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        KukaButtonEnv(**kwargs)


# --- physics: rewards and episode end ----------------------------------------------------------------------------
def test_pressing_counts_five_contact_steps(envs: list[KukaButtonEnv]) -> None:
    envs.append(env := make(continuous=True))
    steps = run(env, press(env))
    rewards = [s[0] for s in steps]
    assert steps[-1][1] and steps[-1][3]["is_success"] and steps[-1][3]["contacts"] == 5
    assert rewards.count(1.0) == 5 and set(rewards) == {0.0, 1.0}
    assert 150 < len(steps) < 1000  # the arm moves at most 0.35 rad/s: the button is some hundred steps away
    assert np.linalg.norm(steps[-1][3]["robot_position"] - steps[-1][3]["target_position"]) < 0.05


def test_table_contact_ends_the_episode(envs: list[KukaButtonEnv]) -> None:
    envs.append(env := make(continuous=True, shape_reward=True, random_target=True))
    # Go straight down, away from a button standing at the far corner of the table.
    steps = run(env, lambda info: np.array([0.0, 0.0, -1.0], np.float32), options={"button_position": (1.1, 0.4)})
    reward, terminated, _, info = steps[-1]
    assert terminated and info["table_contact"] and not info["is_success"]
    assert reward == -250.0  # shaped, continuous: a failed termination
    assert all(-1.0 < s[0] < 0 for s in steps[:-1])  # -distance before


def test_out_of_bounds_gives_minus_one_and_ends_after_the_limit(envs: list[KukaButtonEnv]) -> None:
    envs.append(env := make(continuous=True, max_distance=0.05))
    env.max_steps_outside = 4
    steps = run(env, lambda info: np.zeros(3, np.float32))
    assert [s[0] for s in steps] == [-1.0] * 4 and steps[-1][1] and steps[-1][3]["out_of_bounds"]


def test_truncation_after_max_steps(envs: list[KukaButtonEnv]) -> None:
    for action_repeat, agent_steps in ((1, 7), (3, 3)):  # max_steps counts physics steps, as the original
        envs.append(env := make(continuous=True, max_steps=7, action_repeat=action_repeat))
        steps = run(env, lambda info: np.zeros(3, np.float32))
        assert len(steps) == agent_steps and steps[-1][2] and not steps[-1][1]


def test_two_buttons_are_pressed_in_order(envs: list[KukaButtonEnv]) -> None:
    envs.append(env := make(TWO, continuous=True))
    first, second = (np.array([0.5, 0.125, 0.08]), np.array([0.5, -0.125, 0.08]))
    policy = press(env, lift=True)
    # Pressing the second button first does not count: aim at it while the goal is the first one.
    _, info = env.reset(seed=0)
    for _ in range(400):
        _, reward, terminated, _, info = env.step(policy({**info, "target_position": second}))
        assert reward <= 0 and not terminated
    assert info["contacts"] == 0 and info["target_position"] == pytest.approx(first)
    goals = []
    for _ in range(1500):
        _, reward, terminated, truncated, info = env.step(policy(info))
        goals.append(info["target_position"][1])
        if terminated or truncated:
            break
    assert terminated and info["is_success"]
    assert goals[0] == pytest.approx(0.125) and goals[-1] == pytest.approx(-0.125)


def test_moving_button_bounces_within_its_range(envs: list[KukaButtonEnv]) -> None:
    envs.append(env := make(MOVING, continuous=True, max_steps=700))
    env.reset(seed=1)
    ys = []
    for _ in range(700):
        *_, info = env.step(np.array([0.0, 0.0, 0.0], np.float32))
        ys.append(info["target_position"][1])
        base = pybullet.getBasePositionAndOrientation(env.scene.buttons[0], physicsClientId=env.scene.client)[0]
        assert base[1] == pytest.approx(ys[-1])  # the body moves with the goal point
    assert min(ys) >= -0.302 and max(ys) <= 0.302
    assert max(ys) > 0.29 or min(ys) < -0.29  # reached an end and came back
    assert abs(ys[-1]) < 0.2


def test_distractors_stand_away_from_the_button_and_are_replaced(envs: list[KukaButtonEnv]) -> None:
    envs.append(env := make(RAND, random_target=True))
    client = env.scene.client
    counts = []
    for seed in range(3):
        env.reset(seed=seed)
        assert isinstance(env, KukaRandButtonEnv)
        counts.append(pybullet.getNumBodies(physicsClientId=client) - len(env._distractors))
        button = env.goal[:2]
        for uid in env._distractors:
            xy = np.array(pybullet.getBasePositionAndOrientation(uid, physicsClientId=client)[0][:2])
            assert np.any(np.abs(xy - button) > 0.15)
        assert 0 < len(env._distractors) <= 10
    assert len(set(counts)) == 1  # the previous episode's distractors are gone


# --- observations, seeding, rendering, clients ------------------------------------------------------------------
def test_joint_observations_are_the_real_joint_states(envs: list[KukaButtonEnv]) -> None:
    envs.append(env := make(action_joints=True, arm_state="joints_position"))
    obs, _ = env.reset(seed=0)
    action = np.array([0.5, 1.0, 0.0, -1.0, 0.0, 0.0, 0.0], np.float32)
    for _ in range(40):
        moved, *_ = env.step(action)
    positions, velocities = env.scene.arm.joint_state()
    assert moved[3:10] == pytest.approx(positions, abs=1e-5) and moved[10:] == pytest.approx(velocities, abs=1e-4)
    assert abs(moved[4] - obs[4]) > 0.03 and abs(moved[13]) > 0.1  # joint 2 moved and was moving


def test_same_seed_same_episode(envs: list[KukaButtonEnv]) -> None:
    envs.extend([make(random_target=True, continuous=True), make(random_target=True, continuous=True)])
    first, second = envs
    first.reset(seed=5)
    first.step(first.action_space.sample())  # a used env resets as a fresh one
    trajectories = []
    for env in (first, second):
        obs, _ = env.reset(seed=3)
        env.action_space.seed(3)
        trajectories.append([obs] + [env.step(env.action_space.sample())[0] for _ in range(30)])
    assert np.array_equal(np.array(trajectories[0]), np.array(trajectories[1]))
    assert not np.array_equal(first.reset(seed=4)[0], trajectories[0][0])


def test_render_sizes_and_no_render_in_steps(envs: list[KukaButtonEnv], monkeypatch: pytest.MonkeyPatch) -> None:
    envs.append(env := make(render_mode="rgb_array", render_size=24, multi_view=True))
    env.reset(seed=0)
    image = env.render()
    assert image is not None and image.shape == (24, 24, 6) and image.dtype == np.uint8
    assert image[:, :, :3].std() > 10 and not np.array_equal(image[:, :, :3], image[:, :, 3:])

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a ground-truth step rendered")

    monkeypatch.setattr(pybullet, "getCameraImage", refuse)
    env.reset(seed=0)
    for _ in range(5):
        env.step(0)


def test_close_disconnects_every_client() -> None:
    def connected() -> int:
        return sum(pybullet.getConnectionInfo(physicsClientId=i)["isConnected"] for i in range(64))

    before = connected()
    made = [gym.make(env_id) for env_id in (BUTTON, RAND, TWO, MOVING)]  # the order of ENV_IDS
    assert connected() == before + 4
    ids = {env.unwrapped.scene.client for env in made}  # type: ignore[attr-defined]
    assert len(ids) == 4  # one client per env
    for env, (env_id, entry_point) in zip(made, [e for e in rlzoo.envs.ENV_IDS.items() if "Kuka" in e[0]], strict=True):
        assert env.spec is not None and env.spec.id == env_id
        assert type(env.unwrapped).__name__ == entry_point.split(":")[1]
        env.reset(seed=0)
        env.close()
        env.close()  # twice is fine
    assert connected() == before


def test_toward_button_presses_with_discrete_actions_and_refuses_joints(envs: list[KukaButtonEnv]) -> None:
    envs.append(env := make())
    steps = run(env, press(env))
    assert steps[-1][1] and steps[-1][3]["is_success"]
    envs.append(joints := make(action_joints=True))
    _, info = joints.reset(seed=0)
    with pytest.raises(ValueError, match="collect_policy=random"):
        TowardButton()(info, joints.action_space, RNG)


def test_cached_background_renders_the_same_image() -> None:
    scenes = [ArmScene(cached_background=cached) for cached in (True, False)]
    try:
        for scene in scenes:
            for joint, position in enumerate([0.3, 0.6, -0.2, -1.2, 0.1, 1.0, 0.0]):
                pybullet.resetJointState(scene.arm.uid, joint, position, physicsClientId=scene.client)
            scene.place_button(0, np.array([0.45, 0.1]))
        for size in (24, 64):
            fast, plain = (scene.render(size, multi_view=True) for scene in scenes)
            assert np.array_equal(fast, plain)
        front, _ = camera.snap(scenes[0].client, 64, scenes[0]._views[0], scenes[0]._projection)
        assert not np.array_equal(front, scenes[0].render(64))  # the floor and table are not drawn in the scene itself
    finally:
        for scene in scenes:
            scene.close()


def test_joint_speed_is_proportional_to_the_action(envs: list[KukaButtonEnv]) -> None:
    envs.append(env := make(action_joints=True))
    speeds = []
    for magnitude in (1.0, 0.25):
        env.reset(seed=0)
        before, _ = env.scene.arm.joint_state()
        for _ in range(48):  # 0.2 s
            env.step(np.array([0, magnitude, 0, -magnitude, 0, 0, 0], np.float32))
        after, _ = env.scene.arm.joint_state()
        speeds.append(np.abs(after - before)[[1, 3]] / 0.2)
    assert speeds[0] == pytest.approx([0.35, 0.35], rel=0.1)  # the motors' top speed
    assert speeds[1] == pytest.approx(speeds[0] / 4, rel=0.15)
