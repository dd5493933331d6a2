"""Result records (``rlzoo.results.records``, ``python -m rlzoo.records``): shards of a tiny pipeline merged into a
store give the table of one whole run; merging refuses what cannot form one table; records are read as hostile data;
one stored run re-runs to the last digit."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from rlzoo.errors import ConfigError
from rlzoo.pipeline.command import plan_pipeline, run_pipeline
from rlzoo.pipeline.rerun import copy_stored_encoders, rerun_record
from rlzoo.pipeline.spec import pipeline_spec
from rlzoo.plot import PlotSettings, plot
from rlzoo.results.records import (
    ENCODERS,
    RECORD,
    RUNS,
    check_records,
    read_record,
    store_records,
)
from rlzoo.results.store_merge import merge_into_store
from test_pipeline import TINY

# Three tiny pipelines (18 runs, two encoders) for the module: about 3 min on two idle cores, more under load.
pytestmark = pytest.mark.timeout(2400)
# Two representations of the tiny pipeline (an encoder for one of them), no report.
SHARD = [*(o for o in TINY if not o.startswith("pipeline.sweep.srl_model")),
         "pipeline.sweep.srl_model=[ground_truth,srl_splits]", "pipeline.report=false"]  # fmt: skip


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Pipeline dirs of seeds [0,1,2] (a), [3,4,5] (b) and [0..5] in one run (whole)."""
    root = tmp_path_factory.mktemp("shards")
    folders = {}
    for name, seeds in (("a", "[0,1,2]"), ("b", "[3,4,5]"), ("whole", "[0,1,2,3,4,5]")):
        folders[name] = root / name
        spec = pipeline_spec([*SHARD, f"pipeline.dir={folders[name]}", f"pipeline.sweep.seed={seeds}"])
        run_pipeline(spec, lambda line: None)
    return folders


def write_store(folder: Path, sources: list[Path], overrides: list[str] = SHARD) -> Path:
    """A store of the records under ``sources``, with a ``store.yaml`` naming the tiny pipeline's overrides (as a
    store names them: plain keys, the step settings without the ``+`` the rerun adds)."""
    merge_into_store(sources, folder, log=lambda line: None)
    keep = [o.lstrip("+") for o in overrides if not o.startswith(("experiment=", "pipeline.sweep.seed"))]
    description = {"experiment": "srl_benchmark_small", "commit": "unknown", "verdict_of": "srl_splits",
                   "overrides": keep}  # fmt: skip
    (folder / "store.yaml").write_text(yaml.safe_dump(description))
    return folder


def table_csv(folder: Path, out: Path) -> str:
    plot(PlotSettings(dir=str(folder), out=str(out), verdict_of="srl_splits", baseline=None), log=lambda line: None)
    return (out / "results.csv").read_text()


def test_two_shards_merged_give_the_table_of_one_run(shards: dict[str, Path], tmp_path: Path) -> None:
    store = write_store(tmp_path / "store", [shards["a"], shards["b"]])
    assert sorted(p.name for p in (store / RUNS).iterdir()) == [
        f"{m}_seed{s}" for m in ("ground_truth", "srl_splits") for s in range(6)
    ]
    merged = table_csv(store / RUNS, tmp_path / "merged")
    assert merged == table_csv(shards["whole"] / "runs", tmp_path / "whole")
    rows = list(csv.DictReader(io.StringIO(merged)))
    assert [(row["seeds"], row["seed_values"]) for row in rows] == [("6", "0 1 2 3 4 5")] * 2  # the shards' records
    # a record is small and holds no weights
    record = store / RUNS / "srl_splits_seed0"
    assert sum(p.stat().st_size for p in record.rglob("*") if p.is_file()) < 40_000
    assert not list(record.rglob("*.zip")) and not list(record.rglob("*.pt"))
    assert (store / "encoders" / read_record(record).info["encoder"]["folder"] / "encoder.pt").is_file()
    # no machine path: the encoder's folder, wherever the resolved config repeats it, is the store's name
    config = (record / "config.yaml").read_text()
    assert str(shards["a"]) not in config and "checkpoint: encoders/srl_splits" in config


