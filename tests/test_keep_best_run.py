"""Keep-best evaluation wired into a run (``eval_freq``, ``eval_episodes``, ``test_checkpoint``) and ``checkpoint=best``
in replay, ``load_agent`` and ``init_from``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf
from stable_baselines3 import PPO

from conftest import TINY_ALGO_RUNS, Compose
from rlzoo.enjoy import EnjoySettings, enjoy
from rlzoo.errors import ConfigError
from rlzoo.kinds import load_agent
from rlzoo.playback.loading import enjoy_dir, load_run
from rlzoo.rundir import RunDir, load_obs_norm
from rlzoo.train import train
from rlzoo.training.keep_best import EVALUATIONS_HEADER

RUN = ["algo=ppo", *TINY_ALGO_RUNS["ppo"], "normalize=true", "total_timesteps=192", "checkpoint_freq=0",
       "test_episodes=2", "verbose=0", "logger.formats=[csv]"]  # fmt: skip


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunDir, dict[str, float]]:
    """PPO on CartPole (2 envs, rollouts of 64 steps) evaluated every 64 steps for 2 episodes; tests the best model."""
    from rlzoo.config import compose_config

    path = tmp_path_factory.mktemp("keep") / "run"
    cfg = compose_config([*RUN, "eval_freq=64", "eval_episodes=2", "test_checkpoint=best"], run_dir=path)
    return RunDir(path), train(cfg)


def test_a_run_evaluates_and_keeps_its_best_model(evaluated: tuple[RunDir, dict[str, float]]) -> None:
    run, metrics = evaluated
    lines = run.evaluations.read_text().splitlines()
    assert lines[0] == EVALUATIONS_HEADER
    table = np.loadtxt(run.evaluations, delimiter=",", skiprows=1, ndmin=2)
    assert table[:, 0].tolist() == [64, 128, 192]  # every 64 steps; the last one at the end is not repeated
    assert metrics["eval/best_return"] == table[:, 1].max()
    assert metrics["eval/best_steps"] == table[table[:, 1].argmax(), 0]
    assert PPO.load(run.best_dir / "model.zip").num_timesteps == metrics["eval/best_steps"]
    assert load_obs_norm(run.best_dir / "obs_norm.npz").rms.count <= load_obs_norm(run.obs_norm).rms.count
    progress = run.progress.read_text().splitlines()[0].split(",")
    assert {"eval/mean_return", "eval/best_return"} <= set(progress)
    assert json.loads(run.metrics.read_text())["eval/best_return"] == metrics["eval/best_return"]


def test_checkpoint_best_loads_the_best_model_everywhere(
    evaluated: tuple[RunDir, dict[str, float]], compose: Compose, tmp_path: Path
) -> None:
    run, metrics = evaluated
    steps = metrics["eval/best_steps"]
    loaded = load_run(run.path, "best")
    assert loaded.best and loaded.label == "best" and loaded.model.num_timesteps == steps
    agent = load_agent(run.path, checkpoint="best")
    assert agent is not None
    replay = enjoy(EnjoySettings(run=str(run.path), checkpoint="best", n_episodes=1), log=lambda _: None)
    assert replay.label == "best" and (enjoy_dir(run) / "best_returns.csv").is_file()
    train(compose([*RUN, f"init_from={run.path}:best", "total_timesteps=64"], run_dir=tmp_path / "tuned"))
    assert OmegaConf.load(tmp_path / "tuned" / "config.yaml").init_from == f"{run.path.resolve()}:best"


def test_a_run_without_evaluation_has_no_best_model(compose: Compose, tmp_path: Path) -> None:
    train(compose([*RUN, "total_timesteps=64", "test_episodes=0"], run_dir=tmp_path / "plain"))
    plain = RunDir(tmp_path / "plain")
    assert not plain.evaluations.exists() and not plain.best_dir.exists()
    message = r"checkpoint=best: the run .*plain has no best model .*eval_freq > 0"
    with pytest.raises(ConfigError, match=message):
        load_run(plain.path, "best")
    with pytest.raises(ConfigError, match=message):
        load_agent(plain.path, checkpoint="best")
    with pytest.raises(ConfigError, match=message):
        train(compose([*RUN, f"init_from={plain.path}:best"], run_dir=tmp_path / "tuned"))
    assert not (tmp_path / "tuned").exists()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["eval_freq=-1"], r"eval_freq=-1 .*≥ 0"),
        (["test_checkpoint=best"], r"test_checkpoint=best: this run keeps no best model \(eval_freq=0\); allowed"),
        (["eval_freq=64", "eval_episodes=0"], r"eval_episodes=0 .*≥ 1"),
        (["eval_freq=64", "test_checkpoint=last"], r"test_checkpoint='last'; allowed: final, best"),
    ],
)
def test_bad_evaluation_keys(compose: Compose, tmp_path: Path, overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        train(compose([*RUN, *overrides], run_dir=tmp_path / "bad"))
    assert not (tmp_path / "bad").exists()


def test_the_zoo_dqn_cartpole_pair_evaluates() -> None:
    from rlzoo.config import compose_config

    cfg = compose_config(["algo=dqn", "env=CartPole"], run_dir=Path("unused"))
    assert (cfg.eval_freq, cfg.eval_episodes, cfg.test_checkpoint) == (2500, 10, "best")


def test_success_rate_in_metrics_and_on_the_console_line(compose: Compose, tmp_path: Path) -> None:
    """MobileRobot reports ``info["is_success"]``: the test episodes' success rate is the fraction that ended on the
    target (replayed here on the same seeds); CartPole reports none and gets no such key."""
    from rlzoo.train import console_figures
    from rlzoo.training.build import TEST_SEED_OFFSET
    from rlzoo.training.episodes import play_episodes

    overrides = ["algo=ppo", "env=MobileRobot", "n_envs=1", *TINY_ALGO_RUNS["ppo"][2:], "total_timesteps=64",
                 "test_episodes=4", "checkpoint_freq=0", "verbose=0", "logger.formats=[csv]", "seed=3"]  # fmt: skip
    metrics = train(compose(overrides, run_dir=tmp_path / "robot"))
    loaded = load_run(tmp_path / "robot")
    env = loaded.make_env(seed=3 + TEST_SEED_OFFSET)
    replayed = play_episodes(loaded.model, env, 4)
    env.close()
    assert all(r.success is not None for r in replayed)
    assert metrics["test/success_rate"] == np.mean([r.success for r in replayed])
    assert (
        json.loads((tmp_path / "robot" / "metrics.json").read_text())["test/success_rate"]
        == metrics["test/success_rate"]
    )
    assert f"success rate {metrics['test/success_rate']:.0%}" in console_figures(metrics)
    plain = train(compose([*RUN, "total_timesteps=64"], run_dir=tmp_path / "cartpole"))
    assert "test/success_rate" not in plain and "success" not in console_figures(plain)
