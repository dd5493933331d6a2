"""Resume: a run continues in its own run dir from its newest checkpoint, with its logs cut back to that point."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from stable_baselines3 import PPO
from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

from conftest import TINY_ALGO_RUNS, Compose
from rlzoo.errors import ConfigError
from rlzoo.results.runs import read_monitor
from rlzoo.rundir import RunDir
from rlzoo.train import train
from rlzoo.training.resume import resume_config

RUN = ["algo=ppo", *TINY_ALGO_RUNS["ppo"], "total_timesteps=1024", "checkpoint_freq=256", "test_episodes=2",
       "verbose=0", "logger.formats=[csv]"]  # fmt: skip


def returns100_frames(run: RunDir) -> list[int]:
    return [int(line.split(",")[0]) for line in run.returns100.read_text().splitlines()[1:]]


def test_interrupted_run_resumes_from_newest_checkpoint(compose: Compose, tmp_path: Path) -> None:
    cfg = compose(RUN)
    train(cfg)
    run = RunDir(tmp_path / "run")
    complete_episodes = sum(len(read_monitor(f)[0]) for f in run.monitor_files())
    # Make it look killed after the checkpoint at 512: later checkpoints, final model and metrics gone; the logs still
    # hold the episodes after 512, which the resumed run must not count twice.
    for folder in run.checkpoints():
        if int(folder.name) > 512:
            shutil.rmtree(folder)
    run.model.unlink()
    run.metrics.unlink()
    (run.path / "obs_norm.npz").unlink(missing_ok=True)

    metrics = train(compose(RUN))
    assert run.resumes() == [512]
    assert metrics["train/timesteps"] == 1024
    assert PPO.load(run.model).num_timesteps == 1024
    steps = [int(f.name) for f in run.checkpoints()]
    assert steps == [256, 512, 768, 1024]
    episodes = [read_monitor(f) for f in run.monitor_files()]
    assert all(np.all(lengths > 0) for _, lengths in episodes)
    # Each env's episodes up to 512 are kept, those after are trained again: about as many episodes as one run.
    n_episodes = sum(len(returns) for returns, _ in episodes)
    assert abs(n_episodes - complete_episodes) <= 2 * len(episodes)
    progress_steps = np.genfromtxt(run.progress, delimiter=",", names=True)["timetotal_timesteps"]
    assert np.all(np.diff(progress_steps) > 0)  # progress.csv continues, no step twice


def test_changed_config_in_a_used_run_dir_is_refused(compose: Compose, tmp_path: Path) -> None:
    cfg = compose(RUN)
    train(cfg)
    (tmp_path / "run" / "metrics.json").unlink()
    with pytest.raises(ConfigError, match=r"another config \(algo.gamma: saved 0.98, now 0.9\)"):
        train(compose([*RUN, "algo.gamma=0.9"]))


def test_resume_rejects_conflicting_overrides(compose: Compose, tmp_path: Path) -> None:
    train(compose(RUN))
    composed = compose(["algo=ppo", "algo.gamma=0.9"], run_dir=tmp_path / "other")
    with pytest.raises(ConfigError, match=r"algo.gamma=0.9 \(the run has algo.gamma=0.98\)"):
        resume_config(tmp_path / "run", composed, ["algo.gamma=0.9"])
    agreeing = resume_config(tmp_path / "run", compose(["algo.gamma=0.98"]), ["algo.gamma=0.98"])
    assert agreeing.run_dir == str(tmp_path / "run")
    with pytest.raises(ConfigError, match="is not a run dir"):
        resume_config(tmp_path / "nothing", composed, [])


def test_sigkilled_training_process_resumes(tmp_path: Path) -> None:
    """A real training subprocess killed with SIGKILL after a checkpoint continues with ``resume=<run dir>``."""
    run = RunDir(tmp_path / "run")
    command = [sys.executable, "-m", "rlzoo.train", "algo=ppo", "env=CartPole", "n_envs=2", "algo.n_steps=64",
               "algo.batch_size=64", "algo.n_epochs=2", "+algo.policy_kwargs.net_arch=[16]", "total_timesteps=5000",
               "checkpoint_freq=512", "test_episodes=2", "verbose=0", "logger.formats=[csv]",
               f"run_dir={run.path}", f"hydra.run.dir={tmp_path / 'hydra'}"]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while len(run.checkpoints()) < 2 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not run.is_finished(), "the run finished before it could be killed"
    killed_at = int(run.checkpoints()[-1].name)

    resumed = subprocess.run(
        [sys.executable, "-m", "rlzoo.train", f"resume={run.path}", f"hydra.run.dir={tmp_path / 'hydra2'}"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert run.is_finished()
    assert run.resumes() == [killed_at]
    assert PPO.load(run.model).num_timesteps >= 5000
    frames = returns100_frames(run)
    assert frames == sorted(frames) and frames[-1] >= 5000


def test_sigusr2_saves_a_checkpoint_then_ends_the_run(tmp_path: Path) -> None:
    """SIGUSR2 (Slurm's warning) saves a checkpoint at the current step before the previous handler (here the
    default: the process ends) takes over, so a requeued job loses nothing."""
    run = RunDir(tmp_path / "run")
    command = [sys.executable, "-m", "rlzoo.train", "algo=ppo", "env=CartPole", "n_envs=2", "algo.n_steps=64",
               "algo.batch_size=64", "algo.n_epochs=2", "+algo.policy_kwargs.net_arch=[16]", "total_timesteps=100000",
               "checkpoint_freq=50000", "test_episodes=2", "verbose=0", "logger.formats=[csv]",
               f"run_dir={run.path}", f"hydra.run.dir={tmp_path / 'hydra'}"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not (run.path / "progress.csv").is_file() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    process.send_signal(signal.SIGUSR2)
    assert process.wait(timeout=60) == -signal.SIGUSR2
    steps = [int(folder.name) for folder in run.checkpoints()]
    assert len(steps) == 1 and 0 < steps[0] < 50000  # saved on the signal, not by the interval
    assert (run.checkpoints()[0] / "state.json").is_file()


def tensorboard_steps(run: RunDir, tag: str) -> list[int]:
    """The steps of ``tag`` in every event file of ``run``, in the order they were written."""
    events = []
    for path in run.tensorboard_dir.glob("events.out.tfevents.*"):
        events += [e for e in LegacyEventFileLoader(str(path)).Load() if e.HasField("summary")]
    events.sort(key=lambda event: event.wall_time)
    return [e.step for e in events if any(value.tag == tag for value in e.summary.value)]


def test_tensorboard_curves_go_on_from_the_checkpoint(compose: Compose, tmp_path: Path) -> None:
    overrides = [*RUN, "logger.formats=[csv,tensorboard]"]
    train(compose(overrides))
    run = RunDir(tmp_path / "run")
    before = tensorboard_steps(run, "time/fps")
    assert before[-1] == 1024
    for folder in run.checkpoints():  # killed after the checkpoint at 512
        if int(folder.name) > 512:
            shutil.rmtree(folder)
    run.model.unlink()
    run.metrics.unlink()
    time.sleep(1.1)  # the resumed run's event file gets a later name and wall times
    train(compose(overrides))
    after = tensorboard_steps(run, "time/fps")
    assert after == before  # the same steps, each once: the killed run's points past 512 are gone
    assert run.resumes() == [512]


def test_a_run_without_a_checkpoint_says_it_starts_over(
    compose: Compose, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    overrides = [*RUN, "logger.formats=[csv,tensorboard]"]
    train(compose(overrides))
    run = RunDir(tmp_path / "run")
    for folder in run.checkpoints():  # killed before its first checkpoint
        shutil.rmtree(folder)
    run.model.unlink()
    run.metrics.unlink()
    with caplog.at_level(logging.WARNING, logger="rlzoo"):
        train(compose(overrides))
    assert f"run_dir {run.path} holds no checkpoint yet: the run starts over from step 0" in caplog.text
    assert run.resumes() == []
    steps = tensorboard_steps(run, "time/fps")
    assert steps == sorted(set(steps)) and steps[-1] == 1024  # the old run's events are gone
