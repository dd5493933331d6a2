"""The JAX backend: ``algo=sbx_*`` options (SBX) through the pipeline: checks, run dir, resume, replay, test agents.

Every option also trains in ``test_train.py`` (its ``TINY_ALGO_RUNS`` entry). Without the [jax] extra these tests
skip with the pip command that installs it; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import csv
import os
import shutil
from pathlib import Path
from typing import Any

import hydra.utils
import numpy as np
import pytest
from omegaconf import OmegaConf

from conftest import TINY_ALGO_RUNS, TINY_OFF_POLICY, TINY_ON_POLICY, TINY_RUN, Compose
from extras import require_extra
from rlzoo import preset
from rlzoo.algos import jax_backend
from rlzoo.algos.factory import build_algorithm_factory
from rlzoo.config import CONFIG_DIR
from rlzoo.errors import ConfigError
from rlzoo.rundir import RunDir
from rlzoo.train import train
from test_agents import drive, learn_twin

sbx = require_extra("sbx", "jax")

SBX_OPTIONS = sorted(p.stem for p in (CONFIG_DIR / "algo").glob("sbx_*.yaml"))
SAC_RUN = ["algo=sbx_sac", *TINY_ALGO_RUNS["sbx_sac"], *TINY_RUN]


def test_every_sbx_algorithm_has_an_option() -> None:
    targets = {str(OmegaConf.load(CONFIG_DIR / "algo" / f"{o}.yaml")._target_) for o in SBX_OPTIONS}
    assert targets == {f"sbx.{name}" for name in sbx.__all__}
    assert {"sbx_sac", "sbx_droq", "sbx_tqc", "sbx_crossq", "sbx_td3", "sbx_ddpg", "sbx_dqn", "sbx_ppo"} <= set(
        SBX_OPTIONS
    )
    droq = OmegaConf.load(CONFIG_DIR / "algo" / "sbx_droq.yaml")
    assert droq.policy_kwargs.dropout_rate > 0 and droq.policy_kwargs.layer_norm and droq.gradient_steps == 20


@pytest.mark.parametrize("option", SBX_OPTIONS)
def test_option_keywords_are_the_constructors(option: str, compose: Compose) -> None:
    algo = compose([f"algo={option}"]).algo
    factory = build_algorithm_factory(algo)
    assert jax_backend.is_jax_class(factory.algo_class)
    assert f"sbx.{factory.name}" == algo._target_
    assert set(factory.kwargs) == set(algo) - {"_target_", "_partial_"}


def test_run_dir_loads_with_plain_sbx_and_resumes(compose: Compose, tmp_path: Path) -> None:
    metrics = train(compose(SAC_RUN))
    run = RunDir(tmp_path / "run")
    model = sbx.SAC.load(run.model)
    assert model.num_timesteps == metrics["train/timesteps"] == 192
    action, _ = model.predict(np.zeros(3, dtype=np.float32), deterministic=True)
    assert action.shape == (1,) and -2 <= action[0] <= 2
    assert [int(c.name) for c in run.checkpoints()] == [64, 128, 192]
    assert all((c / "obs_norm.npz").is_file() for c in run.checkpoints())

    shutil.rmtree(run.checkpoint(192))  # as if killed after the checkpoint at 128
    for path in (run.model, run.metrics, run.obs_norm):
        path.unlink()
    metrics = train(compose(SAC_RUN))
    assert run.resumes() == [128]
    assert metrics["train/timesteps"] == 192 and sbx.SAC.load(run.model).num_timesteps == 192


def test_load_agent_and_replay_reproduce_the_test_returns(compose: Compose, tmp_path: Path) -> None:
    from rlzoo import State, load_agent
    from rlzoo.playback.loading import load_run, run_episodes

    cfg = compose(SAC_RUN)
    train(cfg)
    with (tmp_path / "run" / "test_returns.csv").open() as stream:
        expected = [float(row["return"]) for row in csv.DictReader(stream)]
    loaded = load_run(tmp_path / "run")
    assert type(loaded.model) is sbx.SAC
    replayed = [e.ret for e in run_episodes(loaded, 2, seed=cfg.seed + 10_000)]
    np.testing.assert_allclose(replayed, expected, rtol=1e-4)
    agent = load_agent(tmp_path / "run")
    action = agent.act(State(np.array([1.0, 0.0, 0.0], dtype=np.float32)))
    assert action.shape == (1,) and np.all(np.abs(action) <= 2)


def test_discrete_mobile_robot_with_sbx_ppo_replays(compose: Compose, tmp_path: Path) -> None:
    from rlzoo.playback.loading import load_run, run_episodes

    overrides = ["algo=sbx_ppo", "env=MobileRobot", *TINY_ALGO_RUNS["sbx_ppo"][1:], *TINY_RUN, "test_episodes=1"]
    train(compose(overrides))
    saved = OmegaConf.load(tmp_path / "run" / "config.yaml")
    assert saved.env.continuous is False  # SBX PPO takes discrete actions: MobileRobot's 4 moves, as SB3's PPO
    (episode,) = run_episodes(load_run(tmp_path / "run"), 1, positions=True)
    assert episode.length == 250 and episode.robot is not None


BAD_INPUT = [
    (["algo=sbx_sac", "+algo.target_update_interval=2"], r"algo.target_update_interval is not a keyword of SAC"),
    (["algo=sbx_sac", "algo.gamma='0.9'"], r"algo.gamma='0.9' has the wrong type for SAC: expected float"),
    (["algo=sbx_tqc", "algo.batch_size=6.5"], r"algo.batch_size=6.5 has the wrong type for TQC: expected int"),
    (["algo=sbx_dqn", "env=Pendulum"], r"DQN cannot handle the action space Box.*fit: .*sbx_crossq, .*sbx_sac"),
    (["algo=sbx_sac", "env=CartPole"], r"SAC cannot handle the action space Discrete\(2\).*fit: .*sbx_dqn, sbx_ppo"),
    (["algo=sbx_sac", "srl_model=raw_pixels"], r"SAC has no Cnn policy .*algorithms with one: .*sbx_dqn, sbx_ppo"),
]


@pytest.mark.parametrize(("overrides", "message"), BAD_INPUT, ids=[" ".join(c[0]) for c in BAD_INPUT])
def test_bad_input_fails_before_writing(overrides: list[str], message: str, compose: Compose, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=message):
        train(compose(overrides))
    assert not (tmp_path / "run").exists()


def test_missing_extra_is_one_line_naming_it(monkeypatch: pytest.MonkeyPatch, compose: Compose) -> None:
    monkeypatch.setattr(jax_backend, "missing_modules", lambda: ["sbx", "jax"])
    with pytest.raises(ConfigError, match=r'sbx.SAC is an SBX \(JAX\) algorithm, .* pip install -e "\.\[jax\]"$'):
        build_algorithm_factory(compose(["algo=sbx_sac"]).algo)
    build_algorithm_factory(compose(["algo=sac"]).algo)  # SB3's own options do not need the extra


def test_a_gpu_that_jax_cannot_see_is_refused(compose: Compose) -> None:
    import jax

    if any(d.platform != "cpu" for d in jax.devices()):
        pytest.skip("JAX sees a GPU")
    factory = build_algorithm_factory(compose(["algo=sbx_sac"]).algo)
    with pytest.raises(ConfigError, match=r"hardware.device=cuda but JAX sees no GPU .*jax\[cuda12\].*hardware=cpu"):
        factory.check_device("cuda")
    factory.check_device("cpu")
    factory.check_device("auto")  # no GPU: the CPU


def test_unknown_sbx_option_lists_the_sbx_options(compose: Compose) -> None:
    from hydra.errors import MissingConfigException

    with pytest.raises(MissingConfigException, match=r"(?s)Could not find 'algo/sbx_a2c'.*sbx_ppo.*sbx_sac"):
        compose(["algo=sbx_a2c"])


def test_saved_model_class_is_named_in_the_config(compose: Compose, tmp_path: Path) -> None:
    cfg = compose(["algo=sbx_td3", *TINY_ALGO_RUNS["sbx_td3"], *TINY_RUN, "checkpoint_freq=0"])
    train(cfg)
    saved = OmegaConf.load(tmp_path / "run" / "config.yaml")
    assert hydra.utils.get_class(saved.algo._target_) is sbx.TD3


@pytest.mark.slow
def test_sbx_sac_pendulum_learns(compose: Compose, tmp_path: Path) -> None:
    """rl-baselines3-zoo's SAC Pendulum-v1 budget (tuned pair sbx_sac_Pendulum, 20k steps) on the JAX backend."""
    metrics = train(compose(["algo=sbx_sac", "env=Pendulum", "test_episodes=10", "verbose=0"]))
    assert metrics["train/timesteps"] == 20_000
    assert metrics["test/mean_return"] >= -200


