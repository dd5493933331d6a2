"""The pipeline's encoders as Slurm jobs (``hardware=slurm_cpu`` / ``slurm_gpu``), through Submitit, with the
hardware profile's own launcher settings (partition, time limit, CPUs, memory ...), as Hydra's Submitit launcher
passes them for the RL sweep.

Each encoder that is not cached is one job; the launching process submits them all, records each in flight
(:mod:`rlzoo.pipeline.inflight`), waits, and hands each finished step on (its representation's RL runs are then
submitted). A launcher killed and run again finds the finished encoders in the pipeline's cache (``encoder.json``),
waits for the jobs still in flight, and submits only the others. Submitit's files go to
``<pipeline dir>/.submitit/encoders/<job id>/``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from omegaconf import DictConfig, open_dict

from rlzoo.errors import RunFailure
from rlzoo.pipeline import inflight
from rlzoo.progress_lines import ProgressLines


class Step(Protocol):
    """What a job needs of a pipeline step (:class:`rlzoo.pipeline.steps.Step`)."""

    @property
    def kind(self) -> str: ...

    @property
    def folder(self) -> Path: ...

    @property
    def done(self) -> bool: ...

    @property
    def label(self) -> str: ...

    @property
    def config(self) -> DictConfig: ...


S = TypeVar("S", bound=Step)

SLURM_LAUNCHER = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
FOLDER = Path(".submitit") / "encoders"
JOB_NAME = "rlzoo-encoder"
# Hydra's Submitit launcher: keys that Submitit takes as they are (the rest get the ``slurm_`` prefix), and keys that
# configure the executor itself or the sweep only.
BASE_KEYS = {"timeout_min", "cpus_per_task", "gpus_per_node", "tasks_per_node", "mem_gb", "nodes", "name",
             "stderr_to_stdout"}  # fmt: skip
NOT_FOR_A_JOB = {"_target_", "submitit_folder", "max_num_timeout", "array_parallelism"}


def slurm_parameters(launcher: dict[str, Any]) -> dict[str, Any] | None:
    """Submitit's parameters for one encoder job from the resolved ``hydra.launcher`` node; None when the hardware
    profile does not launch on Slurm."""
    if launcher.get("_target_") != SLURM_LAUNCHER:
        return None
    params = {k if k in BASE_KEYS else f"slurm_{k}": v for k, v in launcher.items() if k not in NOT_FOR_A_JOB}
    params["name"] = JOB_NAME
    return params


def train_step(config: DictConfig) -> dict[str, float]:
    """One encoder step, run inside its Slurm job (imports torch there, not in the launching process)."""
    from rlzoo.srl.train import train_encoder

    return train_encoder(config)


def step_in_flight(step: S, pipeline_dir: Path, log: Callable[[str], None]) -> str | None:
    """The id of the Slurm job an earlier launcher submitted for ``step`` while it is still queued or running, or
    None: a recorded job that is gone without the step's result is forgotten, saying so (the step is then cleared
    and submitted again)."""
    entry = inflight.find(pipeline_dir, step.folder.name)
    if entry is None:
        unrecorded = None if step.done else inflight.queued_with_comment(JOB_NAME, step.folder.name)
        if unrecorded is not None:
            log(f"{step.kind} {step.label}: Slurm job {unrecorded} is in flight: waiting for it")
        return unrecorded
    if not step.done and inflight.queued(entry.job, comment=step.folder.name):
        log(f"{step.kind} {step.label}: Slurm job {entry.job} ({entry.owner()}) is in flight: waiting for it")
        return entry.job
    inflight.forget(pipeline_dir, step.folder.name)
    if not step.done:
        log(f"{step.kind} {step.label}: Slurm job {entry.job} ended without a result: clearing its folder, submitting "
            "it again")  # fmt: skip
    return None


def run_steps_on_slurm(
    steps: Sequence[S],
    params: dict[str, Any],
    pipeline_dir: Path,
    log: Callable[[str], None],
    on_done: Callable[[S], None] = lambda step: None,
    adopted: dict[str, S] | None = None,
) -> None:
    """Submit each of ``steps`` (those that are not cached) as a Slurm job, recorded in flight, then wait for them
    and the ``adopted`` ones (job id: step, submitted by an earlier launcher); ``on_done`` gets each step as its job
    ends.

    :raise RunFailure: a job that failed (its error and log file named), after the others have ended.
    """
    import submitit

    folder = pipeline_dir / FOLDER / "%j"
    jobs: dict[Any, S] = {submitit.SlurmJob(folder=folder, job_id=job_id): step
                          for job_id, step in (adopted or {}).items()}  # fmt: skip
    if steps:
        executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
        executor.update_parameters(**params)
        threads = int(params.get("cpus_per_task", 1))
        for step in steps:
            config = step.config.copy()
            with open_dict(config):
                config.torch_threads = threads
            executor.update_parameters(slurm_comment=step.folder.name)  # found by it before it is recorded
            job = executor.submit(train_step, config)
            inflight.record(pipeline_dir, step.folder.name, job.job_id)
            log(f"{step.kind} {step.label}: Slurm job {job.job_id}")
            jobs[job] = step
    failures = []
    for job in _as_ended(list(jobs)):
        step = jobs[job]
        try:
            job.result()
        except Exception as error:  # the job's own exception, or Slurm's (time-out, node failure)
            failures.append(f"{step.kind} {step.label} (Slurm job {job.job_id}, log {job.paths.stdout}): {error}")
            continue
        inflight.forget(pipeline_dir, step.folder.name)
        log(f"{step.kind} {step.label}: done (Slurm job {job.job_id})")
        on_done(step)
    if failures:
        raise RunFailure("encoder job(s) failed: " + "; ".join(failures).replace("\n", " "))


def _as_ended(jobs: list[Any]) -> Iterator[Any]:
    """Yield each Submitit job once it has its result or Slurm no longer has it (cancelled, failed, node lost: its
    ``result()`` then raises); the queue is read with ``squeue``, which needs no accounting storage."""
    pending = list(jobs)
    lines = ProgressLines("waiting for Slurm encoder jobs", len(jobs), "jobs")
    while pending:
        ended = [job for job in pending if job.paths.result_pickle.exists() or not inflight.queued(job.job_id)]
        yield from ended
        pending = [job for job in pending if job not in ended]
        if pending:
            lines.update(len(jobs) - len(pending))
            time.sleep(inflight.POLL_S)
