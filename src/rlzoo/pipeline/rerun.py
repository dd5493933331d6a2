"""Re-run one stored record (``python -m rlzoo.records action=rerun``): the same pipeline, narrowed to its
representation and seed, from a fresh pipeline dir, with the store's encoder copied into its cache (trained again
when this checkout's settings name another encoder), then every score compared with the record's."""

from __future__ import annotations

import csv
import gzip
import io
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from rlzoo.errors import ConfigError
from rlzoo.pipeline.command import plan_pipeline, run_pipeline
from rlzoo.pipeline.spec import pipeline_spec
from rlzoo.provenance import source_commit
from rlzoo.reporting.store_table import read_store_info
from rlzoo.results.records import (
    ENCODERS,
    METRICS,
    Record,
    flat_values,
    make_record,
    record_name,
    store_records,
)
from rlzoo.rundir import RETURNS100, SAMPLED_TEST_RETURNS, TEST_RETURNS, RunDir

TIME_PREFIX = "time/"  # wall and CPU seconds: never equal twice
OWN_KEYS = ("pipeline.dir", "pipeline.report", "pipeline.sweep.")  # set by the rerun itself


def _stored(store: Path, representation: str, seed: int) -> Record:
    records = {r.name: r for r in store_records(store)}
    name = record_name(representation, seed)
    if name not in records:
        raise ConfigError(f"{store} holds no record {name}; it holds: {', '.join(sorted(records)) or 'none'}")
    return records[name]


def rerun_record(store: Path, representation: str, seed: int, folder: Path, log: Callable[[str], None] = print) -> str:
    """Train the stored run of ``representation`` and ``seed`` again in the fresh pipeline dir ``folder``; return
    one line: equal to the last digit, or what differs."""
    record = _stored(store, representation, seed)
    info = read_store_info(store)
    if folder.exists():
        raise ConfigError(f"dir={folder} exists; a rerun trains in a fresh folder (choose another dir=)")
    kept = [o for o in info.overrides if not o.startswith(OWN_KEYS)]
    spec = pipeline_spec([
        f"experiment={info.experiment}", *kept, f"pipeline.dir={folder}", "pipeline.report=false",
        f"pipeline.sweep.srl_model=[{representation}]", f"pipeline.sweep.seed=[{seed}]",
    ])  # fmt: skip
    if source_commit() != info.commit:
        log(f"rlzoo.records: this checkout is at {source_commit()[:12]}, the store's records at {info.commit[:12]}")
    plan = plan_pipeline(spec)
    encoder = record.info.get("encoder")
    for step in plan.encoders.values():
        if encoder is not None and step.folder.name == encoder["folder"]:
            copy_stored_encoders(store, step.folder.parent, [encoder["folder"]], log)
    run_pipeline(spec, log)
    (run,) = [RunDir(p) for p in sorted((folder / "runs").iterdir()) if (p / METRICS).is_file()]
    roots = (folder, *(step.folder.parent for step in plan.encoders.values()))  # where its encoder was trained
    return compare_records(record, make_record(run, {}, roots))


def copy_stored_encoders(
    store: Path, cache: Path, names: Sequence[str] | None = None, log: Callable[[str], None] = print
) -> list[str]:
    """Copy the store's encoders (``names``, or all of them) into a pipeline dir's encoder cache ``cache``
    (``<pipeline dir>/encoders``), each only where the cache lacks a folder of its name, so that the pipeline trains
    none of them again; return the names copied."""
    copied = []
    for name in names if names is not None else sorted(p.name for p in (store / ENCODERS).glob("*") if p.is_dir()):
        source, target = store / ENCODERS / name, cache / name
        if (source / "content_hash").is_file() and not target.exists():
            cache.mkdir(parents=True, exist_ok=True)
            shutil.copytree(source, target)
            copied.append(name)
            log(f"rlzoo.records: encoder {name} from the store")
    return copied


def _file(record: Record, name: str) -> bytes:
    if record.files:
        return record.files.get(name, b"")
    path = record.path / name
    return path.read_bytes() if path.is_file() else b""


def _episodes(record: Record) -> list[tuple[str, str]]:
    """(return, length) of every training episode, per env rank in order (Monitor's wall time left out)."""
    names = sorted(n for n in record.files) if record.files else sorted(
        str(p.relative_to(record.path)) for p in (record.path / "monitor").glob("*.gz"))  # fmt: skip
    rows: list[tuple[str, str]] = []
    for name in names:
        if name.startswith("monitor/"):
            text = gzip.decompress(_file(record, name)).decode()
            lines = [line for line in text.splitlines() if not line.startswith("#")]
            rows += [(row[0], row[1]) for row in csv.reader(io.StringIO("\n".join(lines[1:])))]
    return rows


def differences(stored: Record, new: Record) -> list[str]:
    """What differs between the scores of two records of one run (times apart): metrics, test and training
    episodes, the encoder's weights."""
    found = []
    old_metrics, new_metrics = (json.loads(_file(r, METRICS) or b"{}") for r in (stored, new))
    for key in sorted(set(old_metrics) | set(new_metrics)):
        if not key.startswith(TIME_PREFIX) and old_metrics.get(key) != new_metrics.get(key):
            found.append(f"{key} {old_metrics.get(key)} → {new_metrics.get(key)}")
    for name in (TEST_RETURNS, SAMPLED_TEST_RETURNS, RETURNS100):
        if _file(stored, name) != _file(new, name):
            found.append(f"{name} differs")
    if _episodes(stored) != _episodes(new):
        found.append("the training episodes differ")
    if stored.encoder_hash != new.encoder_hash:
        found.append(f"encoder content hash {str(stored.encoder_hash)[:12]} → {str(new.encoder_hash)[:12]}")
    return found


def config_differences(stored: Record, new: Record) -> list[str]:
    """The config keys whose values differ (a key one commit has and the other lacks shows as absent)."""
    old, now = flat_values(stored.config), flat_values(new.config)
    keys = sorted(set(old) | set(now))
    return [
        f"{k} ({old.get(k, '<absent>')} → {now.get(k, '<absent>')})"
        for k in keys
        if repr(old.get(k, "<absent>")) != repr(now.get(k, "<absent>"))
    ]


def compare_records(stored: Record, new: Record) -> str:
    """One line: the rerun equals the record to the last digit, or the list of what differs."""
    found, configs = differences(stored, new), config_differences(stored, new)
    config = f"; its config differs in {', '.join(configs)}" if configs else ""
    if found:
        return f"rlzoo.records: {stored.name} differs from its record: {'; '.join(found)}{config}"
    episodes = len(_episodes(stored))
    return (
        f"rlzoo.records: {stored.name} equals its record to the last digit ({episodes} training episodes, the "
        f"metrics, the test episodes, the encoder){config}"
    )
