"""``python -m rlzoo.plot dir=<runs or multirun dir>``: learning curves (one PNG per env) and a results table.

Runs are found by their ``config.yaml`` anywhere under ``dir`` and grouped by their resolved config
(:mod:`rlzoo.experiment.results`); curves and scores come from the Monitor files (or ``returns100.csv``).
"""

from __future__ import annotations

import csv
import io
import math
import re
import textwrap
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import hydra
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter
from omegaconf import DictConfig, OmegaConf

from rlzoo.cli import one_line_errors
from rlzoo.config import CONFIG_DIR
from rlzoo.errors import ConfigError
from rlzoo.experiment.results import (
    Group,
    Row,
    find_runs,
    group_runs,
    is_baseline,
    learning_curve,
    read_run,
    results_table,
)
from rlzoo.files import atomic_write_text
from rlzoo.schema import at_least, parse

X_AXES = {"timesteps": "agent steps (summed over envs)", "episodes": "training episodes"}
AUTO = "auto"


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


def plot(settings: PlotSettings, log: Callable[[str], None] = print) -> PlotReport:
    """Find, group and plot the runs under ``settings.dir``; write one PNG per env and the results table."""
    runs = find_runs(settings.dir)
    if not runs:
        raise ConfigError(
            f"dir={settings.dir} holds no run dirs (no config.yaml in it or below it); pass a folder that "
            "python -m rlzoo.train wrote into, e.g. outputs/ or multirun/<date>/<time>"
        )
    notes: list[str] = []
    results = []
    for run in runs:
        try:
            result = read_run(run)
        except Exception as error:  # a config.yaml or CSV that is not what rlzoo writes
            notes.append(f"skipped {run.path}: cannot read it ({error})")
            continue
        if run.error.is_file() and not result.finished:
            last_line = (run.error.read_text().strip().splitlines() or ["?"])[-1]
            notes.append(f"skipped {run.path}: the run failed ({last_line})")
        elif len(result.returns) == 0:
            notes.append(f"skipped {run.path}: no complete training episode yet")
        else:
            results.append(result)
    if not results:
        raise ConfigError(f"dir={settings.dir}: none of its {len(runs)} run dir(s) has a training episode yet")
    unfinished = [r for r in results if not r.finished]
    if unfinished:
        notes.append(
            f"{len(unfinished)} run(s) still training or stopped (no metrics.json): plotted up to their latest "
            f"episode: {', '.join(str(r.path) for r in unfinished)}"
        )
    groups = group_runs(results)
    baseline = _baseline(settings.baseline, groups)
    notes += _budget_notes(groups, settings.budgets)
    rows = results_table(groups, settings.budgets, baseline, settings.last_episodes)
    if not rows:
        raise ConfigError(f"budgets={list(settings.budgets or [])}: no run reached any of them; {_reached(groups)}")
    notes += _baseline_notes(rows, baseline)
    out = Path(settings.out) if settings.out else Path(settings.dir) / "plots"
    out.mkdir(parents=True, exist_ok=True)
    figures = [
        plot_env(env, [g for g in groups if g.env == env], settings, out / f"{_file_name(env)}.png")
        for env in sorted({g.env for g in groups})
    ]
    markdown = markdown_table(rows, baseline)
    tables = [out / "results.md", out / "results.csv"]
    atomic_write_text(tables[0], markdown)
    atomic_write_text(tables[1], csv_table(rows))
    log(f"rlzoo.plot: {len(results)} run(s) in {len(groups)} group(s) over {len(figures)} env(s) under {settings.dir}")
    for note in notes:
        log(f"  note: {note}")
    log(markdown)
    log("wrote " + ", ".join(str(p) for p in figures + tables))
    return PlotReport(groups, rows, figures, tables, notes)


def _baseline(name: str | None, groups: Sequence[Group]) -> str | None:
    if name == AUTO:
        return "ground_truth" if any(g.srl_model == "ground_truth" for g in groups) else None
    if name is not None and not any(is_baseline(g, name) for g in groups):
        srl_models, algos = sorted({g.srl_model for g in groups}), sorted({g.algo_name for g in groups})
        raise ConfigError(
            f"baseline={name!r} is neither an srl_model nor an algorithm of the runs (srl_models: "
            f"{', '.join(srl_models)}; algorithms: {', '.join(algos)}); choose one, or baseline=null"
        )
    return name


def _reached(groups: Sequence[Group]) -> str:
    return "budgets reached: " + ", ".join(f"{g.env} {g.label}: {max(r.reached for r in g.runs)}" for g in groups)


def _budget_notes(groups: Sequence[Group], budgets: Sequence[int] | None) -> list[str]:
    notes = []
    for group in groups:
        where = f"{group.label} on {group.env}"
        counts = Counter((r.budget if r.finished else r.reached, r.finished) for r in group.runs)
        if budgets is None and len(counts) > 1:
            listed = ", ".join(
                f"{steps} ({n} run{'s' * (n > 1)}{'' if done else ', unfinished'})"
                for (steps, done), n in sorted(counts.items(), reverse=True)
            )
            notes.append(
                f"runs of {where} reached different step counts: {listed}; the table compares them at "
                f"{group.common_budget}, which all reached (choose budgets with budgets=[...])"
            )
        for budget in budgets or ():
            short = [r for r in group.runs if r.reached < budget]
            if short:
                notes.append(
                    f"at budget {budget}, {len(short)} of {len(group.runs)} run(s) of {where} are left out "
                    f"(they reached only {', '.join(str(r.reached) for r in short)} steps)"
                )
    return notes


