"""Every reader of a shared folder goes through the confined layer (``rlzoo.confined``): each one refuses, in one
line naming the file, a symlinked file (to a file outside) and an oversize one (a sparse file over its cap, or a file
over a small memory budget given as ``memory_budget_gb`` would give it), and a log a resumed run appends to is never
a FIFO (no open that waits) nor a link."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from omegaconf import OmegaConf

from extras import require_extra
from rlzoo import confined
from rlzoo.errors import ConfigError, Refused
from rlzoo.rundir import RunDir

TINY_GIB = 1 / 1024  # a 1 MiB memory budget


def plant(folder: Path, name: str, kind: str, data: bytes = b"{}", size: int = 0) -> Path:
    """``folder/name`` as a symlink to a file outside (holding ``data``) or a sparse file of ``size`` bytes."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "symlink":
        outside = folder.parent / f"outside-{path.name}"
        outside.write_bytes(data)
        os.symlink(outside, path)
    else:
        with path.open("wb") as stream:
            stream.truncate(size)
    return path


def jax_weights(tmp_path: Path, kind: str) -> Callable[[], Any]:
    from rlzoo.jax_weights import JAX_WEIGHTS, load_jax_weights

    path = plant(tmp_path / "run", JAX_WEIGHTS, kind, size=2 << 20)
    return lambda: load_jax_weights(path, model=None)  # refused before flax or the model is touched


def wandb_id(tmp_path: Path, kind: str) -> Callable[[], Any]:
    from rlzoo.loggers.wandb_state import WandbState

    plant(tmp_path / "run", "wandb.json", kind, b'{"id": "abc"}', size=confined.JSON_CAP + 1)
    return lambda: WandbState.of(RunDir(tmp_path / "run"))


def wandb_points(tmp_path: Path, kind: str) -> Callable[[], Any]:
    from rlzoo.loggers.wandb_state import WandbState

    plant(tmp_path / "run", "wandb_history.jsonl", kind, size=confined.CSV_CAP + 1)
    return lambda: WandbState(RunDir(tmp_path / "run"), "abc").points()


def dataset(tmp_path: Path, kind: str) -> Callable[[], Any]:
    from rlzoo.srl.dataset import ARRAYS, METADATA, load_dataset

    folder = tmp_path / "dataset"
    folder.mkdir()
    (folder / METADATA).write_text(json.dumps({"env_id": "x"}))
    plant(folder, ARRAYS, kind, size=70 << 20)  # over the budget and the 64 MiB a zip's directory may add
    return lambda: load_dataset(folder)


def metrics(tmp_path: Path, kind: str) -> Callable[[], Any]:
    from rlzoo.results.stats import score_values

    plant(tmp_path / "run", "metrics.json", kind, size=confined.JSON_CAP + 1)
    run = SimpleNamespace(path=tmp_path / "run", seed=0)
    row = SimpleNamespace(group=SimpleNamespace(scored_runs=[run]), seeds=(0,), scores=(1.0,))
    return lambda: score_values(row)  # type: ignore[arg-type]


def pipeline_identity(tmp_path: Path, kind: str) -> Callable[[], Any]:
    from rlzoo.pipeline.spec import IDENTITY, pipeline_spec

    spec = pipeline_spec(["experiment=srl_benchmark_small", f"pipeline.dir={tmp_path / 'pipe'}"])
    plant(spec.dir, IDENTITY, kind, b"experiment: srl_benchmark_small\n", size=confined.YAML_CAP + 1)
    return spec.check_dir


def stored_encoder(tmp_path: Path, kind: str) -> Callable[[], Any]:
    from rlzoo.pipeline.rerun import ENCODER_CAP, copy_stored_encoders

    folder = tmp_path / "store" / "encoders" / "enc"
    folder.mkdir(parents=True)
    (folder / "content_hash").write_text("abc\n")
    plant(folder, "encoder.pt", kind, size=ENCODER_CAP + 1)
    return lambda: copy_stored_encoders(tmp_path / "store", tmp_path / "cache", log=lambda _: None)


