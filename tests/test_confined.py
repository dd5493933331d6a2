"""The confined file layer (``rlzoo.confined``) and what goes through it: names, links, special files, caps before
allocation (npz headers, zip members, gzip and CSV streams, JSON), output folders and locks, ``.inflight`` entries,
and a config's memory budget. Every refusal is one line naming the path and writes nothing."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rlzoo import confined
from rlzoo.errors import ConfigError, Refused
from rlzoo.files import locked
from rlzoo.pipeline import inflight
from rlzoo.results.runs import read_monitor
from rlzoo.training.memory import check_memory


def one_line(error: pytest.ExceptionInfo[BaseException]) -> str:
    message = str(error.value)
    assert "\n" not in message and message
    return message


@pytest.mark.parametrize("name", ["..", ".", "a/b", "/etc", "", "a\\b", "x" * 300, "$(id)"])
def test_a_bare_name_is_refused_unless_bare(name: str) -> None:
    with pytest.raises(Refused, match="is not a bare name") as error:
        confined.bare_name(name, "name")
    one_line(error)


@pytest.mark.parametrize("name", ["../x", "/abs/x", "a/../b", "a//..", "a\\b"])
def test_a_relative_name_stays_inside(name: str) -> None:
    with pytest.raises(Refused):
        confined.relative_name(name, "file")
    assert str(confined.relative_name("monitor/0.monitor.csv.gz", "file")) == "monitor/0.monitor.csv.gz"


def special(tmp_path: Path, kind: str) -> Path:
    """``tmp_path/f`` as a symlink to a file outside, a FIFO, a folder, or a symlinked parent folder."""
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    folder = tmp_path / "folder"
    folder.mkdir()
    target = folder / "f"
    if kind == "symlink":
        os.symlink(outside, target)
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "folder":
        target.mkdir()
    elif kind == "parent-link":
        (tmp_path / "real").mkdir()
        (tmp_path / "real" / "g").write_text("{}")
        os.symlink(tmp_path / "real", folder / "sub")
    return folder


@pytest.mark.parametrize(
    ("kind", "name", "message"),
    [("symlink", "f", "is a symlink"), ("fifo", "f", "is a FIFO"), ("folder", "f", "is a folder"),
     ("parent-link", "sub/g", "not a folder of its own")],
)  # fmt: skip
def test_only_regular_files_are_read(tmp_path: Path, kind: str, name: str, message: str) -> None:
    folder = special(tmp_path, kind)
    with pytest.raises(Refused, match=message) as error:
        confined.read_bytes(folder, name)
    one_line(error)
    assert (tmp_path / "outside.txt").read_text() == "secret\n"


def test_a_sparse_file_is_refused_by_its_size_before_reading(tmp_path: Path) -> None:
    """A 20 GiB monitor file of 4 kB on disk: one line, nothing read (the plot's reader)."""
    monitor = tmp_path / "0.monitor.csv"
    with monitor.open("wb") as stream:
        stream.truncate(20 << 30)
    with pytest.raises(Refused, match=r"holds 21474836480 bytes; at most \d+ are read") as error:
        read_monitor(monitor)
    one_line(error)


def test_a_fifo_monitor_file_does_not_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "0.monitor.csv")
    with pytest.raises(Refused, match="is a FIFO"):
        read_monitor(tmp_path / "0.monitor.csv")


def test_a_gzip_bomb_is_cut_at_the_byte_cap(tmp_path: Path) -> None:
    (tmp_path / "0.monitor.csv.gz").write_bytes(gzip.compress(b"1.0,1,0.1\n" * 150_000))  # 1.5 MB from ~4 kB
    with pytest.raises(Refused, match="holds more than 1048576 bytes or"):
        confined.stream_lines(tmp_path, "0.monitor.csv.gz", byte_cap=1 << 20)
    assert len(confined.stream_lines(tmp_path, "0.monitor.csv.gz")) == 150_000  # under the real cap: read whole


def test_rows_are_capped(tmp_path: Path) -> None:
    (tmp_path / "r.csv").write_text("1,2\n" * 50)
    with pytest.raises(Refused, match="or 10 rows"):
        confined.stream_lines(tmp_path, "r.csv", rows=10)


@pytest.mark.parametrize("text", ['{"a": Infinity}', '{"a": NaN}', '{"a": -Infinity}'])
def test_non_finite_json_is_refused(tmp_path: Path, text: str) -> None:
    (tmp_path / "metrics.json").write_text(text)
    with pytest.raises(Refused, match=r"not plain JSON \(with finite numbers where figures are kept") as error:
        confined.read_json(tmp_path, "metrics.json", finite=True)
    one_line(error)
    assert not np.isfinite(confined.read_json(tmp_path, "metrics.json")["a"])  # rlzoo's own state may hold them