def _baseline_notes(rows: Sequence[Row], baseline: str | None) -> list[str]:
    if baseline is None:
        return ["no baseline: the table has no p-values (name one with baseline=<srl_model or algorithm>)"]
    missing = sorted(
        {f"{r.group.label} on {r.group.env} at {r.budget}" for r in rows if not r.is_baseline and math.isnan(r.p_value)}
    )
    if not missing:
        return []
    by_algo = any(r.is_baseline and r.group.srl_model != baseline for r in rows)
    shared = "srl_model" if by_algo else "algorithm"
    return [
        f"no p-value for {'; '.join(missing)}: a p-value needs one {baseline} group with the same env, budget and "
        f"{shared}, and 2+ seeds on each side"
    ]


def _file_name(env_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", env_id)


def plot_env(env: str, groups: Sequence[Group], settings: PlotSettings, path: Path) -> Path:
    """One figure: a line (mean) and a band (± SE) over seeds per group of ``env``."""
    fig = Figure(figsize=(8, 5), layout="constrained")
    ax = fig.subplots()
    for group in groups:
        curve = learning_curve(group, settings.x, settings.smooth)
        seeds = len(group.runs)
        label = textwrap.fill(f"{group.label} ({seeds} seed{'s' * (seeds > 1)})", 110, subsequent_indent="    ")
        (line,) = ax.plot(curve.x, curve.mean, lw=1.8, label=label)
        ax.fill_between(curve.x, curve.mean - curve.se, curve.mean + curve.se, color=line.get_color(), alpha=0.2)
    if settings.budgets and settings.x == "timesteps":
        for budget in settings.budgets:
            ax.axvline(budget, color="grey", ls=":", lw=1)
    unfinished = sum(not r.finished for g in groups for r in g.runs)
    note = f" ({unfinished} run(s) still training)" if unfinished else ""
    ax.set_title(
        f"{env}{note}\nreturn averaged over the last {settings.smooth} training episodes; mean ± SE over seeds",
        fontsize=10,
    )
    ax.set(xlabel=X_AXES[settings.x], ylabel="episode return")
    ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax.grid(alpha=0.3)
    fig.legend(fontsize=8, loc="outside lower center", frameon=False)
    fig.savefig(path, dpi=100)
    return path


def _number(value: float, digits: int = 1) -> str:
    return "—" if math.isnan(value) else f"{value:.{digits}f}"


def _p(row: Row) -> str:
    return "baseline" if row.is_baseline else "—" if math.isnan(row.p_value) else f"{row.p_value:.3g}"


def markdown_table(rows: Sequence[Row], baseline: str | None) -> str:
    """The results table as aligned Markdown (numbers right-aligned)."""
    header = ["env", "algo", "srl_model", "budget (steps)", "seeds", "return (mean ± SE)", f"p vs {baseline}"]
    lines = [
        [
            r.group.env,
            r.group.algo_name + (f" ({', '.join(r.group.variant)})" if r.group.variant else ""),
            r.group.srl_model + (f" ({', '.join(r.group.srl_variant)})" if r.group.srl_variant else ""),
            f"{r.budget:,}",
            str(r.n),
            f"{_number(r.mean)} ± {_number(r.se)}",
            _p(r),
        ]
        for r in rows
    ]
    if baseline is None:
        header, lines = header[:-1], [line[:-1] for line in lines]
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
    right = {3, 4, 5, 6}

    def fmt(cells: Sequence[str]) -> str:
        padded = (c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if i in right else "-" * (w + 2) for i, w in enumerate(widths)) + "|"
    return "\n".join([fmt(header), rule, *(fmt(line) for line in lines)]) + "\n"


def csv_table(rows: Sequence[Row]) -> str:
    """The results table as CSV (full precision; empty cells for undefined values)."""
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(["env", "algo", "srl_model", "variant", "budget", "seeds", "mean", "se", "p_value", "baseline"])

    def cell(value: float) -> Any:
        return "" if math.isnan(value) else f"{value:.6g}"

    for r in rows:
        variant = "; ".join(r.group.variant + r.group.srl_variant)
        group = r.group
        stats = [cell(r.mean), cell(r.se), cell(r.p_value), int(r.is_baseline)]
        writer.writerow([group.env, group.algo_name, group.srl_model, variant, r.budget, r.n, *stats])
    return stream.getvalue()


@hydra.main(config_path=str(CONFIG_DIR), config_name="plot", version_base="1.3")
@one_line_errors("rlzoo.plot")
def main(cfg: DictConfig) -> None:
    """Hydra entrypoint (``key=value`` arguments only)."""
    plot(PlotSettings.from_config(cfg))


if __name__ == "__main__":
    main()
