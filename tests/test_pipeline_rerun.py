"""A launcher killed (SIGKILL: a dropped login session) and run again at once takes over its jobs in flight on a real
Slurm cluster (``scripts/slurm_local.sh start``): one job per step in all, none failed, no ``error.txt``; a requeued
job whose run has finished leaves it byte for byte. Locally, a second launcher on a pipeline dir is refused.

Without a running cluster the Slurm tests skip with the reason; under ``CI=true`` they fail instead.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import submitit

from rlzoo.errors import ConfigError
from rlzoo.pipeline import inflight
from rlzoo.pipeline.command import plan_pipeline, run_pipeline
from rlzoo.pipeline.spec import pipeline_spec
from rlzoo.rundir import RunDir
from test_pipeline import TINY
from test_slurm import (
    TINY_SWEEP,
    _job_ids,
    _sweep_command,
    slurm_cluster,  # noqa: F401  (the fixture)
)

SRC = Path(__file__).resolve().parents[1] / "src"
DEADLINE_S = 300


def _overrides(folder: Path, *more: str) -> list[str]:
    return [
        *TINY, f"pipeline.dir={folder}", "pipeline.sweep.srl_model=[ground_truth,srl_splits]",
        "pipeline.sweep.seed=[0]", "hardware=slurm_cpu", "hydra.launcher.timeout_min=5", "pipeline.report=false", *more,
    ]  # fmt: skip


def _environment() -> dict[str, str]:
    """This checkout's code for the launcher and, through it, its Slurm jobs."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}


def _wait_for(
    what: str, check: Callable[[], bool], process: subprocess.Popen[bytes] | None, log: Path, seconds: float = 300
) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if process is not None and process.poll() is not None:
            pytest.fail(f"the launcher ended (rc {process.returncode}) before {what}:\n{log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {seconds} s waiting for {what}:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)


def _running(folder: Path, prefix: str) -> bool:
    """Whether a job recorded in flight under a name starting with ``prefix`` is running now."""
    for entry in inflight.records(folder):
        if entry.name.startswith(prefix):
            shown = subprocess.run(["squeue", "-h", "-o", "%T", *(["-n"] if "runs" in prefix else ["-j"]), entry.job],
                                   capture_output=True, text=True, check=False)  # fmt: skip
            if "RUNNING" in shown.stdout.split():
                return True
    return False


def _children(pid: int) -> list[int]:
    tasks = Path(f"/proc/{pid}/task")
    return [int(c) for task in tasks.iterdir() for c in (task / "children").read_text().split()]


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except FileNotFoundError:
        return True


def _kill_and_run_again(folder: Path, tmp_path: Path, when: str, prefix: str, *more: str) -> tuple[str, list[int]]:
    """Start the launcher, SIGKILL it once a job recorded under ``prefix`` runs, check that its children (the sweep
    child) end with it, run it again here at once; return the second launcher's output and the first's children."""
    log = tmp_path / "first.log"
    with log.open("wb") as out:
        first = subprocess.Popen([sys.executable, "-m", "rlzoo.pipeline", *_overrides(folder, *more)],
                                 stdout=out, stderr=subprocess.STDOUT, env=_environment())  # fmt: skip
    try:
        _wait_for(when, lambda: _running(folder, prefix), first, log)
        children = _children(first.pid)
        first.send_signal(signal.SIGKILL)
        first.wait()
        gone = lambda: all(_gone(pid) for pid in children)  # noqa: E731
        _wait_for("the sweep child to end with its launcher", gone, None, log, seconds=20)
        lines: list[str] = []
        statuses = run_pipeline(pipeline_spec(_overrides(folder, *more)), lines.append)
    finally:
        if first.poll() is None:
            first.kill()
    text = "\n".join(lines)
    assert sorted(statuses) == ["done"] and len(statuses["done"]) == 2, text
    return text, children


def _check_one_job_per_step(folder: Path, text: str) -> None:
    """One encoder job and one RL job per run in all, every one succeeded, no error.txt in any run."""
    encoder_jobs = sorted(p.name for p in (folder / ".submitit" / "encoders").iterdir() if p.name.isdigit())
    run_jobs = _job_ids(folder / "runs")
    assert len(encoder_jobs) == 1 and len(run_jobs) == 2, (encoder_jobs, run_jobs, text)
    for job_folder, job_id in [(folder / ".submitit" / "encoders", encoder_jobs[0])] + [
        (folder / "runs" / ".submitit", job_id) for job_id in run_jobs
    ]:
        submitit.SlurmJob(folder=job_folder / "%j", job_id=job_id).result()  # raises the job's error, if it failed
    assert list(folder.rglob("error.txt")) == [], text
    assert not list((folder / inflight.FOLDER).glob("*.json")), text  # nothing left in flight


def test_launcher_killed_while_an_encoder_trains_waits_for_it_when_run_again(
    slurm_cluster: None,  # noqa: F811
    tmp_path: Path,
) -> None:
    folder = tmp_path / "pipe"
    more = "pipeline.srl_train.srl_model.training.epochs=40"  # the encoder outlasts the second launcher's start
    text, _ = _kill_and_run_again(folder, tmp_path, "the encoder's job to run", "srl_splits-", more)
    assert re.search(r"encoder srl_splits on MobileRobot: Slurm job \d+ \(launcher pid \d+ on .*\) is in flight", text)
    assert "running into" not in text, text  # its folder was not cleared
    _check_one_job_per_step(folder, text)


def test_launcher_killed_while_the_rl_array_runs_waits_for_it_when_run_again(
    slurm_cluster: None,  # noqa: F811
    tmp_path: Path,
) -> None:
    folder = tmp_path / "pipe"
    more = "total_timesteps=6000"  # the ground-truth run outlasts the second launcher's start
    text, children = _kill_and_run_again(folder, tmp_path, "an RL job to run", "rlzoo-runs-", more)
    adopted = r"runs MobileRobot_ground_truth_seed0: Slurm jobs rlzoo-runs-\w+ \(launcher .*\) are in flight"
    assert re.search(adopted, text), text
    assert children  # the sweep child of the killed launcher, which died with it
    _check_one_job_per_step(folder, text)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_requeued_job_of_a_finished_run_leaves_it_as_it_was(slurm_cluster: None, tmp_path: Path) -> None:  # noqa: F811
    sweep_dir = tmp_path / "sweep"
    command = _sweep_command(sweep_dir, *TINY_SWEEP, "seed=0")
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=DEADLINE_S, check=False,
                          env=_environment())  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = RunDir(sweep_dir / "0")
    assert run.is_finished()
    before = _snapshot(run.path)
    (job_id,) = _job_ids(sweep_dir)
    subprocess.run(["scontrol", "requeue", job_id], check=True, timeout=30)
    log = sweep_dir / ".submitit" / job_id / f"{job_id}_0_log.out"
    _wait_for("the requeued job to end", lambda: _ended_again(job_id), None, log)
    assert "holds a finished run (metrics.json) of this config: nothing to train" in log.read_text(), log.read_text()
    assert _snapshot(run.path) == before