def npz_bytes(**arrays: Any) -> bytes:
    stream = io.BytesIO()
    np.savez(stream, **arrays)
    return stream.getvalue()


def test_npz_arrays_load_as_numpy_loads_them(tmp_path: Path) -> None:
    arrays = {"mean": np.arange(6.0).reshape(2, 3), "count": np.asarray(3), "flags": np.array([True, False])}
    (tmp_path / "a.npz").write_bytes(npz_bytes(**arrays))
    loaded = confined.load_npz(tmp_path, "a.npz")
    assert sorted(loaded) == sorted(arrays)
    for key, value in arrays.items():
        assert np.array_equal(loaded[key], value) and loaded[key].dtype == value.dtype


def lying_header(rows: int) -> bytes:
    """An npz whose member announces ``rows`` x 1000 float32 but holds 8 bytes."""
    stream = io.BytesIO()
    np.lib.format.write_array_header_1_0(stream, {"descr": "<f4", "fortran_order": False, "shape": (rows, 1000)})
    member = stream.getvalue() + b"\0" * 8
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("obs.npy", member)
    return out.getvalue()


def test_an_npy_header_is_checked_before_its_array_is_built(tmp_path: Path) -> None:
    """A header claiming 10^10 rows (37 TiB) over 8 bytes: refused by the header, nothing allocated."""
    (tmp_path / "chunk.npz").write_bytes(lying_header(10**10))
    with pytest.raises(Refused, match=r"announces \(10000000000, 1000\) of float32") as error:
        confined.load_npz(tmp_path, "chunk.npz")
    one_line(error)


def test_a_compressed_npz_bomb_is_refused_by_its_ratio(tmp_path: Path) -> None:
    stream = io.BytesIO()
    np.savez_compressed(stream, obs=np.zeros(40 << 20, dtype=np.uint8))  # 40 MiB of zeros in ~40 kB
    (tmp_path / "run_state.npz").write_bytes(stream.getvalue())
    with pytest.raises(Refused, match=r"member 'obs.npy' expands to 41943\d+ bytes from \d+") as error:
        confined.load_npz(tmp_path, "run_state.npz")
    one_line(error)


def test_arrays_over_the_memory_budget_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.npz").write_bytes(npz_bytes(obs=np.zeros(1 << 20, dtype=np.float32)))  # 4 MiB
    monkeypatch.setenv(confined.MEMORY_ENV, str(2 / 1024))  # 2 MiB
    with pytest.raises(Refused, match=r"expands to|the memory budget"):
        confined.load_npz(tmp_path, "a.npz")
    monkeypatch.setenv(confined.MEMORY_ENV, "nan")
    with pytest.raises(Refused, match="a positive number of GiB"):
        confined.memory_budget()


def test_object_arrays_are_refused_unpickled(tmp_path: Path) -> None:
    (tmp_path / "a.npz").write_bytes(npz_bytes(x=np.array([{"a": 1}], dtype=object)))
    with pytest.raises(Refused, match="holds Python objects"):
        confined.load_npz(tmp_path, "a.npz")


def test_a_model_zip_member_bomb_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """A ``data`` entry of 8 MiB of spaces (compressed ~8 kB) and a ``.pth`` whose pickle is oversize."""
    path = tmp_path / "model.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("data", b" " * (8 << 20))
    with zipfile.ZipFile(path) as archive, pytest.raises(Refused, match="member 'data' expands to 8388608"):
        confined.check_zip(archive, path)
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w", zipfile.ZIP_STORED) as pth:
        pth.writestr("archive/data.pkl", b"(" * (confined.PICKLE_CAP + 1))
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("policy.pth", inner.getvalue())
    with zipfile.ZipFile(path) as archive, pytest.raises(Refused, match=r"policy\.pth: member .archive/data\.pkl."):
        confined.check_zip(archive, path)


def test_an_output_folder_or_lock_that_is_a_link_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "victim.txt").write_text("kept\n")
    for name in ("plots", "results", "enjoy", ".inflight"):
        os.symlink(elsewhere, tmp_path / name)
        with pytest.raises(Refused, match=f"{name} is a symlink") as error:
            confined.output_folder(tmp_path / name)
        one_line(error)
    os.symlink(elsewhere / "victim.txt", tmp_path / ".launcher.lock")
    with pytest.raises(Refused, match="is a symlink"), locked(tmp_path / ".launcher.lock"):
        pass
    with pytest.raises(Refused, match="is a symlink"), inflight.launcher_lock(tmp_path):
        pass
    with pytest.raises(Refused, match=r"\.inflight is a symlink"):
        inflight.records(tmp_path)
    assert (elsewhere / "victim.txt").read_text() == "kept\n" and sorted(os.listdir(elsewhere)) == ["victim.txt"]


