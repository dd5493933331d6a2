"""Values SB3 only trips over inside ``learn()``, and W&B online without credentials or network: one line from the
plan, a non-zero exit, nothing written (issue 26)."""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import Compose
from rlzoo.errors import ConfigError
from rlzoo.loggers import outputs
from rlzoo.train import train
from rlzoo.training.plan import plan_run

SAC = ["algo=sac", "env=Pendulum"]
DQN = ["algo=dqn"]
CASES = [
    (["algo.n_epochs=0"], r"^algo.n_epochs=0 must be an integer ≥ 1$"),
    (["algo.n_steps=0"], r"^algo.n_steps=0 must be an integer ≥ 1$"),
    (["algo.batch_size=0"], r"^algo.batch_size=0 must be an integer ≥ 1$"),
    (["algo.gae_lambda=1.5"], r"^algo.gae_lambda=1.5 must be a number in \[0, 1\]$"),
    (["algo.clip_range=0"], r"^algo.clip_range=0 must be a number > 0$"),
    (["algo.learning_rate=abc"], r"^algo.learning_rate='abc' has the wrong type for PPO: expected a number or a sched"),
    (["algo.learning_rate=-0.1"], r"^algo.learning_rate=-0.1 must be a number ≥ 0 or a schedule$"),
    ([*DQN, "algo.train_freq=0"], r"^algo.train_freq=0 must be an integer ≥ 1 or \[n, 'step' \| 'episode'\]"),
    ([*DQN, "algo.train_freq=[0,step]"], r"^algo.train_freq=\(0, 'step'\) must be an integer ≥ 1 or"),
    ([*DQN, "algo.train_freq=[4,week]"], r"^algo.train_freq=\(4, 'week'\) must be"),
    ([*DQN, "algo.buffer_size=0"], r"^algo.buffer_size=0 must be an integer ≥ 1$"),
    ([*DQN, "algo.target_update_interval=0"], r"^algo.target_update_interval=0 must be an integer ≥ 1$"),
    ([*DQN, "algo.exploration_fraction=2"], r"^algo.exploration_fraction=2 must be a number in \[0, 1\]$"),
    ([*SAC, "algo.batch_size=0"], r"^algo.batch_size=0 must be an integer ≥ 1$"),
    ([*SAC, "algo.tau=2"], r"^algo.tau=2 must be a number in \[0, 1\]$"),
    ([*SAC, "algo.gamma=-0.1"], r"^algo.gamma=-0.1 must be a number in \[0, 1\]$"),
    ([*SAC, "algo.gradient_steps=0"], r"^algo.gradient_steps=0 must be an integer ≥ 1, or -1"),
    ([*SAC, "algo.learning_starts=-1"], r"^algo.learning_starts=-1 must be an integer ≥ 0$"),
    (["algo.ent_coef=-1"], r"^algo.ent_coef=-1 must be a number ≥ 0, or 'auto' / 'auto_<x>' with x > 0"),
    ([*SAC, "algo.ent_coef=-0.1"], r"^algo.ent_coef=-0.1 must be a number ≥ 0, or 'auto'"),
    ([*SAC, "algo.ent_coef=auto_-1"], r"^algo.ent_coef='auto_-1' must be a number ≥ 0, or 'auto'"),
    (["algo.vf_coef=-0.5"], r"^algo.vf_coef=-0.5 must be a number ≥ 0$"),
    (["algo.target_kl=0"], r"^algo.target_kl=0 must be a number > 0$"),
    (["algo=td3", "env=Pendulum", "algo.target_policy_noise=-0.2"], r"^algo.target_policy_noise=-0.2 must be a num"),
]


@pytest.mark.parametrize(("overrides", "message"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_constraint_fails_in_one_line_before_the_run_dir(
    overrides: list[str], message: str, compose: Compose, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=message) as error:
        train(compose(overrides))
    assert "\n" not in str(error.value)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "overrides",
    [
        [*SAC, "algo.gradient_steps=-1"],  # SB3's meaning: as many gradient steps as env steps
        [*DQN, "algo.train_freq=[1,episode]", "algo.learning_starts=0", "algo.gamma=1"],
        ["algo.learning_rate={_target_:stable_baselines3.common.utils.LinearSchedule,start:1e-3,end:0,end_fraction:1}"],
        ["algo.learning_rate=0"],
        [*SAC, "algo.ent_coef=auto_0.1"],
        [*SAC, "algo.ent_coef=0.05"],
        ["algo.ent_coef=0"],
    ],
)
def test_values_sb3_gives_a_meaning_are_kept(overrides: list[str], compose: Compose) -> None:
    plan_run(compose(overrides), run_dir_state=False)


WANDB_ONLINE = ["logger=wandb", "logger.wandb.mode=online"]


def test_wandb_online_without_credentials(compose: Compose, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    with pytest.raises(ConfigError, match=r"^logger.wandb.mode=online needs W&B credentials .*mode=offline") as error:
        train(compose(WANDB_ONLINE))
    assert "\n" not in str(error.value)
    assert not (tmp_path / "run").exists()


def test_wandb_online_without_network(compose: Compose, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{port}")
    started = time.perf_counter()
    with pytest.raises(ConfigError, match=rf"^logger.wandb.mode=online cannot reach http://127.0.0.1:{port} within"):
        train(compose(WANDB_ONLINE))
    assert time.perf_counter() - started < 15
    assert not (tmp_path / "run").exists()


def test_cli_prints_one_line_and_exits_non_zero(tmp_path: Path) -> None:
    run_dir = tmp_path / "cli"
    command = [sys.executable, "-m", "rlzoo.train", "algo=ppo", "algo.n_epochs=0", f"hydra.run.dir={run_dir}"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == ["rlzoo.train: error: algo.n_epochs=0 must be an integer ≥ 1"]
    assert not run_dir.exists()


def test_visdom_missing_names_the_install(compose: Compose, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "visdom" else find_spec(name, *a))
    with pytest.raises(ConfigError, match=r'^logger=visdom needs the \[live\] extra .*: pip install "setuptools<81"'):
        train(compose(["logger=visdom"]))
    assert not (tmp_path / "run").exists()


def test_wandb_init_failing_late_leaves_nothing(
    compose: Compose, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that answers the reachability probe but not TLS: ``wandb.init`` fails after the plan; one line, no
    run dir, no ``wandb/`` folder."""
    import threading

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def answer_garbage() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            with connection:
                connection.sendall(b"not TLS\r\n\r\n")

    threading.Thread(target=answer_garbage, daemon=True).start()
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    monkeypatch.setenv("WANDB_BASE_URL", f"https://127.0.0.1:{port}")
    monkeypatch.setattr(outputs, "INIT_TIMEOUT_S", 3.0)  # a test need not wait W&B's 15 s
    try:
        with pytest.raises(
            ConfigError, match=r"^logger.wandb.mode=online: wandb.init failed \(.*mode=offline"
        ) as error:
            train(compose([*WANDB_ONLINE, "total_timesteps=64"]))
    finally:
        server.close()
    assert "\n" not in str(error.value)
    assert not (tmp_path / "run").exists()
