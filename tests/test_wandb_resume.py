"""One training run, one W&B run: a run killed with SIGKILL and resumed continues the same (offline) W&B run, its
steps going on from the checkpoint without doubling back."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from conftest import Compose
from rlzoo.loggers.outputs import WandbWriter
from rlzoo.loggers.wandb_state import WandbState
from rlzoo.rundir import RunDir
from rlzoo.train import train
from test_loggers import finished_records, read_wandb_records

RUN = ["algo=ppo", "env=CartPole", "n_envs=2", "algo.n_steps=64", "algo.batch_size=64", "algo.n_epochs=1",
       "+algo.policy_kwargs.net_arch=[16]", "total_timesteps=2560", "checkpoint_freq=512", "test_episodes=1",
       "verbose=0", "logger=wandb", "logger.formats=[csv]"]  # fmt: skip


class Recorded:
    """A stand-in W&B run that keeps what is logged."""

    def __init__(self) -> None:
        self.logged: list[dict[str, Any]] = []

    def log(self, values: dict[str, Any]) -> None:
        self.logged.append(values)


def test_writer_drops_steps_wandb_has_and_records_the_last(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    state = WandbState.of(run)
    state.advance(300)  # what a killed process had logged
    recorded = Recorded()
    writer = WandbWriter(recorded, WandbState.of(run))
    for step in (128, 256, 300, 384, 384):
        writer.write({"rollout/ep_rew_mean": 1.0}, {}, step)
    assert [values["global_step"] for values in recorded.logged] == [384, 384]
    assert json.loads(run.wandb_state.read_text()) == {"id": state.id, "step": 384}


def history_steps(path: Path) -> list[int]:
    """The ``global_step`` of every point of a ``.wandb`` file, in order."""
    records = read_wandb_records(path)
    return [
        int(json.loads(item.value_json))
        for r in records
        if r.HasField("history")
        for item in r.history.item
        if (item.key or "/".join(item.nested_key)) == "global_step"
    ]


def _logged_past_checkpoint(run: RunDir) -> bool:
    """Two checkpoints written, and W&B given the points up to the newest one or later."""
    checkpoints = run.checkpoints()
    if len(checkpoints) < 2 or not run.wandb_state.is_file():
        return False
    return int(json.loads(run.wandb_state.read_text())["step"]) >= int(checkpoints[-1].name)


def test_sigkilled_run_resumes_the_same_wandb_run(compose: Compose, tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    command = [sys.executable, "-m", "rlzoo.train", *RUN, f"run_dir={run.path}", f"hydra.run.dir={tmp_path / 'h'}"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "WANDB_SILENT": "true"}
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not _logged_past_checkpoint(run) and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not run.is_finished(), "the run finished before it could be killed"
    killed = json.loads(run.wandb_state.read_text())
    resumed_from = int(run.checkpoints()[-1].name)
    assert killed["step"] >= resumed_from  # W&B has points past the checkpoint the run resumes from

    train(compose(RUN, run_dir=run.path))  # the same command again, as a requeued job runs it
    assert run.resumes() == [resumed_from]
    files = sorted((run.path / "wandb").glob("offline-run-*/run-*.wandb"))
    assert [f.name for f in files] == [f"run-{killed['id']}.wandb"] * 2  # one W&B run id, two processes
    last = finished_records(files[-1])
    assert next(r.run for r in last if r.HasField("run")).run_id == killed["id"]
    before, after = history_steps(files[0]), history_steps(files[-1])
    assert after and min(after) > max([killed["step"], *before])  # no point doubles back
    assert after == sorted(after) and after[-1] >= 2560
