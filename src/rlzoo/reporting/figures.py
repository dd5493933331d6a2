"""Figures and tables of compared runs, shared by ``rlzoo.plot``, ``rlzoo.report`` and the pipeline: learning curves
(one figure per env), the results table as Markdown and CSV."""

from __future__ import annotations

import csv
import io
import math
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter

from rlzoo.results import stats as results_stats
from rlzoo.results.comparison import Row, table_cells
from rlzoo.results.runs import FAILED, UNFINISHED, Group, learning_curve
from rlzoo.results.stats import RowStats

X_AXES = {"timesteps": "agent steps (summed over envs)", "episodes": "training episodes"}


def file_name(env_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", env_id)


def plot_env(
    env: str,
    groups: Sequence[Group],
    path: Path,
    x: str = "timesteps",
    smooth: int = 100,
    budgets: Sequence[int] | None = None,
) -> Path:
    """One figure: a line (mean) and a band (± SE) over seeds per group of ``env`` (groups without a scored run are
    left out).

    :param x: ``timesteps`` or ``episodes``; :param smooth: episodes of the moving average; :param budgets: drawn as
        dotted lines.
    """
    fig = Figure(figsize=(8, 5), layout="constrained")
    ax = fig.subplots()
    for group in (g for g in groups if g.scored_runs):
        curve = learning_curve(group, x, smooth)
        seeds = len({run.seed for run in group.scored_runs})
        label = textwrap.fill(f"{group.label} ({seeds} seed{'s' * (seeds > 1)})", 110, subsequent_indent="    ")
        (line,) = ax.plot(curve.x, curve.mean, lw=1.8, label=label)
        ax.fill_between(curve.x, curve.mean - curve.se, curve.mean + curve.se, color=line.get_color(), alpha=0.2)
    if budgets and x == "timesteps":
        for budget in budgets:
            ax.axvline(budget, color="grey", ls=":", lw=1)
    unfinished = sum(r.status == UNFINISHED for g in groups for r in g.runs)
    failed = sum(r.failed for g in groups for r in g.runs)
    note = f" ({unfinished} run(s) unfinished)" if unfinished else ""
    note += f" ({failed} failed run(s) not shown)" if failed else ""
    ax.set_title(
        f"{env}{note}\nreturn averaged over the last {smooth} training episodes; mean ± SE over seeds",
        fontsize=10,
    )
    ax.set(xlabel=X_AXES[x], ylabel="episode return")
    ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax.grid(alpha=0.3)
    fig.legend(fontsize=8, loc="outside lower center", frameon=False)
    fig.savefig(path, dpi=100)
    return path


def markdown_table(
    rows: Sequence[Row], baseline: str | None, stats: Sequence[RowStats] | None = None, reference: str | None = None
) -> str:
    """The results table as aligned Markdown (numbers right-aligned)."""
    header, lines = table_cells(rows, baseline, stats, reference)
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
    right = {3, 4, *range(6, len(header))}

    def fmt(cells: Sequence[str]) -> str:
        padded = (c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))
        return "| " + " | ".join(padded) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if i in right else "-" * (w + 2) for i, w in enumerate(widths)) + "|"
    return "\n".join([fmt(header), rule, *(fmt(line) for line in lines)]) + "\n"


def csv_table(rows: Sequence[Row], stats: Sequence[RowStats] | None = None) -> str:
    """The results table as CSV (full precision; empty cells for undefined values); ``mean`` and ``se`` are of the
    train return, and with ``stats`` the test return, IQM and P(improvement) columns follow."""
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    header = ["env", "algo", "srl_model", "variant", "budget", "seeds", "seed_values", "runs", "mean", "se"]
    extra = list(results_stats.CSV_HEADER) if stats is not None else []
    writer.writerow([*header, "p_value", "baseline", "failed", "unfinished", "success_rate", *extra])

    def cell(value: float) -> Any:
        return "" if math.isnan(value) else f"{value:.6g}"

    for i, r in enumerate(rows):
        variant = "; ".join(r.group.variant + r.group.srl_variant)
        group = r.group
        seeds = " ".join(map(str, r.seeds))
        values = [cell(r.mean), cell(r.se), cell(r.p_value), int(r.is_baseline)]
        counts = [r.statuses.get(FAILED, 0), r.statuses.get(UNFINISHED, 0), cell(group.success_rate)]
        budget = r.budget if r.n else ""
        line = [group.env, group.algo_name, group.srl_model, variant, budget, r.n, seeds, len(group.runs), *values]
        writer.writerow([*line, *counts, *(results_stats.csv_cells(stats[i]) if stats is not None else [])])
    return stream.getvalue()
