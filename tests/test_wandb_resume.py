"""One training run, one W&B run: a run stopped after a checkpoint (cut back, or a real SIGKILL) and resumed leaves
offline files that ``wandb sync`` sends as one run holding every logged point once, in step order: the points of the
uninterrupted run with the same seed and config (times aside)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from wandb.cli.beta_sync import _find_wandb_files

from conftest import Compose
from rlzoo.errors import Refused
from rlzoo.loggers.outputs import WandbWriter
from rlzoo.loggers.wandb_state import WandbState, history_file, set_aside, state_file
from rlzoo.rundir import RunDir
from rlzoo.train import train
from test_exact_resume import stop_after
from test_loggers import finished_records, read_wandb_records, wandb_records_with_ends

RUN = ["algo=ppo", "env=CartPole", "n_envs=2", "algo.n_steps=64", "algo.batch_size=64", "algo.n_epochs=1",
       "+algo.policy_kwargs.net_arch=[16]", "total_timesteps=2560", "checkpoint_freq=512", "test_episodes=1",
       "verbose=0", "logger=wandb", "logger.wandb.name=ppo", "logger.formats=[csv]", "hardware.torch_threads=1",
       "seed=5"]  # fmt: skip
# Not compared: wall-clock figures, and SB3's count of iterations, which each learn() call starts again
TIMES = ("_timestamp", "_runtime", "time/fps", "time/time_elapsed", "time/iterations")


class Recorded:
    """A stand-in W&B run that keeps what is logged."""

    def __init__(self) -> None:
        self.logged: list[dict[str, Any]] = []

    def log(self, values: dict[str, Any]) -> None:
        self.logged.append(values)


def synced(run: RunDir) -> tuple[set[str], list[dict[str, Any]]]:
    """The run ids and the history points that ``wandb sync <run dir>/wandb`` sends: the files it selects (offline
    runs, one folder deep), those of one run in order of their start time, as it syncs them; every point as logged
    (``_step`` and ``_timestamp`` included)."""
    files = _find_wandb_files([run.path / "wandb"], skip_synced=True, skip_online=True, verbose=False)
    records = {path: read_wandb_records(path) for path in files}
    newest = max(files, key=lambda path: path.stat().st_mtime)
    records[newest] = finished_records(newest)  # the process that ended last may still be writing its exit record
    starts = {path: next((r.run for r in found if r.HasField("run")), None) for path, found in records.items()}
    unreadable = [path.parent.name for path, start in starts.items() if start is None]
    assert not unreadable, f"wandb sync fails: no run record in {unreadable}"
    order = sorted(files, key=lambda path: starts[path].start_time.ToDatetime())  # type: ignore[union-attr]
    points = [
        {(item.key or "/".join(item.nested_key)): json.loads(item.value_json) for item in record.history.item}
        for path in order
        for record in records[path]
        if record.HasField("history")
    ]
    return {start.run_id for start in starts.values() if start is not None}, points


def untimed(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The points without their times (a multi-agent learner's are ``<learner>/time/...``)."""
    return [
        {key: value for key, value in point.items() if not {key, key.split("/", 1)[-1]} & set(TIMES)}
        for point in points
    ]


def check_one_history(run: RunDir, whole: RunDir) -> None:
    """``run``'s W&B history, as synced, is ``whole``'s: one run id, each point once, ``_step`` 0, 1, 2 ..."""
    ids, points = synced(run)
    assert ids == {json.loads(state_file(run).read_text())["id"]}
    steps = [point["_step"] for point in points]
    assert steps == list(range(len(points))), f"_step across the synced files: {steps}"
    global_steps = [point["global_step"] for point in points]
    assert global_steps == sorted(global_steps)
    _, expected = synced(whole)
    assert untimed(points) == untimed(expected)


@pytest.fixture
def whole(compose: Compose, tmp_path: Path) -> RunDir:
    """The uninterrupted run (checkpoints at 512, 1024 ... 2560)."""
    run = RunDir(tmp_path / "whole")
    train(compose(RUN, run_dir=run.path))
    synced(run)  # its exit record written
    return run


