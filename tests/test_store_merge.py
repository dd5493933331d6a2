"""``records action=merge`` and ``action=table`` on hostile input, on copies of the committed store's records (no
training): only finished rlzoo runs and records, read untrusted (no interpolation resolved, names checked, links
refused, finite figures), encoders checked, nothing written outside the store, each refusal one line."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from rlzoo.errors import ConfigError
from rlzoo.records import RecordsSettings, run
from rlzoo.reporting.store_table import _shard_lines
from rlzoo.results.records import ENCODERS, RECORD, RUNS, store_records
from rlzoo.results.store_merge import merge_into_store

STORE = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "srl_benchmark_small"
LEARNED = "autoencoder_seed0"
PLAIN = "ground_truth_seed0"


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in sorted(folder.rglob("*"))}


def plain_run(world: Path, record: str = PLAIN) -> Path:
    """``world/pipe/runs/<record>``: a stored record turned back into the finished run dir it came from (plain
    monitor CSVs, no ``record.json``), its encoder (if any) in ``world/pipe/encoders/`` named by absolute path."""
    run_dir = world / "pipe" / RUNS / record
    shutil.copytree(STORE / RUNS / record, run_dir)
    info = json.loads((run_dir / RECORD).read_text())
    (run_dir / RECORD).unlink()
    for log in sorted((run_dir / "monitor").glob("*.gz")):
        log.with_suffix("").write_bytes(gzip.decompress(log.read_bytes()))
        log.unlink()
    if info["encoder"] is not None:
        name = info["encoder"]["folder"]
        shutil.copytree(STORE / ENCODERS / name, world / "pipe" / ENCODERS / name)
        text = (run_dir / "config.yaml").read_text()
        (run_dir / "config.yaml").write_text(text.replace(f"{ENCODERS}/{name}", str(world / "pipe" / ENCODERS / name)))
    return run_dir


def edit_config(run_dir: Path, change: Callable[[dict], None]) -> None:
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    change(config)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))


def test_a_plain_run_and_a_learned_one_merge(tmp_path: Path) -> None:
    """The positive control: the runs the attacks below start from merge, encoder included."""
    plain_run(tmp_path), plain_run(tmp_path, LEARNED)
    written = merge_into_store([tmp_path / "pipe" / RUNS], tmp_path / "store", log=lambda _: None)
    assert sorted(p.name for p in written) == [LEARNED, PLAIN]
    assert [r.name for r in store_records(tmp_path / "store")] == [LEARNED, PLAIN]
    assert len(list((tmp_path / "store" / ENCODERS).iterdir())) == 1


def _dotdot(run_dir: Path, world: Path) -> None:
    edit_config(run_dir, lambda c: c["srl_model"].__setitem__("name", "../../../escaped"))


def _environment(run_dir: Path, world: Path) -> None:
    edit_config(run_dir, lambda c: c["algo"].__setitem__("gamma", "${oc.env:HOME}"))


def _decode(run_dir: Path, world: Path) -> None:
    edit_config(run_dir, lambda c: c.__setitem__("note", "${oc.decode:'{_target_: os.system, _args_: [id]}'}"))


def _symlinked_scores(run_dir: Path, world: Path) -> None:
    (world / "secret.txt").write_text("user's file\n")
    (run_dir / "test_returns.csv").unlink()
    os.symlink(world / "secret.txt", run_dir / "test_returns.csv")


def _encoder_outside(run_dir: Path, world: Path) -> None:
    """The config names the user's own folder (outside the folders merged) as its encoder."""
    name = next((world / "pipe" / ENCODERS).iterdir()).name
    private = world / "private" / name
    shutil.move(world / "pipe" / ENCODERS / name, private)
    text = (run_dir / "config.yaml").read_text()
    (run_dir / "config.yaml").write_text(text.replace(str(world / "pipe" / ENCODERS / name), str(private)))


def _infinite_metrics(run_dir: Path, world: Path) -> None:
    text = (run_dir / "metrics.json").read_text()
    (run_dir / "metrics.json").write_text(text.replace("{", '{"test/extra": Infinity,', 1))


def _nan_metrics(run_dir: Path, world: Path) -> None:
    text = (run_dir / "metrics.json").read_text()
    (run_dir / "metrics.json").write_text(text.replace("{", '{"test/extra": NaN,', 1))


def _fifo_monitor(run_dir: Path, world: Path) -> None:
    log = next((run_dir / "monitor").iterdir())
    log.unlink()
    os.mkfifo(log)


ATTACKS: dict[str, tuple[Callable[[Path, Path], None], str, str]] = {
    "dotdot-name": (_dotdot, PLAIN, r"srl_model.name='\.\./\.\./\.\./escaped' is not a bare name"),
    "environment": (_environment, PLAIN, r"algo.gamma='\$\{oc.env:HOME\}' is an interpolation"),
    "decode": (_decode, PLAIN, r"note=.*is an interpolation"),
    "symlinked-scores": (_symlinked_scores, PLAIN, r"test_returns.csv is a symlink"),
    "encoder-outside": (_encoder_outside, LEARNED, r"srl_model.checkpoint='\S+/private/\S+' lies outside"),
    "infinite-metrics": (_infinite_metrics, PLAIN, r"metrics.json: not plain JSON \(with finite numbers"),
    "nan-metrics": (_nan_metrics, PLAIN, r"metrics.json: not plain JSON \(with finite numbers"),
    "fifo-monitor": (_fifo_monitor, PLAIN, r"monitor.csv is a FIFO"),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_merging_a_hostile_run_refuses_in_one_line_and_writes_nothing(tmp_path: Path, attack: str) -> None:
    plant, record, message = ATTACKS[attack]
    run_dir = plain_run(tmp_path, record)
    plant(run_dir, tmp_path)
    store = tmp_path / "store"
    shutil.copytree(STORE / RUNS / "random_seed0", store / RUNS / "random_seed0")  # a store that exists
    shutil.copytree(STORE / ENCODERS, store / ENCODERS)
    before = snapshot(tmp_path)
    with pytest.raises(ConfigError, match=message) as error:
        merge_into_store([tmp_path / "pipe" / RUNS], store, log=lambda _: None)
    assert "\n" not in str(error.value)
    assert snapshot(tmp_path) == before
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "pipe" / "escaped").exists()


