"""Nothing is written into rlzoo's package: the user config folder on Hydra's search path (tuned pairs from
``rlzoo.tune``), and the package tree unchanged after train, tune, pipeline and report."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from conftest import TINY_ALGO_RUNS
from extras import require_extra
from rlzoo.config import CONFIG_DIR, PACKAGE_DIR, USER_CONFIG_ENV, compose_config
from rlzoo.errors import ConfigError

PAIR = "# @package _global_\nn_envs: 3\nalgo:\n  n_epochs: 7\n"


def write_pair(folder: Path, name: str = "ppo_Mine") -> Path:
    path = folder / "algo_env" / "tuned" / f"{name}.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(PAIR)
    return path


def search_path(config_dir: Path) -> list[tuple[str, str]]:
    """The search path Hydra builds for an app whose primary config folder is ``config_dir``."""
    from hydra._internal.utils import create_config_search_path

    return [(e.provider, e.path) for e in create_config_search_path(f"file://{config_dir}").get_path()]


def test_the_user_config_folder_is_searched_after_rlzoos_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(USER_CONFIG_ENV, raising=False)
    assert ("rlzoo user config", f"file://{tmp_path / 'rlzoo_conf'}") not in search_path(CONFIG_DIR)  # none yet
    write_pair(tmp_path / "rlzoo_conf")
    entries = search_path(CONFIG_DIR)
    assert entries.index(("rlzoo user config", f"file://{tmp_path / 'rlzoo_conf'}")) > entries.index(
        ("main", f"file://{CONFIG_DIR}")
    )
    cfg = compose_config(["algo=ppo", "env=CartPole", "algo_env=tuned/ppo_Mine"], run_dir=tmp_path / "run")
    assert (cfg.n_envs, cfg.algo.n_epochs) == (3, 7)
    # $RLZOO_CONF names another folder.
    monkeypatch.setenv(USER_CONFIG_ENV, str(tmp_path / "elsewhere"))
    write_pair(tmp_path / "elsewhere", "ppo_Other")
    cfg = compose_config(["algo=ppo", "env=CartPole", "algo_env=tuned/ppo_Other"], run_dir=tmp_path / "run")
    assert cfg.n_envs == 3
    # Another Hydra app's search path is left alone.
    other = tmp_path / "other_app"
    other.mkdir()
    (other / "config.yaml").write_text("x: 1\n")
    assert [p for p, _ in search_path(other)] == ["hydra", "main", "schema"]
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(other), version_base="1.3"):
        assert compose(config_name="config").x == 1


def test_a_pair_found_nowhere_names_the_folders_searched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(USER_CONFIG_ENV, raising=False)
    write_pair(tmp_path / "rlzoo_conf")
    message = (
        rf"algo_env=tuned/ppo_Nowhere: no algo_env/tuned/ppo_Nowhere.yaml in the config folders searched "
        rf"\({CONFIG_DIR}, {tmp_path / 'rlzoo_conf'}\); rlzoo.tune exports"
    )
    with pytest.raises(ConfigError, match=message):
        compose_config(["algo_env=tuned/ppo_Nowhere"], run_dir=tmp_path / "run")


def test_tune_export_into_the_package_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_extra("optuna", "tune")
    from rlzoo.tune.worker import tune
    from test_tune import compose_tune

    monkeypatch.setenv(USER_CONFIG_ENV, str(CONFIG_DIR))
    with pytest.raises(ConfigError, match=r"tune.export=true would write the tuned pair into .*inside rlzoo's package"):
        tune(compose_tune(tmp_path, "n_trials=1", "tune.export=true"), log=lambda _: None)
    with pytest.raises(ConfigError, match=r"tune.dir=.* lies inside rlzoo's package"):
        tune(compose_tune(tmp_path, "n_trials=1", f"tune.dir={PACKAGE_DIR / 'study'}"), log=lambda _: None)
    assert not (tmp_path / "study").exists() and not (PACKAGE_DIR / "study").exists()


def tree_hash(*roots: Path) -> dict[str, str]:
    """Every file under ``roots`` (bytecode caches aside) with the hash of its content."""
    return {
        str(path): hashlib.sha256(path.read_bytes()).hexdigest()
        for root in roots
        for path in sorted(root.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def test_train_tune_pipeline_and_report_leave_the_package_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process tiny runs of every command that writes, from a working directory of their own; the tuned pair
    lands in the user config folder there, and ``algo_env=tuned/<name>`` composes it."""
    require_extra("optuna", "tune")
    from rlzoo.pipeline.command import run_pipeline
    from rlzoo.pipeline.spec import pipeline_spec
    from rlzoo.reporting.page import write_report
    from rlzoo.train import train
    from rlzoo.tune.worker import tune
    from test_pipeline import TINY as TINY_PIPELINE
    from test_tune import compose_tune

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(USER_CONFIG_ENV, raising=False)
    before = tree_hash(PACKAGE_DIR, CONFIG_DIR)
    run = ["algo=ppo", *TINY_ALGO_RUNS["ppo"], "total_timesteps=64", "test_episodes=1", "verbose=0",
           "logger.formats=[csv]", "checkpoint_freq=0"]  # fmt: skip
    for seed in (0, 1):
        train(compose_config([*run, f"seed={seed}"], run_dir=tmp_path / "runs" / str(seed)))
    result = tune(compose_tune(tmp_path, "n_trials=1", "tune.pruner=none", "tune.export=true"), log=lambda _: None)
    assert tmp_path / "rlzoo_conf" / "algo_env" / "tuned" / "ppo_CartPole.yaml" in result.files.pairs
    cfg = compose_config(["algo=ppo", "env=CartPole", "algo_env=tuned/ppo_CartPole"], run_dir=tmp_path / "again")
    assert cfg.total_timesteps == 256  # the study's budget, from the exported pair
    pipeline = [*(o for o in TINY_PIPELINE if "raw_pixels" not in o), f"pipeline.dir={tmp_path / 'pipe'}",
                "pipeline.sweep.seed=[0]", "pipeline.sweep.srl_model=[ground_truth]"]  # fmt: skip
    assert sorted(run_pipeline(pipeline_spec(pipeline), lambda _: None)) == ["done"]
    write_report(tmp_path / "runs", tmp_path / "report.html", log=lambda _: None)
    assert tree_hash(PACKAGE_DIR, CONFIG_DIR) == before
