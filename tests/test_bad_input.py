"""Bad input: one clear message naming the value and what is allowed, before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.errors import ConfigCompositionException, MissingConfigException

from conftest import TINY_ALGO_RUNS, TINY_RUN, Compose
from rlzoo.errors import ConfigError
from rlzoo.train import train

CASES = [
    (["+algo.foo=1"], r"algo.foo is not a keyword of PPO; allowed: .*batch_size"),
    (["algo.gamma='0.9'"], r"algo.gamma='0.9' has the wrong type for PPO: expected float"),
    (["algo.batch_size=64.5"], r"algo.batch_size=64.5 has the wrong type for PPO: expected int"),
    (["algo=dqn", "algo.train_freq=[4, step, 3]"], r"algo.train_freq=.* wrong type for DQN"),
    (["+algo.seed=3"], r"algo.seed is set by the run key seed"),
    (["total_timesteps=0"], r"total_timesteps=0 must be ≥ 1"),
    (["total_timesteps=-5"], r"total_timesteps=-5 must be ≥ 1"),
    (["total_timesteps=abc"], r"total_timesteps='abc' must be an integer"),
    (["n_envs=0"], r"n_envs=0 must be ≥ 1"),
    (["vec_env=threads"], r"vec_env='threads'; allowed: dummy, subproc"),
    (["+foo=1"], r"unknown run key\(s\) foo; allowed: "),
    (["env=gym", "env.id=CartPol-v1"], r"'CartPol-v1' is not a registered Gymnasium id; did you mean: CartPole-v1"),
    (["env=gym"], r"env=gym needs the Gymnasium id"),
    (["+env.foo=3"], r"env CartPole-v1 rejected its arguments \{'foo': 3\}"),
    (["algo=dqn", "env=Pendulum"], r"DQN cannot handle the action space Box.*algorithms that fit: a2c, .*ars, .*sac"),
    (
        ["algo=sac", "env=CartPole"],
        r"SAC cannot handle the action space Discrete\(2\).*fit: a2c, .*ars, .*dqn, .*ppo, .*qrdqn",
    ),
    (["algo=ars", "srl_model=raw_pixels"], r"ARS has no Cnn policy .*algorithms with one: a2c, .*ddpg, .*dqn, .*ppo"),
    (["algo=crossq", "env=Pendulum", "srl_model=raw_pixels"], r"CrossQ has no Cnn policy"),
    (["logger.formats=[json]"], r"logger.formats has \['json'\]; allowed: stdout, csv, tensorboard"),
    (["hardware.device=tpu"], r"hardware.device='tpu'; allowed: cpu, cuda"),
]


@pytest.mark.parametrize(("overrides", "message"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_bad_input_fails_before_writing(overrides: list[str], message: str, compose: Compose, tmp_path: Path) -> None:
    cfg = compose(overrides)
    with pytest.raises(ConfigError, match=message):
        train(cfg)
    assert not (tmp_path / "run").exists()


def test_gpu_profile_without_gpu(compose: Compose, tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    with pytest.raises(ConfigError, match=r"hardware.device='cuda' but no CUDA GPU is visible"):
        train(compose(["hardware=gpu"]))


def test_unknown_group_option_lists_options(compose: Compose) -> None:
    with pytest.raises(MissingConfigException, match=r"(?s)Could not find 'algo/foo'.*ppo.*sac"):
        compose(["algo=foo"])


def test_unknown_key_without_plus_is_refused(compose: Compose) -> None:
    with pytest.raises(ConfigCompositionException, match=r"algo.foo"):
        compose(["algo.foo=1"])


def test_a_finished_run_is_never_overwritten(compose: Compose, tmp_path: Path) -> None:
    overrides = ["algo=a2c", *TINY_ALGO_RUNS["a2c"], *TINY_RUN]
    train(compose(overrides))
    before = (tmp_path / "run" / "metrics.json").read_text()
    with pytest.raises(ConfigError, match=r"holds a finished run"):
        train(compose(overrides))
    assert (tmp_path / "run" / "metrics.json").read_text() == before


def test_batched_vec_env_on_another_env_fails_before_writing(compose: Compose, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="vec_env=batched"):
        train(compose(["algo=ppo", "env=CartPole", "vec_env=batched"]))
    assert not (tmp_path / "run").exists()
