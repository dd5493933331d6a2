"""Ctrl-C during training: one line naming the checkpoint kept and the command that resumes, exit status 130; the
resumed run says that it resumed and from which step, and that an off-policy buffer starts empty when it does; it
keeps the run's seed, progress.csv's columns and the count of iterations."""

from __future__ import annotations

import csv
import logging
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from stable_baselines3 import PPO

from conftest import TINY_OFF_POLICY, TINY_ON_POLICY, Compose
from rlzoo.rundir import RunDir
from rlzoo.train import train
from rlzoo.training import callbacks
from rlzoo.training.resume import interrupted_line

QUIET = ["verbose=0", "logger.formats=[csv]", "test_episodes=1", "checkpoint_freq=64", "total_timesteps=256"]
WAIT_S = 120


def _interrupt_at_second_checkpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C strikes right after the second checkpoint is saved."""
    saved: list[int] = []
    save = callbacks.save_checkpoint

    def save_then_interrupt(run: RunDir, steps: int, *args: Any, **kwargs: Any) -> None:
        save(run, steps, *args, **kwargs)
        saved.append(steps)
        if len(saved) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(callbacks, "save_checkpoint", save_then_interrupt)


def test_an_interrupted_run_names_its_checkpoint_and_resumes_saying_so(
    compose: Compose, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    overrides = ["algo=ppo", "env=CartPole", "n_envs=1", *TINY_ON_POLICY, *QUIET, "seed=3"]
    run = RunDir(tmp_path / "run")
    assert interrupted_line(run) == "nothing was written"
    with monkeypatch.context() as patch:
        _interrupt_at_second_checkpoint(patch)
        with pytest.raises(KeyboardInterrupt):
            train(compose(overrides))
    steps = int(run.checkpoints()[-1].name)
    assert steps == 128 and not run.is_finished()
    line = interrupted_line(run)
    assert line == f"checkpoint kept at step 128 in {run.path}; resume with: python -m rlzoo.train resume={run.path}"
    with caplog.at_level(logging.INFO, logger="rlzoo"):
        train(compose(overrides))
    assert f"resuming {run.path} from its checkpoint at step 128" in caplog.messages
    assert not [m for m in caplog.messages if "replay buffer" in m]  # on-policy: no buffer to speak of
    assert run.resumes() == [128] and run.is_finished()
    whole = RunDir(tmp_path / "whole")
    train(compose(overrides, run_dir=whole.path))
    # the same columns in the same order and the same rows, time/iterations counting on
    rows = _progress(run)
    assert rows == _progress(whole) and [row[2] for row in rows[1:]] == [str(i) for i in range(1, len(rows))]
    assert PPO.load(run.model).seed == PPO.load(whole.model).seed == 3  # the run's own seed


def _progress(run: RunDir) -> list[list[str]]:
    """progress.csv without its wall-time columns (the third is time/iterations)."""
    rows = list(csv.reader(run.progress.read_text().splitlines()))
    kept = [i for i, name in enumerate(rows[0]) if name not in ("time/fps", "time/time_elapsed")]
    return [[row[i] for i in kept] for row in rows]


def test_an_off_policy_run_resumed_without_its_buffer_says_it_starts_empty(
    compose: Compose, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    overrides = ["algo=sac", "env=Pendulum", *TINY_OFF_POLICY, *QUIET, "checkpoint_buffer=false"]
    with monkeypatch.context() as patch:
        _interrupt_at_second_checkpoint(patch)
        with pytest.raises(KeyboardInterrupt):
            train(compose(overrides))
    with caplog.at_level(logging.INFO, logger="rlzoo"):
        train(compose(overrides))
    empty = [m for m in caplog.messages if "empty replay buffer" in m]
    assert len(empty) == 1 and "checkpoint_buffer=false" in empty[0]


def test_ctrl_c_on_the_command_line_is_one_line_and_status_130(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    command = [sys.executable, "-m", "rlzoo.train", "algo=ppo", "env=CartPole", "n_envs=1", *TINY_ON_POLICY,
               "checkpoint_freq=64", "total_timesteps=1000000", f"run_dir={run.path}",
               f"hydra.run.dir={tmp_path / 'hydra'}"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + WAIT_S
        while not run.checkpoints() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process.poll() is None and run.checkpoints(), "the run ended, or made no checkpoint in time"
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130
    lines = [line for line in err.splitlines() if not line.startswith("training: ")]  # progress lines aside
    assert len(lines) <= 2 and any(f"python -m rlzoo.train resume={run.path}" in line for line in lines), err
    assert lines[-1].startswith("rlzoo.train: interrupted: checkpoint kept at step ")