@pytest.mark.slow
def test_headline_sbx_sac_mobile_robot(compose: Compose, tmp_path: Path) -> None:
    """The headline on the JAX backend: ``algo=sbx_sac env=MobileRobot`` as typed (tuned pair: 12k steps, fixed
    target), 100 deterministic test episodes per seed: at least 230 for each of seeds 0, 1, 2 (measured 235.31 /
    234.28 / 235.20; best possible: docs/headline_study.md, "The figure")."""
    for seed in (0, 1, 2):
        cfg = compose(
            ["algo=sbx_sac", "env=MobileRobot", f"seed={seed}", "verbose=0"], run_dir=tmp_path / f"seed{seed}"
        )
        assert cfg.total_timesteps == 12_000 and cfg.test_episodes == 100
        test_return = train(cfg)["test/mean_return"]
        assert test_return >= 230.0, f"seed {seed}: mean test return {test_return:.2f}"


def test_one_xla_thread_unless_the_user_sets_xla_flags(monkeypatch: pytest.MonkeyPatch, compose: Compose) -> None:
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    build_algorithm_factory(compose(["algo=sbx_sac"]).algo)
    assert os.environ["XLA_FLAGS"] == jax_backend.XLA_ONE_THREAD
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=1")
    build_algorithm_factory(compose(["algo=sbx_sac"]).algo)
    assert os.environ["XLA_FLAGS"] == "--xla_force_host_platform_device_count=1"


