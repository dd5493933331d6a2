"""Result records: a finished RL run kept as data, without weights, and stores of them.

A record is a slim run dir that every reader of runs (``rlzoo.plot``, the pipeline's table, the report) reads as it
reads the full one::

    config.yaml            the run's resolved config; its machine paths (run_dir, the encoder's folder) replaced by
                           names inside the store (the record's folder, ``encoders/<name>``)
    monitor/<rank>.monitor.csv.gz   the training episodes (SB3 Monitor, gzipped)
    returns100.csv, metrics.json, provenance.json, test_returns.csv, test_returns_sampled.csv   as in the run dir
    record.json            representation, seed, commit, CPU and wall seconds, the encoder's folder and content hash,
                           the platform it ran on (its run's ``provenance.json``, or the ``platform.json`` of the
                           pipeline dir it came from; absent: not recorded)

A store is a folder of records (``runs/<representation>_seed<N>/``) and of the encoders they used
(``encoders/<name>/``: metadata, metrics, losses and weights, loaded weights-only). Records only ever join a store
together with every record already in it: configs equal but for the seed within each representation, one encoder
content hash per representation, each (representation, seed) once (:func:`check_records`).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlzoo.confined import CSV_CAP, bare_name, load_npz, parse_json, read_bytes, read_json, read_weights
from rlzoo.errors import ConfigError, Refused
from rlzoo.results.runs import leaves
from rlzoo.rundir import (
    CONFIG,
    GZIP_SUFFIX,
    METRICS,
    PROVENANCE,
    RETURNS100,
    SAMPLED_TEST_RETURNS,
    TEST_RETURNS,
    RunDir,
)
from rlzoo.untrusted import read_yaml, refuse_interpolations

RECORD = "record.json"
FORMAT = 1
RUNS, ENCODERS = "runs", "encoders"
KEPT = (METRICS, PROVENANCE, TEST_RETURNS, SAMPLED_TEST_RETURNS, RETURNS100)  # copied as they are
ENCODER_FILES = ("encoder.json", "metrics.json", "losses.csv", "config.yaml", "encoder.pt", "pca.npz")
# Config keys two records of one representation may differ in: the seed, machine paths, where and how a run ran.
FREE_KEYS = ("seed", "run_dir", "srl_model.checkpoint", "srl_model.vec_wrapper.checkpoint", "hardware.", "logger.",
             "verbose", "progress_bar", "memory_budget_gb")  # fmt: skip
FREE_SUFFIXES = (".device", ".torch_threads")
HASH_LENGTH = 64
PLATFORM = "platform.json"
PLATFORM_FIELDS, PLATFORM_TEXT, PLATFORM_BYTES = 32, 200, 16_384


@dataclass(frozen=True)
class Record:
    """One record (read and checked) or a run about to become one.

    :param files: the record's files by relative name (bytes), for a record not written yet; empty once stored.
    """

    path: Path
    config: DictConfig
    info: dict[str, Any]
    files: Mapping[str, bytes]

    @property
    def representation(self) -> str:
        return str(self.info["representation"])

    @property
    def seed(self) -> int:
        return int(self.info["seed"])

    @property
    def name(self) -> str:
        return record_name(self.representation, self.seed)

    @property
    def encoder_hash(self) -> str | None:
        encoder = self.info.get("encoder")
        return None if encoder is None else str(encoder["content_hash"])

    def scores(self) -> bytes:
        """The bytes of its ``metrics.json`` (what two records of one run share)."""
        return self.files[METRICS] if METRICS in self.files else read_bytes(self.path, METRICS)


def record_name(representation: str, seed: int) -> str:
    """``<representation>_seed<seed>``, refused unless a bare name (a record is a folder of the store)."""
    return bare_name(f"{representation}_seed{seed}", "a record's srl_model.name and seed")


def tensor_hash(arrays: Iterable[tuple[str, Any]]) -> str:
    """SHA-256 of named arrays (name, dtype, shape and bytes, in name order): equal for equal weights, whatever the
    file that holds them (``torch.save`` writes a fresh id into every file)."""
    import numpy as np

    digest = hashlib.sha256()
    for name, array in sorted(arrays, key=lambda item: item[0]):
        values = np.ascontiguousarray(array)
        digest.update(f"{name}|{values.dtype.str}|{values.shape}|".encode())
        digest.update(values.tobytes())
    return digest.hexdigest()


def encoder_content_hash(folder: Path) -> str:
    """The content hash of an encoder's weights (``encoder.pt`` weights-only, or ``pca.npz`` without pickle)."""
    import numpy as np

    if (folder / "pca.npz").is_file():
        arrays = load_npz(folder, "pca.npz")
        return tensor_hash((name, np.asarray(array)) for name, array in arrays.items())
    import torch

    try:
        state = torch.load(read_weights(folder, "encoder.pt"), map_location="cpu", weights_only=True)
    except Refused:
        raise
    except Exception as error:  # a missing file, or one that needs pickle: the reason in a few words
        raise ConfigError(
            f"encoder {folder.name}: its weights do not load weights-only ({type(error).__name__})"
        ) from None
    return tensor_hash((f"{name}:{tensor.dtype}", tensor.float().numpy()) for name, tensor in state.items())


