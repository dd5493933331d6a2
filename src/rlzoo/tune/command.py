"""``python -m rlzoo.tune``: hyperparameter search on Optuna, every trial an ``rlzoo.train`` run in the study folder.

A thin Hydra entrypoint over :func:`rlzoo.tune.worker.tune` (``conf/tune.yaml``). With ``-m``, the launcher of the
``hardware`` profile starts ``tune.workers`` jobs (local processes with ``hardware=local_parallel``, a Slurm array
with ``hardware=slurm_cpu``), each a worker of the same study.
"""

from __future__ import annotations

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from rlzoo.cli import one_line_errors
from rlzoo.config import CONFIG_DIR
from rlzoo.errors import ConfigError


def _train_command() -> str:
    """The ``rlzoo.train`` command with this study's algorithm, env and the command line's env and srl_model keys."""
    hydra_cfg = HydraConfig.get()
    choices = hydra_cfg.runtime.choices
    context = [
        o
        for o in hydra_cfg.overrides.task
        if o.lstrip("+~").split("=", 1)[0].split(".", 1)[0] in ("env", "srl_model") and "=" in o
    ]
    parts = [f"algo={choices.get('algo')}", f"env={choices.get('env')}", *context]
    return "python -m rlzoo.train " + " ".join(dict.fromkeys(parts))


@hydra.main(config_path=str(CONFIG_DIR), config_name="tune", version_base="1.3")
@one_line_errors("rlzoo.tune")
def main(cfg: DictConfig) -> float:
    """Hydra entrypoint: runs one worker; returns the study's best value (NaN before any trial completed)."""
    from rlzoo.tune import require_optuna

    require_optuna()
    from rlzoo.tune.worker import tune

    hydra_cfg = HydraConfig.get()
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    workers = cfg.tune.workers
    if isinstance(workers, int) and workers > 1 and not multirun:
        raise ConfigError(
            f"tune.workers={workers} runs one job per worker: add -m (with hardware=local_parallel for "
            "local processes, hardware=slurm_cpu for a Slurm array)"
        )
    launch = str(hydra_cfg.sweep.dir if multirun else hydra_cfg.runtime.output_dir)
    result = tune(cfg, launch=launch, train_command=_train_command())
    files, best = result.files, result.files.best
    print(f"rlzoo.tune: {files.trials_csv} ({len(result.study.trials)} trials)")
    if best is None:
        print("rlzoo.tune: no trial has completed yet")
        return float("nan")
    print(f"rlzoo.tune: best trial {best.number}: mean return {best.value:.2f}; tuned pair {files.pairs[-1]}")
    for skipped in files.skipped_plots:
        print(f"rlzoo.tune: plot skipped: {skipped}")
    print(f"rlzoo.tune: use it: {files.usage}")
    return float(best.value or 0.0)


if __name__ == "__main__":
    main()
