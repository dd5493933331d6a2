"""``python -m rlzoo.plot dir=<runs or multirun dir>``: learning curves (one PNG per env) and a results table.

Runs are found by their ``config.yaml`` anywhere under ``dir`` and grouped by their resolved config
(:mod:`rlzoo.results.runs`); curves and scores come from the Monitor files (or ``returns100.csv``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import hydra
from omegaconf import DictConfig, OmegaConf

from rlzoo.cli import one_line_errors, run_checked
from rlzoo.config import CONFIG_DIR
from rlzoo.confined import output_folder
from rlzoo.errors import ConfigError
from rlzoo.files import atomic_write_text
from rlzoo.reporting.figures import csv_table, file_name, markdown_table, plot_env
from rlzoo.results import stats as results_stats
from rlzoo.results import verdicts
from rlzoo.results.comparison import AUTO, Row, compare
from rlzoo.results.runs import Group
from rlzoo.schema import at_least, parse


@dataclass(frozen=True)
class PlotSettings:
    """The keys of ``conf/plot.yaml`` (see there), checked."""

    dir: str
    out: str | None = None
    x: Literal["timesteps", "episodes"] = "timesteps"
    budgets: tuple[int, ...] | None = None
    baseline: str | None = AUTO
    last_episodes: int = field(default=100, metadata=at_least(1))
    smooth: int = field(default=100, metadata=at_least(1))
    verdict_of: str | None = None
    verdict_ci: float = 0.95

    @classmethod
    def from_config(cls, cfg: DictConfig) -> PlotSettings:
        values = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(values, dict)
        if values["dir"] in (None, "", "???"):
            raise ConfigError("dir=<folder> is required: a run dir, or a folder of runs or sweeps (searched below)")
        budgets = values.get("budgets")
        if budgets is not None:
            budgets = [budgets] if not isinstance(budgets, list) else budgets
            if not budgets or any(isinstance(b, bool) or not isinstance(b, int | float) or b <= 0 for b in budgets):
                raise ConfigError(f"budgets={budgets!r}; allowed: a list of agent-step counts > 0, e.g. [20000,50000]")
            values["budgets"] = tuple(sorted({int(b) for b in budgets}))
        verdicts.check_confidence(values.get("verdict_ci", 0.95), "verdict_ci")
        values["dir"] = str(values["dir"])
        return parse(cls, values)  # type: ignore[arg-type]


@dataclass(frozen=True)
class PlotReport:
    """What :func:`plot` found and wrote."""

    groups: list[Group]
    rows: list[Row]
    figures: list[Path]
    tables: list[Path]
    notes: list[str]
    baseline: str | None = None
    profiles: list[Path] = field(default_factory=list)  # performance profiles (rliable), one per env


def plot(settings: PlotSettings, log: Callable[[str], None] = print) -> PlotReport:
    """Find, group and plot the runs under ``settings.dir``; write one PNG per env and the results table."""
    comparison = compare(settings.dir, settings.budgets, settings.baseline, settings.last_episodes)
    groups, rows, baseline = comparison.groups, comparison.rows, comparison.baseline
    verdicts.check_reference(settings.verdict_of, [g.srl_model for g in groups])
    out = Path(settings.out) if settings.out else Path(settings.dir) / "plots"
    output_folder(out)
    figures = [
        plot_env(
            env,
            [g for g in groups if g.env == env],
            out / f"{file_name(env)}.png",
            settings.x,
            settings.smooth,
            settings.budgets,
        )
        for env in sorted({g.env for g in groups if g.scored_runs})
    ]
    reference = settings.verdict_of
    stats = results_stats.row_stats(rows, baseline, reference=reference, confidence=settings.verdict_ci)
    profiles = results_stats.plot_profiles(rows, out)
    notes = comparison.notes + ([] if results_stats.rliable_installed() else [results_stats.MISSING_NOTE])
    caption = results_stats.CAPTION.format(last=settings.last_episodes, reps=results_stats.REPS)
    markdown = markdown_table(rows, baseline, stats, reference)
    tables = [out / "results.md", out / "results.csv"]
    atomic_write_text(tables[0], markdown)
    atomic_write_text(tables[1], csv_table(rows, stats))
    n_runs = sum(len(g.runs) for g in groups)
    log(f"rlzoo.plot: {n_runs} run(s) in {len(groups)} group(s) over {len(figures)} env(s) under {settings.dir}")
    for note in notes:
        log(f"  note: {note}")
    log(markdown + caption)
    log("wrote " + ", ".join(str(p) for p in figures + profiles + tables))
    return PlotReport(groups, rows, figures, tables, notes, baseline, profiles)


@hydra.main(config_path=str(CONFIG_DIR), config_name="plot", version_base="1.3")
@one_line_errors("rlzoo.plot")
def main(cfg: DictConfig) -> None:
    """Hydra entrypoint (``key=value`` arguments only)."""
    plot(PlotSettings.from_config(cfg))


if __name__ == "__main__":
    run_checked(main, "rlzoo.plot", "plot")