def _is_free(key: str) -> bool:
    return key.endswith(FREE_SUFFIXES) or any(key == k or (k.endswith(".") and key.startswith(k)) for k in FREE_KEYS)


def flat_values(config: DictConfig) -> dict[str, Any]:
    """Every leaf of ``config`` as ``dotted.key: value`` (unresolved: a record's config is data), the free keys left
    out."""
    return {key: value for key, value in leaves(config, resolve=False).items() if not _is_free(key)}


ABSENT = "<absent>"


def config_differences(one: Record, two: Record) -> list[tuple[str, Any, Any]]:
    """(key, value in ``one``, value in ``two``) of every config key the two records set differently, in key order
    (the free keys left out; a key one lacks reads :data:`ABSENT`)."""
    a, b = flat_values(one.config), flat_values(two.config)
    pairs = [(key, a.get(key, ABSENT), b.get(key, ABSENT)) for key in sorted(set(a) | set(b))]
    return [(key, first, second) for key, first, second in pairs if repr(first) != repr(second)]


def check_records(records: Sequence[Record]) -> None:
    """Refuse, in one line naming the difference, records that cannot form one table: one (representation, seed)
    twice, configs of one representation that differ in anything but the seed (and machine paths), or two encoders
    (content hashes) for one representation."""
    seen: dict[str, Record] = {}
    first: dict[str, Record] = {}
    for record in records:
        if record.name in seen:
            raise ConfigError(
                f"seed {record.seed} of {record.representation} is there twice ({seen[record.name].path} and "
                f"{record.path}); a store holds each (representation, seed) once"
            )
        seen[record.name] = record
        other = first.setdefault(record.representation, record)
        if other is not record:
            _check_same_run_settings(other, record)


def _check_same_run_settings(one: Record, two: Record) -> None:
    if one.encoder_hash != two.encoder_hash:
        raise ConfigError(
            f"{one.representation}: two encoders (content hashes {str(one.encoder_hash)[:12]} in {one.path} and "
            f"{str(two.encoder_hash)[:12]} in {two.path}); the records of one representation share its encoder"
        )
    differing = config_differences(one, two)
    if differing:
        key, first, second = differing[0]
        raise ConfigError(
            f"{one.representation}: {key} is {first!r} in {one.path} but {second!r} in {two.path}; records of one "
            "table differ in the seed only"
        )


def read_record(folder: Path) -> Record:
    """A stored record, checked as hostile data: no symlink, plain JSON and YAML, finite figures, fields of the right
    types."""
    for path in (folder, *folder.rglob("*")):
        if path.is_symlink():
            raise ConfigError(f"{path}: a symlink in a record; records hold plain files only")
    try:
        info = read_json(folder, RECORD, finite=True)
        config = read_yaml(folder / CONFIG)
        if os.path.lexists(folder / METRICS):
            read_json(folder, METRICS, finite=True)
    except Refused:
        raise
    except (OSError, ValueError) as error:
        raise ConfigError(f"{folder}: not a readable record ({type(error).__name__})") from None
    refuse_interpolations(config, folder / CONFIG)
    _check_info(info, config, folder)
    return Record(folder, config, info, {})


