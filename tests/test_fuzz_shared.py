"""Property-based fuzzing (Hypothesis) of what rlzoo reads from shared folders: a run dir, a pipeline dir's
``.inflight/`` and a store, with generated contents (JSON with payloads and non-finite numbers, YAML, npz members with
true or lying headers, zip members, names, symlinks out, FIFOs, folders where files belong).

Properties, for every reader: it returns or raises one :class:`~rlzoo.errors.ConfigError` line (nothing else); no
marker file appears; nothing outside the folder is created, changed or deleted; memory (peak RSS) and time stay under
their caps. Profiles: ``RLZOO_FUZZ_PROFILE=fast`` (the default, CI: a few seconds) or ``long``
(``RLZOO_FUZZ_PROFILE=long pytest tests/test_fuzz_shared.py``, about 2,000 examples per test)."""

from __future__ import annotations

import io
import json
import os
import resource
import shutil
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from rlzoo.errors import ConfigError  # noqa: E402
from rlzoo.model_files import load_obs_norm  # noqa: E402
from rlzoo.pipeline import inflight  # noqa: E402
from rlzoo.results.records import read_record, store_records  # noqa: E402
from rlzoo.results.runs import read_run  # noqa: E402
from rlzoo.results.store_merge import merge_into_store  # noqa: E402
from rlzoo.rundir import RunDir  # noqa: E402
from rlzoo.training.run_state import Snapshot  # noqa: E402
from rlzoo.training.safe_load import saved_data  # noqa: E402

STORE = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "srl_benchmark_small"
RECORD = STORE / "runs" / "ground_truth_seed0"
HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]
settings.register_profile("fast", max_examples=10, deadline=None, suppress_health_check=HEALTH)
settings.register_profile("long", max_examples=2000, deadline=None, suppress_health_check=HEALTH)
PROFILE = settings.get_profile(os.environ.get("RLZOO_FUZZ_PROFILE", "fast"))
RSS_CAP_MB = 1024  # peak RSS growth one example may cause
TIME_CAP_S = 20.0  # wall seconds one example may take (a FIFO read or a bomb would take far longer)
MARKER = "ran"

NAMES = ["config.yaml", "metrics.json", "record.json", "provenance.json", "test_returns.csv", "returns100.csv",
         "obs_norm.npz", "model.zip", "monitor/0.monitor.csv", "monitor/0.monitor.csv.gz", "checkpoints/64/state.json",
         "checkpoints/64/run_state.json", "checkpoints/64/run_state.npz", ".inflight/a.json", "runs/x_seed0",
         "../escaped.json", "monitor/../../escaped"]  # fmt: skip


YAML = [
    "a: ${oc.decode:'{_target_: codecs.open, _args_: [MARKER, w]}'}",
    "!!python/object/apply:os.system [id]",
    "seed: 1\nsrl_model: {name: ../x}",
    "- 1",
    "{algo: {gamma: .nan}}",
    "algo: {_target_: codecs.open}",
]


def json_values() -> st.SearchStrategy[Any]:
    words = st.sampled_from(["${oc.env:HOME}", "../../x", "/etc/passwd", "x_seed0", "MARKER"])
    leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20), words)
    return st.recursive(
        leaves, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=12,
    )  # fmt: skip


def npz_bytes(draw: st.DrawFn) -> bytes:
    """A real npz, or one whose member's header lies about its shape, or a compressed bomb."""
    kind = draw(st.sampled_from(["real", "lying", "bomb", "object"]))
    stream = io.BytesIO()
    if kind == "real":
        shape = draw(st.lists(st.integers(0, 5), max_size=3))
        np.savez(stream, mean=np.zeros(shape), var=np.ones(shape), count=np.asarray(1.0),
                 clip_obs=np.asarray(10.0), epsilon=np.asarray(1e-8))  # fmt: skip
    elif kind == "lying":
        rows = draw(st.integers(1, 10**12))
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (rows, 64)})
        with zipfile.ZipFile(stream, "w") as archive:
            archive.writestr("mean.npy", header.getvalue() + b"\0" * draw(st.integers(0, 64)))
    elif kind == "bomb":
        np.savez_compressed(stream, mean=np.zeros(draw(st.integers(1, 8)) << 20, dtype=np.uint8))
    else:
        np.savez(stream, mean=np.array([{"a": 1}], dtype=object))
    return stream.getvalue()


def zip_bytes(draw: st.DrawFn) -> bytes:
    """A model.zip-like archive: a ``data`` entry (JSON, huge, or absent) and ``.pth`` members of any bytes."""
    stream = io.BytesIO()
    with zipfile.ZipFile(stream, "w", zipfile.ZIP_DEFLATED) as archive:
        data = draw(st.sampled_from(["json", "huge", "none"]))
        if data == "json":
            archive.writestr("data", json.dumps(draw(json_values()), allow_nan=True))
        elif data == "huge":
            archive.writestr("data", b" " * (draw(st.integers(1, 40)) << 20))
        for index in range(draw(st.integers(0, 2))):
            archive.writestr(f"policy{index}.pth", draw(st.binary(max_size=64)))
    return stream.getvalue()


