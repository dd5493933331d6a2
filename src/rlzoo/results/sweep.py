"""Sweep summary: one row per job of a ``--multirun`` sweep, in ``<sweep dir>/summary.csv`` and ``summary.md``.

A sweep dir (``hydra.sweep.dir``, ``multirun/<date>/<time>/`` by default) holds one run dir per job, named by its job
number (``0/``, ``1/`` ...; each with Hydra's ``.hydra/overrides.yaml``), Submitit's logs in ``.submitit/`` on Slurm,
and the summary. The :class:`SweepSummary` Hydra callback rewrites the summary after every job (in the job's
process, so it also works on Slurm and when a job fails) and prints it when the sweep ends. Job status: ``done``,
``resumed`` (done after at least one resume), ``failed`` (its error is in the run dir's ``error.txt``), or
``unfinished`` (running, queued, or killed). A failed job's error is recorded by the job itself (the task function
returns normally), so Hydra prints no traceback; the sweep's last line is ``N jobs: a done, b failed (see
<sweep dir>/summary.md)`` and its exit status is non-zero when a job failed.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import sys
from dataclasses import astuple, dataclass, fields
from pathlib import Path
from typing import Any

import yaml
from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig

from rlzoo.confined import JSON_CAP, YAML_CAP, read_text
from rlzoo.errors import Refused, error_line
from rlzoo.files import atomic_write_text, locked
from rlzoo.rundir import RunDir, record_failure

SUMMARY_CSV = "summary.csv"
SUMMARY_MD = "summary.md"
OVERRIDES = Path(".hydra") / "overrides.yaml"


@dataclass(frozen=True)
class JobRow:
    """One job of a sweep as the summary lists it."""

    job: str
    overrides: str
    status: str
    test_return: float
    steps: int
    wall_seconds: float
    run_dir: str
    error: str


def _job_row(folder: Path) -> JobRow:
    """One job's row, its files read through the confined layer (a sweep dir may be a received pipeline's ``runs/``):
    a file refused there makes the job ``failed`` with the refusal as its error."""
    run = RunDir(folder)
    try:
        overrides = _overrides(folder)
        metrics: dict[str, Any] = run.read_metrics() if run.is_finished() else {}
        error = error_line(read_text(folder, run.error.name, JSON_CAP)) if run.error.is_file() and not metrics else ""
    except Refused as refused:
        overrides, metrics, error = [], {}, str(refused)
    finished_status = "resumed" if run.resumes() else "done"
    status = finished_status if metrics else ("failed" if error else "unfinished")
    return JobRow(
        job=folder.name,
        overrides=" ".join(str(o) for o in overrides),
        status=status,
        test_return=float(metrics.get("test/mean_return", math.nan)),
        steps=int(metrics.get("train/timesteps", 0)),
        wall_seconds=float(metrics.get("time/total_seconds", math.nan)),
        run_dir=str(folder),
        error=error,
    )


def _overrides(folder: Path) -> list[Any]:
    """The job's ``.hydra/overrides.yaml``: a list of override strings (empty where it has none)."""
    if not os.path.lexists(folder / OVERRIDES):
        return []
    try:
        values = yaml.safe_load(read_text(folder, OVERRIDES.as_posix(), YAML_CAP))
    except yaml.YAMLError:
        values = None
    if not isinstance(values, list):
        raise Refused(f"{folder / OVERRIDES} is not a list of overrides as Hydra writes it")
    return values


def sweep_rows(sweep_dir: Path) -> list[JobRow]:
    """Every job dir of ``sweep_dir`` (a folder with ``.hydra/overrides.yaml``), in job-number order."""
    folders = [p for p in sweep_dir.iterdir() if p.is_dir() and (p / OVERRIDES).is_file()] if sweep_dir.is_dir() else []
    folders.sort(key=lambda p: (int(number.group()) if (number := re.match(r"\d+", p.name)) else -1, p.name))
    return [_job_row(folder) for folder in folders]


def markdown_table(rows: list[JobRow]) -> str:
    """The rows as an aligned Markdown table (a failed job's status holds the first line of its error, whole)."""
    header = ["job", "overrides", "status", "test return", "steps", "wall s", "run dir"]
    cells = [
        [r.job, r.overrides, _status(r), _number(r.test_return, ".2f"),
         str(r.steps) if r.steps else "-", _number(r.wall_seconds, ".1f"), r.run_dir]
        for r in rows
    ]  # fmt: skip
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(header)]
    right = {3, 4, 5}

    def line(values: list[str]) -> str:
        padded = [v.rjust(w) if i in right else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths, strict=True))]
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if i in right else "-" * (w + 2) for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), rule, *(line(c) for c in cells), "", counts_line(rows)]) + "\n"


def _status(row: JobRow) -> str:
    return row.status + (f": {row.error}".replace("|", "\\|") if row.error else "")


def counts_line(rows: list[JobRow]) -> str:
    """``N jobs: a done, b failed`` (resumed and unfinished jobs named when there are any)."""
    counts = {s: sum(r.status == s for r in rows) for s in ("done", "resumed", "failed", "unfinished")}
    total = ", ".join(f"{n} {s}" for s, n in counts.items() if n or s in ("done", "failed"))
    return f"{len(rows)} jobs: {total}"


def _number(value: float, spec: str) -> str:
    return "-" if math.isnan(value) else format(value, spec)


def write_summary(sweep_dir: Path) -> list[JobRow]:
    """Rewrite ``summary.csv`` and ``summary.md`` of ``sweep_dir`` from its job dirs; return the rows."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    with locked(sweep_dir / ".summary.lock"):  # summary writers in turn: parallel jobs end at the same time
        rows = sweep_rows(sweep_dir)
        stream = io.StringIO()
        writer = csv.writer(stream, lineterminator="\n")
        writer.writerow([f.name for f in fields(JobRow)])
        writer.writerows(astuple(row) for row in rows)
        atomic_write_text(sweep_dir / SUMMARY_CSV, stream.getvalue())
        atomic_write_text(sweep_dir / SUMMARY_MD, markdown_table(rows))
    return rows


class SweepSummary(Callback):
    """Hydra callback (``hydra.callbacks.sweep_summary`` in ``conf/train.yaml``): records a failed job's error in
    its run dir and rewrites the sweep summary after every job of a multirun; prints it at the end."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """The launching process of a sweep runs as long as the sweep: the cyclic collector, paused while
        ``python -m rlzoo.train`` starts (:mod:`rlzoo.gc_tuning`), is turned on for it."""
        from rlzoo.gc_tuning import resume

        resume()

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        hydra_cfg = HydraConfig.get()
        if hydra_cfg.mode != RunMode.MULTIRUN:
            return
        if job_return.status == JobStatus.FAILED:
            error = job_return._return_value
            run_dir = Path(hydra_cfg.runtime.output_dir)
            if isinstance(error, BaseException):
                record_failure(run_dir, error)
            else:
                atomic_write_text(RunDir(run_dir).error, str(error))
        write_summary(Path(hydra_cfg.sweep.dir))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Print the summary; the last line counts the jobs and, when one failed, the sweep exits non-zero with it."""
        sweep_dir = Path(config.hydra.sweep.dir)
        rows = write_summary(sweep_dir)
        table = markdown_table(rows).rstrip("\n").rsplit("\n\n", 1)[0]
        print(f"rlzoo: sweep summary ({sweep_dir / SUMMARY_CSV}):\n{table}\n", flush=True)
        last = f"rlzoo.train: {counts_line(rows)} (see {sweep_dir / SUMMARY_MD})"
        if any(r.status == "failed" for r in rows):
            sys.exit(last)
        print(last)
