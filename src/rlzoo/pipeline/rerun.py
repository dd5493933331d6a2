"""Re-run one stored record (``python -m rlzoo.records action=rerun``): the same pipeline, narrowed to its
representation and seed, from a fresh pipeline dir, with the store's encoder copied into its cache (trained again
when this checkout's settings name another encoder), then every score compared with the record's and judged by
:mod:`rlzoo.results.reproduction` (equal; broken on the same platform; on another platform, within the stored seeds'
range or not)."""

from __future__ import annotations

import difflib
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath

from rlzoo.confined import bare_name, output_folder, read_bytes, write_bytes
from rlzoo.errors import ConfigError
from rlzoo.pipeline.command import plan_pipeline, run_pipeline
from rlzoo.pipeline.spec import pipeline_spec
from rlzoo.pipeline.store_overrides import store_overrides
from rlzoo.provenance import source_commit
from rlzoo.reporting.store_table import STORE_FILE, read_store_info
from rlzoo.results.records import (
    ENCODER_FILES,
    ENCODERS,
    METRICS,
    Record,
    config_differences,
    copied_record,
    make_record,
    record_name,
    store_records,
)
from rlzoo.results.reproduction import Outcome, differing_scores, episodes_by_env, file_of, judge, metrics_of
from rlzoo.results.store_merge import CONTENT_HASH
from rlzoo.rundir import RETURNS100, SAMPLED_TEST_RETURNS, TEST_RETURNS, RunDir

ENCODER_CAP = 1 << 30  # one file of a stored encoder (its weights), as a merge copies it
OWN_KEYS = ("pipeline.dir", "pipeline.report", "pipeline.sweep.")  # set by the rerun itself


def _stored(store: Path, representation: str, seed: int) -> Record:
    return stored_record(store_records(store), store, representation, seed)


