"""Merging finished runs and records into a store (``python -m rlzoo.records action=merge``), as untrusted data.

Everything is read and checked before anything is written (a refusal writes nothing): only finished rlzoo RL runs and
records, read through :mod:`rlzoo.confined` (no link, FIFO or device; caps), configs without interpolations (none is
resolved), names that are bare names, finite figures, encoders from inside the folders given. Records are written
inside ``<store>/runs/``, encoders inside ``<store>/encoders/``, each folder refused when it is a link.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from rlzoo.confined import bare_name, output_folder, read_bytes, read_text, write_bytes
from rlzoo.errors import ConfigError, Refused
from rlzoo.results.records import (
    ENCODER_FILES,
    ENCODERS,
    RECORD,
    RUNS,
    Record,
    check_records,
    config_differences,
    make_record,
    platform_of_source,
    store_records,
)
from rlzoo.results.runs import find_runs
from rlzoo.rundir import RunDir
from rlzoo.untrusted import read_yaml

CONTENT_HASH = "content_hash"


def candidates(sources: Sequence[Path], log: Callable[[str], None] = print) -> list[RunDir]:
    """The finished RL runs (and records) under ``sources``: a pipeline dir's datasets and encoders are not runs,
    and a run that was resumed is left out, saying so (its randomness restarted at the resume, so it is not the run an
    uninterrupted one gives, and a rerun could not reproduce it)."""
    found = []
    for source in sources:
        for run in find_runs(source):
            if (run.path / RECORD).is_file():
                found.append(run)
            elif _is_rl_run(run) and run.resumes():
                log(f"rlzoo.records: left out {run.path}: it was resumed, so it is not the uninterrupted run")
            elif _is_rl_run(run):
                found.append(run)
    return found


def _is_rl_run(run: RunDir) -> bool:
    try:
        config = read_yaml(run.config)
    except ConfigError:
        return False
    return run.is_finished() and "algo" in config and "srl_model" in config


def _roots(sources: Sequence[Path]) -> list[Path]:
    """Where a merged run's encoder may lie: a source or the folder holding it (``<pipeline dir>/runs``)."""
    return [folder for source in sources for folder in (source, source.resolve().parent)]


def new_records(
    sources: Sequence[Path], stored: Sequence[Record], hashes: dict[Path, str], log: Callable[[str], None]
) -> list[Record]:
    """The records of ``sources`` the store lacks; one stored with the same scores is skipped, and refused in one
    line when its config differs (the same run cannot have two configs)."""
    by_name = {r.name: r for r in stored}
    new: list[Record] = []
    for source in sources:
        platform = platform_of_source(source)
        for run in candidates([source], log):
            record = make_record(run, hashes, _roots(sources), platform)
            same = by_name.get(record.name)
            if same is not None and same.scores() == record.scores():
                _check_same_config(same, record)
                continue  # this very run is stored already
            new.append(record)
    return new


def _check_same_config(stored: Record, new: Record) -> None:
    differing = config_differences(stored, new)
    if differing:
        key, kept, given = differing[0]
        raise ConfigError(
            f"{new.path}: the scores of stored {stored.name} but {key}={given!r}, not the stored {kept!r}; a stored "
            "run keeps its config (remove one of them)"
        )


def merge_into_store(sources: Sequence[Path], store: Path, log: Callable[[str], None] = print) -> list[Path]:
    """Add the finished runs and records under ``sources`` to ``store`` (made if missing) with their encoders; a
    record already there with the same scores is skipped. Everything is checked first: a refusal writes nothing."""
    stored = store_records(store)
    hashes: dict[Path, str] = {}
    new = new_records(sources, stored, hashes, log)
    check_records([*stored, *new])
    encoders = {folder.name: folder for folder in hashes}
    _check_stored_encoders(store, encoders, hashes)
    _check_record_encoders(store, new, encoders)
    if new or encoders:
        output_folder(store)
    written = [_write_record(output_folder(store / RUNS), record) for record in new]
    for name, folder in encoders.items():
        _store_encoder(folder, store / ENCODERS / name, hashes[folder])
    log(f"rlzoo.records: {len(written)} new record(s) in {store}, {len(stored)} there already")
    return written


def stored_hash(store: Path, name: str) -> str | None:
    """The content hash the store keeps for encoder ``name`` (None: the store lacks it)."""
    folder = store / ENCODERS / bare_name(name, "an encoder's folder")
    if not (folder / CONTENT_HASH).is_file():
        return None
    return read_text(folder, CONTENT_HASH, 1024).strip()


def _check_stored_encoders(store: Path, encoders: dict[str, Path], hashes: dict[Path, str]) -> None:
    for name, folder in encoders.items():
        kept = stored_hash(store, name)
        if kept is not None and kept != hashes[folder]:
            raise ConfigError(
                f"encoder {name}: content hash {hashes[folder][:12]} differs from the store's {kept[:12]}; the store "
                "keeps one encoder per name"
            )


def _check_record_encoders(store: Path, new: Sequence[Record], encoders: dict[str, Path]) -> None:
    """A record copied without its encoder folder: the store must hold that encoder, with the record's hash."""
    for record in new:
        encoder = record.info.get("encoder")
        if encoder is None or encoder["folder"] in encoders:
            continue
        kept = stored_hash(store, encoder["folder"])
        if kept is None:
            raise Refused(
                f"{record.path}: its encoder {encoder['folder']} is neither beside it nor in the store {store}; merge "
                "the record together with its store's encoders/ folder"
            )
        if kept != record.encoder_hash:
            raise Refused(
                f"{record.path}: names encoder content hash {str(record.encoder_hash)[:12]}, but the store's "
                f"{encoder['folder']} holds {kept[:12]}; a record joins the store with the encoder it used"
            )


def _write_record(runs: Path, record: Record) -> Path:
    """Write ``record`` as ``runs/<name>/``, whole or not at all, never outside ``runs``."""
    staging = Path(tempfile.mkdtemp(prefix=f".{record.name}.", dir=runs))
    try:
        staging.chmod(0o755)
        for relative, data in record.files.items():
            write_bytes(staging, relative, data)
        target = runs / bare_name(record.name, "a record's name")
        if target.is_symlink():
            raise Refused(f"{target} is a symlink; a store holds plain folders only")
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return runs / record.name


def _store_encoder(source: Path, target: Path, content_hash: str) -> None:
    """Copy an encoder's files (no dataset) into the store, with its content hash; machine paths become names."""
    if (target / CONTENT_HASH).is_file():
        return
    output_folder(target)
    for name in ENCODER_FILES:
        if (source / name).is_file() or (source / name).is_symlink():
            data = read_bytes(source, name, 1 << 30)
            if name in ("encoder.json", "config.yaml"):
                data = data.replace(str(source.parent.parent).encode(), b"<pipeline dir>")
            write_bytes(target, name, data)
    write_bytes(target, CONTENT_HASH, (content_hash + "\n").encode())