def _ended_again(job_id: str) -> bool:
    shown = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True, check=False).stdout
    return "Restarts=1" in shown and "JobState=COMPLETED" in shown


def test_second_local_launcher_is_refused_naming_the_first(tmp_path: Path) -> None:
    folder = tmp_path / "pipe"
    overrides = [
        "experiment=srl_benchmark_small", f"pipeline.dir={folder}", "pipeline.sweep.srl_model=[ground_truth]",
        "hardware=local_parallel",
    ]  # fmt: skip
    spec = pipeline_spec(overrides)
    plan_pipeline(spec)  # the dir is this pipeline's
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom pathlib import Path\nfrom rlzoo.pipeline.inflight import "
         "launcher_lock\nwith launcher_lock(Path(sys.argv[1])):\n    print('held', flush=True)\n    time.sleep(600)",
         str(folder)],
        stdout=subprocess.PIPE, env=_environment(),
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        with pytest.raises(ConfigError, match=rf"is in use: another launcher \(pid {holder.pid}\) runs this pipeline"):
            run_pipeline(spec)
    finally:
        holder.kill()
        holder.wait()
    with inflight.launcher_lock(folder):  # a dead launcher's lock is taken over
        assert (folder / inflight.LAUNCHER_LOCK).read_text().split()[0] == str(os.getpid())


def test_a_recorded_job_is_waited_for_while_queued_and_redone_once_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from omegaconf import OmegaConf

    from rlzoo.pipeline.launch import Job, runs_in_flight
    from rlzoo.pipeline.slurm import step_in_flight
    from rlzoo.pipeline.steps import Step, announced

    step = Step("encoder", "srl_splits on E", tmp_path / "encoders" / "e-1", OmegaConf.create(), "encoder.json")
    step.folder.mkdir(parents=True)
    (step.folder / "losses.csv").write_text("epoch\n")  # what the job wrote so far
    inflight.record(tmp_path, step.folder.name, "812")
    spec: Any = SimpleNamespace(dir=tmp_path, runs_dir=tmp_path / "runs")
    run = Job({"env": "E", "srl_model": "ground_truth", "seed": 0}, "ground_truth")
    inflight.record(tmp_path, "rlzoo-runs-1", "rlzoo-runs-1", [run.name])
    lines: list[str] = []
    monkeypatch.setattr(inflight, "queued", lambda job, **_: True)
    assert step_in_flight(step, tmp_path, lines.append) == "812"
    assert [entry.name for entry in runs_in_flight(spec, [run.name], lines.append)] == ["rlzoo-runs-1"]
    assert (step.folder / "losses.csv").is_file() and len(inflight.records(tmp_path)) == 2
    monkeypatch.setattr(inflight, "queued", lambda job, **_: False)  # cancelled, failed, node lost
    assert step_in_flight(step, tmp_path, lines.append) is None and announced(step, lines.append)
    assert runs_in_flight(spec, [run.name], lines.append) == []
    assert not step.folder.exists() and inflight.records(tmp_path) == []
    monkeypatch.setattr(inflight, "queued_with_comment", lambda name, comment: "900")  # submitted, not recorded
    assert step_in_flight(step, tmp_path, lines.append) == "900"
    assert lines[2:] == [
        "encoder srl_splits on E: Slurm job 812 ended without a result: clearing its folder, submitting it again",
        f"encoder srl_splits on E: running into {step.folder}",
        "runs E_ground_truth_seed0: Slurm jobs rlzoo-runs-1 ended without finishing them: launching them again",
        "encoder srl_splits on E: Slurm job 900 is in flight: waiting for it",
    ]
