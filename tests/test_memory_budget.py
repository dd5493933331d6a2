"""The memory budget is the caller's: the run key ``memory_budget_gb`` of ``rlzoo.train`` (resume included),
``rlzoo.enjoy``, ``rlzoo.report``, the pipeline and ``load_agent`` sets it for what a config asks for and what one
file of a run dir may hold; a run records null, and a shared run's value is never read."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf

from conftest import TINY_ALGO_RUNS, TINY_RUN
from rlzoo.config import compose_config
from rlzoo.confined import memory_budget
from rlzoo.errors import ConfigError
from rlzoo.kinds import load_agent
from rlzoo.rundir import MODEL, RunDir
from rlzoo.train import train

PPO = ["algo=ppo", *TINY_ALGO_RUNS["ppo"], *TINY_RUN, "test_episodes=0"]
TINY = "1e-5"  # GiB: about 10 kB, less than a tiny PPO's weights
ZIP_OVER = r"model\.zip holds \d+ bytes; at most 10737 are read"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny PPO run trained with ``memory_budget_gb=32`` on its command line."""
    folder = tmp_path_factory.mktemp("budget") / "ppo"
    train(compose_config([*PPO, "memory_budget_gb=32"], run_dir=folder), ["memory_budget_gb=32"])
    return folder


def one_line(error: pytest.ExceptionInfo[BaseException]) -> str:
    message = str(error.value)
    assert "\n" not in message and message
    return message


def saved_with(run: Path, value: object) -> None:
    """``run``'s config as a shared run dir might hold it: ``memory_budget_gb`` set to ``value``."""
    config = OmegaConf.load(run / "config.yaml")
    assert isinstance(config, DictConfig)
    config.memory_budget_gb = value
    OmegaConf.save(config, run / "config.yaml")


def test_a_run_records_null_and_the_budget_is_restored(base: Path) -> None:
    assert OmegaConf.load(base / "config.yaml").memory_budget_gb is None
    assert memory_budget() == 16 << 30  # the block of train() only


def test_the_command_line_budget_refuses_a_config_before_the_run_dir(tmp_path: Path) -> None:
    overrides = ["algo=sac", "env=Pendulum", "algo.buffer_size=1000000", "memory_budget_gb=0.001"]
    over = r"algo.buffer_size=1000000 needs at least 0.00745 GiB, over the memory budget of 0.001 GiB; .*budget_gb="
    with pytest.raises(ConfigError, match=over) as error:
        train(compose_config(overrides, run_dir=tmp_path / "run"), overrides[-1:])
    one_line(error)
    assert not (tmp_path / "run").exists()
    with pytest.raises(ConfigError, match=r"memory_budget_gb=-1: a positive number of GiB is allowed"):
        train(compose_config(["memory_budget_gb=-1"], run_dir=tmp_path / "run"), ["memory_budget_gb=-1"])
    assert not (tmp_path / "run").exists()


def test_a_shared_runs_value_is_never_read(base: Path, tmp_path: Path) -> None:
    """The run's own ``memory_budget_gb`` neither raises the caller's budget nor lowers it."""
    run = tmp_path / "shared"
    shutil.copytree(base, run)
    saved_with(run, 1000)
    with pytest.raises(ConfigError, match=ZIP_OVER) as error:
        load_agent(run, memory_budget_gb=float(TINY))
    one_line(error)
    saved_with(run, 1e-9)
    load_agent(run)  # the default budget: the run's tiny value is not read


def test_a_resume_takes_the_callers_budget_and_refuses_a_runs_own(base: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(base, run)
    (run / "metrics.json").unlink()
    (run / MODEL).unlink()  # unfinished: resumed from its newest checkpoint
    before = sorted(p.name for p in run.rglob("*"))
    overrides = [f"resume={run}", f"memory_budget_gb={TINY}"]
    with pytest.raises(ConfigError, match=ZIP_OVER.replace("model", r"checkpoints/\d+/model")) as error:
        train(compose_config(overrides, run_dir=tmp_path / "hydra"), overrides[1:])  # not "conflicts with the run"
    one_line(error)
    assert sorted(p.name for p in run.rglob("*")) == before
    saved_with(run, 1000)
    with pytest.raises(ConfigError, match=r"holds a run with another config \(memory_budget_gb: saved 1000, now None"):
        train(compose_config([f"resume={run}"], run_dir=tmp_path / "hydra"))
    assert RunDir(run).checkpoints()


@pytest.mark.parametrize("config", ["enjoy", "report"])
def test_enjoy_and_report_take_the_key_checked(config: str) -> None:
    from rlzoo.enjoy import EnjoySettings
    from rlzoo.report import ReportSettings

    settings = {"enjoy": EnjoySettings, "report": ReportSettings}[config]
    where = "run=x" if config == "enjoy" else "dir=x"

    def read(value: str) -> float | None:
        cfg = compose_config([where, f"memory_budget_gb={value}"], run_dir=None, config_name=config)
        return settings.from_config(cfg).memory_budget_gb

    assert read("64") == 64
    with pytest.raises(ConfigError, match=r"memory_budget_gb='lots': a positive number of GiB is allowed") as error:
        read("lots")
    one_line(error)


def test_the_pipeline_passes_the_key_to_its_runs_and_out_of_its_identity(tmp_path: Path) -> None:
    from rlzoo.pipeline.spec import pipeline_spec

    common = ["experiment=srl_benchmark_small", f"pipeline.dir={tmp_path}"]
    spec = pipeline_spec([*common, "memory_budget_gb=64"])
    assert "memory_budget_gb=64" in spec.train
    assert spec.identity() == pipeline_spec(common).identity()  # the same cache with another budget