@st.composite
def contents(draw: st.DrawFn) -> list[tuple[str, str, Any]]:
    """Entries to plant: (name, kind, content)."""
    entries = []
    for _ in range(draw(st.integers(1, 5))):
        name = draw(st.sampled_from(NAMES))
        kind = draw(st.sampled_from(["json", "yaml", "bytes", "npz", "zip", "symlink", "fifo", "folder", "sparse"]))
        if kind == "json":
            content: Any = json.dumps(draw(json_values()), allow_nan=True)
        elif kind == "yaml":
            content = draw(st.sampled_from(YAML))
        elif kind == "npz":
            content = npz_bytes(draw)
        elif kind == "zip":
            content = zip_bytes(draw)
        else:
            content = draw(st.binary(max_size=256))
        entries.append((name, kind, content))
    return entries


def plant(folder: Path, entries: list[tuple[str, str, Any]], world: Path) -> None:
    for name, kind, content in entries:
        path = folder / name
        if not path.resolve().is_relative_to(folder.resolve()):
            continue  # a name leading out is the readers' to refuse, not the planter's to write
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or path.is_file() or path.is_fifo():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
        if kind == "symlink":
            os.symlink(world / "outside" / "victim.txt", path)
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "folder":
            path.mkdir()
        elif kind == "sparse":
            with path.open("wb") as stream:
                stream.truncate(20 << 30)
        else:
            text = content if isinstance(content, bytes) else str(content).replace("MARKER", str(world / MARKER))
            path.write_bytes(text if isinstance(text, bytes) else text.encode())


def snapshot(folder: Path) -> dict[str, tuple[int, int, int]]:
    found = {}
    for path in sorted(folder.rglob("*")):
        info = path.lstat()
        found[str(path.relative_to(folder))] = (info.st_size, info.st_mtime_ns, info.st_mode)
    return found


def holds(world: Path, target: Path, read: Callable[[], object]) -> None:
    """The properties of one read of ``target`` (a folder under ``world``)."""
    outside = world / "outside"
    before = snapshot(outside)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.monotonic()
    try:
        read()
    except ConfigError as error:
        assert "\n" not in str(error) and str(error), repr(error)
    assert time.monotonic() - start < TIME_CAP_S
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) / 1024 < RSS_CAP_MB
    assert not (world / MARKER).exists() and not (world / "escaped.json").exists() and not (world / "escaped").exists()
    assert snapshot(outside) == before and (outside / "victim.txt").read_text() == "kept\n"


def fresh_world() -> tuple[tempfile.TemporaryDirectory[str], Path]:
    holder = tempfile.TemporaryDirectory()
    world = Path(holder.name)
    (world / "outside").mkdir()
    (world / "outside" / "victim.txt").write_text("kept\n")
    return holder, world


@settings(PROFILE)
@given(contents())
def test_a_fuzzed_run_dir_is_read_or_refused_in_one_line(entries: list[tuple[str, str, Any]]) -> None:
    """The plot's reader, observation statistics, a checkpoint's run state, the model's data entry."""
    holder, world = fresh_world()
    with holder:
        run = world / "shared" / "run"
        shutil.copytree(RECORD, run)
        (run / "record.json").unlink()
        plant(run, entries, world)
        for read in (
            lambda: read_run(RunDir(run)),
            lambda: load_obs_norm(run / "obs_norm.npz"),
            lambda: Snapshot.read(run / "checkpoints" / "64"),
            lambda: saved_data(run / "model.zip"),
        ):
            holds(world, run, read)


@settings(PROFILE)
@given(contents())
def test_a_fuzzed_store_or_pipeline_dir_is_merged_or_refused_in_one_line(entries: list[tuple[str, str, Any]]) -> None:
    """A received store's record and a pipeline dir's runs and ``.inflight``: read, merged into a store of the
    user's (written only inside it), or refused."""
    holder, world = fresh_world()
    with holder:
        pipe = world / "pipe"
        record = pipe / "runs" / RECORD.name
        shutil.copytree(RECORD, record)
        plant(record, entries, world)
        plant(pipe, entries, world)
        mine = world / "mine"  # the user's own store
        for read in (
            lambda: read_record(record),
            lambda: inflight.records(pipe),
            lambda: store_records(pipe),
            lambda: merge_into_store([pipe / "runs"], mine, log=lambda _: None),
        ):
            holds(world, pipe, read)
            shutil.rmtree(mine, ignore_errors=True)  # the user's store: merged into, then set back for the next
