"""An env resumes exactly by implementing the ``Stateful`` protocol (``get_state`` / ``set_state``), with nothing in
``training/`` naming it; without the two methods, a resumed run resets it, saying so."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from stable_baselines3.common.vec_env import DummyVecEnv

from conftest import Compose
from rlzoo.errors import Refused
from rlzoo.rundir import RunDir
from rlzoo.stateful import Stateful, implements
from rlzoo.train import train
from rlzoo.training.env_state import capture_envs, restore_envs
from rlzoo.training.monitor import PerEnvMonitor
from rlzoo.training.run_state import Snapshot
from test_exact_resume import QUIET, TINY_NET, check_resumes_exactly, stop_after


class Drift(gym.Env[np.ndarray, int]):
    """A point pushed left, not at all or right, drifting by noise from the env's generator; 40-step episodes. Its
    position and step count are its own: no attribute tells the run state what they are."""

    observation_space = spaces.Box(-5.0, 5.0, shape=(2,), dtype=np.float32)
    action_space = spaces.Discrete(3)

    def __init__(self) -> None:
        self.where, self.count = np.zeros(2), 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.where, self.count = self.np_random.uniform(-1.0, 1.0, size=2), 0
        return self.where.astype(np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.where = np.clip(self.where + 0.1 * (int(action) - 1) + self.np_random.normal(0.0, 0.1, size=2), -5, 5)
        self.count += 1
        return self.where.astype(np.float32), -float(np.abs(self.where).sum()), False, self.count >= 40, {}


class StatefulDrift(Drift):
    """:class:`Drift` with the protocol: its position and step count, checked when they are put back."""

    def get_state(self) -> dict[str, Any]:
        return {"where": self.where.copy(), "count": self.count}

    def set_state(self, state: Mapping[str, Any]) -> None:
        where, count = state.get("where"), state.get("count")
        if not isinstance(where, np.ndarray) or where.shape != (2,) or not np.isfinite(where).all():
            raise ValueError("where: expected 2 finite numbers")
        if not isinstance(count, int) or not 0 <= count < 40:
            raise ValueError("count: expected a step of the episode")
        self.where, self.count = where.astype(np.float64), count


for name, entry in (("Drift", Drift), ("StatefulDrift", StatefulDrift)):
    if f"rlzootest/{name}-v0" not in gym.registry:
        gym.register(id=f"rlzootest/{name}-v0", entry_point=entry)

PPO = ["algo=ppo", "n_envs=2", "algo.n_steps=32", "algo.batch_size=32", TINY_NET, "total_timesteps=384",
       "checkpoint_freq=128", *QUIET]  # fmt: skip


def _venv(env_id: str) -> PerEnvMonitor:
    venv = DummyVecEnv([lambda: gym.make(env_id) for _ in range(2)])
    venv.seed(1)
    return PerEnvMonitor(venv)


def test_the_protocol_is_two_methods() -> None:
    assert implements(StatefulDrift()) and isinstance(StatefulDrift(), Stateful)
    assert not implements(Drift())


def test_an_env_with_the_protocol_continues_bit_for_bit(tmp_path: Path) -> None:
    """Saved mid-episode through the checkpoint's files, put into a fresh vec env: the same observations, rewards
    and episode ends for 100 steps (episode ends included)."""
    saved = _venv("rlzootest/StatefulDrift-v0")
    saved.reset()
    actions = np.random.default_rng(0).integers(0, 3, size=(130, 2))
    for action in actions[:30]:
        saved.step(action)
    snapshot = Snapshot()
    assert capture_envs(snapshot, saved)
    snapshot.write(tmp_path)
    fresh = _venv("rlzootest/StatefulDrift-v0")
    restore_envs(Snapshot.read(tmp_path) or Snapshot(), fresh)
    for action in actions[30:]:
        for a, b in zip(saved.step(action)[:3], fresh.step(action)[:3], strict=True):
            assert np.array_equal(a, b)
    assert not capture_envs(Snapshot(), _venv("rlzootest/Drift-v0"))


def test_a_state_that_does_not_fit_is_refused_in_one_line(tmp_path: Path) -> None:
    saved = _venv("rlzootest/StatefulDrift-v0")
    saved.reset()
    snapshot = Snapshot()
    assert capture_envs(snapshot, saved)
    key = next(k for k in snapshot.arrays if k.endswith("/where"))
    snapshot.arrays[key] = np.array([np.nan, 0.0])
    with pytest.raises(Refused, match=r"^run state env/0/\d+/where: expected 2 finite numbers$"):
        restore_envs(snapshot, _venv("rlzootest/StatefulDrift-v0"))


def test_a_run_on_an_env_with_the_protocol_resumes_exactly(compose: Compose, tmp_path: Path) -> None:
    check_resumes_exactly([*PPO, "env.id=rlzootest/StatefulDrift-v0"], compose, tmp_path)
    saved = json.loads((tmp_path / "whole" / "checkpoints" / "256" / "run_state.json").read_text())
    assert saved["envs_saved"] is True and any(key.endswith("/count") for key in saved)


def test_a_run_on_an_env_without_it_resets_its_envs(
    compose: Compose, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    overrides = [*PPO, "env.id=rlzootest/Drift-v0"]
    whole = RunDir(tmp_path / "whole")
    train(compose(overrides, run_dir=whole.path))
    assert json.loads((whole.checkpoint(256) / "run_state.json").read_text())["envs_saved"] is False
    stopped = stop_after(whole.path, tmp_path / "stopped", 256)
    with caplog.at_level("WARNING", logger="rlzoo"):
        train(compose(overrides, run_dir=stopped.path))
    assert any("cannot be saved" in record.getMessage() for record in caplog.records)


def test_an_array_that_declares_more_than_its_file_holds_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """A run state's arrays are sized before they are read: a header declaring 10^12 numbers in a file of a few
    hundred bytes (numpy would allocate them first) is one line."""
    Snapshot({"envs_saved": False}, {"x": np.arange(10.0)}).write(tmp_path)
    assert np.array_equal((Snapshot.read(tmp_path) or Snapshot()).arrays["x"], np.arange(10.0))
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (10**12,)})
    with zipfile.ZipFile(tmp_path / "run_state.npz", "w") as archive:
        archive.writestr("x.npy", header.getvalue() + bytes(80))
    with pytest.raises(
        Refused, match=r"member 'x\.npy' announces \(1000000000000,\) of float64 \(\d+ bytes\) in \d+ bytes"
    ):
        Snapshot.read(tmp_path)
