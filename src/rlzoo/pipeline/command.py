"""``python -m rlzoo.pipeline experiment=<name>``: from nothing to the results table in one command.

Steps, each cached by content in the pipeline dir (``pipeline.dir``, ``multirun/pipeline/<experiment>`` by default):
collect one dataset per env (``rlzoo.collect``), train one encoder per learned representation (``rlzoo.srl.train``),
run the RL sweep env x srl_model x seed (``rlzoo.train -m``, through the hardware profile's launcher: local, joblib
or Slurm; with ``pipeline.runs_beside_encoders``, the runs that need no encoder start while the encoders train, and
the others as soon as their encoder is),
then write the table (``rlzoo.plot``), the HTML report (``rlzoo.report``) and, with ``logger=wandb``, the table and
figures to the sweep's W&B group. Running it again after a crash, or with more seeds or options, computes
only what is missing and says so per step; on Slurm it waits for the jobs an earlier launcher left in flight
(:mod:`rlzoo.pipeline.inflight`). Every input is checked before the first step starts.
"""

from __future__ import annotations

import queue
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from rlzoo.cli import one_line_errors, run_checked
from rlzoo.config import CONFIG_DIR
from rlzoo.confined import MEMORY_KEY, memory_budget_of
from rlzoo.errors import ConfigError, Refused
from rlzoo.pipeline.inflight import launcher_lock
from rlzoo.pipeline.launch import Job, all_jobs, check_runs_use_encoders, job_statuses, representation_key, run_sweep
from rlzoo.pipeline.slurm import run_steps_on_slurm, step_in_flight
from rlzoo.pipeline.spec import PIPELINE_CONFIG, PipelineSpec, pipeline_spec
from rlzoo.pipeline.steps import (
    Step,
    announced,
    check_overrides_apply,
    clear_options,
    compose_train,
    dataset_step,
    encoder_step,
    is_learned,
    method_config,
    run_steps,
    write_option,
)

RESULTS = "results"


@dataclass(frozen=True)
class PipelinePlan:
    """The steps of a checked pipeline: datasets per env, encoders per (env, method), the RL jobs."""

    spec: PipelineSpec
    datasets: dict[str, Step]
    encoders: dict[tuple[str, str], Step]
    jobs: list[Job]


def plan_pipeline(spec: PipelineSpec) -> PipelinePlan:
    """Compose every step's config and check it (nothing is written but the generated ``srl_model`` options, once
    the pipeline dir is claimed for this experiment)."""
    spec.check_dir()
    scratch = spec.runs_dir  # a run_dir to compose with; nothing is written there
    bases = {str(m): method_config(spec, str(m)) for m in spec.axes["srl_model"]}
    learned = [m for m, base in bases.items() if is_learned(base)]
    check_overrides_apply(spec, bases, learned)
    datasets: dict[str, Step] = {}
    encoders: dict[tuple[str, str], Step] = {}
    for env in map(str, spec.axes["env"]):
        configs = {method: compose_train(spec, env, method, scratch) for method in bases}  # every job's keys, checked
        if learned:
            datasets[env] = dataset_step(spec, env, configs[learned[0]].env)
            encoders |= {(env, m): encoder_step(spec, m, bases[m], env, datasets[env]) for m in learned}
    check_runs_use_encoders(spec, {key: step.folder for key, step in encoders.items()})
    spec.claim_dir()
    clear_options(spec)  # Hydra's search path: only the options written below
    options = {}
    for env in map(str, spec.axes["env"]):
        for method, base in bases.items():
            if method in learned or method in spec.srl_model:
                encoder = encoders[(env, method)].folder if method in learned else None
                size = int(datasets[env].config.image_size) if method in learned else None
                options[(env, method)] = write_option(spec, method, base, env, size, encoder)
                compose_train(spec, env, options[(env, method)], scratch, search=spec.dir / "conf")
    return PipelinePlan(spec, datasets, encoders, all_jobs(spec, options))


