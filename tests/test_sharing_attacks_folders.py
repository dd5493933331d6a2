"""The folder half of the attack corpus (``test_sharing_attacks.py`` holds the run-dir half): the confined layer's
attack classes, planted in copies of the committed store's records (no training), through the entrypoints that read
folders someone else made: ``rlzoo.plot`` over a sweep, the pipeline's results step over its ``runs/``,
``rlzoo.records`` merge (a record as a source), table and rerun (a record in the store).

A table-driven generator makes the cases: a file attack (a symlinked, FIFO, sparse oversize, gzip-bombed, YAML-tagged
or non-finite file) planted in one record, or a folder attack (the output folder the entrypoint writes into is a
link to a folder outside). Each case goes through every entrypoint that reads what it plants: refused in one line
naming the file or folder, nothing outside changed, nothing written where the entrypoint writes, no wait on a FIFO,
no allocation beyond the caps. A rerun must refuse before it trains (its training step raises here if reached).
"""

from __future__ import annotations

import os
import re
import shutil
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from extras import require_extra
from rlzoo.errors import ConfigError

STORE = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "srl_benchmark_small"
RECORD = "ground_truth_seed0"
MONITOR = "monitor/0.monitor.csv.gz"
BOMB_BYTES = (512 << 20) + (8 << 20)  # zeros just over the CSV cap once decompressed (~0.5 MiB compressed)


@cache
def gzip_bomb() -> bytes:
    """A gzip stream of :data:`BOMB_BYTES` zeros, made in 1 MiB steps (never held whole)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: a gzip header
    chunk = bytes(1 << 20)
    parts = [packer.compress(chunk) for _ in range(BOMB_BYTES >> 20)]
    return b"".join([*parts, packer.flush()])


# --- file attacks: planted in a record copy (``run``), with the world folder for what lies outside --------------------


def _symlink(name: str) -> Callable[[Path, Path], None]:
    def plant(run: Path, world: Path) -> None:
        outside = world / f"outside-{Path(name).name}"
        shutil.move(run / name, outside)  # the real content, outside the folder read
        os.symlink(outside, run / name)

    return plant


def _fifo(name: str) -> Callable[[Path, Path], None]:
    def plant(run: Path, world: Path) -> None:
        (run / name).unlink()
        os.mkfifo(run / name)

    return plant


def _sparse(name: str, size: int) -> Callable[[Path, Path], None]:
    def plant(run: Path, world: Path) -> None:
        with (run / name).open("r+b") as stream:
            stream.truncate(size)

    return plant


def _bomb(run: Path, world: Path) -> None:
    (run / MONITOR).write_bytes(gzip_bomb())


def _yaml_tag(run: Path, world: Path) -> None:
    with (run / "config.yaml").open("a") as stream:
        stream.write(f"payload: !!python/object/apply:codecs.open [{str(world / 'ran')!r}, w]\n")


def _infinite_metrics(run: Path, world: Path) -> None:
    text = (run / "metrics.json").read_text()
    (run / "metrics.json").write_text(text.replace("{", '{"test/extra": Infinity,', 1))


# --- folder attacks: the entrypoint's output folder, a link to a folder outside --------------------------------------


def _output_link(where: str) -> Callable[[Path, Path], None]:
    def plant(run: Path, world: Path) -> None:
        (world / where).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(world / "outside", world / where)

    return plant


PLOT, PIPELINE, MERGE, TABLE, RERUN = "plot", "pipeline", "merge", "table", "rerun"
READERS = frozenset({PLOT, PIPELINE, MERGE, TABLE, RERUN})  # every entrypoint reads the record's files


@dataclass(frozen=True)
class Attack:
    """One case: what it plants, the refusal's regex, and the entrypoints that read what it plants."""

    name: str
    plant: Callable[[Path, Path], None]
    message: str
    through: frozenset[str] = READERS


SYMLINK = r"(is a symlink; a shared folder holds plain files only|: a symlink in a record)"
ATTACKS = {
    attack.name: attack
    for attack in [
        Attack("symlink-monitor", _symlink(MONITOR), SYMLINK),
        Attack("symlink-metrics", _symlink("metrics.json"), SYMLINK),
        Attack("symlink-config", _symlink("config.yaml"), SYMLINK),
        Attack("fifo-monitor", _fifo(MONITOR), r"0\.monitor\.csv\.gz is a FIFO"),
        Attack("fifo-metrics", _fifo("metrics.json"), r"metrics\.json is a FIFO"),
        Attack("sparse-monitor", _sparse(MONITOR, 20 << 30), r"0\.monitor\.csv\.gz holds 21474836480 bytes; at most"),
        Attack("sparse-config", _sparse("config.yaml", 8 << 20), r"config\.yaml holds 8388608 bytes; at most 4194304"),
        # a merge copies the gzipped bytes as they are (capped on disk); the readers that decompress cut it
        Attack("gzip-bomb", _bomb, r"0\.monitor\.csv\.gz holds more than 536870912 bytes", frozenset({PLOT})),
        Attack("yaml-tag", _yaml_tag, r"config\.yaml is not plain YAML \(line \d+\)"),
        Attack("infinite-metrics", _infinite_metrics, r"metrics\.json: not plain JSON \(with finite numbers",
               frozenset({MERGE, TABLE, RERUN})),  # a plot or pipeline shows a run's figures as they are
        Attack("plots-link", _output_link("sweep/plots"), r"sweep/plots is a symlink", frozenset({PLOT})),
        Attack("results-link", _output_link("pipe/results"), r"pipe/results is a symlink", frozenset({PIPELINE})),
        Attack("store-runs-link", _output_link("store/runs"), r"store/runs is a symlink", frozenset({MERGE})),
    ]
}  # fmt: skip