def network_parameters(policy: Any) -> list[np.ndarray]:
    """Every network parameter of an SBX policy (actor, and critic or value function: flax train states) as arrays."""
    import jax

    states = [policy.actor_state, policy.qf_state if hasattr(policy, "qf_state") else policy.vf_state]
    return [np.asarray(leaf) for state in states for leaf in jax.tree_util.tree_leaves(state.params)]


@pytest.mark.parametrize(
    ("algo", "env", "overrides", "steps"),
    [
        ("sbx_ppo", "CartPole", [*TINY_ON_POLICY, "algo.batch_size=16", "algo.n_epochs=2"], 96),
        ("sbx_ppo", "Pendulum", [*TINY_ON_POLICY, "algo.batch_size=16", "+env.max_episode_steps=20"], 64),
        ("sbx_sac", "Pendulum", [*TINY_OFF_POLICY, "+env.max_episode_steps=30"], 120),
    ],
    ids=["ppo-discrete", "ppo-time-limit", "sac"],
)
def test_training_agent_learns_as_sbx_learn(algo: str, env: str, overrides: list[str], steps: int) -> None:
    """The training-agent API drives SBX models as SB3's: a user's loop over ``act`` ends with the weights of
    ``learn()`` (PPO's policy and value run in JAX, as in SBX's own rollout collection)."""
    bound = preset(algo, *overrides, verbose=0).env(env)
    agent = drive(bound, steps)
    assert agent.model.num_timesteps == steps and agent.model._n_updates > 0
    mine, theirs = network_parameters(agent.model.policy), network_parameters(learn_twin(bound, steps))
    assert len(mine) == len(theirs) > 0
    assert all(np.array_equal(a, b) for a, b in zip(mine, theirs, strict=True))
