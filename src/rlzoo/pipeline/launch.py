"""The RL sweep of a pipeline: its jobs, which of them are missing, and the ``rlzoo.train -m`` launches that run them.

Every job has a run dir named by its axis values, ``<pipeline dir>/runs/<env>_<srl_model>_seed<seed>[_<key>=<value>]``
(``hydra.sweep.subdir``), so a finished job (``metrics.json``) is found again and never rerun; an unfinished one is
launched again and resumes from its newest checkpoint. The missing jobs are launched as few Hydra multiruns as cover
them (one per env and per set of seeds), through the hardware profile's launcher: local, joblib or Slurm.
"""

from __future__ import annotations

import functools
import itertools
import os
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from rlzoo.errors import ConfigError
from rlzoo.pipeline import inflight
from rlzoo.pipeline.spec import PipelineSpec, content_key, group_options
from rlzoo.rundir import RunDir
from rlzoo.untrusted import read_yaml, refuse_interpolations


@dataclass(frozen=True)
class Job:
    """One RL run of the sweep: its axis values and the ``srl_model`` option it selects."""

    values: dict[str, Any]
    option: str

    @property
    def name(self) -> str:
        return job_name(self.values)

    def run_dir(self, spec: PipelineSpec) -> RunDir:
        return RunDir(spec.runs_dir / self.name)


def job_name(values: dict[str, Any]) -> str:
    """``<env>_<srl_model>_seed<seed>`` then ``_<key>=<value>`` for every other axis."""
    named = f"{values.get('env', 'env')}_{values['srl_model']}_seed{values.get('seed', 0)}"
    rest = "".join(f"_{k}={v}" for k, v in values.items() if k not in ("env", "srl_model", "seed"))
    return named + rest


def subdir_pattern(axes: dict[str, list[Any]]) -> str:
    """The ``hydra.sweep.subdir`` that names a job's run dir as :func:`job_name` does."""
    env = "${hydra.runtime.choices.env}" if "env" in axes else "env"
    seed = "${seed}" if "seed" in axes else "0"
    rest = "".join(
        f"_{k}=${{hydra.runtime.choices.{k}}}" if k in _groups() else f"_{k}=${{{k}}}"
        for k in axes
        if k not in ("env", "srl_model", "seed")
    )
    return f"{env}_${{srl_model.name}}_seed{seed}{rest}"


def _groups() -> set[str]:
    from rlzoo.config import CONFIG_DIR

    return {p.name for p in CONFIG_DIR.iterdir() if p.is_dir() and group_options(p.name)}


def all_jobs(spec: PipelineSpec, options: dict[tuple[str, str], str]) -> list[Job]:
    """The product of the axes; ``options`` maps (env, method) to a generated ``srl_model`` option."""
    keys = list(spec.axes)
    jobs = []
    for combination in itertools.product(*spec.axes.values()):
        values = dict(zip(keys, combination, strict=True))
        jobs.append(Job(values, options.get(representation_key(values), str(values["srl_model"]))))
    return jobs


def check_runs_use_encoders(spec: PipelineSpec, encoders: dict[tuple[str, str], Path]) -> None:
    """Refuse a pipeline dir whose RL runs (finished or not) were trained on another encoder than the one the pipeline
    has now for their representation: its method's file (``conf/srl_model``) changed since, which the pipeline's
    identity does not cover. A run names its encoder folder in ``srl_model.checkpoint``; folders are named by their
    content, so the same name is the same encoder (in a copied or moved pipeline dir too)."""
    stale = []
    for job in all_jobs(spec, {}):
        encoder = encoders.get(representation_key(job.values))
        config = job.run_dir(spec).config
        if encoder is None or not os.path.lexists(config):
            continue
        saved = read_yaml(config)  # a received pipeline dir's run: plain YAML, no link, capped, nothing resolved
        refuse_interpolations(saved, config)
        used = OmegaConf.select(saved, "srl_model.checkpoint")
        if used is None or Path(str(used)).name != encoder.name:
            stale.append(f"{job.name} (trained on {Path(str(used)).name if used else 'no encoder'})")
    if stale:
        raise ConfigError(
            f"pipeline.dir={spec.dir}: RL run(s) {', '.join(stale)} do not use this pipeline's encoder of their "
            "representation now (its conf/srl_model file changed since): rlzoo never mixes them in one table; choose "
            "another pipeline.dir, or move those runs out of its runs/ folder to train them again"
        )


def representation_key(values: dict[str, Any]) -> tuple[str, str]:
    """``(env, srl_model)`` of a job's axis values: what its encoder and generated option are keyed by."""
    return str(values.get("env", "")), str(values["srl_model"])


