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
    """The results table as CSV (full precision; empty cells for undefined values): per score of
    :data:`rlzoo.results.scores.SCORES` its columns (:func:`rlzoo.results.stats.csv_header`: the training return's
    are ``seeds``, ``mean``, ``se``, ``iqm`` ...), the IQMs and P(improvement) filled with ``stats``."""
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    header = ["env", "algo", "srl_model", "variant", "budget", "seed_values", "runs", "p_value", "baseline", "failed"]
    writer.writerow([*header, "unfinished", *results_stats.csv_header()])
    every = stats if stats is not None else results_stats.row_stats(rows, None, values_only=True)
    for r, stat in zip(rows, every, strict=True):
        group = r.group
        variant = "; ".join(group.variant + group.srl_variant)
        p_value = "" if math.isnan(r.p_value) else f"{r.p_value:.6g}"
        seeds, budget = " ".join(map(str, r.seeds)), r.budget if r.n else ""
        line = [group.env, group.algo_name, group.srl_model, variant, budget, seeds, len(group.runs), p_value,
                int(r.is_baseline), r.statuses.get(FAILED, 0), r.statuses.get(UNFINISHED, 0)]  # fmt: skip
        writer.writerow([*line, *results_stats.csv_cells(stat)])
    return stream.getvalue()
