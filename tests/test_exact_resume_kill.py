"""Preemption that changes nothing, for a real kill: a ``python -m rlzoo.train`` process SIGKILLed at whatever point
it has reached after a checkpoint, and the same command run again, ends with the weights, metrics (times aside),
``returns100.csv`` and monitored episodes of the uninterrupted run with the same seed and config."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import Compose
from rlzoo.rundir import RunDir
from rlzoo.train import train
from test_exact_resume import QUIET, TINY_NET, episodes, figures, weights_hash

# SAC on MobileRobot: checkpoints every 400 steps, a 500-row buffer (replay chunks rebuild it on resume).
OVERRIDES = ["algo=sac", "env=MobileRobot", "algo.buffer_size=500", "algo.learning_starts=100", "algo.batch_size=32",
             TINY_NET, "total_timesteps=2000", "checkpoint_freq=400", *QUIET]  # fmt: skip
WAIT_S = 120
TRAIN_ON_S = 0.3  # the kill strikes while the run trains on past the checkpoint (SAC: about 400 steps a second)


def _command(run: RunDir, hydra_dir: Path) -> list[str]:
    return [sys.executable, "-m", "rlzoo.train", *OVERRIDES, f"run_dir={run.path}", f"hydra.run.dir={hydra_dir}"]


def _kill_after_first_checkpoint(run: RunDir, hydra_dir: Path, log: Path) -> int:
    """Start the run, SIGKILL it :data:`TRAIN_ON_S` after its first checkpoint is on disk; return its newest complete
    checkpoint then."""
    with log.open("wb") as out:
        process = subprocess.Popen(_command(run, hydra_dir), stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + WAIT_S
        while not run.checkpoints() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert process.poll() is None, f"the run ended (rc {process.returncode}) first:\n{log.read_text()[-3000:]}"
        assert run.checkpoints(), f"no checkpoint within {WAIT_S} s:\n{log.read_text()[-3000:]}"
        time.sleep(TRAIN_ON_S)
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=30) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert not run.is_finished(), "the run finished before it could be killed"
    return int(run.checkpoints()[-1].name)


def test_a_sigkilled_process_run_again_ends_where_the_uninterrupted_run_ends(compose: Compose, tmp_path: Path) -> None:
    whole = RunDir(tmp_path / "whole")
    train(compose(OVERRIDES, run_dir=whole.path))
    killed = RunDir(tmp_path / "killed")
    killed_at = _kill_after_first_checkpoint(killed, tmp_path / "hydra", tmp_path / "first.log")
    assert killed_at < 2000

    again = subprocess.run(_command(killed, tmp_path / "hydra2"), capture_output=True, text=True, timeout=300,
                           env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert killed.resumes() == [killed_at]
    assert weights_hash(killed.model) == weights_hash(whole.model)
    assert figures(killed) == figures(whole)
    assert episodes(killed) == episodes(whole)
    assert killed.returns100.read_text() == whole.returns100.read_text()