def blocks(jobs: list[Job]) -> list[dict[str, list[Any]]]:
    """Cover ``jobs`` by few cartesian products: per env and other axes' values, options that miss the same seeds
    go together."""
    seeds: dict[tuple[Any, ...], dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    rest_of: dict[tuple[Any, ...], dict[str, Any]] = {}
    for job in jobs:
        rest = {k: v for k, v in job.values.items() if k not in ("srl_model", "seed")}
        key = tuple(sorted((k, repr(v)) for k, v in rest.items()))
        rest_of[key] = rest
        seeds[key][job.option].append(job.values.get("seed"))
    covered = []
    for key, by_option in seeds.items():
        together: dict[tuple[Any, ...], list[str]] = defaultdict(list)
        for option, values in by_option.items():
            together[tuple(values)].append(option)
        for seed_values, options in together.items():
            block = {k: [v] for k, v in rest_of[key].items()} | {"srl_model": options}
            if seed_values != (None,):
                block["seed"] = list(seed_values)
            covered.append(block)
    return covered


def in_block(job: Job, block: dict[str, list[Any]]) -> bool:
    """Whether ``job`` is one of the runs of the sweep ``block`` (its srl_model values are options)."""
    values = job.values | {"srl_model": job.option}
    return all(values.get(key) in options for key, options in block.items())


def launch_command(spec: PipelineSpec, block: dict[str, list[Any]]) -> list[str]:
    """``python -m rlzoo.train -m`` with the experiment, the pipeline's train overrides and the block's axes."""
    axes = [f"{key}={','.join(map(str, values))}" for key, values in block.items()]
    return [
        sys.executable, "-m", "rlzoo.train", "-m", f"experiment={spec.experiment}", *spec.train, *axes,
        f"hydra.sweep.dir={spec.runs_dir}", f"hydra.sweep.subdir={subdir_pattern(spec.axes)}",
        f"hydra.searchpath=[file://{spec.dir / 'conf'}]",
    ]  # fmt: skip


def run_sweep(spec: PipelineSpec, jobs: list[Job], log: Callable[[str], None]) -> int:
    """Launch the jobs that have not finished; return how many launches failed (a job failing fails its launch).
    On Slurm, the runs an earlier launcher's array still trains are waited for, not launched again; those it ended
    without finishing are launched then, saying so."""
    missing = [job for job in jobs if not job.run_dir(spec).is_finished()]
    log(
        f"runs: {len(jobs) - len(missing)} of {len(jobs)} finished (cached); {len(missing)} to train in {spec.runs_dir}"
    )
    adopted = runs_in_flight(spec, [job.name for job in missing], log) if spec.slurm is not None else []
    held = {name for entry in adopted for name in entry.runs}
    failed = launch(spec, [job for job in missing if job.name not in held], log)
    for entry in adopted:
        inflight.wait_while(functools.partial(inflight.queued, entry.job), phase=f"waiting for Slurm jobs {entry.job}")
        inflight.forget(spec.dir, entry.name)
        left = [job for job in missing if job.name in entry.runs and not job.run_dir(spec).is_finished()]
        if left:
            log(f"runs {', '.join(job.name for job in left)}: Slurm jobs {entry.job} ended without finishing them: "
                "launching them again")  # fmt: skip
            failed += launch(spec, left, log)
    return failed


def runs_in_flight(spec: PipelineSpec, names: list[str], log: Callable[[str], None]) -> list[inflight.InFlight]:
    """The recorded arrays of an earlier launcher that still train some of the runs ``names``, saying so; a record
    whose array is gone is forgotten (its unfinished runs are launched again with the others)."""
    adopted = []
    for entry in inflight.records(spec.dir):
        held = sorted(set(entry.runs) & set(names))
        if not held:
            if not inflight.queued(entry.job) and all(RunDir(spec.runs_dir / run).is_finished() for run in entry.runs):
                inflight.forget(spec.dir, entry.name)  # its array finished them all
            continue
        if inflight.queued(entry.job):
            log(f"runs {', '.join(held)}: Slurm jobs {entry.job} ({entry.owner()}) are in flight: waiting for them")
            adopted.append(entry)
        else:
            inflight.forget(spec.dir, entry.name)
            log(f"runs {', '.join(held)}: Slurm jobs {entry.job} ended without finishing them: launching them again")
    return adopted


def launch(spec: PipelineSpec, jobs: list[Job], log: Callable[[str], None]) -> int:
    """Launch ``jobs`` as few sweeps as cover them, one after another; return how many launches failed. On Slurm
    each sweep's array gets a job name of its own, recorded in flight while its launch lasts."""
    failed = 0
    for block in blocks(jobs):
        command = launch_command(spec, block)
        names = [job.name for job in jobs if in_block(job, block)]
        name = f"rlzoo-runs-{content_key({'dir': str(spec.dir), 'runs': sorted(names)})}"
        if spec.slurm is not None:
            command.append(f"hydra.launcher.name={name}")
            inflight.record(spec.dir, name, name, names)
        log("launching: " + " ".join(command[1:]))
        failed += subprocess.run(command, check=False, preexec_fn=inflight.die_with_parent()).returncode != 0
        inflight.forget(spec.dir, name)
    return failed


def job_statuses(spec: PipelineSpec, jobs: list[Job]) -> dict[str, list[str]]:
    """Job names by status: done, failed (``error.txt``), unfinished."""
    statuses: dict[str, list[str]] = defaultdict(list)
    for job in jobs:
        run = job.run_dir(spec)
        status = "done" if run.is_finished() else "failed" if run.error.is_file() else "unfinished"
        statuses[status].append(job.name)
    return dict(statuses)
