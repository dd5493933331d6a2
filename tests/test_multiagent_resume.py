"""Preemption that changes nothing, for multi-agent runs: a tic-tac-toe run stopped after a checkpoint and resumed ends
with every learner's weights (a SHA-256 of every parameter tensor), the metrics (times aside) and the returns100
curves of the uninterrupted run with the same seed and config, and each learner's model.zip keeps the run's seed and
its progress.csv the uninterrupted run's columns and rows (times aside; an on-policy time/iterations counts on)."""

from __future__ import annotations

import csv
import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

from conftest import Compose
from extras import require_extra

require_extra("pettingzoo", "multiagent")

from rlzoo.checkpoint_format import REPLAY  # noqa: E402
from rlzoo.errors import ConfigError  # noqa: E402
from rlzoo.multiagent.run_files import agent_returns100_files  # noqa: E402
from rlzoo.rundir import RunDir  # noqa: E402
from rlzoo.train import train  # noqa: E402
from test_exact_resume import figures, weights_hash  # noqa: E402

BUDGET = ["total_timesteps=600", "checkpoint_freq=200", "test_episodes=5", "verbose=0", "logger.formats=[csv]",
          "hardware.torch_threads=1", "seed=5"]  # fmt: skip
TINY_DQN = ["algo=dqn", "algo.learning_starts=20", "algo.buffer_size=120", "algo.batch_size=16",
            "algo.target_update_interval=50", "+algo.policy_kwargs.net_arch=[16]"]  # fmt: skip
TICTACTOE = ["env=pettingzoo", "env.id=pettingzoo.classic.tictactoe_v3", *TINY_DQN, *BUDGET]
LEAVING = ["env=pettingzoo", "env.id=multiagent_tiny", *BUDGET]  # agents that leave at different times, no masks
RUNS = {
    **{layout: [*TICTACTOE, f"multiagent={layout}"] for layout in ("independent", "fixed_opponent", "shared")},
    # unmasked: DQN's random actions and the random opponent's come from the action spaces' generators
    "leaving_dqn_fixed_opponent": [*LEAVING, *TINY_DQN, "multiagent=fixed_opponent"],
    # on-policy: a rollout in progress at the checkpoint
    "leaving_ppo": [*LEAVING, "algo=ppo", "algo.n_steps=48", "algo.batch_size=16", "algo.n_epochs=2",
                    "+algo.policy_kwargs.net_arch=[16]", "multiagent=independent"],
}  # fmt: skip


def _learners(run: RunDir) -> list[str]:
    return sorted(p.parent.name for p in (run.path / "models").glob("*/model.zip"))


def _curves(run: RunDir) -> dict[str, str]:
    files = {"": run.returns100, **agent_returns100_files(run)}
    return {key: path.read_text() for key, path in files.items()}


def _learner_logs(run: RunDir) -> dict[str, tuple[object, list[list[str]]]]:
    """Per learner: the seed its model.zip saved, and its progress.csv without the wall-time columns."""
    logs = {}
    for learner in _learners(run):
        folder = run.path / "models" / learner
        seed = json.loads(zipfile.ZipFile(folder / "model.zip").read("data"))["seed"]
        rows = list(csv.reader((folder / "progress.csv").read_text().splitlines()))
        kept = [i for i, name in enumerate(rows[0]) if name not in ("time/fps", "time/time_elapsed")]
        logs[learner] = seed, [[row[i] for i in kept] for row in rows]
    return logs


def stop_after(source: Path, target: Path, steps: int) -> RunDir:
    """``target``: the multi-agent run ``source`` as a kill after checkpoint ``steps`` leaves it (later checkpoints,
    the final models and what follows them gone; logs and replay chunks written later still there)."""
    shutil.copytree(source, target)
    run = RunDir(target)
    for folder in run.checkpoints():
        if int(folder.name) > steps:
            shutil.rmtree(folder)
    for path in [*run.path.glob("models/*/model.zip"), *run.path.glob("*.json"), *run.path.glob("test_returns*")]:
        if path.name != "wandb.json":
            path.unlink()
    return run


