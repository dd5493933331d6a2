"""One process at a time in a run dir: a second ``rlzoo.train`` on a run dir in use is refused before it writes."""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import TINY_ALGO_RUNS, Compose
from rlzoo.errors import ConfigError
from rlzoo.rundir import LOCK, RunDir, RunDirInUse, record_failure
from rlzoo.train import train
from rlzoo.training.plan import plan_run
from rlzoo.training.resume import check_still_planned

RUN = ["algo=ppo", *TINY_ALGO_RUNS["ppo"], "total_timesteps=1024", "checkpoint_freq=256", "test_episodes=2",
       "verbose=0", "logger.formats=[csv]"]  # fmt: skip


def _command(run: RunDir, hydra_dir: Path) -> list[str]:
    return [sys.executable, "-m", "rlzoo.train", "algo=ppo", "env=CartPole", "n_envs=2", "algo.n_steps=64",
            "algo.batch_size=64", "algo.n_epochs=2", "+algo.policy_kwargs.net_arch=[16]", "total_timesteps=1000000",
            "checkpoint_freq=500000", "test_episodes=2", "verbose=0", "logger.formats=[csv]",
            f"run_dir={run.path}", f"hydra.run.dir={hydra_dir}"]  # fmt: skip


def test_a_second_process_on_a_run_dir_in_use_is_refused_and_the_first_keeps_its_logs(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    first = subprocess.Popen(_command(run, tmp_path / "hydra1"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (run.config.is_file() and run.monitor_files()) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # a few episodes in the monitor files
        assert first.poll() is None and run.monitor_files(), "the first run did not start training"
        sizes = {path: path.stat().st_size for path in run.monitor_files()}
        config = run.config.read_bytes()

        second = subprocess.run(_command(run, tmp_path / "hydra2"), capture_output=True, text=True, timeout=120)
        assert second.returncode != 0
        assert f"run_dir {run.path} is in use: another rlzoo process (pid {first.pid})" in second.stderr
        assert "Traceback" not in second.stderr
        assert first.poll() is None, "the first run stopped"
        # Nothing of the first run was removed or cut back (a fresh start would have truncated its monitor files).
        assert all(path.stat().st_size >= size for path, size in sizes.items())
        assert run.config.read_bytes() == config
        assert not run.error.exists()
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    with run.locked():  # a killed process frees the lock (the kernel's)
        assert (run.path / LOCK).read_text() == str(os.getpid())
    assert not (run.path / LOCK).exists()


def test_a_run_dir_held_in_this_process_is_refused_before_any_write(compose: Compose, tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    with run.locked():
        with pytest.raises(RunDirInUse, match=rf"is in use: another rlzoo process \(pid {os.getpid()}\)"):
            train(compose(RUN))
        assert [path.name for path in run.path.iterdir()] == [LOCK]
    train(compose(RUN))
    assert run.is_finished()
    assert not (run.path / LOCK).exists(), "the lock file outlived the run"


def test_a_run_dir_that_changed_after_planning_is_refused(compose: Compose, tmp_path: Path) -> None:
    cfg = compose(RUN)
    train(cfg)
    run = RunDir(tmp_path / "run")
    for folder in run.checkpoints()[1:]:  # as if stopped after its first checkpoint (256 steps)
        shutil.rmtree(folder)
    run.model.unlink()
    run.metrics.unlink()
    plan = plan_run(cfg)
    assert plan.resume_point is not None and plan.resume_point.timesteps == 256
    check_still_planned(run, plan.resume_point, plan.config)  # as planned: no error
    with pytest.raises(ConfigError, match="changed while this run was being planned"):
        check_still_planned(run, None, plan.config)  # planned as a fresh start, but it now holds a checkpoint


def test_a_job_refused_for_a_run_dir_in_use_writes_no_error_file(tmp_path: Path) -> None:
    record_failure(tmp_path, RunDirInUse("in use"))
    assert not RunDir(tmp_path).error.exists()
    record_failure(tmp_path, ConfigError("bad value"))
    assert "bad value" in RunDir(tmp_path).error.read_text()


def test_a_file_system_without_locks_trains_unguarded(
    compose: Compose, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_locks(*args: object) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    train(compose(RUN))
    run = RunDir(tmp_path / "run")
    assert run.is_finished()
    assert not (run.path / LOCK).exists()
