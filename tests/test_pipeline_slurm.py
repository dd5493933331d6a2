"""The pipeline on a real Slurm cluster (``scripts/slurm_local.sh start``): with ``hardware=slurm_cpu`` every encoder
trains as a Slurm job and the launching process trains none; a launcher run again finds the finished encoders cached.

Without a running cluster these tests skip with the reason; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

import rlzoo.srl.train
from rlzoo.pipeline.command import run_pipeline
from rlzoo.pipeline.spec import pipeline_spec
from test_pipeline import TINY
from test_slurm import slurm_cluster  # noqa: F401  (the fixture)


def _never_here(*args: object) -> None:
    raise AssertionError("the launching process trained an encoder")


def test_encoders_train_as_slurm_jobs_and_are_cached(
    slurm_cluster: None,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(rlzoo.srl.train, "train_encoder", _never_here)
    folder = tmp_path / "pipe"
    overrides = [
        *TINY, f"pipeline.dir={folder}", "pipeline.sweep.srl_model=[ground_truth,srl_splits]",
        "pipeline.sweep.seed=[0]", "hardware=slurm_cpu", "hydra.launcher.timeout_min=5", "pipeline.report=false",
    ]  # fmt: skip
    lines: list[str] = []
    statuses = run_pipeline(pipeline_spec(overrides), lines.append)
    text = "\n".join(lines)
    assert sorted(statuses) == ["done"] and len(statuses["done"]) == 2, text
    job_ids = re.findall(r"encoder srl_splits on MobileRobot: Slurm job (\d+)", text)
    assert len(job_ids) == 1, text
    assert f"encoder srl_splits on MobileRobot: done (Slurm job {job_ids[0]})" in text
    shown = subprocess.run(["scontrol", "show", "job", job_ids[0]], capture_output=True, text=True, check=False)
    assert "JobName=rlzoo-encoder" in shown.stdout and "JobState=COMPLETED" in shown.stdout, shown
    assert len(list(folder.glob("encoders/srl_splits-MobileRobot-*/encoder.json"))) == 1
    assert list(folder.glob(f".submitit/encoders/{job_ids[0]}/*_log.out"))
    # Run again (a launcher killed after the encoder's job ended): the encoder is taken from the cache.
    again: list[str] = []
    run_pipeline(pipeline_spec(overrides), again.append)
    assert "encoder srl_splits on MobileRobot: cached" in "\n".join(again)
    assert "Slurm job" not in "\n".join(again)
