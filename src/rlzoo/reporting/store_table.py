"""The table of a store of result records (:mod:`rlzoo.results.records`): what ``docs/results.md`` shows, rebuilt
from the store alone.

A store's ``store.yaml`` says what it holds: the experiment, the commit every record was trained at, the verdicts'
reference, and the published figures printed beside the measured ones (``paper``). ``shards.csv`` lists how the
records were made (one row per shard: seeds, CPU and wall seconds from ``/usr/bin/time -v``, load average).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from rlzoo.confined import YAML_CAP, bare_name, read_json, read_text, stream_lines
from rlzoo.errors import ConfigError
from rlzoo.provenance import platform_label
from rlzoo.results.comparison import Row, compare
from rlzoo.results.efficiency import EfficiencyCurve, efficiency_curves, plot_efficiency
from rlzoo.results.records import ENCODERS, RUNS, Record, check_records, store_records
from rlzoo.results.scores import GREEDY, Score, verdict_scores
from rlzoo.results.stats import (
    IQM_TITLE,
    STATS_INSTALL,
    RowStats,
    plot_profiles,
    rliable_installed,
    row_stats,
    shown_scores,
)
from rlzoo.schema import parse

STORE_FILE = "store.yaml"
SHARDS = "shards.csv"
BEGIN = "<!-- store table: begin (written from the store by rlzoo.records: edit the store, not this table) -->"
END = "<!-- store table: end -->"
PROFILE = "srl_benchmark_small_profile.png"
EFFICIENCY = "srl_benchmark_small_efficiency.png"
EVERY = 5  # the efficiency table shows every 5th step of the curves


@dataclass(frozen=True)
class StoreInfo:
    """``store.yaml``: what a store holds and what its table prints beside the measured figures."""

    experiment: str
    commit: str
    verdict_of: str
    overrides: list[str] = field(default_factory=list)
    relative_to: str = "ground_truth"  # the scores' IQMs are also given as a percentage of this representation's
    paper: dict[str, dict[str, str]] = field(default_factory=dict)


def read_store_info(store: Path) -> StoreInfo:
    path = store / STORE_FILE
    try:
        values = yaml.safe_load(read_text(store, STORE_FILE, YAML_CAP))
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"{path}: not a readable store description ({type(error).__name__})") from None
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: holds no mapping")
    return parse(StoreInfo, values)


def missing_pairs(
    records: Sequence[Record], representations: Sequence[str], seeds: Sequence[int]
) -> list[tuple[str, int]]:
    """The (representation, seed) pairs of the sweep that the store lacks, in sweep order."""
    have = {(r.representation, r.seed) for r in records}
    return [(m, s) for m in representations for s in seeds if (m, s) not in have]


def missing_line(missing: Sequence[tuple[str, int]]) -> str:
    """``none``, or per representation the seeds it lacks: ``raw_pixels seeds 0, 1; srl_splits seed 3``."""
    by_representation: dict[str, list[int]] = {}
    for representation, seed in missing:
        by_representation.setdefault(representation, []).append(seed)
    parts = [
        f"{name} seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"
        for name, seeds in by_representation.items()
    ]
    return "; ".join(parts) or "none"


def _relative(stats: RowStats, shown: Sequence[Score], is_reference: bool) -> str:
    """Per score, the row's IQM as a percentage of the reference representation's, with its CI."""
    if is_reference:
        return "100"
    parts = []
    for score in shown:
        of = stats.of(score)
        low, high = of.relative_ci
        parts.append("—" if math.isnan(of.relative) else f"{of.relative:.1f} [{low:.1f}, {high:.1f}]")
    return "<br>".join(parts)


def _versus(stats: RowStats) -> str:
    """P(reference > row) per score with its CI, and its verdict."""
    if stats.is_reference:
        return "reference"
    versus = stats.versus
    if versus is None or not versus.defined:
        return "—"
    parts = []
    for point, (low, high), verdict in zip(versus.points, versus.intervals, versus.verdicts, strict=True):
        parts.append("—" if math.isnan(point) else f"{point:.2f} [{low:.2f}, {high:.2f}] {verdict}")
    return "<br>".join(parts)


def _gtc(store: Path, records: Sequence[Record], representation: str) -> str:
    """GTC_mean of the representation's encoder before / after whitening (from the stored encoder's metrics)."""
    folders = {r.info["encoder"]["folder"] for r in records if r.representation == representation and r.encoder_hash}
    if not folders:
        return "1" if representation == "ground_truth" else "—"
    folder = store / ENCODERS / bare_name(folders.pop(), "an encoder's folder")
    try:
        metrics = read_json(folder, "metrics.json")
    except OSError as error:
        raise ConfigError(
            f"{store}: the encoder {folder.name} of {representation}'s records is missing ({error.strerror}); merge "
            "it with its records (its folder under encoders/)"
        ) from None
    before, after = metrics.get("srl/unwhitened/gtc_mean", math.nan), metrics.get("srl/gtc_mean", math.nan)
    return f"{float(before):.2f} / {float(after):.2f}"


def _shards(store: Path) -> list[dict[str, str]]:
    path = store / SHARDS
    if not path.is_file():
        return []
    return list(csv.DictReader(stream_lines(store, SHARDS)))


def store_table(store: Path, representations: Sequence[str], seeds: Sequence[int], figures: Path | None) -> str:
    """The markdown of the store's table (and, with ``figures``, its performance profile and sample-efficiency
    curves written there).

    :param representations: the experiment's srl_models, in the order of its sweep; ``seeds`` likewise.
    """
    info = read_store_info(store)
    records = store_records(store)
    check_records(records)
    if not records:
        raise ConfigError(f"{store}: holds no records yet ({RUNS}/ is empty or missing)")
    for representation in sorted({r.representation for r in records}):
        _gtc(store, records, representation)  # a missing encoder: one line, before the statistics
    if not rliable_installed():
        raise ConfigError(f"the store's table needs rliable (its IQMs, CIs and curves): {STATS_INSTALL}")
    comparison = compare(store / RUNS, baseline=None)
    stats = row_stats(comparison.rows, None, reference=info.verdict_of, relative_to=info.relative_to)
    curves = efficiency_curves(comparison.rows)
    if figures is not None:
        for path in plot_profiles(comparison.rows, figures):
            path.replace(figures / PROFILE)
        budget = max(row.budget for row in comparison.rows)
        plot_efficiency(curves, figures / EFFICIENCY, f"{comparison.rows[0].group.env} to {budget:,} steps")
    lines = _lines(store, info, records, comparison.rows, stats, representations, seeds)
    return "\n".join([*lines, *_efficiency_lines(curves), "", *_shard_lines(store)])


def _lines(
    store: Path,
    info: StoreInfo,
    records: Sequence[Record],
    rows: Sequence[Row],
    stats: Sequence[RowStats],
    representations: Sequence[str],
    seeds: Sequence[int],
) -> list[str]:
    missing = missing_pairs(records, representations, seeds)
    commits = sorted({str(r.info.get("commit", "unknown"))[:12] for r in records})
    cpu = sum(float(r.info["cpu_seconds"]) for r in records)
    shown = shown_scores(stats)
    relative = [score for score in shown if score.relative]
    judged = " / ".join(score.name for score in verdict_scores())
    lines = [
        f"Records: {len(records)} of {len(representations) * len(seeds)} (representations x seeds "
        f"{seeds[0]} to {seeds[-1]}), trained at commit {', '.join(commits)}; their runs' CPU time {cpu:,.0f} s.",
        f"Missing: {missing_line(missing)}.",
        f"Platforms: {platforms_line(records)}.",
        "",
        f"| srl_model | seeds | {' | '.join(f'{score.title} {IQM_TITLE}' for score in shown)} "
        f"| IQM as % of {info.relative_to}'s [95 % CI]: {' / '.join(score.name for score in relative)} "
        f"| P({info.verdict_of} > row) [95 % CI] and verdict: {judged} "
        "| GTC_mean before / after whitening | paper: last-100 (Table 1) | paper: GTC_mean (Table 2) |",
        f"|---|---:|{'---:|' * len(shown)}---:|---|---:|---:|---:|",
    ]
    order = sorted(zip(rows, stats, strict=True), key=lambda pair: -_sort_key(pair[1]))
    for row, stat in order:
        name = row.group.srl_model
        paper = info.paper.get(name, {})
        iqms = " | ".join(score.interval(stat.of(score).iqm, stat.of(score).iqm_ci) for score in shown)
        lines.append(
            f"| {name} | {row.n} | {iqms} | {_relative(stat, relative, name == info.relative_to)} | {_versus(stat)} | "
            f"{_gtc(store, records, name)} | {paper.get('last100', '—')} | {paper.get('gtc', '—')} |"
        )
    return lines


def _efficiency_lines(curves: Sequence[EfficiencyCurve]) -> list[str]:
    """The sample-efficiency curves at every :data:`EVERY`-th step: IQM of the training return [95 % CI]."""
    if not curves:
        return []
    steps = curves[0].steps[EVERY - 1 :: EVERY]
    lines = [
        "",
        f"Sample efficiency ([{EFFICIENCY}]({EFFICIENCY})): train return IQM [95 % CI] at each step.",
        "",
        f"| srl_model | {' | '.join(f'{step:,}' for step in steps)} |",
        f"|---|{'---:|' * len(steps)}",
    ]
    for curve in sorted(curves, key=lambda c: -c.iqm[-1]):
        cells = (
            f"{curve.iqm[i]:.1f} [{curve.low[i]:.1f}, {curve.high[i]:.1f}]"
            for i in range(EVERY - 1, len(curve.steps), EVERY)
        )
        lines.append(f"| {curve.label} | {' | '.join(cells)} |")
    return lines


def platforms_line(records: Sequence[Record]) -> str:
    """The platforms the records ran on (:func:`rlzoo.provenance.platform_label`), each with its seeds per
    representation count, most records first."""
    counts: dict[str, int] = {}
    for record in records:
        label = platform_label(record.info.get("platform"))
        counts[label] = counts.get(label, 0) + 1
    parts = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return "; ".join(f"{label}: {count} record{'s' if count != 1 else ''}" for label, count in parts)


def _sort_key(stat: RowStats) -> float:
    iqm = stat.of(GREEDY).iqm
    return -math.inf if math.isnan(iqm) else iqm


def _shard_lines(store: Path) -> list[str]:
    shards = _shards(store)
    if not shards:
        return []
    lines = ["| shard | seeds | records | CPU s (user + system) | wall | load average (1 min: mean, max) | finished |",
             "|---|---|---:|---:|---:|---|---|"]  # fmt: skip
    for shard in shards:
        lines.append(
            f"| {shard['shard']} | {shard['seeds']} | {shard['records']} | {_seconds(shard['cpu_seconds'])} | "
            f"{_seconds(shard['wall_seconds'], 60, ' min')} | {_load(shard)} | "
            f"{shard['finished']} |"
        )
    return lines


def _load(shard: dict[str, str]) -> str:
    """A shard's load average (mean, max), ``—`` where it was not measured."""
    mean, top = (shard.get(key) or "" for key in ("load_mean", "load_max"))
    return f"{mean}, {top}" if mean and top else "—"


def _seconds(value: str, unit: float = 1.0, suffix: str = "") -> str:
    """A shard's figure in ``unit``s (``—`` where it was not measured)."""
    return f"{float(value) / unit:,.0f}{suffix}" if value else "—"


def replace_section(text: str, section: str, where: str) -> str:
    """``text`` with the part between :data:`BEGIN` and :data:`END` replaced by ``section``."""
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise ConfigError(f"{where}: needs the two marker lines of the store table once each ({BEGIN} ... {END})")
    head, rest = text.split(BEGIN)
    _, tail = rest.split(END)
    return f"{head}{BEGIN}\n{section}\n{END}{tail}"


def section_of(text: str) -> str:
    """The part of ``text`` between the markers (what :func:`replace_section` put there)."""
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        return ""
    return text.split(BEGIN)[1].split(END)[0].strip("\n")
