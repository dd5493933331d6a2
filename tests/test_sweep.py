"""Sweeps: jobs in parallel on local cores, a failing job that does not stop the others, the sweep summary."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

from conftest import TINY_ALGO_RUNS, TINY_RUN
from rlzoo.results.sweep import write_summary
from rlzoo.rundir import RunDir


def test_local_parallel_sweep_isolates_a_failing_job_and_summarises(tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    command = [sys.executable, "-m", "rlzoo.train", "-m", "hardware=local_parallel", "algo=ppo",
               *TINY_ALGO_RUNS["ppo"], *TINY_RUN, "total_timesteps=128,-5", f"hydra.sweep.dir={sweep_dir}"]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0  # Hydra reports the failed job with a non-zero exit, after running every job
    with (sweep_dir / "summary.csv").open() as stream:
        rows = {row["job"]: row for row in csv.DictReader(stream)}
    assert rows["0"]["status"] == "done" and float(rows["0"]["test_return"]) > 0 and rows["0"]["steps"] == "128"
    assert "total_timesteps=128" in rows["0"]["overrides"]
    assert rows["1"]["status"] == "failed" and "total_timesteps=-5 must be ≥ 1" in rows["1"]["error"]
    assert (sweep_dir / "1" / "error.txt").is_file() and not (sweep_dir / "1" / "metrics.json").exists()
    table = (sweep_dir / "summary.md").read_text()
    assert "2 jobs: 1 done, 1 failed" in table


def _fake_job(sweep_dir: Path, job: str, overrides: list[str]) -> RunDir:
    run = RunDir(sweep_dir / job)
    (run.path / ".hydra").mkdir(parents=True)
    (run.path / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    return run


def test_summary_statuses_from_run_dirs(tmp_path: Path) -> None:
    finished = {"test/mean_return": 12.5, "train/timesteps": 1000, "time/total_seconds": 3.25}
    done = _fake_job(tmp_path, "0", ["seed=0"])
    done.metrics.write_text(json.dumps(finished))
    resumed = _fake_job(tmp_path, "1", ["seed=1"])
    resumed.metrics.write_text(json.dumps(finished))
    resumed.record_resume(500)
    _fake_job(tmp_path, "2", ["seed=2"])  # still running (or killed)
    failed = _fake_job(tmp_path, "10", ["seed=10"])
    failed.error.write_text("Traceback ...\nValueError: boom\n")
    rows = write_summary(tmp_path)
    assert [(r.job, r.status) for r in rows] == [("0", "done"), ("1", "resumed"), ("2", "unfinished"), ("10", "failed")]
    assert rows[0].test_return == 12.5 and rows[0].steps == 1000 and rows[3].error == "ValueError: boom"
    table = (tmp_path / "summary.md").read_text().splitlines()
    assert len({len(line) for line in table[:6]}) == 1  # aligned columns
    assert table[-1] == "4 jobs: 1 done, 1 resumed, 1 failed, 1 unfinished"
