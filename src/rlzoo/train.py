"""``python -m rlzoo.train``: train one agent from the Hydra config groups and write a self-describing run dir.

A thin Hydra entrypoint over :func:`train`, which resolves the kind of run (:func:`rlzoo.training.kind.resolve_kind`)
and hands it to the one run skeleton, :func:`rlzoo.training.run.run`. torch and SB3 are imported only where a run
trains, so a sweep's launching process (local_parallel, Slurm) starts in a fraction of a second.
"""

from __future__ import annotations

if __name__ == "__main__":  # the command: no cyclic garbage collection while it starts up (rlzoo.gc_tuning)
    from rlzoo.gc_tuning import pause_for_start_up

    pause_for_start_up()

from collections.abc import Sequence
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from rlzoo.cli import discard_output_dir, one_line_errors, run_checked
from rlzoo.config import CONFIG_DIR
from rlzoo.confined import MEMORY_KEY, memory_budget_of
from rlzoo.gc_tuning import release_previous_run
from rlzoo.kinds import KIND_PACKAGES  # noqa: F401  (every kind of run, registered)
from rlzoo.training.kind import resolve_kind


def train(cfg: DictConfig, overrides: Sequence[str] = ()) -> dict[str, float]:
    """Train, save and test one agent (or a multi-agent team) as ``cfg`` describes; return its metrics
    (``test/mean_return`` ...).

    Every input is checked before the run dir is written to; ``metrics.json`` is written last. ``cfg`` is not
    changed. A run dir holding an unfinished run with the same config resumes it; ``resume=<run dir>`` continues that
    run with its saved config (``overrides``, the command line's, must agree with it). The memory budget is ``cfg``'s
    ``memory_budget_gb`` (the caller's, never a resumed run's: a resume's overrides may set it).
    """
    import rlzoo.kinds  # noqa: F401  (in a sweep's worker, which runs this function without importing this module)
    from rlzoo.training.run import run

    release_previous_run()
    with memory_budget_of(cfg.get(MEMORY_KEY)):
        return run(resolve_kind(cfg), cfg, overrides)


def console_figures(metrics: dict[str, float]) -> str:
    """The figures of a finished run on its console line: mean test return, success rate (envs that report success),
    the sampled-action test (sampled_test=true), the best evaluation (keep-best), and each agent's figures
    (multi-agent runs)."""
    tested = "test/mean_return" in metrics
    parts = [f"mean test return {metrics['test/mean_return']:.2f}" if tested else "no test episodes (test_episodes=0)"]
    if "test/success_rate" in metrics:
        parts.append(f"success rate {metrics['test/success_rate']:.0%}")
    if "test_sampled/mean_return" in metrics:
        parts.append(f"sampled actions {metrics['test_sampled/mean_return']:.2f}")
    if "eval/best_return" in metrics:
        parts.append(f"best evaluation {metrics['eval/best_return']:.2f} at {int(metrics['eval/best_steps'])} steps")
    return ", ".join(parts + agent_figures(metrics))


def agent_figures(metrics: dict[str, float]) -> list[str]:
    """A multi-agent run's learner figures per seat, from its ``test/<seat>/...`` keys: ``learner as player_2: mean
    return 0.62, win 75 %, draw 10 %, loss 15 %`` (the outcome rates where the metrics carry them: two-player games)."""
    agents = [key.split("/")[1] for key in metrics if key.startswith("test/") and key.count("/") == 2 and
              key.endswith("/mean_return")]  # fmt: skip
    lines = []
    for agent in agents:
        rates = [f"{key.split('/')[2].removesuffix('_rate')} {value:.0%}" for key, value in metrics.items()
                 if key.startswith(f"test/{agent}/") and key.endswith("_rate")]  # fmt: skip
        lines.append(", ".join([f"learner as {agent}: mean return {metrics[f'test/{agent}/mean_return']:.2f}", *rates]))
    return lines


@hydra.main(config_path=str(CONFIG_DIR), config_name="train", version_base="1.3")
@one_line_errors("rlzoo.train", summarised_sweeps=True)
def main(cfg: DictConfig) -> float:
    """Hydra entrypoint: returns the mean test return, so that a sweeper can optimise it."""
    hydra_cfg = HydraConfig.get()
    overrides = [o for o in hydra_cfg.overrides.task if o.split("=", 1)[0] != "resume"]
    if Path(str(cfg.resume or cfg.run_dir)).resolve() != Path(hydra_cfg.runtime.output_dir).resolve():
        discard_output_dir()  # the run writes elsewhere (resume=, run_dir=): Hydra's own folder would stay empty
    try:
        metrics = train(cfg, overrides)
    except KeyboardInterrupt:  # Ctrl-C: one line naming what was kept and the command that resumes
        from rlzoo.rundir import RunDir
        from rlzoo.training.resume import interrupted_line

        run = RunDir(Path(str(cfg.resume or cfg.run_dir)))
        raise KeyboardInterrupt(interrupted_line(run, bool(cfg.get("checkpoint_buffer", True)))) from None
    mean_return = metrics.get("test/mean_return", float("nan"))
    run_dir = cfg.resume or cfg.run_dir
    print(f"rlzoo.train: {run_dir}: {int(metrics['train/timesteps'])} steps, {console_figures(metrics)}")
    return mean_return


def cli() -> None:
    """The ``rlzoo-train`` command: :func:`main` once the command line is checked, as ``python -m rlzoo.train``."""
    run_checked(main, "rlzoo.train", "train")


if __name__ == "__main__":
    cli()
