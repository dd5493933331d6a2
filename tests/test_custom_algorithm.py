"""A user's own algorithm: one Python file + one YAML, trained through ``algo=<its yaml>``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

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


def test_shared_run_of_a_custom_algorithm_loads_when_its_module_is_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Untrusted, ``algo._target_=vpg.VPG`` is outside the allowlist; allowed by name or registered in the user config
    folder (``$RLZOO_CONF/algo/vpg.yaml``), the run loads without unpickling and acts as SB3's own load."""
    from rlzoo.kinds import load_agent
    from rlzoo.playback.loading import load_run

    overrides = [SEARCHPATH, "algo=vpg", "env=CartPole", "algo.n_steps=16", "total_timesteps=32", "test_episodes=0"]
    train(compose_config([*overrides, "verbose=0", "logger.formats=[csv]"], run_dir=tmp_path / "run"))
    monkeypatch.setenv("RLZOO_CONF", str(tmp_path / "no_user_config"))
    with pytest.raises(ConfigError, match=r"algo._target_='vpg.VPG' is outside the allowlist"):
        load_agent(tmp_path / "run")
    trusted = load_run(tmp_path / "run", trusted=True).model
    for untrusted in (load_run(tmp_path / "run", allow=["vpg"]).model, None):
        if untrusted is None:
            monkeypatch.setenv("RLZOO_CONF", str(HERE / "conf"))
            untrusted = load_run(tmp_path / "run").model
        state = trusted.policy.state_dict()
        assert all(torch.equal(untrusted.policy.state_dict()[key], value) for key, value in state.items())
