"""Multi-agent runs go through the one run skeleton: W&B, the time budget, checkpoints with their resume state, and a
run killed with SIGKILL that continues where its last checkpoint left it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import Compose
from extras import require_extra

require_extra("pettingzoo", "multiagent")

from stable_baselines3 import DQN  # noqa: E402

from rlzoo.rundir import RunDir  # noqa: E402
from rlzoo.train import train  # noqa: E402
from test_loggers import finished_records  # noqa: E402

TICTACTOE = ["env=pettingzoo", "env.id=pettingzoo.classic.tictactoe_v3"]
TINY_DQN = ["algo=dqn", "algo.learning_starts=20", "algo.buffer_size=500", "algo.batch_size=16",
            "algo.target_update_interval=50", "+algo.policy_kwargs.net_arch=[16]"]  # fmt: skip
QUIET = ["verbose=0", "logger.formats=[csv]", "hardware.torch_threads=1"]


def test_time_budget_reaches_multiagent_runs(compose: Compose, tmp_path: Path) -> None:
    overrides = [*TICTACTOE, "multiagent=independent", *TINY_DQN, *QUIET, "total_timesteps=10000000",
                 "max_train_seconds=3", "test_episodes=2", "checkpoint_freq=0"]  # fmt: skip
    metrics = train(compose(overrides))
    assert metrics["train/timesteps"] < 10_000_000  # stopped by the clock (which counts building the learners)
    assert 3 <= metrics["time/train_seconds"] < 60


def test_wandb_logs_every_learner_of_a_multiagent_run(compose: Compose, tmp_path: Path) -> None:
    overrides = [*TICTACTOE, "multiagent=independent", *TINY_DQN, *QUIET, "total_timesteps=200", "test_episodes=2",
                 "checkpoint_freq=0", "logger=wandb", "logger.formats=[csv]"]  # fmt: skip
    train(compose(overrides))
    files = list((tmp_path / "run" / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(files) == 1
    records = finished_records(files[0])
    logged = {
        item.key or "/".join(item.nested_key) for r in records if r.HasField("history") for item in r.history.item
    }
    assert {"player_1/train/loss", "player_2/train/loss"} <= logged
    summary = {item.key for r in records if r.HasField("summary") for item in r.summary.update}
    assert "test/mean_return" in summary


def test_checkpoints_hold_every_learner_and_its_steps(compose: Compose, tmp_path: Path) -> None:
    overrides = [*TICTACTOE, "multiagent=independent", *TINY_DQN, *QUIET, "total_timesteps=300",
                 "checkpoint_freq=100", "test_episodes=2"]  # fmt: skip
    train(compose(overrides))
    run = RunDir(tmp_path / "run")
    first, second, last = (int(p.name) for p in run.checkpoints())  # at the first game end at or past 100, 200
    assert 100 <= first < 109 and 200 <= second < 209 and last == 300  # and at the end of training
    state = json.loads((run.checkpoint(second) / "state.json").read_text())
    assert set(state["kind"]["key_steps"]) == {"player_1", "player_2"}
    assert sum(state["kind"]["key_steps"].values()) == second - 2  # each key's last move closes in the next game
    assert (
        DQN.load(run.models(second).learner("player_1").model).num_timesteps == state["kind"]["key_steps"]["player_1"]
    )


def test_sigkilled_multiagent_run_resumes(tmp_path: Path) -> None:
    """A multi-agent training subprocess killed with SIGKILL after a checkpoint continues with ``resume=<run dir>``:
    every learner from its checkpoint, its step count (and so its schedules) going on, its TensorBoard curve too."""
    run = RunDir(tmp_path / "run")
    command = [sys.executable, "-m", "rlzoo.train", *TICTACTOE, "multiagent=independent", *TINY_DQN, *QUIET,
               "logger.formats=[csv,tensorboard]", "total_timesteps=4000", "checkpoint_freq=200", "test_episodes=2",
               f"run_dir={run.path}", f"hydra.run.dir={tmp_path / 'hydra'}"]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while len(run.checkpoints()) < 2 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    output = process.communicate()[0].decode()
    assert not run.is_finished(), "the run finished before it could be killed: " + output
    killed_at = int(run.checkpoints()[-1].name)
    key_steps = json.loads((run.checkpoints()[-1] / "state.json").read_text())["kind"]["key_steps"]

    resumed = subprocess.run(
        [sys.executable, "-m", "rlzoo.train", f"resume={run.path}", f"hydra.run.dir={tmp_path / 'hydra2'}"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert run.is_finished() and run.resumes() == [killed_at]
    assert json.loads(run.metrics.read_text())["train/timesteps"] == 4000
    # each learner went on from its checkpoint's step count: together they count about the whole run's moves (a
    # move still open at the checkpoint or at the end is not counted), not only the moves after the kill
    final = {key: DQN.load(run.models().learner(key).model).num_timesteps for key in key_steps}
    assert all(final[key] > steps for key, steps in key_steps.items())
    assert 4000 - 10 <= sum(final.values()) <= 4000
    frames = [int(line.split(",")[0]) for line in run.returns100.read_text().splitlines()[1:]]
    assert frames == sorted(frames) and 4000 - 9 <= frames[-1] <= 4000  # the last finished game's frame
    for key in key_steps:  # each learner's TensorBoard curve goes on from its checkpoint instead of doubling back
        steps = _event_steps(RunDir(run.models().learner(key).path))
        assert steps == sorted(steps)


def _event_steps(run: RunDir) -> list[int]:
    """The steps of every summary in ``run``'s TensorBoard event files, in the order they were written."""
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

    events = []
    for path in run.tensorboard_dir.glob("events.out.tfevents.*"):
        events += [e for e in LegacyEventFileLoader(str(path)).Load() if e.HasField("summary")]
    events.sort(key=lambda event: event.wall_time)
    return [event.step for event in events]


