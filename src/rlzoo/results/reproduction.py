"""What a rerun of a stored record means (``rlzoo.records action=rerun``): "to the last digit" is promised on the
platform that made the record (the same CPU model, the kernels torch dispatches, the library versions); elsewhere a
rerun's floats may differ by an ulp that compounds, and the rerun is judged by where its scores fall among the stored
seeds of its representation.

- equal to the last digit: exit 0;
- different on the same platform: a broken reproduction, exit 1, naming the first differing training episode and
  each differing score;
- different on another platform (or a record that names none): what differs in the platforms, the first differing
  training episode, and each differing score against the range of the stored seeds; exit 0 inside that range, 1
  outside.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rlzoo.confined import CSV_CAP, lines_of, parse_json, read_bytes, stream_lines
from rlzoo.provenance import platform_difference
from rlzoo.results.records import METRICS, Record

TIME_PREFIX = "time/"  # wall and CPU seconds: never equal twice
SCORE_SUFFIXES = ("mean_return", "success_rate")  # the scores a table reads, ranged over the stored seeds
MONITOR_PREFIX, MONITOR_SUFFIX = "monitor/", ".monitor.csv.gz"


@dataclass(frozen=True)
class Outcome:
    """The verdict of a rerun: one line, and whether it failed (exit 1)."""

    line: str
    failed: bool


def file_of(record: Record, name: str) -> bytes:
    """The bytes of ``name`` in ``record`` (in memory, or in its folder); empty where it has none."""
    if record.files:
        return record.files.get(name, b"")
    return read_bytes(record.path, name, CSV_CAP) if os.path.lexists(record.path / name) else b""


def metrics_of(record: Record) -> dict[str, Any]:
    values = parse_json(file_of(record, METRICS) or b"{}", record.path / METRICS)
    return values if isinstance(values, dict) else {}


def _monitor_names(record: Record) -> list[str]:
    if record.files:
        names = [n for n in record.files if n.startswith(MONITOR_PREFIX)]
    else:
        names = [f"{MONITOR_PREFIX}{p.name}" for p in (record.path / "monitor").glob(f"*{MONITOR_SUFFIX}")]
    return sorted(names, key=_rank)


def _rank(name: str) -> tuple[int, str]:
    stem = name[len(MONITOR_PREFIX) :].split(".")[0]
    return (int(stem), name) if stem.isdigit() else (-1, name)


def episodes_by_env(record: Record) -> dict[str, list[tuple[str, str]]]:
    """(return, length) of every training episode of each env (its monitor file's name), in order; Monitor's wall
    time left out."""
    found: dict[str, list[tuple[str, str]]] = {}
    for name in _monitor_names(record):
        lines = [line for line in _monitor_lines(record, name) if not line.startswith("#")]
        rows = csv.reader(io.StringIO("\n".join(lines[1:])))
        found[name[len(MONITOR_PREFIX) :].split(".")[0]] = [(row[0], row[1]) for row in rows if len(row) >= 2]
    return found


def _monitor_lines(record: Record, name: str) -> list[str]:
    """The lines of a monitor file of ``record``, from memory or its folder, within the CSV caps after
    decompression (a gzip bomb is one line)."""
    if record.files:
        lines = lines_of(record.files.get(name, b""), record.path / name)
    else:
        lines = stream_lines(record.path, name)
    return [line.rstrip("\r\n") for line in lines]


def first_differing_episode(stored: Record, new: Record) -> str | None:
    """``env <rank>, episode <index>`` of the earliest training episode (by index, then env) that differs, or None
    when every env's episodes are equal."""
    old, now = episodes_by_env(stored), episodes_by_env(new)
    earliest: tuple[int, int, str] | None = None
    for order, env in enumerate(sorted(set(old) | set(now), key=lambda e: _rank(f"{MONITOR_PREFIX}{e}"))):
        a, b = old.get(env, []), now.get(env, [])
        index = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
        if index is None and len(a) != len(b):
            index = min(len(a), len(b))
        if index is not None and (earliest is None or (index, order) < earliest[:2]):
            earliest = (index, order, env)
    return None if earliest is None else f"env {earliest[2]}, episode {earliest[0]}"


def differing_scores(stored: Record, new: Record) -> list[str]:
    """The metrics (times apart) whose values differ, in key order."""
    old, now = metrics_of(stored), metrics_of(new)
    return [k for k in sorted(set(old) | set(now)) if not k.startswith(TIME_PREFIX) and old.get(k) != now.get(k)]


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan


def score_ranges(key: str, records: Sequence[Record]) -> tuple[float, float, int]:
    """(min, max, count) of ``key`` over the finite values of ``records``' metrics."""
    values = [v for v in (_number(metrics_of(r).get(key)) for r in records) if math.isfinite(v)]
    return (min(values), max(values), len(values)) if values else (math.nan, math.nan, 0)


def _ranged(key: str, value: float, seeds: Sequence[Record]) -> tuple[str, bool]:
    """``key value: within|outside the N stored seeds' range lo to hi`` and whether it lies inside."""
    low, high, count = score_ranges(key, seeds)
    inside = count > 0 and low <= value <= high
    where = "within" if inside else "outside"
    return f"{key} {value:.6g}: {where} the {count} stored seeds' range {low:.6g} to {high:.6g}", inside


def judge(stored: Record, new: Record, seeds: Sequence[Record], differences: Sequence[str], configs: str) -> Outcome:
    """The verdict of a rerun ``new`` of ``stored``, given what :func:`rlzoo.pipeline.rerun.differences` found and
    the stored records of its representation (``seeds``, ``stored`` among them)."""
    head = f"rlzoo.records: {stored.name}"
    if not differences:
        episodes = sum(len(rows) for rows in episodes_by_env(stored).values())
        return Outcome(
            f"{head} equals its record to the last digit ({episodes} training episodes, the metrics, the test "
            f"episodes, the encoder){configs}",
            failed=False,
        )
    episode = first_differing_episode(stored, new) or "none (the training episodes are equal)"
    platforms = platform_difference(stored.info.get("platform"), new.info.get("platform"))
    if not platforms:
        return Outcome(
            f"{head} differs from its record on the same platform, a broken reproduction: first differing "
            f"training episode {episode}; {'; '.join(differences)}{configs}",
            failed=True,
        )
    now = metrics_of(new)
    ranged = [
        _ranged(k, _number(now.get(k)), seeds) for k in differing_scores(stored, new) if k.endswith(SCORE_SUFFIXES)
    ]
    inside = all(ok for _, ok in ranged)
    scores = "; ".join(text for text, _ in ranged) or "no score differs"
    return Outcome(
        f"{head} differs from its record on another platform ({', '.join(platforms)}): first differing training "
        f"episode {episode}; {scores}{configs}",
        failed=not inside,
    )
