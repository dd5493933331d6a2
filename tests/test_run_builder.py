"""The run builder: a pure plan, one assembly, exact env counts, snapshots, layers."""

from __future__ import annotations

import copy
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import gymnasium as gym
import numpy as np
import pytest
import torch

from conftest import TINY_ON_POLICY, TINY_RUN, Compose
from rlzoo import State, preset
from rlzoo.errors import ConfigError
from rlzoo.train import train
from rlzoo.training.plan import plan_run

TINY_PPO = [*TINY_ON_POLICY, "algo.n_epochs=1", *TINY_RUN, "checkpoint_freq=0"]


@contextmanager
def counting_make() -> Iterator[list[str]]:
    """Every ``gymnasium.make`` call while the block runs (the env ids, in order)."""
    calls: list[str] = []
    real_make = gym.make

    def make(env_id: Any, *args: Any, **kwargs: Any) -> gym.Env:
        calls.append(str(env_id))
        return real_make(env_id, *args, **kwargs)

    with mock.patch.object(gym, "make", make):
        yield calls


def test_plan_never_writes_into_its_config(compose: Compose) -> None:
    cfg = compose(["algo=sac", "env=MobileRobot"])
    before = copy.deepcopy(cfg)
    plan = plan_run(cfg)
    assert cfg == before
    assert before.env.continuous is None and plan.config.env.continuous is True  # the plan records the action type
    assert plan.spec.kwargs["continuous"] is True


def test_train_leaves_its_config_unchanged(compose: Compose) -> None:
    cfg = compose(["algo=ppo", "env=MobileRobot", "+env.max_steps=16", *TINY_PPO])
    before = copy.deepcopy(cfg)
    train(cfg)
    assert cfg == before


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["n_envs=1"], 1 + 2),
        (["n_envs=8"], 8 + 2),
        (["n_envs=8", "vec_env=batched"], 8 + 2),
        (["n_envs=1", "srl_model=raw_pixels", "srl_model.height=40", "srl_model.width=40", "normalize=false"], 1 + 2),
        (["n_envs=1", "test_envs=1"], 1 + 1),
    ],
    ids=["one-env", "eight-envs", "batched", "raw-pixels", "one-test-env"],
)
def test_train_builds_n_envs_and_test_envs(overrides: list[str], expected: int, compose: Compose) -> None:
    """``n_envs`` training envs and min(test_envs, test_episodes) test envs (TINY_RUN: 2 test episodes)."""
    cfg = compose(["algo=ppo", "env=MobileRobot", "+env.max_steps=16", *TINY_PPO, "algo.n_steps=8", *overrides])
    with counting_make() as calls:
        train(cfg)
    assert calls == ["rlzoo/MobileRobot-v0"] * expected


def test_a_preset_agent_builds_one_env() -> None:
    with counting_make() as calls:
        preset("ppo", *TINY_ON_POLICY, verbose=0).env("CartPole").agent()
    assert calls == ["CartPole-v1"]


def test_a_test_agent_is_a_snapshot() -> None:
    bound = preset("ppo", *TINY_ON_POLICY, "algo.n_epochs=1", "normalize=true", n_envs=1, verbose=0).env("CartPole")
    agent, env = bound.agent(), gym.make("CartPole-v1")

    def drive(steps: int) -> None:
        state = State.from_reset(env.reset(seed=0))
        for _ in range(steps):
            action = agent.act(state)
            state = State.from_reset(env.reset()) if state.done else State.from_step(env.step(action))

    drive(100)
    frozen = bound.test_agent()
    weights = [p.detach().clone() for p in frozen.model.policy.parameters()]
    mean = frozen.normalize.rms.mean.copy()  # type: ignore[union-attr]
    drive(300)
    assert not all(torch.equal(a, b) for a, b in zip(weights, bound.learner.model.policy.parameters(), strict=True))
    assert all(torch.equal(a, b) for a, b in zip(weights, frozen.model.policy.parameters(), strict=True))
    assert np.array_equal(mean, frozen.normalize.rms.mean)  # type: ignore[union-attr]
    assert not np.array_equal(mean, bound.learner.normalizer.obs_rms.mean)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["env.random_target=maybe"], r"env rlzoo/MobileRobot-v0 rejected .*env.random_target='maybe' must be true or"),
        (["+env.speed=3"], r"env.speed is not a keyword of MobileRobotEnv; allowed: .*random_target"),
        (["env.render_size=big"], r"env.render_size='big' must be an integer"),
    ],
)
def test_env_keywords_are_checked_before_writing(
    overrides: list[str], message: str, compose: Compose, tmp_path: Path
) -> None:
    with counting_make() as calls, pytest.raises(ConfigError, match=message):
        train(compose(["algo=ppo", "env=MobileRobot", *overrides]))
    assert calls == [] and not (tmp_path / "run").exists()


def test_rlzoo_envs_imports_neither_torch_nor_sb3() -> None:
    code = "import sys, rlzoo.envs\nassert 'torch' not in sys.modules and 'stable_baselines3' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
