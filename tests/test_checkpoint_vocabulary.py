"""One checkpoint vocabulary (``final``, ``latest``, ``best``, steps), defined once in :mod:`rlzoo.rundir` and used by
resume, fine-tuning, replay, ``load_agent`` and the report."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rlzoo.errors import ConfigError
from rlzoo.model_files import ModelFolder
from rlzoo.rundir import BEST, FINAL, LATEST, MODEL, RunDir


def fake_run(path: Path, steps: list[int], final: bool) -> RunDir:
    """A run dir whose model files are empty stand-ins (only their presence counts here)."""
    run = RunDir(path)
    for n in steps:
        run.checkpoint(n).mkdir(parents=True)
        (run.checkpoint(n) / MODEL).write_bytes(b"")
    if final:
        (path / MODEL).write_bytes(b"")
    return run


def test_latest_is_the_final_model_once_training_ended_whatever_the_file_times(tmp_path: Path) -> None:
    run = fake_run(tmp_path, [64, 128], final=True)
    os.utime(run.checkpoint(128) / MODEL, (2e9, 2e9))  # a checkpoint touched after the final model
    assert run.find_model(LATEST) == (ModelFolder(run.path), None)
    assert run.find_model(FINAL) == (ModelFolder(run.path), None)


def test_latest_is_the_newest_checkpoint_by_steps_before_training_ends(tmp_path: Path) -> None:
    run = fake_run(tmp_path, [64, 128], final=False)
    os.utime(run.checkpoint(64) / MODEL, (2e9, 2e9))
    assert run.find_model(LATEST) == (ModelFolder(run.checkpoint(128)), 128)
    assert run.find_model("64") == (ModelFolder(run.checkpoint(64)), 64)


@pytest.mark.parametrize(
    ("checkpoint", "message"),
    [
        (FINAL, r"has no final model.zip .*available: 64; choose one with checkpoint=<steps> or checkpoint=latest"),
        (BEST, r"has no best model"),
        (32, r"checkpoint=32 not found in run .*; available: 64"),
        ("newest", r"checkpoint='newest'; allowed: final, latest, best or the steps of a checkpoint"),
    ],
)
def test_a_model_the_run_lacks_is_one_line(tmp_path: Path, checkpoint: str | int, message: str) -> None:
    run = fake_run(tmp_path, [64], final=False)
    with pytest.raises(ConfigError, match=message) as error:
        run.find_model(checkpoint)
    assert "\n" not in str(error.value)