def test_a_record_folder_reads_as_its_run_dirs(shards: dict[str, Path], tmp_path: Path) -> None:
    store = write_store(tmp_path / "store", [shards["a"]])
    assert table_csv(store / RUNS, tmp_path / "records") == table_csv(shards["a"] / "runs", tmp_path / "runs")


def test_merging_again_adds_only_what_is_new(shards: dict[str, Path], tmp_path: Path) -> None:
    store = write_store(tmp_path / "store", [shards["a"]])
    lines: list[str] = []
    merge_into_store([shards["a"], shards["b"]], store, log=lines.append)
    assert lines == [f"rlzoo.records: 6 new record(s) in {store}, 6 there already"]


def test_a_resumed_run_is_left_out(shards: dict[str, Path], tmp_path: Path) -> None:
    resumed = tmp_path / "runs" / "MobileRobot_ground_truth_seed3"
    shutil.copytree(shards["b"] / "runs" / "MobileRobot_ground_truth_seed3", resumed)
    (resumed / "resumes.csv").write_text("time,steps\n2026-01-01T00:00:00,320\n")
    lines: list[str] = []
    assert merge_into_store([tmp_path / "runs"], tmp_path / "store", log=lines.append) == []
    assert lines[0] == f"rlzoo.records: left out {resumed}: it was resumed, so it is not the uninterrupted run"


def edited(store: Path, name: str, change: Callable[[dict], None], file: str = RECORD) -> None:
    path = store / RUNS / name / file
    values = json.loads(path.read_text()) if path.suffix == ".json" else yaml.safe_load(path.read_text())
    change(values)
    path.write_text(json.dumps(values) if path.suffix == ".json" else yaml.safe_dump(values))


def other_budget(config: dict) -> None:
    config["total_timesteps"] = 1200


def other_encoder(info: dict) -> None:
    info["encoder"]["content_hash"] = "f" * 64


@pytest.mark.parametrize(
    ("change", "file", "message"),
    [
        (other_budget, "config.yaml", r"^srl_splits: total_timesteps is 600 in .* but 1200 in .*seed[345]"),
        (other_encoder, RECORD, r"^srl_splits: two encoders \(content hashes [0-9a-f]{12} in .* and ffffffffffff in"),
    ],
)
def test_merging_refuses_shards_that_differ(
    shards: dict[str, Path], tmp_path: Path, change: Callable[[dict], None], file: str, message: str
) -> None:
    other = write_store(tmp_path / "other", [shards["b"]])
    shutil.rmtree(other / "encoders")  # bare records: their encoder is known by its content hash only
    for seed in (3, 4, 5):
        edited(other, f"srl_splits_seed{seed}", change, file)
    store = write_store(tmp_path / "store", [shards["a"]])
    before = sorted(p.name for p in (store / RUNS).iterdir())
    with pytest.raises(ConfigError, match=message):
        merge_into_store([other / RUNS], store)
    assert sorted(p.name for p in (store / RUNS).iterdir()) == before  # nothing written


