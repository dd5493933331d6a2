"""``python -m rlzoo.report dir=<sweep or pipeline dir>``: one self-contained HTML page of the runs under ``dir``.

The page (``<dir>/report.html``, or ``out=``) holds the results table (as ``rlzoo.plot`` computes it), the learning
curves, the encoders' metrics (KNN-MSE, GTC) where runs used learned representations, a replay of each group's best
seed and every run's config; see :mod:`rlzoo.reporting.page`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import hydra
import torch
from omegaconf import DictConfig, OmegaConf

from rlzoo.cli import one_line_errors, run_checked
from rlzoo.config import CONFIG_DIR
from rlzoo.confined import MEMORY_KEY, budget_gib, memory_budget_of
from rlzoo.errors import ConfigError
from rlzoo.plot import PlotSettings
from rlzoo.reporting.page import write_report


@dataclass(frozen=True)
class ReportSettings:
    """The keys of ``conf/report.yaml`` (see there), checked."""

    plot: PlotSettings
    videos: bool
    trusted: bool = False
    memory_budget_gb: float | None = None

    @classmethod
    def from_config(cls, cfg: DictConfig) -> ReportSettings:
        values = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(values, dict)
        videos, trusted = values.pop("videos", True), values.pop("trusted", False)
        for key, value in (("videos", videos), ("trusted", trusted)):
            if not isinstance(value, bool):
                raise ConfigError(f"{key}={value!r} must be true or false")
        budget = values.pop(MEMORY_KEY, None)
        budget = None if budget is None else budget_gib(budget)
        return cls(PlotSettings.from_config(OmegaConf.create(values)), videos, trusted, budget)


@hydra.main(config_path=str(CONFIG_DIR), config_name="report", version_base="1.3")
@one_line_errors("rlzoo.report")
def main(cfg: DictConfig) -> None:
    """Hydra entrypoint (``key=value`` arguments only)."""
    torch.set_num_threads(1)
    settings = ReportSettings.from_config(cfg)
    plot = settings.plot
    out = None if plot.out is None else Path(plot.out)
    with memory_budget_of(settings.memory_budget_gb):
        _write(settings, out)


def _write(settings: ReportSettings, out: Path | None) -> None:
    plot = settings.plot
    write_report(
        plot.dir,
        out,
        budgets=plot.budgets,
        baseline=plot.baseline,
        videos=settings.videos,
        verdict_of=plot.verdict_of,
        verdict_ci=plot.verdict_ci,
        trusted=settings.trusted,
    )


if __name__ == "__main__":
    run_checked(main, "rlzoo.report", "report")