def test_sigusr2_checkpoints_a_multiagent_run_that_resumes_its_seat_rotation(compose: Compose, tmp_path: Path) -> None:
    """SIGUSR2 (Slurm's warning) saves every learner's checkpoint at the end of the current game, with the seat
    rotation's episode, before the previous handler (here the default: the process ends) takes over; the resumed run's
    learner takes the seat it had reached, and the curve goes on."""
    from rlzoo.multiagent.kind import MultiAgent
    from rlzoo.training.context import RunContext

    run = RunDir(tmp_path / "run")
    overrides = [*TICTACTOE, "multiagent=fixed_opponent", *TINY_DQN, *QUIET, "total_timesteps=3000",
                 "checkpoint_freq=100000", "test_episodes=2"]  # fmt: skip
    command = [sys.executable, "-m", "rlzoo.train", *overrides, f"run_dir={run.path}",
               f"hydra.run.dir={tmp_path / 'hydra'}"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while len(run.returns100.read_text().splitlines() if run.returns100.is_file() else []) < 2:
        assert time.monotonic() < deadline and process.poll() is None, "no returns100 row within 60 s"
        time.sleep(0.05)  # a row: 100 episodes played, so the seat rotation moved on
    process.send_signal(signal.SIGUSR2)
    assert process.wait(timeout=60) == -signal.SIGUSR2
    (checkpoint,) = run.checkpoints()  # saved on the signal, not by the interval
    signalled_at = int(checkpoint.name)
    state = json.loads((checkpoint / "state.json").read_text())["kind"]
    assert 0 < signalled_at < 3000 and state["seat_episode"] >= 100
    assert DQN.load(run.models(signalled_at).learner("player_1").model).num_timesteps == state["key_steps"]["player_1"]

    resume = compose([f"resume={run.path}"])
    plan = MultiAgent().plan(resume, [])
    with RunContext(plan) as context:
        assert MultiAgent().build(plan, context).team.rotation.episode == state["seat_episode"]  # type: ignore[union-attr]
    metrics = train(resume)
    assert metrics["train/timesteps"] == 3000 and run.resumes() == [signalled_at]
    frames = [int(line.split(",")[0]) for line in run.returns100.read_text().splitlines()[1:]]
    # the last row is the final partial window, at the frame of the last finished game (a game is at most 9 moves)
    assert frames == sorted(frames) and len(set(frames)) == len(frames) and 3000 - 9 <= frames[-1] <= 3000
