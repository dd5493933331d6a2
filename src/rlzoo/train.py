"""``python -m rlzoo.train``: train one agent from the Hydra config groups and write a self-describing run dir.

A thin Hydra entrypoint over :func:`train`. torch and SB3 are imported only where a run trains
(:mod:`rlzoo.training.run`), so a sweep's launching process (local_parallel, Slurm) starts in a fraction of a
second.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from rlzoo.cli import discard_output_dir, one_line_errors
from rlzoo.config import CONFIG_DIR


def train(cfg: DictConfig, overrides: Sequence[str] = ()) -> dict[str, float]:
    """Train, save and test one agent as ``cfg`` describes; return its metrics (``test/mean_return`` ...).

    Every input is checked before the run dir is written to; ``metrics.json`` is written last. ``cfg`` is not
    changed. A run dir holding an unfinished run with the same config resumes it; ``resume=<run dir>`` continues that
    run with its saved config (``overrides``, the command line's, must agree with it).
    """
    from rlzoo.multiagent.plan import is_pettingzoo

    if cfg.get("multiagent") is not None or is_pettingzoo(cfg):  # multi-agent runs: rlzoo.multiagent.run
        from rlzoo.multiagent.run import train_multiagent

        return train_multiagent(cfg, overrides)
    from rlzoo.training.run import train_run

    return train_run(cfg, overrides)


@hydra.main(config_path=str(CONFIG_DIR), config_name="train", version_base="1.3")
@one_line_errors("rlzoo.train", summarised_sweeps=True)
def main(cfg: DictConfig) -> float:
    """Hydra entrypoint: returns the mean test return, so that a sweeper can optimise it."""
    hydra_cfg = HydraConfig.get()
    overrides = [o for o in hydra_cfg.overrides.task if o.split("=", 1)[0] != "resume"]
    if Path(str(cfg.resume or cfg.run_dir)).resolve() != Path(hydra_cfg.runtime.output_dir).resolve():
        discard_output_dir()  # the run writes elsewhere (resume=, run_dir=): Hydra's own folder would stay empty
    metrics = train(cfg, overrides)
    mean_return = metrics.get("test/mean_return", float("nan"))
    run_dir = cfg.resume or cfg.run_dir
    print(f"rlzoo.train: {run_dir}: {int(metrics['train/timesteps'])} steps, mean test return {mean_return:.2f}")
    return mean_return


if __name__ == "__main__":
    main()