@pytest.fixture(scope="module")
def whole_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunDir]:
    """Every run of :data:`RUNS`, uninterrupted (checkpoints at the first game end at or past 200 and 400, and at
    600)."""
    from rlzoo.config import compose_config

    folder = tmp_path_factory.mktemp("whole")
    runs = {}
    for name, overrides in RUNS.items():
        runs[name] = RunDir(folder / name)
        train(compose_config(overrides, run_dir=runs[name].path))
    return runs


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_resumed_multiagent_run_ends_where_the_uninterrupted_run_ends(
    name: str, whole_runs: dict[str, RunDir], compose: Compose, tmp_path: Path
) -> None:
    whole = whole_runs[name]
    steps = [int(folder.name) for folder in whole.checkpoints()]
    assert len(steps) == 3 and steps[-1] == 600 and 200 <= steps[0] < 209 and 400 <= steps[1] < 409
    stopped = stop_after(whole.path, tmp_path / "stopped", steps[1])
    train(compose(RUNS[name], run_dir=stopped.path))
    assert stopped.resumes() == [steps[1]]
    assert _learners(stopped) == _learners(whole)
    for learner in _learners(whole):
        assert weights_hash(stopped.models().learner(learner).model) == weights_hash(
            whole.models().learner(learner).model
        ), learner
    assert figures(stopped) == figures(whole)
    assert _curves(stopped) == _curves(whole)
    logs = _learner_logs(stopped)
    assert logs == _learner_logs(whole) and {seed for seed, _ in logs.values()} == {5}  # the run's own seed


def test_every_learning_key_keeps_its_replay_chunks(whole_runs: dict[str, RunDir]) -> None:
    run = whole_runs["independent"]
    folder = run.checkpoints()[1]
    buffers = json.loads((folder / "run_state.json").read_text())["buffers"]
    assert set(buffers) == {"player_1", "player_2"}
    for key, found in buffers.items():
        assert found["size"] == 120 and all((run.path / REPLAY / key / c["file"]).is_file() for c in found["chunks"])
        with np.load(run.path / REPLAY / key / found["chunks"][-1]["file"], allow_pickle=False) as saved:
            assert saved["next_masks"].dtype == bool  # the legal actions of each next state, per row
            assert all(saved[name].dtype != object for name in saved.files)


def test_a_truncated_chunk_resumes_a_multiagent_run_from_the_checkpoint_before(
    whole_runs: dict[str, RunDir], compose: Compose, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    whole = whole_runs["independent"]
    first, second, _ = (int(folder.name) for folder in whole.checkpoints())
    stopped = stop_after(whole.path, tmp_path / "stopped", second)
    listed = json.loads((stopped.checkpoint(second) / "run_state.json").read_text())["buffers"]["player_2"]["chunks"]
    chunk = stopped.path / REPLAY / "player_2" / listed[-1]["file"]  # named by player_2's own steps
    chunk.write_bytes(chunk.read_bytes()[:-100])  # a kill while the chunk was written
    with caplog.at_level("WARNING", logger="rlzoo"):
        train(compose(RUNS["independent"], run_dir=stopped.path))
    assert stopped.resumes() == [first]
    warnings = [r.getMessage() for r in caplog.records if "is incomplete" in r.getMessage()]
    assert len(warnings) == 1 and str(chunk) in warnings[0]
    for name in _learners(whole):
        assert weights_hash(stopped.models().learner(name).model) == weights_hash(whole.models().learner(name).model), (
            name
        )


def test_a_multiagent_run_without_any_complete_checkpoint_is_refused_in_one_line(
    whole_runs: dict[str, RunDir], compose: Compose, tmp_path: Path
) -> None:
    whole = whole_runs["independent"]
    second = int(whole.checkpoints()[1].name)
    stopped = stop_after(whole.path, tmp_path / "stopped", second)
    for chunk in (stopped.path / REPLAY / "player_1").glob("*.npz"):
        chunk.unlink()
    refusal = r"no checkpoint can rebuild the replay buffer .*player_1/\d+\.npz is missing"
    with pytest.raises(ConfigError, match=refusal):
        train(compose(RUNS["independent"], run_dir=stopped.path))


def test_a_run_stopped_after_its_last_checkpoint_tests_as_the_uninterrupted_run(
    whole_runs: dict[str, RunDir], compose: Compose, tmp_path: Path
) -> None:
    """The checkpoint at the end of training falls within a game: nothing is played after it, and the test episodes
    (against the random opponent, whose generator goes on) are the uninterrupted run's."""
    whole = whole_runs["fixed_opponent"]
    stopped = stop_after(whole.path, tmp_path / "stopped", 600)
    train(compose(RUNS["fixed_opponent"], run_dir=stopped.path))
    assert stopped.resumes() == [600]
    assert figures(stopped) == figures(whole) and _curves(stopped) == _curves(whole)
    tests = "test_returns_agents.csv"
    assert (stopped.path / tests).read_text() == (whole.path / tests).read_text()


def test_without_checkpoint_buffer_a_multiagent_run_resumes_with_empty_buffers(
    whole_runs: dict[str, RunDir], compose: Compose, tmp_path: Path
) -> None:
    whole = whole_runs["independent"]
    second = int(whole.checkpoints()[1].name)
    stopped = stop_after(whole.path, tmp_path / "stopped", second)
    train(compose([*RUNS["independent"], "checkpoint_buffer=false"], run_dir=stopped.path))
    assert stopped.resumes() == [second]
    assert weights_hash(stopped.models().learner("player_1").model) != weights_hash(
        whole.models().learner("player_1").model
    )
