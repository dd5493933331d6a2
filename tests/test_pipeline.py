"""python -m rlzoo.pipeline: datasets, encoders, the RL sweep and the table from one command, cached by content."""

from __future__ import annotations

import csv
import os
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from omegaconf import DictConfig, OmegaConf

from rlzoo.config import CONFIG_DIR
from rlzoo.errors import ConfigError
from rlzoo.pipeline import spec as spec_module
from rlzoo.pipeline.command import main, run_pipeline
from rlzoo.pipeline.launch import Job
from rlzoo.pipeline.spec import IDENTITY, content_key, pipeline_spec
from rlzoo.pipeline.steps import Step, run_steps
from rlzoo.results.stats import rliable_installed
from test_loggers import finished_records

# The srl_benchmark_small experiment, shrunk: 300 frames at 16 x 16, 1-epoch encoders of 8 dims, 600 RL steps.
TINY = [
    "experiment=srl_benchmark_small",
    "pipeline.collect.n_samples=300", "pipeline.collect.image_size=16", "pipeline.collect.n_workers=0",
    "+pipeline.collect.progress_bar=false",
    "pipeline.srl_train.srl_model.training.epochs=1", "+pipeline.srl_train.srl_model.training.batch_size=64",
    "+pipeline.srl_train.srl_model.state_dim=8", "pipeline.srl_train.srl_model.network.channels=4",
    "pipeline.srl_train.srl_model.network.keypoints=4",
    "+pipeline.srl_train.progress_bar=false", "+pipeline.srl_train.device=cpu",
    "+pipeline.srl_model.raw_pixels.height=40", "+pipeline.srl_model.raw_pixels.width=40",
    "pipeline.sweep.srl_model=[ground_truth,raw_pixels,random,srl_splits]",
    "total_timesteps=600", "n_envs=2", "algo.n_steps=64", "algo.batch_size=64", "algo.n_epochs=1",
    "+algo.policy_kwargs.net_arch=[16]", "checkpoint_freq=0", "test_episodes=1", "verbose=0", "logger.formats=[csv]",
]  # fmt: skip
METHODS = ("ground_truth", "raw_pixels", "random", "srl_splits")