def stored_record(tmp_path: Path, kind: str) -> Callable[[], Any]:
    from rlzoo.results.records import Record
    from rlzoo.results.reproduction import episodes_by_env, metrics_of

    folder = tmp_path / "store" / "runs" / "r_seed0"
    folder.mkdir(parents=True)
    plant(folder, "metrics.json", kind, size=confined.CSV_CAP + 1)
    plant(folder, "monitor/0.monitor.csv.gz", kind, size=confined.CSV_CAP + 1)
    record = Record(folder, OmegaConf.create(), {}, {})
    return lambda: (episodes_by_env(record), metrics_of(record))


def evaluations(tmp_path: Path, kind: str) -> Callable[[], Any]:
    from rlzoo.training.keep_best import previous_best_row

    path = plant(tmp_path / "run", "evaluations.csv", kind, size=confined.CSV_CAP + 1)
    return lambda: previous_best_row(path)


def monitor_count(tmp_path: Path, kind: str) -> Callable[[], Any]:
    from rlzoo.training.budget import episodes_logged

    path = plant(tmp_path / "run", "monitor/0.monitor.csv", kind, size=confined.CSV_CAP + 1)
    return lambda: episodes_logged([path])


def event_file(tmp_path: Path, kind: str) -> Callable[[], Any]:
    from rlzoo.loggers.tensorboard import cut_event_files

    plant(tmp_path / "run" / "tb", "events.out.tfevents.1.host", kind, size=2 << 20)
    return lambda: cut_event_files(tmp_path / "run" / "tb", 10)


def sweep_job(tmp_path: Path, kind: str) -> Callable[[], Any]:
    from rlzoo.results.sweep import sweep_rows

    plant(tmp_path / "sweep" / "0", ".hydra/overrides.yaml", kind, b"- seed=0\n", size=confined.YAML_CAP + 1)

    def rows() -> None:
        (row,) = sweep_rows(tmp_path / "sweep")
        assert row.status == "failed"
        raise Refused(row.error)  # the job's row carries the refusal

    return rows


def pipeline_run_config(tmp_path: Path, kind: str) -> Callable[[], Any]:
    from rlzoo.pipeline.launch import all_jobs, check_runs_use_encoders, representation_key
    from rlzoo.pipeline.spec import pipeline_spec

    spec = pipeline_spec(["experiment=srl_benchmark_small", f"pipeline.dir={tmp_path / 'pipe'}",
                          "pipeline.sweep.srl_model=[ground_truth]", "pipeline.sweep.seed=[0]"])  # fmt: skip
    (job,) = all_jobs(spec, {})
    config = job.run_dir(spec).config
    plant(config.parent, config.name, kind, b"seed: 0\n", size=confined.YAML_CAP + 1)
    return lambda: check_runs_use_encoders(spec, {representation_key(job.values): tmp_path / "encoder"})


def tune_study(tmp_path: Path, kind: str) -> Callable[[], Any]:
    require_extra("optuna", "tune")
    from rlzoo.tune.study import STUDY_FILE, _check_study_dir

    folder = tmp_path / "tune"
    plant(folder, STUDY_FILE, kind, b'{"name": "s", "storage": "x"}', size=confined.JSON_CAP + 1)
    settings = SimpleNamespace(study_dir=folder, dir=folder, storage="x", name="s", trials_dir=folder / "trials")
    return lambda: _check_study_dir(settings, in_storage=True)  # type: ignore[arg-type]


READERS: dict[str, Callable[[Path, str], Callable[[], Any]]] = {
    "model.msgpack": jax_weights, "wandb.json": wandb_id, "wandb_history.jsonl": wandb_points,
    "dataset.npz": dataset, "metrics.json (stats)": metrics, "experiment.yaml": pipeline_identity,
    "store encoder": stored_encoder, "store record": stored_record, "evaluations.csv": evaluations,
    "monitor (episodes)": monitor_count, "event file": event_file, "sweep job": sweep_job,
    "pipeline run config": pipeline_run_config, "tune study": tune_study,
}  # fmt: skip
MESSAGES = {"symlink": r"is a symlink; a shared folder holds plain files only", "oversize": r"holds \d+ bytes; at most"}