def run_pipeline(spec: PipelineSpec, log: Callable[[str], None] = print) -> dict[str, list[str]]:
    """Run (or finish) the pipeline ``spec`` describes; return the RL jobs by status (done, failed, unfinished).
    One launcher at a time works on a pipeline dir; on Slurm a launcher run again takes over the jobs an earlier
    one left in flight (:mod:`rlzoo.pipeline.inflight`)."""
    started = time.perf_counter()
    plan = plan_pipeline(spec)
    with launcher_lock(spec.dir):
        statuses = _run_steps(plan, log)
    say = lambda message: log(f"rlzoo.pipeline: {message}")  # noqa: E731
    say(
        f"finished in {time.perf_counter() - started:.0f} s: " + ", ".join(f"{len(v)} {k}" for k, v in statuses.items())
    )
    return statuses


def _run_steps(plan: PipelinePlan, log: Callable[[str], None]) -> dict[str, list[str]]:
    """The steps of ``plan``, each cached or run: datasets, encoders, RL runs, then the results."""
    from rlzoo.collect import collect

    spec = plan.spec
    say = lambda message: log(f"rlzoo.pipeline: {message}")  # noqa: E731
    say(f"experiment {spec.experiment} in {spec.dir}: {len(plan.datasets)} dataset(s), {len(plan.encoders)} "
        f"encoder(s), {len(plan.jobs)} RL run(s)")  # fmt: skip
    run_steps(list(plan.datasets.values()), collect, 1, say)
    if spec.runs_beside_encoders or spec.slurm is not None:
        runs_as_encoders_finish(plan, say)
    else:
        train_encoders(spec, list(plan.encoders.values()), say)
        run_sweep(spec, plan.jobs, say)
    statuses = job_statuses(spec, plan.jobs)
    results(spec, say)
    return statuses


def train_encoders(
    spec: PipelineSpec, steps: list[Step], say: Callable[[str], None], on_done: Callable[[Step], None] = lambda s: None
) -> None:
    """Train the encoders that are not cached: as Slurm jobs with ``hardware=slurm_*`` (waiting for those an
    earlier launcher left in flight), else here (``pipeline.encoder_workers`` at once); ``on_done`` gets each step
    as it is done."""
    from rlzoo.srl.train import train_encoder

    if spec.slurm is None:
        run_steps(steps, train_encoder, spec.encoder_workers, say, on_done=on_done)
        return
    adopted, todo = {}, []
    for step in steps:
        job = step_in_flight(step, spec.dir, say)
        if job is not None:
            adopted[job] = step  # an earlier launcher's job, still queued or running: waited for, not redone
        elif announced(step, say):
            todo.append(step)
    run_steps_on_slurm(todo, spec.slurm, spec.dir, say, on_done, adopted)


def runs_as_encoders_finish(plan: PipelinePlan, say: Callable[[str], None]) -> None:
    """Train the encoders while the RL runs go on beside them (``pipeline.runs_beside_encoders``, and always on
    Slurm): first the runs that need no new encoder (ground truth, raw pixels, cached encoders), then each
    representation's runs as soon as its encoder is trained, all that are ready in one sweep, so that no core waits
    for the slowest encoder while there is a run to train. Here one sweep runs at a time; on Slurm each is submitted
    as soon as it is ready."""
    training = {step.folder: key for key, step in plan.encoders.items() if not step.done}
    ready: queue.SimpleQueue[list[Job] | None] = queue.SimpleQueue()
    ready.put([job for job in plan.jobs if representation_key(job.values) not in training.values()])

    def encoder_done(step: Step) -> None:
        ready.put([job for job in plan.jobs if representation_key(job.values) == training[step.folder]])

    with ThreadPoolExecutor(max_workers=1) as pool:
        runs = pool.submit(sweep_as_ready, plan.spec, ready, say)
        try:
            train_encoders(plan.spec, list(plan.encoders.values()), say, on_done=encoder_done)
        finally:
            ready.put(None)  # no more jobs: the sweep thread ends after the ready ones (an encoder's error still stops)
        runs.result()