def killed_at(run: RunDir, steps: int) -> None:
    """Leave ``run``'s W&B files as a kill after the point at ``steps`` leaves them: W&B's file cut short after that
    point (what its service had written, the last chunk half-written), ``wandb.json`` recording the next point (logged,
    never written to the file)."""
    (path,) = (run.path / "wandb").glob("offline-run-*/run-*.wandb")
    ends = [end for record, end in wandb_records_with_ends(path) if _global_step(record) == steps]
    with path.open("r+b") as stream:
        stream.truncate(ends[0] + 10)
    state = json.loads(state_file(run).read_text())
    state_file(run).write_text(json.dumps({**state, "step": steps + 128}))


def _global_step(record: Any) -> int | None:
    items = record.history.item if record.HasField("history") else []
    found = [item.value_json for item in items if (item.key or "/".join(item.nested_key)) == "global_step"]
    return int(json.loads(found[0])) if found else None


def test_a_run_cut_back_to_a_checkpoint_and_resumed_syncs_the_uninterrupted_history(
    compose: Compose, tmp_path: Path, whole: RunDir
) -> None:
    stopped = stop_after(whole.path, tmp_path / "stopped", 1024)
    killed_at(stopped, 1536)  # W&B had points past the checkpoint the run resumes from
    train(compose(RUN, run_dir=stopped.path))
    assert stopped.resumes() == [1024]
    check_one_history(stopped, whole)
    (aside,) = (stopped.path / "wandb" / "superseded").glob("offline-run-*/run-*.wandb")  # the killed process's own
    assert max(filter(None, map(_global_step, read_wandb_records(aside)))) == 1536


def _logged_past_checkpoint(run: RunDir) -> bool:
    """Two checkpoints written, and W&B given the points up to the newest one or later."""
    checkpoints = run.checkpoints()
    if len(checkpoints) < 2 or not state_file(run).is_file():
        return False
    return int(json.loads(state_file(run).read_text())["step"]) >= int(checkpoints[-1].name)


def test_a_sigkilled_run_resumed_syncs_the_uninterrupted_history(
    compose: Compose, tmp_path: Path, whole: RunDir
) -> None:
    run = RunDir(tmp_path / "run")
    command = [sys.executable, "-m", "rlzoo.train", *RUN, f"run_dir={run.path}", f"hydra.run.dir={tmp_path / 'h'}"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "WANDB_SILENT": "true"}
    env.pop("WANDB_SERVICE", None)  # set again by the uninterrupted run: the killed run's id would stay "in use" there
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not _logged_past_checkpoint(run) and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not run.is_finished(), "the run finished before it could be killed"
    resumed_from = int(run.checkpoints()[-1].name)
    train(compose(RUN, run_dir=run.path))  # the same command again, as a requeued job runs it
    assert run.resumes() == [resumed_from]
    check_one_history(run, whole)


