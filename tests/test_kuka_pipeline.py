"""The arm envs through the pipeline: the joints representations, dataset collection with the toward-button policy,
the 3-D replay plot of the gripper, and the bad inputs of issue 14 (one line, nothing written)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agent_loops import assert_plays_as_enjoy
from conftest import Compose
from extras import require_extra
from rlzoo.collect import collect
from rlzoo.config import compose_config
from rlzoo.enjoy import EnjoySettings, enjoy
from rlzoo.errors import ConfigError
from rlzoo.playback.loading import Episode, load_run, run_episodes
from rlzoo.playback.plots import trajectory_figure
from rlzoo.srl.dataset import load_dataset
from rlzoo.train import train
from rlzoo.training.build import RunBuilder
from rlzoo.training.plan import plan_run
from srl_helpers import make_encoder

pybullet = require_extra("pybullet", "arm")

ARM_ENVS = ("KukaButton", "KukaRandButton", "Kuka2Button", "KukaMovingButton")
JOINT_STATES = {"joints": 14, "joints_position": 17}  # 7 positions + 7 velocities (+ gripper - button)
TINY_SAC = [
    "algo=sac",
    "algo.buffer_size=500",
    "algo.learning_starts=50",
    "algo.batch_size=16",
    "+algo.policy_kwargs.net_arch=[16]",
    "total_timesteps=100",
    "test_episodes=1",
    "checkpoint_freq=0",
    "logger.formats=[csv]",
    "verbose=0",
    "env.render_size=32",
    "+env.max_steps=40",
]
TINY_COLLECT = ["n_workers=0", "progress_bar=false", "image_size=16"]


# --- srl_model=joints, joints_position -------------------------------------------------------------------------------
@pytest.mark.parametrize("srl_model", sorted(JOINT_STATES))
@pytest.mark.parametrize("env", ARM_ENVS)
def test_joint_representations_fit_every_arm_env(env: str, srl_model: str, compose: Compose) -> None:
    plan = plan_run(compose(["algo=sac", f"env={env}", f"srl_model={srl_model}", "++env.frame_stack=1"]))
    assert plan.representation.make_kwargs == {"arm_state": srl_model} and plan.policy == "MlpPolicy"
    venv = RunBuilder(plan).training_env()
    try:
        assert venv.observation_space.shape == (JOINT_STATES[srl_model],)
        assert venv.reset().shape == (1, JOINT_STATES[srl_model])
    finally:
        venv.close()


def test_training_on_joint_positions(compose: Compose, tmp_path: Path) -> None:
    metrics = train(compose([*TINY_SAC, "env=KukaButton", "srl_model=joints_position", "++env.frame_stack=1"]))
    assert metrics["train/timesteps"] == 100
    loaded = load_run(tmp_path / "run")
    assert loaded.representation.name == "joints_position" and loaded.model.observation_space.shape == (17,)


# --- collection -------------------------------------------------------------------------------------------------------
def test_collect_with_the_toward_button_policy(tmp_path: Path) -> None:
    overrides = ["env=KukaButton", "collect_policy=toward_button", "collect_policy.random_fraction=0", "n_samples=250"]
    metadata = collect(compose_config([*overrides, *TINY_COLLECT], run_dir=tmp_path / "data", config_name="collect"))
    assert metadata["n_samples"] == 250 and metadata["positive_rewards"] > 0  # it reached and pressed the button
    assert metadata["ground_truth_names"] == ["robot_x", "robot_y", "robot_z"]
    data = load_dataset(tmp_path / "data" / "dataset.npz")
    assert data.images.shape == (250, 16, 16, 3) and set(np.unique(data.actions)) <= set(range(6))
    ground_truth, names = data.metric_ground_truth()
    assert ground_truth.shape == (250, 6) and names[3:] == ["target_x", "target_y", "target_z"]
    encoder = make_encoder(tmp_path / "pca", tmp_path / "data", "pca")  # an encoder measured on (x, y, z) positions
    assert {"srl/gtc/robot_z", "srl/gtc/target_z"} <= set(encoder) and np.isfinite(encoder["srl/knn_mse"])


COLLECT_BAD = [
    (["env=KukaButton", "collect_policy=toward_target"], r"arm env \(rlzoo/Kuka\*-v0\) use collect_policy=toward_b"),
    (
        ["env=KukaButton", "env.action_joints=true", "collect_policy=toward_button"],
        r"toward_button drives Cartesian actions .*Box\(-1.0, 1.0, \(7,\).*collect_policy=random or an agent",
    ),
    (["env=MobileRobot", "collect_policy=toward_button"], r"2-D positions; .*use collect_policy=toward_target"),
]


@pytest.mark.parametrize(("overrides", "message"), COLLECT_BAD, ids=[c[0][-1] + c[0][0] for c in COLLECT_BAD])
def test_collection_policy_that_does_not_fit_the_env(overrides: list[str], message: str, tmp_path: Path) -> None:
    cfg = compose_config([*overrides, *TINY_COLLECT, "n_samples=20"], run_dir=tmp_path / "data", config_name="collect")
    with pytest.raises(ConfigError, match=message) as failed:
        collect(cfg)
    assert "\n" not in str(failed.value) and not (tmp_path / "data").exists()


# --- replay -----------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def arm_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SAC on KukaButton (ground truth), 100 steps, 40-step episodes."""
    run_dir = tmp_path_factory.mktemp("arm") / "run"
    train(compose_config([*TINY_SAC, "env=KukaButton"], run_dir=run_dir))
    return run_dir