def _check_info(info: Any, config: DictConfig, folder: Path) -> None:
    def bad(what: str) -> ConfigError:
        return ConfigError(f"{folder / RECORD}: {what}")

    if not isinstance(info, dict) or info.get("format") != FORMAT:
        raise bad(f"not a record of format {FORMAT}")
    representation, seed = info.get("representation"), info.get("seed")
    bare_name(representation, f"{folder / RECORD}: representation")
    if not isinstance(representation, str) or representation != OmegaConf.select(config, "srl_model.name"):
        raise bad(f"representation {representation!r} is not its config's srl_model.name")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed != config.get("seed"):
        raise bad(f"seed {seed!r} is not its config's seed")
    for key in ("cpu_seconds", "wall_seconds"):
        value = info.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise bad(f"{key} is {value!r}; a number of seconds ≥ 0 is allowed")
    encoder = info.get("encoder")
    if encoder is not None and not (
        isinstance(encoder, dict)
        and _is_hash(encoder.get("content_hash"))
        and isinstance(encoder.get("folder"), str)
        and _is_plain_name(encoder["folder"])
    ):
        raise bad("encoder is not {folder: <name>, content_hash: <64 hex digits>}")
    if "platform" in info:
        check_platform(info["platform"], str(folder / RECORD))
    if folder.name != record_name(representation, seed):
        raise bad(f"its folder is named {folder.name}, not {record_name(representation, seed)}")


def check_platform(value: Any, source: str) -> dict[str, str | int]:
    """A platform description (:func:`rlzoo.provenance.platform_facts`) read from a file: a small flat mapping of
    names to short strings and integers, else one :class:`ConfigError`."""
    if (
        not isinstance(value, dict)
        or len(value) > PLATFORM_FIELDS
        or not all(isinstance(k, str) and len(k) <= PLATFORM_TEXT and _is_fact(v) for k, v in value.items())
    ):
        raise ConfigError(f"{source}: its platform is not a mapping of at most {PLATFORM_FIELDS} short facts")
    return dict(value)


def _is_fact(value: Any) -> bool:
    return (isinstance(value, str) and len(value) <= PLATFORM_TEXT) or (
        isinstance(value, int) and not isinstance(value, bool)
    )


def platform_of_source(source: Path) -> dict[str, str | int] | None:
    """The platform a pipeline dir's runs ran on, where the folder says so (``platform.json``, written by
    ``benchmarks/store_shard.py`` for a commit whose runs do not record it): ``source`` or, for its ``runs/``, the
    pipeline dir above."""
    for folder in (source, source.parent) if source.name == RUNS else (source,):
        if (folder / PLATFORM).exists() or (folder / PLATFORM).is_symlink():
            return check_platform(read_json(folder, PLATFORM, PLATFORM_BYTES), str(folder / PLATFORM))
    return None


def _is_hash(value: Any) -> bool:
    return isinstance(value, str) and len(value) == HASH_LENGTH and all(c in "0123456789abcdef" for c in value)


def _is_plain_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name


def make_record(
    run: RunDir, encoder_hashes: dict[Path, str], roots: Sequence[Path], platform: Mapping[str, Any] | None = None
) -> Record:
    """The record of the finished run ``run`` (nothing written), read untrusted: its config without interpolations
    (none is resolved), its name a bare name, its files regular files read through :mod:`rlzoo.confined`, its
    figures finite, its encoder a folder inside ``roots``. A record itself (one with ``record.json``) is read and
    copied as it is.

    :param encoder_hashes: the encoder folders the records use, with their content hashes (a cache, filled here).
    :param roots: the folders its encoder may lie in.
    :param platform: the platform the run ran on, where its own ``provenance.json`` names none.
    """
    if (run.path / RECORD).is_file():
        return copied_record(run.path, encoder_hashes)
    config = run.read_config()
    refuse_interpolations(config, run.config)
    values = OmegaConf.to_container(config, resolve=False)
    assert isinstance(values, dict)
    representation, seed = OmegaConf.select(config, "srl_model.name"), config.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise Refused(f"{run.config}: seed={seed!r}; an integer seed is allowed")
    name = record_name(str(bare_name(representation, f"{run.config}: srl_model.name")), seed)
    values["run_dir"] = name
    encoder = _encoder_of(config, encoder_hashes, roots, run.config)
    if encoder is not None:  # the encoder's machine path, wherever the config repeats it, becomes its store name
        values = _renamed(values, str(_encoder_folder(config)), f"{ENCODERS}/{encoder['folder']}")
    metrics = read_json(run.path, METRICS, finite=True)
    if not isinstance(metrics, dict):
        raise Refused(f"{run.metrics} does not hold a mapping of metrics")
    provenance = read_json(run.path, PROVENANCE) if run.provenance.is_file() else {}
    info = {
        "format": FORMAT, "representation": representation, "seed": seed,
        "commit": str(provenance.get("commit", "unknown")), "cpu_seconds": float(metrics.get("time/cpu_seconds", 0.0)),
        "wall_seconds": float(metrics.get("time/total_seconds", 0.0)), "encoder": encoder,
    }  # fmt: skip
    recorded = provenance.get("platform") or platform
    if recorded:
        info["platform"] = check_platform(recorded, str(run.provenance))
    files = {CONFIG: OmegaConf.to_yaml(OmegaConf.create(values)).encode(), RECORD: _json(info)}
    files |= {kept: read_bytes(run.path, kept, CSV_CAP) for kept in KEPT if (run.path / kept).is_file()}
    for log in run.monitor_files():
        data = read_bytes(run.monitor_dir, log.name, CSV_CAP)
        files[f"monitor/{log.name}{GZIP_SUFFIX}"] = gzip.compress(data, mtime=0)
    return Record(run.path, OmegaConf.create(values), info, files)