def test_offline_writer_logs_every_point_and_keeps_its_copy(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    state = WandbState.of(run)
    state.advance(300)  # what a killed process had logged: an offline run logs the resumed points again
    recorded = Recorded()
    writer = WandbWriter(recorded, WandbState.of(run))
    for step in (128, 256):
        writer.write({"rollout/ep_rew_mean": 1.0, "note": "text"}, {}, step)
    assert [values["global_step"] for values in recorded.logged] == [128, 256]
    lines = [json.loads(line) for line in history_file(run).read_text().splitlines()]
    assert [line["values"] for line in lines] == [{"rollout/ep_rew_mean": 1.0, "global_step": s} for s in (128, 256)]


def test_online_writer_drops_steps_wandb_has(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    state = WandbState.of(run)
    state.advance(300)
    recorded = Recorded()
    writer = WandbWriter(recorded, WandbState.of(run, offline=False))
    for step in (128, 256, 300, 384, 384):
        writer.write({"rollout/ep_rew_mean": 1.0}, {}, step)
    assert [values["global_step"] for values in recorded.logged] == [384, 384]
    assert json.loads(state_file(run).read_text()) == {"id": state.id, "step": 384}


@pytest.mark.parametrize(
    "text",
    ["garbage\n", '{"time": 1.0, "values": {"a": "x"}}\n', '{"time": true, "values": {}}\n', "[1, 2]\n", "\udcff\n"],
)
def test_a_foreign_wandb_history_is_refused_in_one_line(text: str, tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    history_file(run).write_bytes(text.encode(errors="surrogateescape"))
    with pytest.raises(Refused, match=r"wandb_history.jsonl line 1 is not a W&B point as rlzoo writes them") as error:
        WandbState.of(run).points()
    assert "\n" not in str(error.value)


def test_a_line_cut_short_by_a_kill_is_no_point_and_is_cut_off(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    history_file(run).write_text('{"time": 5.0, "values": {"global_step": 128}}\n{"time": 6.0, "val')
    state = WandbState.of(run)
    assert state.points() == [(5.0, {"global_step": 128})]
    recorded = Recorded()
    state.continue_offline(recorded)
    WandbWriter(recorded, state).write({"a": 1.5}, {}, 256)
    state.close()
    assert recorded.logged == [{"global_step": 128, "_timestamp": 5.0}, {"a": 1.5, "global_step": 256}]
    assert [values for _, values in state.points()] == [{"global_step": 128}, {"a": 1.5, "global_step": 256}]


def test_superseded_must_be_a_folder_of_the_run(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    (run.path / "wandb" / "offline-run-1-abc").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (run.path / "wandb" / "superseded").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(Refused, match=r"superseded is not a folder"):
        set_aside(run)
    assert (run.path / "wandb" / "offline-run-1-abc").is_dir() and not any((tmp_path / "elsewhere").iterdir())


def test_a_resumed_run_with_a_foreign_wandb_history_is_refused_before_wandb_moves(
    compose: Compose, tmp_path: Path
) -> None:
    short = [*RUN, "total_timesteps=512", "checkpoint_freq=256"]
    whole = RunDir(tmp_path / "whole")
    train(compose(short, run_dir=whole.path))
    stopped = stop_after(whole.path, tmp_path / "stopped", 256)
    with history_file(stopped).open("a") as stream:
        stream.write('{"time": 1.0, "values": {"global_step": "__import__"}}\n')
    before = sorted((stopped.path / "wandb").iterdir())
    with pytest.raises(Refused, match=r"wandb_history.jsonl line 5 is not a W&B point") as error:
        train(compose(short, run_dir=stopped.path))
    assert "\n" not in str(error.value)
    assert sorted((stopped.path / "wandb").iterdir()) == before and not stopped.resumes()


def test_a_resumed_multiagent_run_syncs_one_history_for_every_learner(compose: Compose, tmp_path: Path) -> None:
    """Every learner logs into the one W&B run (``<learner>/`` keys), and the resumed run syncs the uninterrupted
    run's points (multi-agent runs resume exactly from their checkpoints at game ends)."""
    pytest.importorskip("pettingzoo", reason="the [multiagent] extra: pip install -e '.[multiagent]'")
    overrides = ["env=pettingzoo", "env.id=pettingzoo.classic.tictactoe_v3", "multiagent=independent", "algo=dqn",
                 "algo.learning_starts=20", "algo.buffer_size=500", "algo.batch_size=16", "total_timesteps=300",
                 "+algo.policy_kwargs.net_arch=[16]", "checkpoint_freq=100", "test_episodes=2", "verbose=0",
                 "logger=wandb", "logger.wandb.name=ttt", "logger.formats=[csv]",
                 "hardware.torch_threads=1"]  # fmt: skip
    whole = RunDir(tmp_path / "whole")
    train(compose(overrides, run_dir=whole.path))
    _, expected = synced(whole)
    middle = int(whole.checkpoints()[-2].name)  # the second of three: checkpoints come at game ends
    stopped = stop_after(whole.path, tmp_path / "stopped", middle)
    (stopped.path / "models.json").unlink()  # the learners' final models not yet recorded
    kept = json.loads((stopped.checkpoint(middle) / "state.json").read_text())["log_lines"][history_file(stopped).name]
    train(compose(overrides, run_dir=stopped.path))
    assert stopped.resumes() == [middle]
    ids, points = synced(stopped)
    assert ids == {json.loads(state_file(stopped).read_text())["id"]}
    assert [point["_step"] for point in points] == list(range(len(points)))
    assert 0 < kept < len(points) and untimed(points) == untimed(expected)
    assert {key.split("/")[0] for point in points for key in point if "/" in key} >= {"player_1", "player_2"}
