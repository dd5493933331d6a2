"""The optional env families: Atari ([atari]), MuJoCo ([mujoco]), Box2D ([box2d]).

Each test skips where its extra is missing (naming the pip command) and fails under ``CI=true``, where every extra
is installed. Without an extra, a command ends in one line naming it: tests/test_faults.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from stable_baselines3.common.vec_env import DummyVecEnv

from agent_loops import assert_plays_as_enjoy
from conftest import TINY_OFF_POLICY, TINY_ON_POLICY, Compose
from extras import require_extra
from rlzoo.any_env.making import make
from rlzoo.any_env.spec import EnvSpec
from rlzoo.any_env.wrappers import GAME
from rlzoo.playback.loading import load_run
from rlzoo.rundir import RunDir
from rlzoo.train import train
from rlzoo.training.monitor import PerEnvMonitor
from rlzoo.training.plan import plan_run

TINY = ["test_episodes=1", "checkpoint_freq=0", "verbose=0", "logger.formats=[csv]"]


def test_atari_trains_on_stacked_grey_frames_and_tests_whole_games(compose: Compose, tmp_path: Path) -> None:
    require_extra("ale_py", "atari")
    cfg = compose(["algo=ppo", "env=atari", "env.id=ALE/Breakout-v5", "env.max_num_frames_per_episode=800",
                   "n_envs=2", "algo.n_steps=16", "algo.batch_size=32", "algo.n_epochs=1", "total_timesteps=64",
                   *TINY])  # fmt: skip
    plan = plan_run(cfg)
    assert plan.policy == "CnnPolicy" and plan.config.env.observation == "image" and plan.config.normalize is False
    assert plan.config.algo.ent_coef == 0.01  # the tuned pair conf/algo_env/ppo_atari.yaml
    metrics = train(cfg)
    assert metrics["test/episodes"] == 1
    assert RunDir(tmp_path / "run").read_config().env.frame_stack == 4
    # the replay says what its mean is over: whole games, not the lives training learns from
    from rlzoo.enjoy import EnjoySettings, enjoy

    lines: list[str] = []
    enjoy(EnjoySettings(run=str(tmp_path / "run"), n_episodes=1), log=lines.append)
    said = "over whole games: every life, the game's own score (training learns from episodes of one life and clipped"
    assert f"\n  {said} rewards)" in lines[0]


def test_atari_training_episodes_are_lives_but_the_monitor_counts_games() -> None:
    require_extra("ale_py", "atari")
    spec = EnvSpec.from_values({"id": "ALE/Breakout-v5", "frameskip": 1, "frame_skip": 4,
                                "max_num_frames_per_episode": 1200, "atari": {}})  # fmt: skip
    training = make(spec, training=True)
    assert training.observation_space.shape == (84, 84, 1)
    venv = PerEnvMonitor(DummyVecEnv([lambda: training]), game_episodes=True)
    venv.seed(0)
    venv.reset()
    dones, games, rewards = 0, [], []
    for _ in range(1200):
        _, reward, done, infos = venv.step(np.array([venv.action_space.sample()]))
        rewards.append(float(reward[0]))
        dones += int(done[0])
        if GAME in infos[0]:
            games.append(infos[0][GAME])
            assert infos[0]["episode"]["r"] == games[-1]["r"]
    assert games and dones > len(games)  # lives lost end training episodes; only games are monitored
    assert set(rewards) <= {-1.0, 0.0, 1.0}  # clipped in training
    assert [len(r) for r in venv.get_attr("episode_returns")] == [len(games)]
    test = make(spec)  # a test env: whole games, unclipped
    assert test.observation_space.shape == (84, 84, 1)


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_mujoco_tasks_train_with_the_tuned_pairs(algo: str, compose: Compose, tmp_path: Path) -> None:
    require_extra("mujoco", "mujoco")
    cfg = compose([f"algo={algo}", "env=HalfCheetah", *TINY_OFF_POLICY, "total_timesteps=100",
                   "+env.max_episode_steps=30", *TINY])  # fmt: skip
    assert cfg.algo.learning_starts == 50  # the command line wins over the pair's 10,000
    metrics = train(cfg)
    assert metrics["test/episodes"] == 1
    assert RunDir(tmp_path / "run").read_config().env.id == "HalfCheetah-v5"


def test_mujoco_skips_frames_natively() -> None:
    require_extra("mujoco", "mujoco")
    env = make(EnvSpec.from_values({"id": "Hopper-v5", "frame_skip": 2}))
    assert env.unwrapped.frame_skip == 2  # MuJoCo's own frame_skip, not an action-repeat wrapper


def test_mujoco_warnings_leave_no_log_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    require_extra("mujoco", "mujoco")
    import mujoco

    monkeypatch.chdir(tmp_path)
    env = make(EnvSpec.from_values({"id": "HalfCheetah-v5"}))
    env.reset(seed=0)
    data = env.unwrapped.data  # type: ignore[attr-defined]
    data.qvel[:] = 1e30
    mujoco.mj_step(env.unwrapped.model, data)  # type: ignore[attr-defined]
    printed = capfd.readouterr()
    assert "Nan, Inf or huge value in QVEL" in printed.out + printed.err  # still on the console
    assert list(tmp_path.iterdir()) == []  # no MUJOCO_LOG.TXT


def test_box2d_tasks_train_and_car_racing_observes_images(compose: Compose, tmp_path: Path) -> None:
    require_extra("Box2D", "box2d")
    cfg = compose(["algo=dqn", "env=LunarLander", *TINY_OFF_POLICY, "total_timesteps=100", "+env.max_episode_steps=30",
                   *TINY])  # fmt: skip
    assert train(cfg)["test/episodes"] == 1
    elsewhere = tmp_path / "plans"
    assert plan_run(compose(["algo=sac", "env=LunarLander"], elsewhere)).spec.kwargs["continuous"] is True
    plan = plan_run(compose(["algo=ppo", "env=CarRacing", *TINY_ON_POLICY], elsewhere))
    assert plan.policy == "CnnPolicy" and plan.config.env.observation == "image"
    plan = plan_run(compose(["algo=ppo", "env=BipedalWalker"], elsewhere))
    assert plan.policy == "MlpPolicy" and plan.config.env.observation == "native"


def test_atari_games_end_at_the_documented_cap(compose: Compose, tmp_path: Path) -> None:
    """A policy that never presses FIRE (Breakout waits for it after a lost life) ends its test game at 18,000
    frames, 4,500 agent steps (conf/env/atari.yaml), not at ALE's 108,000."""
    require_extra("ale_py", "atari")
    plan = plan_run(compose(["algo=ppo", "env=atari", "env.id=ALE/Breakout-v5"], tmp_path / "plan"))
    env = make(plan.spec)  # a test env
    env.reset(seed=0)
    steps, ended = 0, False
    while not ended and steps < 30_000:
        _, _, terminated, truncated, _ = env.step(0)  # NOOP
        steps, ended = steps + 1, terminated or truncated
    assert truncated and 4_490 <= steps <= 4_500  # less the reset's no-ops and FIRE (raw frames)


def test_load_agent_on_atari_plays_two_games_as_enjoy(compose: Compose, tmp_path: Path) -> None:
    """An Atari agent (4 stacked 84 x 84 frames) takes the observations of ``agent.make_env()`` (AtariWrapper's)
    and acts as ``rlzoo.enjoy`` does, step by step, over two games of a plain loop."""
    require_extra("ale_py", "atari")
    game = ["algo=ppo", "env=atari", "env.id=ALE/Breakout-v5", "env.max_num_frames_per_episode=400"]
    train(compose([*game, "algo.n_steps=16", "algo.batch_size=16", "algo.n_epochs=1", "total_timesteps=32", *TINY]))
    assert load_run(tmp_path / "run").spec.options.frame_stack == 4
    assert_plays_as_enjoy(tmp_path / "run")