def stored_record(records: Sequence[Record], store: Path, representation: str, seed: int) -> Record:
    """The record of ``representation`` and ``seed`` among a store's ``records``.

    :raise ConfigError: one line naming the store's representations (close ones suggested), or the seeds it holds of
        ``representation``.
    """
    name = record_name(representation, seed)
    found = [r for r in records if r.name == name]
    if found:
        return found[0]
    seeds: dict[str, list[int]] = {}
    for record in records:
        seeds.setdefault(record.representation, []).append(record.seed)
    if representation in seeds:
        held = ", ".join(str(s) for s in sorted(seeds[representation]))
        raise ConfigError(f"seed={seed}: {store} holds no record {name}; its seeds of {representation}: {held}")
    close = difflib.get_close_matches(representation, list(seeds), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    names = ", ".join(sorted(seeds)) or "none"
    raise ConfigError(f"representation={representation!r} is not in {store}; its representations: {names}{hint}")


def rerun_record(
    store: Path, representation: str, seed: int, folder: Path, log: Callable[[str], None] = print
) -> Outcome:
    """Train the stored run of ``representation`` and ``seed`` again in the fresh pipeline dir ``folder``; return
    its verdict (one line, and whether it failed). Everything read from the store (its overrides, the record's
    files, its encoder's) is read and checked before anything is written."""
    info = read_store_info(store)
    kept = [o for o in store_overrides(info, store / STORE_FILE) if not o.startswith(OWN_KEYS)]
    record = copied_record(_stored(store, representation, seed).path, {})  # its files in memory, checked
    encoder = record.info.get("encoder")
    name = str(encoder["folder"]) if encoder is not None else None
    stored = stored_encoder_files(store, name) if name is not None else {}
    if folder.exists():
        raise ConfigError(f"dir={folder} exists; a rerun trains in a fresh folder (choose another dir=)")
    spec = pipeline_spec([
        f"experiment={info.experiment}", *kept, f"pipeline.dir={folder}", "pipeline.report=false",
        f"pipeline.sweep.srl_model=[{representation}]", f"pipeline.sweep.seed=[{seed}]",
    ])  # fmt: skip
    if source_commit() != info.commit:
        log(f"rlzoo.records: this checkout is at {source_commit()[:12]}, the store's records at {info.commit[:12]}")
    plan = plan_pipeline(spec)
    for step in plan.encoders.values():
        if stored and step.folder.name == name and not os.path.lexists(step.folder):
            _write_encoder(step.folder, stored)
            log(f"rlzoo.records: encoder {step.folder.name} from the store")
    run_pipeline(spec, log)
    (run,) = [RunDir(p) for p in sorted((folder / "runs").iterdir()) if (p / METRICS).is_file()]
    roots = (folder, *(step.folder.parent for step in plan.encoders.values()))  # where its encoder was trained
    seeds = [r for r in store_records(store) if r.representation == representation]
    return compare_records(record, make_record(run, {}, roots), seeds)


def copy_stored_encoders(
    store: Path, cache: Path, names: Sequence[str] | None = None, log: Callable[[str], None] = print
) -> list[str]:
    """Copy the store's encoders (``names``, or all of them) into a pipeline dir's encoder cache ``cache``
    (``<pipeline dir>/encoders``), each only where the cache lacks a folder of its name, so that the pipeline trains
    none of them again; return the names copied. The store's files are read through the confined layer (bare names,
    plain files, no link below the store) and each folder is written whole or not at all."""
    copied = []
    for name in names if names is not None else _stored_encoders(store):
        files = stored_encoder_files(store, name)
        if files and not os.path.lexists(cache / name):
            _write_encoder(output_folder(cache) / name, files)
            copied.append(name)
            log(f"rlzoo.records: encoder {name} from the store")
    return copied


def stored_encoder_files(store: Path, name: str) -> dict[str, bytes]:
    """The files of the store's encoder ``name`` (empty: the store lacks it, no ``content_hash``), read through the
    confined layer: a bare name, plain files, no link below the store, each within :data:`ENCODER_CAP`."""
    source = PurePosixPath(ENCODERS, bare_name(name, "a stored encoder's folder"))
    if not os.path.lexists(store / source / CONTENT_HASH):
        return {}
    kept = [f for f in (*ENCODER_FILES, CONTENT_HASH) if os.path.lexists(store / source / f)]
    return {f: read_bytes(store, source / f, ENCODER_CAP) for f in kept}


def _write_encoder(target: Path, files: dict[str, bytes]) -> None:
    """Write an encoder folder whole or not at all (a staging folder beside it, renamed)."""
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=output_folder(target.parent)))
    try:
        for file, data in files.items():
            write_bytes(staging, file, data)
        staging.chmod(0o755)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _stored_encoders(store: Path) -> list[str]:
    """The encoder folders of a store (plain folders; a link there is read, and refused, by name)."""
    folder = store / ENCODERS
    return sorted(p.name for p in folder.iterdir() if p.is_dir() or p.is_symlink()) if folder.is_dir() else []


def differences(stored: Record, new: Record) -> list[str]:
    """What differs between the scores of two records of one run (times apart): metrics, test and training
    episodes, the encoder's weights."""
    old_metrics, new_metrics = metrics_of(stored), metrics_of(new)
    found = [f"{key} {old_metrics.get(key)} → {new_metrics.get(key)}" for key in differing_scores(stored, new)]
    for name in (TEST_RETURNS, SAMPLED_TEST_RETURNS, RETURNS100):
        if file_of(stored, name) != file_of(new, name):
            found.append(f"{name} differs")
    if episodes_by_env(stored) != episodes_by_env(new):
        found.append("the training episodes differ")
    if stored.encoder_hash != new.encoder_hash:
        found.append(f"encoder content hash {str(stored.encoder_hash)[:12]} → {str(new.encoder_hash)[:12]}")
    return found


def compare_records(stored: Record, new: Record, seeds: Sequence[Record] = ()) -> Outcome:
    """The verdict of the rerun ``new`` of ``stored`` (:func:`rlzoo.results.reproduction.judge`); ``seeds``: the
    stored records of its representation, whose range a rerun on another platform is judged by."""
    found = differences(stored, new)
    configs = [f"{key} ({old} → {now})" for key, old, now in config_differences(stored, new)]
    config = f"; its config differs in {', '.join(configs)}" if configs else ""
    return judge(stored, new, seeds or [stored], found, config)