def copied_record(folder: Path, encoder_hashes: dict[Path, str]) -> Record:
    """A stored record, in memory (its own files only: config, record, scores, gzipped monitor files); its store's
    copy of its encoder, where that has one, must hold the weights the record names."""
    record = read_record(folder)
    names = [CONFIG, RECORD, *KEPT]
    files = {name: read_bytes(folder, name, CSV_CAP) for name in names if os.path.lexists(folder / name)}
    if METRICS in files:
        parse_json(files[METRICS], folder / METRICS, finite=True)
    monitor = folder / "monitor"
    for log in sorted(monitor.glob(f"*{GZIP_SUFFIX}")) if monitor.is_dir() else []:
        files[f"monitor/{log.name}"] = read_bytes(monitor, log.name, CSV_CAP)
    encoder = record.info.get("encoder")
    stored = folder.parent.parent / ENCODERS / encoder["folder"] if encoder is not None else None
    if stored is not None and stored.is_dir():
        if stored not in encoder_hashes:
            encoder_hashes[stored] = encoder_content_hash(stored)
        if encoder_hashes[stored] != record.encoder_hash:
            raise ConfigError(
                f"{folder}: names encoder content hash {str(record.encoder_hash)[:12]}, but {stored} holds "
                f"{encoder_hashes[stored][:12]}"
            )
    return Record(record.path, record.config, record.info, files)


def _json(values: dict[str, Any]) -> bytes:
    return (json.dumps(values, indent=1, sort_keys=True) + "\n").encode()


def _renamed(value: Any, path: str, name: str) -> Any:
    """``value`` (a config's plain values) with every string that is ``path`` or lies under it starting with
    ``name`` instead."""
    if isinstance(value, dict):
        return {key: _renamed(item, path, name) for key, item in value.items()}
    if isinstance(value, list):
        return [_renamed(item, path, name) for item in value]
    if isinstance(value, str) and (value == path or value.startswith(path + "/")):
        return name + value[len(path) :]
    return value


def _encoder_folder(config: DictConfig) -> Path | None:
    checkpoint = OmegaConf.select(config, "srl_model.checkpoint")
    if not checkpoint:
        return None
    folder = Path(str(checkpoint))
    return folder if folder.is_dir() else folder.parent


def _encoder_of(
    config: DictConfig, hashes: dict[Path, str], roots: Sequence[Path], source: Path
) -> dict[str, str] | None:
    """The encoder a run used (its folder's name and content hash); the folder must lie in one of ``roots``."""
    folder = _encoder_folder(config)
    if folder is None:
        return None
    bare_name(folder.name, f"{source}: srl_model.checkpoint's folder")
    resolved = folder.resolve()
    if folder.is_symlink() or not any(resolved.is_relative_to(root.resolve()) for root in roots):
        where = ", ".join(str(root) for root in roots)
        raise Refused(
            f"{source}: srl_model.checkpoint={str(folder)!r} lies outside {where}; a run's encoder is merged from "
            "the folders given (or the folder holding them)"
        )
    if folder not in hashes:
        hashes[folder] = encoder_content_hash(folder)
    return {"folder": folder.name, "content_hash": hashes[folder]}


def store_records(store: Path) -> list[Record]:
    """Every record of ``store`` (``<store>/runs/*``), read and checked."""
    runs = store / RUNS
    return [read_record(p) for p in sorted(runs.iterdir()) if p.is_dir()] if runs.is_dir() else []
