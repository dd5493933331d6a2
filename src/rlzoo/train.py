"""``python -m rlzoo.train``: train one agent from the Hydra config groups and write a self-describing run dir.

A thin Hydra entrypoint over :func:`train`. torch and SB3 are imported only where a run trains
(:mod:`rlzoo.experiment.training`), so a sweep's launching process (local_parallel, Slurm) starts in a fraction of a
second.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from rlzoo.config import CONFIG_DIR
from rlzoo.errors import ConfigError


def train(cfg: DictConfig) -> dict[str, float]:
    """Train, save and test one agent as ``cfg`` describes; return its metrics (``test/mean_return`` ...).

    Every input is checked before the run dir is written to; ``metrics.json`` is written last. A run dir holding an
    unfinished run with the same config resumes it; ``resume=<run dir>`` continues that run with its saved config.
    """
    from rlzoo.experiment.training import train_run

    return train_run(cfg)


@hydra.main(config_path=str(CONFIG_DIR), config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> float:
    """Hydra entrypoint: returns the mean test return, so that a sweeper can optimise it."""
    try:
        if cfg.get("resume"):
            overrides = [o for o in HydraConfig.get().overrides.task if o.split("=", 1)[0] != "resume"]
            from rlzoo.experiment.resume import resume_config

            cfg = resume_config(Path(cfg.resume), cfg, overrides)
        metrics = train(cfg)
    except ConfigError as error:
        if HydraConfig.get().mode == RunMode.MULTIRUN:
            raise  # the launcher records the failed job and runs the others
        sys.exit(f"rlzoo.train: error: {error}")
    mean_return = metrics.get("test/mean_return", float("nan"))
    print(f"rlzoo.train: {cfg.run_dir}: {int(metrics['train/timesteps'])} steps, mean test return {mean_return:.2f}")
    return mean_return


if __name__ == "__main__":
    main()
