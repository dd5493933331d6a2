"""The results table and figures in Weights & Biases, beside the runs they compare: one ``results`` run in the sweep's
W&B group (the group its jobs logged to), holding the table as a ``wandb.Table`` and each figure as a
``wandb.Image``. Offline unless ``mode=online``, like the runs (``wandb sync <dir>/wandb/offline-run-*`` uploads it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlzoo.results.comparison import Comparison, table_cells
from rlzoo.results.stats import row_stats, shown_scores


def table_data(comparison: Comparison) -> tuple[list[str], list[list[Any]]]:
    """The table's text cells, with its numbers again as numeric columns for W&B's charts: per score the table shows
    (:func:`rlzoo.results.stats.shown_scores`) its mean and SE over seeds (``mean``, ``se``, ``test_mean`` ...),
    then the p-value."""
    stats = row_stats(comparison.rows, None, values_only=True)
    shown = shown_scores(stats)
    header, lines = table_cells(comparison.rows, comparison.baseline)

    def number(value: float) -> float | None:
        return None if math.isnan(value) else value

    columns = [f"{score.csv}{name}" for score in shown for name in ("mean", "se")]
    numbers = [
        [*(number(v) for score in shown for v in (stat.of(score).mean, stat.of(score).se)), number(r.p_value)]
        for r, stat in zip(comparison.rows, stats, strict=True)
    ]
    return [*header, *columns, "p_value"], [[*line, *extra] for line, extra in zip(lines, numbers, strict=True)]


def log_results(
    comparison: Comparison, figures: Sequence[Path], settings: dict[str, Any], group: str, folder: Path
) -> Path:
    """Log the table and ``figures`` as one W&B run named ``results`` in ``group``; return its local run folder.

    :param settings: ``logger.wandb``'s keys (project, entity, mode, tags); its own group is replaced by ``group``.
    :param folder: where the run's files go (``<folder>/wandb/``).
    """
    import wandb

    run = wandb.init(
        project=settings.get("project", "rlzoo"),
        entity=settings.get("entity"),
        group=group,
        name="results",
        job_type="results",
        tags=list(settings.get("tags") or []),
        mode=settings.get("mode", "offline"),
        dir=str(folder),
        config={"baseline": comparison.baseline, "runs": len(comparison.results)},
        reinit="create_new",
    )
    try:
        columns, data = table_data(comparison)
        images = {f"curves/{path.stem}": wandb.Image(str(path)) for path in figures}
        run.log({"results": wandb.Table(columns=list[str | int](columns), data=data), **images})
        return Path(run.dir).parent
    finally:
        run.finish()
