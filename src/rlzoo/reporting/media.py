"""What a report shows beside the table: a replay of the best seed of each group, and the encoders' metrics."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlzoo.confined import read_bytes, read_json
from rlzoo.errors import ConfigError, Refused
from rlzoo.playback.video import gif_bytes
from rlzoo.results.comparison import Row
from rlzoo.results.runs import RunResult
from rlzoo.rundir import FINAL, LATEST
from rlzoo.srl.encoder import METADATA as ENCODER_METADATA
from rlzoo.training.safe_load import first_line

ENCODER_METRICS = "metrics.json"


@dataclass(frozen=True)
class Replay:
    """One deterministic test episode of a run, as an animated GIF."""

    run: RunResult
    score: float
    episode_return: float
    gif: bytes


def best_run(row: Row, last: int = 100) -> tuple[RunResult, float] | None:
    """The scored run of ``row``'s group with the best score at the row's budget (None when none is scored)."""
    scored = [
        (run, run.score(row.budget, last)) for run in row.group.scored_runs if row.n and run.reached >= row.budget
    ]
    scored = [(run, score) for run, score in scored if np.isfinite(score)]
    return max(scored, key=lambda pair: pair[1]) if scored else None


def replay(run: RunResult, score: float, seed: int = 0, *, trusted: bool = False) -> Replay | None:
    """Replay one deterministic episode of ``run``'s latest model (its final one once finished), recording frames,
    as the run's kind replays (:func:`rlzoo.training.kind.kind_of_run`).

    :return: None when the run has no model yet or its env renders no frames.
    :raise ConfigError: the run is refused untrusted (:class:`~rlzoo.errors.Refused`), or its replay fails: one line
        naming it (a report never drops a run's replay quietly).
    """
    from rlzoo.kinds import KIND_PACKAGES  # noqa: F401  (every kind of run, registered)
    from rlzoo.training.kind import ReplayRequest, kind_of_run

    try:
        kind, run_dir = kind_of_run(run.path)
        finished = run_dir.is_finished()
        if not (finished or run_dir.checkpoints()):
            return None  # still starting: no model yet
        checkpoint = FINAL if finished else LATEST
        replayed = kind.replay(run_dir, ReplayRequest(checkpoint, 1, seed=seed, frames=True, trusted=trusted))
    except Refused as error:
        raise ConfigError(f"the replay of run {run.path} was refused: {error}") from None
    except Exception as error:  # whatever the replay raised: the report fails, naming the run
        raise ConfigError(f"the replay of run {run.path} failed: {first_line(error)}") from None
    if not replayed.frames:
        return None
    return Replay(run, score, replayed.returns[0], gif_bytes(replayed.frames))


def best_replays(rows: Sequence[Row], last: int = 100, *, trusted: bool = False) -> list[Replay]:
    """A replay of the best run of each group (at the largest budget it has a row for); ``trusted``: see
    :func:`rlzoo.playback.loading.load_run` (a run refused untrusted fails the report, in one line naming it)."""
    chosen: dict[int, Row] = {}
    for row in rows:
        if row.n and (id(row.group) not in chosen or row.budget > chosen[id(row.group)].budget):
            chosen[id(row.group)] = row
    replays = []
    for row in chosen.values():
        best = best_run(row, last)
        if best is not None and (made := replay(*best, trusted=trusted)) is not None:
            replays.append(made)
    return replays


@dataclass(frozen=True)
class EncoderInfo:
    """An encoder folder's description (``encoder.json``) and metrics (``metrics.json``)."""

    path: Path
    metadata: dict[str, Any]
    metrics: dict[str, float]
    states_png: bytes | None = field(default=None, repr=False)

    @property
    def method(self) -> str:
        return str(self.metadata.get("method", "?"))


def encoder_folders(results: Iterable[RunResult], folder: Path) -> list[Path]:
    """Encoders the runs used (``srl_model.checkpoint``) and any others under ``folder``, each once.

    Encoder folders are named by their content (method, env, config hash): runs of a copied pipeline dir still name
    the original's folders, so a folder named as one under ``folder`` is that one, not another encoder."""
    found = {p.parent.name: p.parent.resolve() for p in sorted(folder.glob(f"**/{ENCODER_METADATA}"))}
    for result in results:
        checkpoint = result.config.srl_model.get("checkpoint")
        used = Path(str(checkpoint)) if checkpoint else None
        if used is not None and (used / ENCODER_METADATA).is_file():
            found.setdefault(used.name, used.resolve())
    return sorted(found.values())


IMAGE_CAP = 64 << 20  # an encoder's states.png in a report


def read_encoder(path: Path) -> EncoderInfo:
    """The description and metrics of an encoder folder (metrics empty when it has none)."""
    metadata = read_json(path, ENCODER_METADATA)
    metrics = read_json(path, ENCODER_METRICS) if (path / ENCODER_METRICS).is_file() else {}
    states = path / "states.png"
    return EncoderInfo(path, metadata, metrics, read_bytes(path, states.name, IMAGE_CAP) if states.is_file() else None)
