"""The scores of the results tables, one object each: what a score reads (a ``metrics.json`` key, or the training
return), its column title, its CSV columns, its format, whether verdicts read it and whether a table shows it as a
percentage of a reference representation's. Every table (the plot's and the pipeline's Markdown and CSV, the HTML
page, W&B's table, the store's table) and the statistics behind them iterate :data:`SCORES`, so a new score is one
:func:`register_score` call::

    register_score(Score("distance", "final distance", key="test/final_distance", csv="distance_", verdict=False))
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rlzoo.errors import ConfigError


@dataclass(frozen=True)
class Score:
    """One score of a run, one value per seed in a table.

    :param name: what verdicts and notes call it (``greedy test``); its CSV verdict columns use it too.
    :param title: its column title (``test return``: ``test return (mean ± SE)``, ``test return IQM [95 % CI]``).
    :param key: the ``metrics.json`` key a finished run holds it under; None for the training return, the mean of a
        run's last training episodes at the table's budget (the score a table row is made of).
    :param csv: the prefix of its CSV columns (``test_``: ``test_mean``, ``test_iqm``, ...).
    :param percent: shown as a percentage (a rate in [0, 1]), else with one decimal.
    :param verdict: verdicts (:mod:`rlzoo.results.verdicts`) read it.
    :param relative: tables that name a reference representation show it as a percentage of that one's.
    """

    name: str
    title: str
    key: str | None
    csv: str
    percent: bool = False
    verdict: bool = True
    relative: bool = True

    def format(self, value: float) -> str:
        """One value as the tables print it (``—`` when undefined)."""
        if math.isnan(value):
            return "—"
        return f"{value:.0%}" if self.percent else f"{value:.1f}"

    def interval(self, point: float, ci: tuple[float, float]) -> str:
        """``point [low, high]`` (``—`` when undefined)."""
        if math.isnan(point):
            return "—"
        return f"{self.format(point)} [{self.format(ci[0])}, {self.format(ci[1])}]"


TRAIN = Score("train", "train return", None, "")
GREEDY = Score("greedy test", "test return", "test/mean_return", "test_")
SAMPLED = Score("sampled test", "sampled test return", "test_sampled/mean_return", "sampled_test_")
SUCCESS = Score("success", "test success", "test/success_rate", "success_", percent=True, verdict=False, relative=False)
SCORES: dict[str, Score] = {score.name: score for score in (TRAIN, GREEDY, SAMPLED, SUCCESS)}


def register_score(score: Score) -> Score:
    """Add ``score`` to every table (after the scores there are); a name, key or CSV prefix taken is refused."""
    for other in SCORES.values():
        if score.name == other.name or score.csv == other.csv or (score.key is not None and score.key == other.key):
            raise ConfigError(f"score {score.name!r}: its name, key or CSV prefix is score {other.name!r}'s")
    SCORES[score.name] = score
    return score


def metric_scores() -> list[Score]:
    """The scores read from ``metrics.json``, in table order."""
    return [score for score in SCORES.values() if score.key is not None]


def verdict_scores() -> list[Score]:
    """The scores verdicts read, in table order."""
    return [score for score in SCORES.values() if score.verdict]
