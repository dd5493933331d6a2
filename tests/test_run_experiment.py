"""run_experiment: presets x envs, each a ``train(cfg)`` run dir as the CLI writes it, checked before any trains."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from rlzoo import State, load_agent, preset, run_experiment
from rlzoo.errors import ConfigError
from rlzoo.rundir import RunDir
from rlzoo.single_agent.experiment import experiment_overrides

CUSTOM = Path(__file__).parent / "custom_algorithm"
TINY = ["+algo.policy_kwargs.net_arch=[16]", "n_envs=1", "checkpoint_freq=0", "verbose=0"]


def test_two_presets_on_two_envs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    presets = [
        preset("ppo", *TINY, "algo.n_steps=32", "algo.batch_size=32", "algo.n_epochs=1"),
        preset("a2c", *TINY, "algo.n_steps=8"),
    ]
    runs = run_experiment(presets, ["CartPole", "MountainCar"], 64, test_episodes=2, verbose=False, logdir=tmp_path)

    assert [(r.algo, r.env) for r in runs] == [
        ("ppo", "CartPole"),
        ("ppo", "MountainCar"),
        ("a2c", "CartPole"),
        ("a2c", "MountainCar"),
    ]
    assert len({r.run_dir.parent for r in runs}) == 1 and runs[0].run_dir.name == "0_ppo_CartPole"
    for run in runs:
        assert RunDir(run.run_dir).is_finished() and (run.run_dir / "model.zip").is_file()
        assert json.loads((run.run_dir / "metrics.json").read_text()) == pytest.approx(run.metrics)
        assert run.metrics["train/timesteps"] == 64 and run.metrics["test/episodes"] == 2
        assert not (run.run_dir / "progress.csv").exists()  # verbose=False: no loss / debug metrics
        assert (run.run_dir / "returns100.csv").is_file()
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 4 and printed[0].startswith("rlzoo: ppo_CartPole: 64 steps")


def test_every_run_is_checked_before_any_trains(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="DQN cannot handle the action space Box"):
        run_experiment([preset("ppo"), preset("dqn")], ["CartPole", "Pendulum"], 64, logdir=tmp_path)
    assert not list(tmp_path.rglob("config.yaml"))
    with pytest.raises(ConfigError, match=r"render=True .*srl_model=raw_pixels needs render_mode=rgb_array"):
        run_experiment(preset("ppo", srl_model="raw_pixels"), "CartPole", 64, render=True, logdir=tmp_path)


def test_arguments_are_overrides() -> None:
    assert experiment_overrides(10, 5, render=True, quiet=True, verbose=True) == [
        "total_timesteps=10", "test_episodes=5", "verbose=0", "++env.render_mode=human",
    ]  # fmt: skip
    cfg = preset("ppo").env("CartPole").compose("run", *experiment_overrides(10, 5, True, False, False))
    assert (cfg.env.render_mode, list(cfg.logger.formats), cfg.verbose) == ("human", [], 1)


def test_custom_algorithm_through_run_experiment_and_load_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(CUSTOM))  # the user's module vpg.py is importable
    vpg = preset("vpg", f"hydra.searchpath=[file://{CUSTOM / 'conf'}]", *TINY, "algo.n_steps=32")
    (run,) = run_experiment(vpg, "CartPole", 64, test_episodes=1, quiet=True, logdir=tmp_path)
    assert run.metrics["train/timesteps"] == 64
    agent = load_agent(run.run_dir, allow=["vpg"])  # the user's own module, named by the one who loads the run
    assert type(agent.model).__name__ == "VPG"
    env = gym.make("CartPole-v1")
    state, total = State.from_reset(env.reset(seed=0)), 0.0
    while not state.done:
        state = State.from_step(env.step(agent.act(state)))
        total += state.reward
    assert total >= 1
    # The same algorithm learns step by step through its training agent (its own train()).
    learner = vpg.env("CartPole").agent()
    for observation in np.random.default_rng(0).normal(scale=0.05, size=(65, 4)):
        learner.act(State(observation.astype(np.float32), reward=1.0))
    assert learner.model._n_updates == 2