def test_write_bytes_stays_inside_and_never_follows_a_link(tmp_path: Path) -> None:
    (tmp_path / "victim.txt").write_text("kept\n")
    folder = tmp_path / "store"
    folder.mkdir()
    os.symlink(tmp_path / "victim.txt", folder / "record.json")
    with pytest.raises(Refused, match=r"record\.json is a symlink; rlzoo keeps a plain file there"):
        confined.write_bytes(folder, "record.json", b"{}")  # never written through
    assert (tmp_path / "victim.txt").read_text() == "kept\n"
    confined.write_bytes(folder, "sub/new.json", b"{}")
    assert (folder / "sub" / "new.json").read_bytes() == b"{}" and sorted(os.listdir(folder)) == ["record.json", "sub"]
    for name in ("../x", "/tmp/x"):
        with pytest.raises(Refused):
            confined.write_bytes(folder, name, b"")


def inflight_entry(folder: Path, file_name: str, values: dict[str, Any]) -> Path:
    path = folder / inflight.FOLDER / f"{file_name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {"name": file_name, "job": "812", "runs": [], "pid": 1, "host": "h"} | values
    path.write_text(json.dumps(entry))
    return path


@pytest.mark.parametrize(
    ("values", "message"),
    [({"name": "../../victim"}, "is not a bare name"), ({"name": "other"}, "is not its file's name"),
     ({"job": "812; rm -rf ~"}, "neither a Slurm job id"), ({"runs": ["../x"]}, "is not a bare name")],
)  # fmt: skip
def test_an_inflight_entry_is_checked(tmp_path: Path, values: dict[str, Any], message: str) -> None:
    (tmp_path / "victim.json").write_text("kept")
    inflight_entry(tmp_path, "step", values)
    with pytest.raises(ConfigError, match=message) as error:
        inflight.records(tmp_path)
    one_line(error)
    assert (tmp_path / "victim.json").read_text() == "kept"


def test_the_launcher_waits_only_on_jobs_it_named(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = {"812": "RUNNING someones-job (null)\n", "813": "RUNNING rlzoo-encoder step\n"}

    def squeue(command: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(command, 0, lines.get(command[-1], ""), "")

    monkeypatch.setattr(inflight.subprocess, "run", squeue)
    assert not inflight.queued("812", comment="step")  # someone else's job: not waited for
    assert inflight.queued("813", comment="step")
    assert not inflight.queued("813", comment="another-step")


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [({"buffer_size": 1e10}, r"algo.buffer_size=10000000000.0"),
     ({"policy_kwargs": {"net_arch": [200000, 200000]}}, r"algo.policy_kwargs.net_arch=\[200000, 200000\]"),
     ({"policy_kwargs": {"net_arch": {"pi": [64], "qf": [200000, 200000]}}}, "algo.policy_kwargs.net_arch=")],
)  # fmt: skip
def test_a_config_over_the_memory_budget_is_refused(kwargs: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError, match=rf"SAC: {key}.* needs at least [\d.]+ GiB, over the memory budget") as error:
        check_memory("SAC", kwargs)
    one_line(error)
    check_memory("SAC", {"buffer_size": 1_000_000, "policy_kwargs": {"net_arch": [256, 256]}})  # the usual: fine


def test_the_budget_is_raised_from_the_command_line_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(confined.MEMORY_ENV, "200")
    check_memory("SAC", {"buffer_size": 1e10})  # 74.5 GiB: within 200


STORE = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "srl_benchmark_small"


@pytest.mark.parametrize("attack", ["plots-link", "fifo-monitor", "sparse-monitor"])
def test_plot_refuses_in_one_line_and_writes_nothing_outside(tmp_path: Path, attack: str) -> None:
    """``rlzoo.plot`` over a received sweep (a record read as the run dir it is): a linked ``plots/`` folder, a
    FIFO or a sparse 20 GiB monitor file end in one line, nothing written outside, nothing hangs."""
    from rlzoo.plot import PlotSettings, plot

    sweep = tmp_path / "sweep"
    run = sweep / "ground_truth_seed0"
    shutil.copytree(STORE / "runs" / "ground_truth_seed0", run)
    outside = tmp_path / "outside"
    outside.mkdir()
    log = run / "monitor" / "0.monitor.csv.gz"
    if attack == "plots-link":
        os.symlink(outside, sweep / "plots")
    elif attack == "fifo-monitor":
        log.unlink()
        os.mkfifo(log)
    else:
        log.unlink()
        with log.open("wb") as stream:
            stream.truncate(20 << 30)
    with pytest.raises(ConfigError) as error:
        plot(PlotSettings(dir=str(sweep)), log=lambda _: None)
    one_line(error)
    assert str(run if attack != "plots-link" else sweep / "plots") in str(error.value)
    assert list(outside.iterdir()) == []