def test_from_nothing_to_the_table_then_only_what_is_missing(tmp_path: Path) -> None:
    folder = tmp_path / "pipe"
    lines: list[str] = []
    statuses = run_pipeline(pipeline_spec([*TINY, f"pipeline.dir={folder}", "pipeline.sweep.seed=[0]"]), lines.append)

    assert statuses == {"done": [f"MobileRobot_{m}_seed0" for m in METHODS]}
    (dataset,) = (folder / "datasets").iterdir()
    assert (dataset / "dataset.json").is_file() and OmegaConf.load(dataset / "config.yaml").env.random_target
    encoders = sorted(p.name.split("-")[0] for p in (folder / "encoders").iterdir())
    assert encoders == ["random", "srl_splits"]  # ground truth and raw pixels need none
    # srl_benchmark_small trains them at once (pipeline.encoder_workers: 2), each in its own process of one thread
    assert {OmegaConf.load(f).torch_threads for f in (folder / "encoders").glob("*/config.yaml")} == {1}
    # and launches the runs that need no encoder beside them (pipeline.runs_beside_encoders), the others as soon as
    # their encoder is trained (random's and srl_splits' in one sweep, or one each, as they finish)
    said = "\n".join(lines)
    assert "runs: 0 of 2 finished (cached); 2 to train" in said.split("encoder srl_splits on MobileRobot: done")[0]
    assert said.count(" to train in ") in (2, 3)
    config = OmegaConf.load(folder / "runs" / "MobileRobot_srl_splits_seed0" / "config.yaml")
    assert config.srl_model.name == "srl_splits" and config.srl_model.state_dim == 8 and config.srl_model.height == 16
    assert config.srl_model.checkpoint.startswith(str(folder / "encoders" / "srl_splits-MobileRobot-"))
    assert OmegaConf.load(folder / "runs" / "MobileRobot_raw_pixels_seed0" / "config.yaml").env.render_size == 40
    table = (folder / "results" / "results.md").read_text()
    assert all(f"| {m} " in table for m in METHODS) and (folder / "report.html").is_file()
    first = {m: (folder / "runs" / f"MobileRobot_{m}_seed0" / "metrics.json").stat().st_mtime_ns for m in METHODS}

    # One more seed, with logger=wandb (not part of the experiment): only the new runs train, the rest is reused.
    lines.clear()
    again = [*TINY, f"pipeline.dir={folder}", "pipeline.sweep.seed=[0,1]", "logger=wandb"]
    statuses = run_pipeline(pipeline_spec(again), lines.append)

    said = "\n".join(lines)
    assert "dataset MobileRobot: cached" in said and "encoder srl_splits on MobileRobot: cached" in said
    assert "runs: 4 of 8 finished (cached); 4 to train" in said
    assert sorted(statuses) == ["done"] and len(statuses["done"]) == 8
    for method, mtime in first.items():
        assert (folder / "runs" / f"MobileRobot_{method}_seed0" / "metrics.json").stat().st_mtime_ns == mtime
    with (folder / "results" / "results.csv").open() as stream:
        rows = {row["srl_model"]: row for row in csv.DictReader(stream)}
    assert {name: row["seeds"] for name, row in rows.items()} == dict.fromkeys(METHODS, "2")  # 2 seeds each
    assert all(rows[m]["p_value"] != "" for m in METHODS if m != "ground_truth")  # a p-value against ground truth
    assert_rliable_columns(rows)
    # The new runs and the table share the sweep's W&B group (offline files, read back).
    (results,) = (folder / "wandb").glob("offline-run-*/run-*.wandb")
    (job,) = (folder / "runs" / "MobileRobot_random_seed1" / "wandb").glob("offline-run-*/run-*.wandb")
    groups = [next(r.run.run_group for r in finished_records(f) if r.HasField("run")) for f in (results, job)]
    assert groups == [str(folder / "runs")] * 2
    assert "W&B: the table and 1 figure(s) in group" in said

    # A crash (a run lost its final files): only that run trains again.
    crashed = folder / "runs" / "MobileRobot_random_seed1"
    (crashed / "metrics.json").unlink()
    (crashed / "model.zip").unlink()
    lines.clear()
    run_pipeline(pipeline_spec([*again, "pipeline.videos=false"]), lines.append)
    assert "runs: 7 of 8 finished (cached); 1 to train" in "\n".join(lines) and (crashed / "metrics.json").is_file()

    # A run trained on another encoder of its representation (its method's conf/srl_model file changed since, which
    # gives the encoder a new folder) is refused by name, never mixed into the table, and nothing is touched.
    stale = folder / "runs" / "MobileRobot_srl_splits_seed1"
    config = OmegaConf.load(stale / "config.yaml")
    config.srl_model.checkpoint = str(folder / "encoders" / "srl_splits-MobileRobot-0123456789ab")
    OmegaConf.save(config, stale / "config.yaml")
    before = {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}
    message = r"RL run\(s\) MobileRobot_srl_splits_seed1 \(trained on srl_splits-MobileRobot-0123456789ab\) do not use"
    with pytest.raises(ConfigError, match=message):
        run_pipeline(pipeline_spec(again), lines.append)
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()} == before


def assert_rliable_columns(rows: dict[str, dict[str, str]]) -> None:
    """The pipeline's results.csv carries rliable's IQM with its 95 % CI, and P(improvement) over ground truth (the
    ``stats`` extra; without it the cells stay empty, as the table's note says)."""
    if not rliable_installed():
        assert all(row["iqm"] == "" for row in rows.values())
        return
    for method, row in rows.items():
        iqm, low, high = (float(row[k]) for k in ("iqm", "iqm_ci_low", "iqm_ci_high"))
        assert low <= iqm <= high, method
        assert (row["p_improvement"] == "") == (method == "ground_truth"), method
    assert all(0 <= float(rows[m]["p_improvement"]) <= 1 for m in METHODS if m != "ground_truth")