@pytest.mark.parametrize("kind", sorted(MESSAGES))
@pytest.mark.parametrize("reader", sorted(READERS))
def test_each_reader_refuses_a_symlink_and_an_oversize_file_in_one_line(tmp_path: Path, reader: str, kind: str) -> None:
    call = READERS[reader](tmp_path, kind)
    outside = {path: path.read_bytes() for path in tmp_path.rglob("outside-*")}
    with confined.memory_budget_of(TINY_GIB), pytest.raises(ConfigError) as error:
        call()
    message = str(error.value)
    assert "\n" not in message and str(tmp_path) in message, message
    assert re.search(MESSAGES[kind], message), message
    assert {path: path.read_bytes() for path in outside} == outside
    assert not (tmp_path / "cache").exists() or list((tmp_path / "cache").iterdir()) == []  # nothing copied


@pytest.mark.parametrize("name", ["returns100.csv", "evaluations.csv", "wandb_history.jsonl", "progress.csv"])
@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_a_log_a_resumed_run_appends_to_is_never_a_fifo_or_a_link(tmp_path: Path, name: str, kind: str) -> None:
    """The appenders of a resumed run dir (returns100, keep-best evaluations, W&B's copy, SB3's CSV): one line, no
    wait, nothing written outside."""
    from rlzoo.loggers.outputs import AppendingCSVOutputFormat
    from rlzoo.loggers.wandb_state import WandbState
    from rlzoo.training.callbacks import Returns100Writer
    from rlzoo.training.keep_best import previous_best_row

    run = tmp_path / "run"
    run.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("kept\n")
    os.mkfifo(run / name) if kind == "fifo" else os.symlink(outside, run / name)
    opens: dict[str, Callable[[], Any]] = {
        "returns100.csv": lambda: Returns100Writer(run / name).open(),
        "evaluations.csv": lambda: previous_best_row(run / name),  # the keep-best callback's first read
        "wandb_history.jsonl": lambda: WandbState(RunDir(run), "abc").continue_offline(None),
        "progress.csv": lambda: AppendingCSVOutputFormat(str(run / name)),
    }
    with pytest.raises(Refused, match=r"is a (FIFO|symlink)") as error:
        opens[name]()
    assert "\n" not in str(error.value) and outside.read_text() == "kept\n"


def test_the_budget_is_the_callers_and_scoped() -> None:
    """``memory_budget_of`` sets the budget for its block only; a bad value is one line naming the key."""
    default = confined.memory_budget()
    with confined.memory_budget_of(2):
        assert confined.memory_budget() == 2 * confined.GiB
        with confined.memory_budget_of(None):
            assert confined.memory_budget() == 2 * confined.GiB
    assert confined.memory_budget() == default
    for bad in (0, -1, "lots", float("nan"), True):
        refused = pytest.raises(Refused, match=r"memory_budget_gb=.*: a positive number of GiB is allowed")
        with refused, confined.memory_budget_of(bad):
            pass


def test_a_dataset_reads_as_before(tmp_path: Path) -> None:
    from rlzoo.srl.dataset import load_dataset, save_dataset

    arrays = {"images": np.zeros((3, 4, 4, 3), np.uint8), "actions": np.arange(3),
              "rewards": np.ones(3, np.float32), "episode_starts": np.array([True, False, False]),
              "ground_truth": np.zeros((3, 2), np.float32)}  # fmt: skip
    save_dataset(tmp_path / "d", arrays, {"env_id": "x", "ground_truth_names": ["x", "y"]})
    loaded = load_dataset(tmp_path / "d")
    assert len(loaded) == 3 and loaded.target_positions is None and loaded.n_episodes == 1
