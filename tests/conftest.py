"""Shared test setup: one torch thread, no display, runs composed in-process."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import torch
from omegaconf import DictConfig

from extras import require_extras_of
from rlzoo.config import compose_config
from rlzoo.progress_lines import Pace

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("WANDB_SILENT", "true")
# A bare SB3 learn() without a logger makes a /tmp/SB3-<time> folder each time: keep them in one that goes at exit.
if "SB3_LOGDIR" not in os.environ:
    os.environ["SB3_LOGDIR"] = tempfile.mkdtemp(prefix="rlzoo-tests-sb3-")
    atexit.register(shutil.rmtree, os.environ["SB3_LOGDIR"], ignore_errors=True)
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _own_progress_pace(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's progress lines on stderr keep a pace of their own, as each command's do (one process each)."""
    monkeypatch.setattr("rlzoo.progress_lines.STDERR_PACE", Pace())


@pytest.fixture(autouse=True)
def _no_inherited_wandb_service(monkeypatch: pytest.MonkeyPatch) -> None:
    """W&B points ``WANDB_SERVICE`` at this process's service once a test has used it; a subprocess or Slurm job that
    inherited it would register its runs there (a killed job's run id then stays "in use")."""
    monkeypatch.delenv("WANDB_SERVICE", raising=False)


# Tiny budgets: shrink rollouts, batches, buffers and networks, not only the step count.
TINY_ON_POLICY = ["algo.n_steps=32", "algo.batch_size=32", "+algo.policy_kwargs.net_arch=[16]"]
TINY_OFF_POLICY = [
    "algo.buffer_size=500",
    "algo.learning_starts=50",
    "algo.batch_size=16",
    "+algo.policy_kwargs.net_arch=[16]",
]
TINY_RUN = [
    "normalize=true",
    "total_timesteps=192",
    "test_episodes=2",
    "checkpoint_freq=64",
    "verbose=0",
    "logger.formats=[csv]",
]

# A compatible env and tiny settings for every algorithm option.
TINY_ALGO_RUNS: dict[str, list[str]] = {
    "a2c": ["env=CartPole", "n_envs=2", "algo.n_steps=8", "+algo.policy_kwargs.net_arch=[16]"],
    "ppo": ["env=CartPole", "n_envs=2", *TINY_ON_POLICY, "algo.n_epochs=2"],
    "trpo": ["env=CartPole", "n_envs=2", *TINY_ON_POLICY, "algo.n_critic_updates=2"],
    "recurrent_ppo": [
        "env=CartPole",
        "n_envs=2",
        *TINY_ON_POLICY,
        "algo.n_epochs=2",
        "+algo.policy_kwargs.lstm_hidden_size=8",
    ],
    "ars": ["env=Pendulum", "algo.n_delta=2", "+algo.policy_kwargs.net_arch=[16]"],
    "dqn": ["env=CartPole", *TINY_OFF_POLICY],
    "qrdqn": ["env=CartPole", *TINY_OFF_POLICY, "+algo.policy_kwargs.n_quantiles=5"],
    "sac": ["env=Pendulum", *TINY_OFF_POLICY],
    "td3": ["env=Pendulum", *TINY_OFF_POLICY],
    "ddpg": ["env=Pendulum", *TINY_OFF_POLICY],
    "tqc": ["env=Pendulum", *TINY_OFF_POLICY, "+algo.policy_kwargs.n_quantiles=5"],
    "crossq": ["env=Pendulum", *TINY_OFF_POLICY],
    # rlzoo's own algorithms (rlzoo.algos)
    "ddqn": ["env=CartPole", "n_envs=2", *TINY_OFF_POLICY, "algo.target_update_interval=10"],
    "per": ["env=CartPole", *TINY_OFF_POLICY, "algo.n_steps=3"],
    "c51": ["env=CartPole", *TINY_OFF_POLICY, "algo.n_atoms=11"],
    "rainbow": ["env=CartPole", "n_envs=2", *TINY_OFF_POLICY, "algo.n_atoms=11", "algo.target_update_interval=10"],
    "cmaes": ["env=CartPole", "n_envs=2", "algo.popsize=4", "+algo.policy_kwargs.net_arch=[4]"],
    "random": ["env=CartPole", "n_envs=2"],
    "acer": ["env=CartPole", "n_envs=2", "algo.n_steps=8", "algo.replay_start=32", "+algo.policy_kwargs.net_arch=[16]"],
    "acktr": ["env=CartPole", "n_envs=2", "algo.n_steps=8", "+algo.policy_kwargs.net_arch=[16]"],
    # The JAX backend (SBX, the [jax] extra): skipped without the extra, failed under CI (tests/test_jax_backend.py).
    "sbx_sac": ["env=Pendulum", *TINY_OFF_POLICY],
    "sbx_droq": ["env=Pendulum", *TINY_OFF_POLICY, "algo.gradient_steps=2", "algo.policy_delay=2"],
    "sbx_tqc": ["env=Pendulum", *TINY_OFF_POLICY, "+algo.policy_kwargs.n_quantiles=5"],
    "sbx_crossq": ["env=Pendulum", *TINY_OFF_POLICY],
    "sbx_td3": ["env=Pendulum", *TINY_OFF_POLICY],
    "sbx_ddpg": ["env=Pendulum", *TINY_OFF_POLICY],
    "sbx_dqn": ["env=CartPole", *TINY_OFF_POLICY],
    "sbx_ppo": ["env=CartPole", "n_envs=2", *TINY_ON_POLICY, "algo.n_epochs=2"],
}

Compose = Callable[..., DictConfig]


@pytest.fixture
def compose(tmp_path: Path) -> Compose:
    """Compose the CLI's config for ``overrides`` with the run dir under ``tmp_path``."""

    def _compose(overrides: Sequence[str] = (), run_dir: Path | None = None) -> DictConfig:
        return compose_config(list(overrides), run_dir=run_dir or tmp_path / "run")

    return _compose


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A parametrised test whose parameters name an option of a missing extra skips with the ``pip install`` that
    fixes it (fails under ``CI=true``): ``tests/extras.py``."""
    require_extras_of(item)


SLOW_TIMEOUT_S = 7200  # a slow learning check trains for minutes to an hour on 2 cores; the fast tests get pyproject's


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Slow learning checks get :data:`SLOW_TIMEOUT_S` instead of the fast tests' per-test timeout."""
    for item in items:
        if item.get_closest_marker("slow") is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))