def test_bad_input_stops_before_anything_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "pipe"
    with pytest.raises(ConfigError, match=r"sweeps srl_model=nope: not an option of conf/srl_model \(options: "):
        pipeline_spec([*TINY, f"pipeline.dir={folder}", "pipeline.sweep.srl_model=[ground_truth,nope]"])
    with pytest.raises(ConfigError, match=r"pipeline.encoder_workers=0; allowed: a whole number ≥ 1"):
        pipeline_spec([*TINY, f"pipeline.dir={folder}", "pipeline.encoder_workers=0"])
    with pytest.raises(ConfigError, match=r"pipeline.runs_beside_encoders='maybe'; allowed: true or false"):
        pipeline_spec([*TINY, f"pipeline.dir={folder}", "pipeline.runs_beside_encoders=maybe"])
    with pytest.raises(ConfigError, match=r"sweeps env=Mars: not an option of conf/env"):
        pipeline_spec([*TINY, f"pipeline.dir={folder}", "pipeline.sweep.env=[MobileRobot,Mars]"])
    # An encoder setting no encoder could train with is refused while planning, before the dataset is collected.
    bad_encoder = pipeline_spec([*TINY, f"pipeline.dir={folder}", "pipeline.srl_train.whiten=0"])
    with pytest.raises(ConfigError, match=r"pipeline.srl_train of random on MobileRobot: whiten=0(\.0)?; allowed"):
        run_pipeline(bad_encoder, lambda _: None)
    assert not folder.exists()
    # An srl_model key that no method has would do nothing: refused, for every learned method and for one.
    unknown = pipeline_spec([*TINY, f"pipeline.dir={folder}", "+pipeline.srl_train.srl_model.network.depth=3"])
    with pytest.raises(ConfigError, match=r"pipeline.srl_train: srl_model.network.depth=3 sets a key that no learned"):
        run_pipeline(unknown, lambda _: None)
    with pytest.raises(ConfigError, match=r"pipeline.srl_model has \['pca'\], which the sweep does not run"):
        pipeline_spec([*TINY, f"pipeline.dir={folder}", "+pipeline.srl_model.pca.state_dim=3"])
    # The experiment's own settings of srl_splits stay while the sweep is narrowed to other representations.
    narrowed = pipeline_spec([*TINY, f"pipeline.dir={folder}", "pipeline.sweep.srl_model=[ground_truth]"])
    assert narrowed.srl_model["srl_splits"] == ["srl_model.losses.inverse.learn_scale=true"]
    assert narrowed.identity() == pipeline_spec([*TINY, f"pipeline.dir={folder}"]).identity()
    one = pipeline_spec([*TINY, f"pipeline.dir={folder}", "+pipeline.srl_model.ground_truth.depth=3"])
    with pytest.raises(ConfigError, match=r"pipeline.srl_model.ground_truth: srl_model.depth=3 sets a key that"):
        run_pipeline(one, lambda _: None)
    assert not folder.exists()
    # A folder holding another experiment's cache (here: other RL settings) is refused, never mixed.
    folder.mkdir()
    (folder / "experiment.yaml").write_text(
        OmegaConf.to_yaml(OmegaConf.create(pipeline_spec([*TINY, f"pipeline.dir={folder}"]).identity()))
    )
    other = pipeline_spec([*TINY, f"pipeline.dir={folder}", "total_timesteps=700"])
    with pytest.raises(ConfigError, match=r"holds the cache of another experiment \(train: .*total_timesteps=600"):
        run_pipeline(other, lambda _: None)
    assert sorted(p.name for p in folder.iterdir()) == ["experiment.yaml"]
    (tmp_path / "stranger").mkdir()
    (tmp_path / "stranger" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match=r"is not empty and is no pipeline's \(no experiment.yaml\)"):
        run_pipeline(pipeline_spec([*TINY, f"pipeline.dir={tmp_path / 'stranger'}"]), lambda _: None)
    argv = ["rlzoo.pipeline", *TINY, f"pipeline.dir={tmp_path / 'cli'}", "pipeline.sweep.srl_model=[nope]"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exited:
        main()
    assert str(exited.value.code).startswith("rlzoo.pipeline: error: the experiment sweeps srl_model=nope")
    assert not (tmp_path / "cli").exists()


def test_a_comment_in_the_experiment_files_keeps_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = pipeline_spec([*TINY, f"pipeline.dir={tmp_path / 'pipe'}"])
    before = spec.identity()
    # A dir whose record holds the files' text (an older form), not their content, is still this experiment's cache.
    spec.dir.mkdir()
    legacy = before | {"experiment_files": content_key(spec.experiment_files())}
    (spec.dir / IDENTITY).write_text(OmegaConf.to_yaml(OmegaConf.create(legacy)))
    spec.claim_dir()  # and its record now holds the files' content
    assert (
        OmegaConf.load(spec.dir / IDENTITY).experiment_files == before["experiment_files"] != legacy["experiment_files"]
    )
    conf = tmp_path / "conf"
    texts = {
        group: (CONFIG_DIR / group / "srl_benchmark_small.yaml").read_text() for group in ("experiment", "pipeline")
    }
    for group, text in texts.items():
        (conf / group).mkdir(parents=True)
        (conf / group / "srl_benchmark_small.yaml").write_text(text + "# a note on the experiment\n")
    monkeypatch.setattr(spec_module, "CONFIG_DIR", conf)
    assert spec.identity() == before  # a comment changes nothing
    spec.check_dir()
    changed = texts["experiment"].replace("total_timesteps: 250000", "total_timesteps: 250001")
    (conf / "experiment" / "srl_benchmark_small.yaml").write_text(changed)
    assert spec.identity()["experiment_files"] != before["experiment_files"]  # a value does
    with pytest.raises(ConfigError, match=r"holds the cache of another experiment \(experiment_files: "):
        spec.check_dir()


def test_each_encoders_runs_start_as_soon_as_it_is_trained(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The runs that need no encoder launch at once; a fast encoder's runs launch while a slow encoder still trains:
    # the slow one below finishes only once the fast one's sweep has started (after all encoders, it never would).
    from rlzoo.pipeline import command

    fast_launched = threading.Event()
    order: list[str] = []

    def sweep(spec: object, jobs: list[Job], say: object) -> int:
        names = ",".join(sorted(job.option for job in jobs))
        order.append(f"sweep {names}")
        if names == "fast":
            fast_launched.set()
        return 0

    def train_encoders(steps: list[SimpleNamespace], action: object, workers: int, say: object, **kwargs: Any) -> None:
        if not steps:  # the datasets: none here
            return
        on_done = kwargs["on_done"]
        order.append("fast trained")
        on_done(steps[0])
        if not fast_launched.wait(timeout=20):
            order.append("slow gave up waiting")
        order.append("slow trained")
        on_done(steps[1])

    jobs = [Job({"env": "E", "srl_model": m, "seed": 0}, m) for m in ("ground_truth", "fast", "slow")]
    encoders = {("E", m): SimpleNamespace(folder=Path(m), done=False) for m in ("fast", "slow")}
    spec = SimpleNamespace(experiment="x", dir=tmp_path, encoder_workers=2, runs_beside_encoders=True, slurm=None)
    plan = SimpleNamespace(spec=spec, datasets={}, encoders=encoders, jobs=jobs)
    monkeypatch.setattr(command, "plan_pipeline", lambda spec: plan)
    monkeypatch.setattr(command, "run_steps", train_encoders)
    monkeypatch.setattr(command, "run_sweep", sweep)
    monkeypatch.setattr(command, "job_statuses", lambda spec, jobs: {"done": [job.option for job in jobs]})
    monkeypatch.setattr(command, "results", lambda spec, say: None)
    statuses = command.run_pipeline(spec, print)
    assert order.index("sweep fast") < order.index("slow trained") < order.index("sweep slow")
    assert order.index("sweep ground_truth") < order.index("sweep fast")
    assert "slow gave up waiting" not in order and statuses == {"done": ["ground_truth", "fast", "slow"]}


def record_threads(config: DictConfig) -> None:
    """A step's action that writes the thread count it was given and its process (module level: a worker imports it)."""
    Path(config.out).write_text(f"{config.torch_threads} {os.getpid()}")


def test_a_lone_step_left_to_run_gets_its_one_thread_worker_too(tmp_path: Path) -> None:
    # With encoder_workers 2 and the other encoders cached, the last one must train as it would beside them (one
    # torch thread, in a worker): torch's thread count changes the floats, so the cached folder's key would lie.
    out = tmp_path / "threads.txt"
    config = OmegaConf.create({"torch_threads": None, "out": str(out)})
    step = Step("encoder", "srl_splits on MobileRobot", tmp_path / "encoder", config, "encoder.json")
    run_steps([step], record_threads, 2, lambda line: None)
    threads, pid = out.read_text().split()
    assert threads == "1" and int(pid) != os.getpid()