# --- the entrypoints: where each finds the record, and how it is called ----------------------------------------------

WHERE = {PLOT: "sweep", PIPELINE: "pipe/runs", MERGE: "source/runs", TABLE: "store/runs", RERUN: "store/runs"}


def _plot(world: Path) -> None:
    from rlzoo.plot import PlotSettings, plot

    plot(PlotSettings(dir=str(world / "sweep")), log=lambda _: None)


def _pipeline(world: Path) -> None:
    from rlzoo.pipeline.command import results
    from rlzoo.pipeline.spec import pipeline_spec

    overrides = ["experiment=srl_benchmark_small", "pipeline.verdict_of=null", f"pipeline.dir={world / 'pipe'}"]
    results(pipeline_spec([*overrides, "pipeline.report=false"]), lambda _: None)


def _merge(world: Path) -> None:
    from rlzoo.results.store_merge import merge_into_store

    merge_into_store([world / "source"], world / "store", log=lambda _: None)


def _table(world: Path) -> None:
    from rlzoo.records import RecordsSettings, run

    run(RecordsSettings(action="table", store=str(world / "store"), sources=[]))


def _rerun(world: Path) -> None:
    from rlzoo.pipeline.rerun import rerun_record

    rerun_record(world / "store", "ground_truth", 0, world / "rerun", log=lambda _: None)


ENTRYPOINTS: dict[str, Callable[[Path], None]] = {
    PLOT: _plot, PIPELINE: _pipeline, MERGE: _merge, TABLE: _table, RERUN: _rerun,
}  # fmt: skip


def world_for(entrypoint: str, world: Path) -> Path:
    """The folders ``entrypoint`` reads: the record copied where it finds runs (a store gets its ``store.yaml``);
    the copy."""
    if entrypoint == TABLE:
        require_extra("rliable", "stats")  # the store's table is rliable's IQMs and CIs
    run = world / WHERE[entrypoint] / RECORD
    shutil.copytree(STORE / "runs" / RECORD, run)
    if entrypoint in (TABLE, RERUN):
        shutil.copy(STORE / "store.yaml", world / "store" / "store.yaml")
    (world / "outside").mkdir()
    (world / "outside" / "victim.txt").write_text("kept\n")
    return run


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every entry under ``folder`` (links not followed): its size and modification time."""
    return {str(p.relative_to(folder)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in sorted(folder.rglob("*"))}


CASES = [(attack, entrypoint) for attack, case in ATTACKS.items() for entrypoint in sorted(case.through)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("attack", "entrypoint"), CASES)
def test_a_hostile_folder_is_refused_in_one_line_and_changes_nothing(
    attack: str, entrypoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = ATTACKS[attack]
    run = world_for(entrypoint, tmp_path)
    case.plant(run, tmp_path)
    monkeypatch.chdir(tmp_path)

    def trains(*_: Any, **__: Any) -> None:
        raise AssertionError("the rerun reached its training step: the store was not refused before it")

    monkeypatch.setattr("rlzoo.pipeline.rerun.run_pipeline", trains)
    monkeypatch.setattr("rlzoo.pipeline.rerun.plan_pipeline", trains)
    before = snapshot(tmp_path)
    with pytest.raises(ConfigError) as error:
        ENTRYPOINTS[entrypoint](tmp_path)
    message = str(error.value)
    assert "\n" not in message and re.search(case.message, message), message
    assert str(tmp_path) in message  # names the file or folder
    assert snapshot(tmp_path) == before  # nothing written: no plots/, results/, store, rerun folder
    assert (tmp_path / "outside" / "victim.txt").read_text() == "kept\n" and not (tmp_path / "ran").exists()


@pytest.mark.parametrize("entrypoint", sorted(ENTRYPOINTS))
def test_the_unplanted_record_goes_through(entrypoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The positive control: each entrypoint reads the same record, unplanted, without a refusal (a rerun as far as
    its training step)."""
    world_for(entrypoint, tmp_path)
    monkeypatch.chdir(tmp_path)

    def trains(*_: Any, **__: Any) -> None:
        raise ConfigError("stopped before training")

    monkeypatch.setattr("rlzoo.pipeline.rerun.plan_pipeline", trains)
    if entrypoint == RERUN:
        with pytest.raises(ConfigError, match="stopped before training"):
            _rerun(tmp_path)
    else:
        ENTRYPOINTS[entrypoint](tmp_path)
