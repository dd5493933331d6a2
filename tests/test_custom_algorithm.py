"""A user's own algorithm: one Python file + one YAML, trained through ``algo=<its yaml>``."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlzoo.config import compose_config
from rlzoo.errors import ConfigError
from rlzoo.rundir import RunDir
from rlzoo.train import train

HERE = Path(__file__).parent / "custom_algorithm"
SEARCHPATH = f"hydra.searchpath=[file://{HERE / 'conf'}]"


@pytest.fixture(autouse=True)
def importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HERE))


def test_custom_algorithm_trains_through_its_yaml(tmp_path: Path) -> None:
    overrides = [SEARCHPATH, "algo=vpg", "env=CartPole", "algo.n_steps=64", "n_envs=2", "total_timesteps=1024"]
    cfg = compose_config([*overrides, "test_episodes=2", "verbose=0", "logger.formats=[csv]"], run_dir=tmp_path)
    metrics = train(cfg)

    from vpg import VPG  # importable from the folder added to sys.path, like a user's module

    model = VPG.load(RunDir(tmp_path).model, device="cpu")
    assert model.num_timesteps == metrics["train/timesteps"] == 1024
    assert model._n_updates == 1024 // 128
    progress = (tmp_path / "progress.csv").read_text().splitlines()
    assert "train/policy_loss" in progress[0]


def test_custom_algorithm_gets_the_same_checks(tmp_path: Path) -> None:
    cfg = compose_config([SEARCHPATH, "algo=vpg", "+algo.clip_range=0.2"], run_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"algo.clip_range is not a keyword of VPG; allowed: gamma, learning_rate"):
        train(cfg)