def sweep_as_ready(spec: PipelineSpec, ready: queue.SimpleQueue[list[Job] | None], say: Callable[[str], None]) -> None:
    """Launch the jobs put on ``ready``, all that wait at once in one sweep, until ``None`` arrives; on Slurm each
    sweep is submitted at once (the sweeps wait for their jobs side by side), here one sweep runs at a time."""
    finished = False
    with ThreadPoolExecutor(max_workers=8 if spec.slurm is not None else 1) as sweeps:
        launched = []
        while not finished:
            parts = [ready.get()]
            while not ready.empty():
                parts.append(ready.get())
            finished = None in parts
            jobs = [job for part in parts if part for job in part]
            if jobs:
                launched.append(sweeps.submit(run_sweep, spec, jobs, say))
                if spec.slurm is None:
                    launched[-1].result()
        for sweep in launched:
            sweep.result()


def results(spec: PipelineSpec, say: Callable[[str], None]) -> None:
    """The table and figures (``<dir>/results/``), the report (``<dir>/report.html``) and W&B's copy of them."""
    from rlzoo.plot import PlotSettings, plot
    from rlzoo.reporting.page import write_report

    try:
        settings = PlotSettings(
            dir=str(spec.runs_dir), out=str(spec.dir / RESULTS), verdict_of=spec.verdict_of, verdict_ci=spec.verdict_ci
        )
        report = plot(settings, log=say)
    except Refused:  # a run refused untrusted (its config names code ...): the pipeline fails, naming it
        raise
    except ConfigError as error:  # no run has an episode yet (all failed before their first)
        say(f"no table: {error}")
        return
    if spec.report:
        write_report(
            spec.dir,
            spec.dir / "report.html",
            videos=spec.videos,
            verdict_of=spec.verdict_of,
            verdict_ci=spec.verdict_ci,
            log=say,
        )
    if spec.wandb is not None:
        from rlzoo.reporting.wandb_results import log_results
        from rlzoo.results.comparison import compare

        folder = log_results(compare(spec.runs_dir), report.figures, spec.wandb, str(spec.runs_dir), spec.dir)
        say(f"W&B: the table and {len(report.figures)} figure(s) in group {spec.runs_dir} ({folder})")


@hydra.main(config_path=str(CONFIG_DIR), config_name=PIPELINE_CONFIG, version_base="1.3")
@one_line_errors("rlzoo.pipeline")
def main(cfg: DictConfig) -> None:
    """Hydra entrypoint: the command line's overrides describe the pipeline (see :func:`pipeline_spec`)."""
    hydra_cfg = HydraConfig.get()
    overrides = [*hydra_cfg.overrides.task, *(o for o in hydra_cfg.overrides.hydra if o.startswith("hydra.launcher"))]
    with memory_budget_of(cfg.get(MEMORY_KEY)):  # its own reads; its runs get the key as an override
        statuses = run_pipeline(pipeline_spec(list(overrides)))
    failed = statuses.get("failed", []) + statuses.get("unfinished", [])
    if failed:
        raise SystemExit(
            f"rlzoo.pipeline: {len(failed)} RL run(s) did not finish: {', '.join(failed)} (see runs/summary.md)"
        )


def usage() -> str:
    """What ``--help`` prints without an experiment (the pipeline's config needs one to compose)."""
    experiments = sorted(path.stem for path in (Path(CONFIG_DIR) / "experiment").glob("*.yaml"))
    return (
        "python -m rlzoo.pipeline experiment=<name> [overrides]   (docs/pipeline.md; with experiment=<name>, --help "
        "shows its config)\n\n"
        f"{(__doc__ or '').strip()}\n\nexperiments: {', '.join(experiments)}\n"
    )


def cli(argv: list[str] | None = None) -> None:
    """The command: ``--help`` without an experiment prints :func:`usage`; anything else goes to Hydra's main, once
    the command line is checked (:func:`rlzoo.cli.run_checked`; a sweep is written ``pipeline.sweep.<key>=[...]``)."""
    args = sys.argv[1:] if argv is None else argv
    if {"--help", "-h"} & set(args) and not any(arg.startswith("experiment=") for arg in args):
        print(usage())
        return
    run_checked(main, "rlzoo.pipeline", PIPELINE_CONFIG, sweeps_in="pipeline.sweep")


if __name__ == "__main__":
    cli()