def test_merging_refuses_one_seed_twice(shards: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^seed 0 of ground_truth is there twice \(.*\); a store holds each"):
        merge_into_store([shards["a"], shards["whole"]], tmp_path / "store")
    assert not (tmp_path / "store").exists()


# Hostile records: each payload, written into a copy of a real record, is refused in one line and runs nothing.
MARKER = "rlzoo-record-marker"
CONFIG_PAYLOADS = [
    "seed: 0\nx: !!python/object/apply:os.system ['touch {marker}']\n",
    "seed: 0\nsrl_model: {{name: ground_truth}}\nx: ${{oc.env:HOME}}\n",
    "seed: 0\nsrl_model: {{name: ground_truth}}\nx: [1, {{y: '${{oc.decode:\"{{_target_: os.system}}\"}}'}}]\n",
    "seed: 0\nsrl_model: {{name: ground_truth}}\n'${{oc.env:HOME}}': 1\n",
    "- just\n- a list\n",
    "{{{{ not yaml",
]
INFO_FIELDS = {"format": [2, None, "1"], "representation": ["srl_splits", 3, None], "seed": [1, True, "0", 0.5],
               "cpu_seconds": [-1, "fast", float("nan"), None], "wall_seconds": [float("inf"), True],
               "encoder": [{"folder": "../../x", "content_hash": "0" * 64}, {"folder": "e", "content_hash": "xyz"},
                           "encoders/e", {"folder": "/abs", "content_hash": "a" * 64}]}  # fmt: skip


def info_payloads() -> list[tuple[str, object]]:
    return [(key, value) for key, values in INFO_FIELDS.items() for value in values]


@pytest.fixture(scope="module")
def clean_record(shards: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = write_store(tmp_path_factory.mktemp("clean"), [shards["a"]])
    return store / RUNS / "ground_truth_seed0"


def hostile_copy(clean: Path, tmp_path: Path) -> Path:
    copy = tmp_path / RUNS / clean.name
    shutil.copytree(clean, copy)
    return copy


@pytest.mark.parametrize("payload", CONFIG_PAYLOADS)
def test_a_hostile_config_is_refused_and_runs_nothing(clean_record: Path, tmp_path: Path, payload: str) -> None:
    record = hostile_copy(clean_record, tmp_path)
    marker = tmp_path / MARKER
    (record / "config.yaml").write_text(payload.format(marker=marker))
    with pytest.raises(ConfigError) as refused:
        store_records(tmp_path)
    assert "\n" not in str(refused.value) and str(record) in str(refused.value)
    assert not marker.exists()


@pytest.mark.parametrize(("key", "value"), info_payloads())
def test_a_hostile_record_json_is_refused(clean_record: Path, tmp_path: Path, key: str, value: object) -> None:
    record = hostile_copy(clean_record, tmp_path)
    edited(tmp_path, record.name, lambda info: info.__setitem__(key, value))
    with pytest.raises(ConfigError, match=r"record\.json: "):
        store_records(tmp_path)


def test_a_symlink_or_a_misnamed_record_is_refused(clean_record: Path, tmp_path: Path) -> None:
    record = hostile_copy(clean_record, tmp_path)
    (record / "metrics.json").unlink()
    (record / "metrics.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(ConfigError, match=r"metrics\.json: a symlink in a record"):
        store_records(tmp_path)
    (record / "metrics.json").unlink()
    shutil.copy(clean_record / "metrics.json", record / "metrics.json")
    record.rename(record.with_name("ground_truth_seed7"))
    with pytest.raises(ConfigError, match=r"its folder is named ground_truth_seed7, not ground_truth_seed0"):
        store_records(tmp_path)


def test_check_records_accepts_a_clean_store(shards: dict[str, Path], tmp_path: Path) -> None:
    store = write_store(tmp_path / "store", [shards["a"], shards["b"]])
    check_records(store_records(store))  # the merge check itself: no refusal of what merge wrote


def test_a_stored_run_reruns_to_the_last_digit(shards: dict[str, Path], tmp_path: Path) -> None:
    store = write_store(tmp_path / "store", [shards["a"]])
    lines: list[str] = []
    said = rerun_record(store, "srl_splits", 1, tmp_path / "rerun", log=lines.append)
    assert said.line.startswith("rlzoo.records: srl_splits_seed1 equals its record to the last digit")
    assert not said.failed
    assert any("from the store" in line for line in lines)  # the stored encoder, not a new one
    # a record whose scores were changed: the rerun names the difference in one line
    edited(store, "srl_splits_seed1", lambda m: m.__setitem__("test/mean_return", 1e6), file="metrics.json")
    said = rerun_record(store, "srl_splits", 1, tmp_path / "rerun2", log=lines.append)
    assert said.line.startswith(
        "rlzoo.records: srl_splits_seed1 differs from its record on the same platform, a broken reproduction: "
    )
    assert "test/mean_return 1000000.0 → " in said.line
    assert said.failed and "\n" not in said.line


def test_the_command_refuses_a_bad_action_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rlzoo.records", "action=tabel", f"store={tmp_path}"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert done.stderr.strip() == "rlzoo.records: error: action='tabel'; allowed: merge, table, rerun"
    assert list(tmp_path.iterdir()) == []


def test_a_shard_in_a_fresh_dir_trains_no_stored_encoder(shards: dict[str, Path], tmp_path: Path) -> None:
    """The store's encoders seed a fresh pipeline dir's cache (benchmarks/store_shard.py does it first): the shard
    trains none of them again, and its records join the store under the same encoder hash."""
    store = write_store(tmp_path / "store", [shards["a"]])
    (name,) = [p.name for p in (store / ENCODERS).iterdir()]
    fresh = tmp_path / "fresh"
    spec = pipeline_spec([*SHARD, f"pipeline.dir={fresh}", "pipeline.sweep.seed=[6]"])
    plan_pipeline(spec)  # the pipeline dir claimed, as the shard script has the store's commit do it
    assert copy_stored_encoders(store, fresh / "encoders", log=lambda line: None) == [name]
    assert copy_stored_encoders(store, fresh / "encoders", log=lambda line: None) == []  # there already
    weights = (fresh / "encoders" / name / "encoder.pt").read_bytes()
    run_pipeline(spec, lambda line: None)
    assert (fresh / "encoders" / name / "encoder.pt").read_bytes() == weights  # not trained again
    merge_into_store([fresh], store, log=lambda line: None)
    assert {"ground_truth_seed6", "srl_splits_seed6"} <= {r.name for r in store_records(store)}


def test_a_rerun_of_a_record_the_store_lacks_names_what_it_holds(tmp_path: Path) -> None:
    """An unknown representation: the store's representations on one line, with the close one suggested; a known
    representation with an unknown seed: the seeds the store holds of it."""
    from omegaconf import OmegaConf

    from rlzoo.pipeline.rerun import stored_record
    from rlzoo.results.records import Record

    records = [Record(tmp_path / f"{m}_seed{s}", OmegaConf.create(), {"representation": m, "seed": s}, {})
               for m in ("ground_truth", "raw_pixels", "srl_splits") for s in (2, 0, 1)]  # fmt: skip
    assert stored_record(records, tmp_path, "srl_splits", 1).path.name == "srl_splits_seed1"
    with pytest.raises(ConfigError) as refused:
        stored_record(records, tmp_path, "raw_pixel", 0)
    assert str(refused.value) == (
        f"representation='raw_pixel' is not in {tmp_path}; its representations: ground_truth, raw_pixels, "
        "srl_splits; did you mean raw_pixels?"
    )
    with pytest.raises(ConfigError, match=r"^seed=7: .* holds no record srl_splits_seed7; its seeds of srl_splits: "
                       r"0, 1, 2$"):  # fmt: skip
        stored_record(records, tmp_path, "srl_splits", 7)


def test_the_table_without_rliable_is_one_line_naming_the_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rlzoo.records as records

    store = tmp_path / "store"
    shutil.copytree(Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "srl_benchmark_small", store)
    monkeypatch.setattr("rlzoo.reporting.store_table.rliable_installed", lambda: False)
    docs = tmp_path / "results.md"
    docs.write_text("kept\n")
    with pytest.raises(ConfigError, match=r"^the store's table needs rliable .*: pip install -e \"\.\[stats\]\"$"):
        records.write_table(store, docs)
    assert docs.read_text() == "kept\n" and sorted(p.name for p in tmp_path.iterdir()) == ["results.md", "store"]