def stored_copy(tmp_path: Path, record: str, field: str, value: object) -> Path:
    """``tmp_path/src/runs/<record>``: a stored record copied alone (no encoders/ beside it), ``field`` edited."""
    copy = tmp_path / "src" / RUNS / record
    shutil.copytree(STORE / RUNS / record, copy)
    info = json.loads((copy / RECORD).read_text())
    info[field] = value
    (copy / RECORD).write_text(json.dumps(info).replace('"__inf__"', "Infinity"))
    return copy


def test_a_record_with_infinity_is_refused(tmp_path: Path) -> None:
    stored_copy(tmp_path, PLAIN, "cpu_seconds", "__inf__")
    with pytest.raises(ConfigError, match=r"record.json: not plain JSON \(with finite numbers") as error:
        merge_into_store([tmp_path / "src"], tmp_path / "store", log=lambda _: None)
    assert "\n" not in str(error.value) and not (tmp_path / "store").exists()


def test_a_record_without_its_encoder_needs_the_stores_with_its_hash(tmp_path: Path) -> None:
    """Copied without ``encoders/``: refused into a store lacking the encoder, refused against another hash,
    accepted where the store holds that very encoder."""
    stored_copy(tmp_path, LEARNED, "format", 1)
    with pytest.raises(ConfigError, match=r"its encoder \S+ is neither beside it nor in the store") as error:
        merge_into_store([tmp_path / "src"], tmp_path / "store", log=lambda _: None)
    assert "\n" not in str(error.value) and not (tmp_path / "store").exists()
    store = tmp_path / "store"
    shutil.copytree(STORE / ENCODERS, store / ENCODERS)
    name = json.loads((STORE / RUNS / LEARNED / RECORD).read_text())["encoder"]["folder"]
    (store / ENCODERS / name / "content_hash").write_text("0" * 64 + "\n")
    before = snapshot(tmp_path)
    with pytest.raises(ConfigError, match=r"names encoder content hash e0e569c4b2aa, but the store's \S+ holds 000"):
        merge_into_store([tmp_path / "src"], store, log=lambda _: None)
    assert snapshot(tmp_path) == before
    shutil.copy(STORE / ENCODERS / name / "content_hash", store / ENCODERS / name / "content_hash")
    assert [p.name for p in merge_into_store([tmp_path / "src"], store, log=lambda _: None)] == [LEARNED]


def test_a_stored_run_with_another_config_is_reported(tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(STORE / RUNS / PLAIN, store / RUNS / PLAIN)
    run_dir = plain_run(tmp_path)  # the same run: same seed, same scores
    edit_config(run_dir, lambda c: c["algo"].__setitem__("gamma", 0.5))
    with pytest.raises(ConfigError, match=r"scores of stored ground_truth_seed0 but algo.gamma=0.5, not"):
        merge_into_store([tmp_path / "pipe" / RUNS], store, log=lambda _: None)
    plain_run(tmp_path / "again")  # unchanged: skipped, saying nothing
    assert merge_into_store([tmp_path / "again" / "pipe" / RUNS], store, log=lambda _: None) == []


def test_the_table_of_a_store_missing_an_encoder_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    store = tmp_path / "store"
    shutil.copytree(STORE, store)
    name = json.loads((STORE / RUNS / LEARNED / RECORD).read_text())["encoder"]["folder"]
    shutil.rmtree(store / ENCODERS / name)
    with pytest.raises(ConfigError, match=rf"the encoder {name} of autoencoder's records is missing") as error:
        run(RecordsSettings(action="table", store=str(store), sources=[]))
    assert "\n" not in str(error.value)


def test_a_shard_without_a_load_prints_a_dash(tmp_path: Path) -> None:
    (tmp_path / "shards.csv").write_text(
        "shard,seeds,commit,records,cpu_seconds,wall_seconds,load_mean,load_max,finished\n"
        "a,0 1,abc,2,,60,,,no\nb,2,abc,1,10,60,1.5,2.0,yes\n"
    )
    rows = _shard_lines(tmp_path)[2:]
    assert rows[0].split(" | ")[5] == "—" and rows[1].split(" | ")[5] == "1.5, 2.0"


def test_the_callers_keys_are_free_in_a_records_config() -> None:
    """Where and how a run ran (the memory budget, the device, paths) is no difference between two records."""
    from omegaconf import OmegaConf

    from rlzoo.results.records import flat_values

    config = OmegaConf.create({"memory_budget_gb": 64, "run_dir": "/x", "hardware": {"device": "cpu"}, "gamma": 0.99})
    assert flat_values(config) == {"gamma": 0.99}
