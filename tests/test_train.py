"""Every algorithm option trains in-process on a compatible env and writes a complete, loadable run dir."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import hydra.utils
import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from conftest import TINY_ALGO_RUNS, TINY_RUN, Compose
from rlzoo.config import CONFIG_DIR
from rlzoo.rundir import RETURNS100_HEADER, RunDir
from rlzoo.train import train


def test_every_algo_option_has_a_tiny_run() -> None:
    assert {p.stem for p in (CONFIG_DIR / "algo").glob("*.yaml")} == set(TINY_ALGO_RUNS)


@pytest.mark.parametrize("algo", sorted(TINY_ALGO_RUNS))
def test_algo_trains_and_writes_run_dir(algo: str, compose: Compose, tmp_path: Path) -> None:
    cfg = compose([f"algo={algo}", *TINY_ALGO_RUNS[algo], *TINY_RUN])
    metrics = train(cfg)

    run = RunDir(tmp_path / "run")
    assert run.is_finished()
    assert json.loads(run.metrics.read_text()) == pytest.approx(metrics)
    assert metrics["train/timesteps"] >= 192
    assert metrics["test/episodes"] == 2
    assert np.isfinite(metrics["test/mean_return"])
    # The final model loads with plain SB3 / sb3-contrib.
    algo_class = hydra.utils.get_class(cfg.algo._target_)
    loaded = algo_class.load(run.model, device="cpu")
    assert loaded.num_timesteps == metrics["train/timesteps"]
    # Normalisation on (the default for ground truth), so statistics sit beside the model and every checkpoint.
    assert run.obs_norm.is_file()
    checkpoints = run.checkpoints()
    assert checkpoints and int(checkpoints[0].name) >= 64
    assert all((c / "obs_norm.npz").is_file() for c in checkpoints)
    assert run.returns100.read_text().splitlines()[0] == RETURNS100_HEADER
    with (run.path / "test_returns.csv").open() as stream:
        assert len(list(csv.DictReader(stream))) == 2
    assert list(run.monitor_dir.glob("*.monitor.csv"))
    assert list(run.tensorboard_dir.glob("events.out.tfevents.*")) or not cfg.logger.formats.count("tensorboard")
    assert (run.path / "config.yaml").is_file()


def test_raw_pixels_on_cartpole(compose: Compose, tmp_path: Path) -> None:
    cfg = compose(
        [
            "algo=ppo",
            "env=CartPole",
            "srl_model=raw_pixels",
            "srl_model.height=40",
            "srl_model.width=40",
            "srl_model.frame_stack=2",
            "n_envs=2",
            "algo.n_steps=16",
            "algo.batch_size=16",
            "algo.n_epochs=1",
            "total_timesteps=32",
            "test_episodes=1",
            "checkpoint_freq=0",
            "verbose=0",
            "logger.formats=[csv]",
        ]
    )
    metrics = train(cfg)
    run = RunDir(tmp_path / "run")
    model = hydra.utils.get_class(cfg.algo._target_).load(run.model, device="cpu")
    # Channels first after SB3's transpose; two stacked RGB frames of 40 x 40.
    assert model.observation_space.shape == (6, 40, 40)
    assert model.policy.__class__.__name__ == "ActorCriticCnnPolicy"
    assert not run.obs_norm.exists()  # pixels are not normalised by running statistics
    assert metrics["test/episodes"] == 1


def test_returns100_rows_are_windows_of_100_episodes(compose: Compose, tmp_path: Path) -> None:
    # CartPole episodes under a random-ish policy last ~20 steps: 3000 steps give > 100 episodes.
    cfg = compose(["algo=a2c", "env=CartPole", "n_envs=1", "algo.learning_rate=0.0", "test_episodes=0", *TINY_RUN[4:]])
    cfg.total_timesteps = 3000
    train(cfg)
    run = RunDir(tmp_path / "run")
    monitor_returns = np.loadtxt(next(run.monitor_dir.glob("*.csv")), delimiter=",", skiprows=2, usecols=0)
    rows = np.loadtxt(run.returns100, delimiter=",", skiprows=1, ndmin=2)
    assert len(rows) == int(np.ceil(len(monitor_returns) / 100))
    first = monitor_returns[:100]
    assert rows[0, 1:] == pytest.approx([first.mean(), first.std(), first.max(), first.min()], rel=1e-5)
    assert rows[-1, 0] <= 3000


def test_test_episodes_zero_still_finishes(compose: Compose, tmp_path: Path) -> None:
    cfg = compose(["algo=a2c", *TINY_ALGO_RUNS["a2c"], *TINY_RUN, "test_episodes=0"])
    metrics = train(cfg)
    assert "test/mean_return" not in metrics
    assert RunDir(tmp_path / "run").is_finished()


def test_a_run_records_its_platform_and_command(compose: Compose, tmp_path: Path) -> None:
    cfg = compose(["algo=a2c", *TINY_ALGO_RUNS["a2c"], *TINY_RUN, "test_episodes=0"])
    train(cfg)
    provenance = json.loads((tmp_path / "run" / "provenance.json").read_text())
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    cpu_model = next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    assert provenance["platform"]["cpu_model"] == cpu_model
    assert provenance["platform"]["torch"] == torch.__version__
    assert provenance["platform"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert provenance["command"].split()[0].startswith("python")  # this process's command line, as typed
    assert provenance["threads"]["torch_threads"] == torch.get_num_threads()
    assert provenance["hardware"]["device"] == "cpu"


def test_total_timesteps_accepts_float(compose: Compose, tmp_path: Path) -> None:
    cfg = compose(["algo=a2c", *TINY_ALGO_RUNS["a2c"], *TINY_RUN, "total_timesteps=1.6e1", "checkpoint_freq=0"])
    assert train(cfg)["train/timesteps"] == 16


@pytest.mark.parametrize(("algo", "continuous"), [("sac", True), ("dqn", False), ("ppo", False)])
def test_mobile_robot_action_type_follows_the_algorithm(
    algo: str, continuous: bool, compose: Compose, tmp_path: Path
) -> None:
    env_overrides = [f"algo={algo}", "env=MobileRobot", *TINY_ALGO_RUNS[algo][1:]]
    train(compose([*env_overrides, *TINY_RUN, "checkpoint_freq=0"]))
    saved = OmegaConf.load(tmp_path / "run" / "config.yaml")
    assert saved.env.continuous is continuous
    model = hydra.utils.get_class(saved.algo._target_).load(tmp_path / "run" / "model.zip", device="cpu")
    assert model.action_space.shape == ((2,) if continuous else ())


def test_mobile_robot_raw_pixels_render_natively_at_the_training_size(compose: Compose, tmp_path: Path) -> None:
    overrides = ["algo=ppo", "env=MobileRobot1D", "srl_model=raw_pixels", "srl_model.height=40", "srl_model.width=40"]
    cfg = compose([*overrides, "algo.n_steps=16", "algo.batch_size=16", "algo.n_epochs=1", "total_timesteps=16"])
    assert cfg.env.render_size == 40
    train(compose([*overrides, "algo.n_steps=16", "algo.batch_size=16", "algo.n_epochs=1", *TINY_RUN[1:]]))
    assert (tmp_path / "run" / "metrics.json").is_file()
