"""The command line, as a user types it (one success, one failure; everything else is tested in-process)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

TINY = ["n_envs=2", "algo.n_steps=16", "algo.batch_size=32", "algo.n_epochs=1", "total_timesteps=64"]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rlzoo.train", *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_cli_trains_and_returns_metrics(tmp_path: Path) -> None:
    done = run_cli("algo=ppo", "env=CartPole", *TINY, "test_episodes=2", f"hydra.run.dir={tmp_path}")
    assert done.returncode == 0, done.stderr
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["test/episodes"] == 2
    assert (tmp_path / "model.zip").is_file() and (tmp_path / ".hydra" / "overrides.yaml").is_file()


def test_cli_bad_input_one_message_nonzero_exit(tmp_path: Path) -> None:
    done = run_cli("algo=dqn", "env=Pendulum", f"hydra.run.dir={tmp_path}")
    assert done.returncode != 0
    (line,) = done.stderr.strip().splitlines()
    assert re.fullmatch(
        r"rlzoo.train: error: DQN cannot handle the action space Box\(-2.0, 2.0, \(1,\), float32\) \(it supports "
        r"Discrete\); algorithms that fit: a2c, .*ars, .*crossq, ddpg, ppo, .*sac, .*td3, tqc, trpo",
        line,
    )
    assert not (tmp_path / "config.yaml").exists() and not (tmp_path / "model.zip").exists()
