"""Small truths (issue 26): ``--help`` lists what train accepts, run names after the env id for ``env=gym`` /
``env=atari``, image observations named as such, checkpoints with the run dir's permissions."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

from conftest import TINY_ALGO_RUNS, TINY_RUN, Compose
from rlzoo.any_env.options import observation_label
from rlzoo.config import CONFIG_DIR
from rlzoo.results.comparison import Row, table_cells
from rlzoo.results.runs import Group, RunResult
from rlzoo.rundir import RunDir
from rlzoo.train import train

TRAIN_GROUPS = {"algo", "env", "srl_model", "hardware", "logger", "algo_env", "experiment", "multiagent"}


def test_help_lists_only_the_groups_train_accepts() -> None:
    listing = str(OmegaConf.create({"groups": "${rlzoo.help_groups:train}"}).groups)
    groups = {line.split(":", 1)[0] for line in listing.splitlines()}
    assert groups == TRAIN_GROUPS  # not collect_policy, search_space, srl_network ... (other entrypoints' groups)
    assert "ppo" in dict(line.split(": ", 1) for line in listing.splitlines())["algo"].split(", ")


@pytest.fixture
def hydra_run_dir() -> Iterator[object]:
    """The run dir Hydra would choose for overrides (``hydra.run.dir`` resolved as at a run's start)."""

    def run_dir(overrides: list[str]) -> str:
        cfg = compose("train", overrides, return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)
        return str(cfg.hydra.run.dir)

    with initialize_config_dir(str(CONFIG_DIR), version_base="1.3"):
        try:
            yield run_dir
        finally:
            HydraConfig.instance().cfg = None  # type: ignore[assignment]


@pytest.mark.parametrize(
    ("overrides", "ending"),
    [
        (["env=gym", "env.id=Taxi-v3"], "_ppo_Taxi-v3"),
        (["env=atari", "env.id=ALE/Breakout-v5"], "_ppo_ALE-Breakout-v5"),
        (["env=CartPole"], "_ppo_CartPole"),
    ],
)
def test_run_names_use_the_env_id_of_any_id_options(hydra_run_dir: object, overrides: list[str], ending: str) -> None:
    name = hydra_run_dir(["algo=ppo", *overrides])  # type: ignore[operator]
    assert Path(name).name.endswith(ending)


def test_image_observations_are_named_as_such(tmp_path: Path) -> None:
    assert observation_label("ground_truth", "image") == "images"
    assert observation_label("ground_truth", "native") == "ground_truth"
    assert observation_label("raw_pixels", "native") == "raw_pixels"

    def group(mode: str) -> Group:
        config = OmegaConf.create({"env": {"id": "ALE/Pong-v5", "observation": mode}, "seed": 0})
        run = RunResult(tmp_path, config, np.array([10]), np.array([1.0]), finished=True)
        return Group("ALE/Pong-v5", "stable_baselines3.PPO", "ground_truth", runs=[run])

    _, lines = table_cells([Row(group("image"), 10, (1.0,)), Row(group("native"), 10, (1.0,))], baseline=None)
    assert [line[2] for line in lines] == ["images", "ground_truth"]


def test_checkpoints_get_the_run_dirs_permissions(compose: Compose, tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        train(compose(["algo=ppo", *TINY_ALGO_RUNS["ppo"], *TINY_RUN, "test_episodes=0"]))
    finally:
        os.umask(old)
    run = RunDir(tmp_path / "run")
    mode = stat.S_IMODE(run.path.stat().st_mode)
    assert mode == 0o755
    assert [stat.S_IMODE(folder.stat().st_mode) for folder in run.checkpoints()] == [mode] * len(run.checkpoints())
    assert run.checkpoints()