def test_replay_video_and_3d_trajectory_of_the_gripper(arm_run: Path) -> None:
    settings = EnjoySettings(str(arm_run), n_episodes=1, video=True, plot=("trajectory",))
    files = enjoy(settings, log=lambda _: None).files
    assert [f.name for f in files] == ["final_returns.csv", "final.mp4", "final_trajectory.png"]
    assert files[1].stat().st_size > 1_000 and files[2].stat().st_size > 20_000
    (episode,) = run_episodes(load_run(arm_run), 1, positions=True)
    assert episode.robot is not None and episode.robot.shape == (episode.length + 1, 3)
    fig = trajectory_figure([episode], "arm")
    (ax,) = fig.axes
    assert ax.name == "3d"
    path, _start, _end, button = ax.get_lines()
    assert np.allclose(np.array(path.get_data_3d()).T, episode.robot)  # type: ignore[attr-defined]
    assert np.allclose(np.ravel(button.get_data_3d()), episode.targets[0])  # type: ignore[attr-defined, index]


def test_moving_button_is_drawn_as_a_path_and_the_plane_stays_2d() -> None:
    steps = np.linspace(0.0, 1.0, 11)[:, None]
    robot = np.c_[0.5 + 0 * steps, steps, 0.3 - 0.1 * steps]
    moving = np.c_[0.5 + 0 * steps, -0.2 + 0.1 * steps, 0.08 + 0 * steps]
    episode = Episode(ret=1.0, length=10, actions=np.zeros((10, 3)), robot=robot, targets=moving)
    lines = trajectory_figure([episode], "moving").axes[0].get_lines()
    assert len(lines) == 5 and np.allclose(np.array(lines[3].get_data_3d()).T, moving)  # type: ignore[attr-defined]
    flat = Episode(ret=0.0, length=10, actions=np.zeros(10), robot=robot[:, :2], targets=moving[:, :2])
    assert trajectory_figure([flat], "plane").axes[0].name == "rectilinear"


# --- bad input (issue 14) ---------------------------------------------------------------------------------------------
TRAIN_BAD = [
    (["algo=dqn", "env=KukaButton", "env.action_joints=true"], r"DQN cannot handle .*\(7,\).*that fit: .*sac"),
    (["algo=sac", "env=KukaButton", "env.render_size=0"], r"render_size must be a positive int, got render_size=0"),
    (
        ["algo=sac", "env=MobileRobot", "srl_model=joints"],
        r"^srl_model=joints needs an arm env \(rlzoo/Kuka\*-v0\) taking arm_state; env rlzoo/MobileRobot-v0 does not$",
    ),
    (["algo=ppo", "env=CartPole", "srl_model=joints_position"], r"needs an arm env .*; env CartPole-v1 does not$"),
]


@pytest.mark.parametrize(("overrides", "message"), TRAIN_BAD, ids=[" ".join(c[0]) for c in TRAIN_BAD])
def test_bad_input_fails_in_one_line_before_writing(
    overrides: list[str], message: str, compose: Compose, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=message) as failed:
        train(compose(overrides))
    assert "\n" not in str(failed.value) and not (tmp_path / "run").exists()


def test_cli_names_the_srl_model_option(tmp_path: Path) -> None:
    run_dir = tmp_path / "bad"
    command = ["-m", "rlzoo.train", "env=MobileRobot", "srl_model=joints", f"hydra.run.dir={run_dir}"]
    done = subprocess.run([sys.executable, *command], capture_output=True, text=True, check=False, cwd=tmp_path)
    assert done.returncode != 0 and not run_dir.exists()
    assert done.stderr.strip().splitlines()[-1] == (
        "rlzoo.train: error: srl_model=joints needs an arm env (rlzoo/Kuka*-v0) taking arm_state; "
        "env rlzoo/MobileRobot-v0 does not"
    )


def test_load_agent_with_stacked_states_plays_two_episodes_as_enjoy(arm_run: Path) -> None:
    """The arm pair stacks 2 states (``env.frame_stack``): ``load_agent`` on ``agent.make_env()`` in a plain loop
    acts as ``rlzoo.enjoy`` does, step by step, over two episodes."""
    assert load_run(arm_run).spec.options.frame_stack == 2
    assert_plays_as_enjoy(arm_run)
