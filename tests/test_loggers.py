"""logger=wandb: an offline W&B run with group, name and resolved config from the job, and SB3's metrics."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

from wandb.proto import wandb_internal_pb2

from conftest import TINY_ALGO_RUNS, TINY_RUN, Compose
from rlzoo.train import train

BLOCK = 32 * 1024
HEADER = 7  # crc32 (4) + length (2, little-endian) + type (1)


def read_wandb_records(path: Path) -> list[wandb_internal_pb2.Record]:
    """Parse a ``.wandb`` file: a 7-byte file header, then 32 KiB blocks of (possibly split) records.

    W&B's service may still be writing the file: reading stops at the first chunk that is cut short or whose
    crc32 (over its type byte and payload) does not match, so callers that wait re-read the complete records later.
    """
    return [record for record, _ in wandb_records_with_ends(path)]


def wandb_records_with_ends(path: Path) -> list[tuple[wandb_internal_pb2.Record, int]]:
    """The records of a ``.wandb`` file (:func:`read_wandb_records`), each with the file offset where it ends."""
    data = path.read_bytes()[7:]
    records, pending, offset = [], b"", 0
    while offset + HEADER <= len(data):
        room = BLOCK - ((offset + 7) % BLOCK)
        if room < HEADER:  # block trailer padding
            offset += room
            continue
        checksum, length, kind = struct.unpack("<IHB", data[offset : offset + HEADER])
        payload = data[offset + HEADER : offset + HEADER + length]
        offset += HEADER + length
        if kind == 0 and length == 0:
            continue
        if len(payload) < length or zlib.crc32(payload, zlib.crc32(bytes([kind]))) != checksum:
            break  # a chunk still being written
        pending = payload if kind in (1, 2) else pending + payload
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append((record, offset + 7))
    return records


def finished_records(path: Path, timeout: float = 60.0) -> list[wandb_internal_pb2.Record]:
    """The records of a ``.wandb`` file once W&B's service has written its exit record (it may lag ``finish()``)."""
    deadline = time.monotonic() + timeout
    records = read_wandb_records(path)
    while not any(r.HasField("exit") for r in records) and time.monotonic() < deadline:
        time.sleep(0.5)
        records = read_wandb_records(path)
    return records


def test_wandb_offline_run_carries_job_config_and_metrics(compose: Compose, tmp_path: Path) -> None:
    overrides = ["algo=ppo", *TINY_ALGO_RUNS["ppo"], *TINY_RUN, "logger=wandb", "logger.formats=[csv]"]
    metrics = train(compose(overrides))
    files = list((tmp_path / "run" / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(files) == 1
    records = finished_records(files[0])
    run = next(r.run for r in records if r.HasField("run"))
    assert run.run_group == "ppo_CartPole_ground_truth"
    assert run.project == "rlzoo"
    config_keys = {item.key for r in records if r.HasField("config") for item in r.config.update}
    config_keys |= {item.key for item in run.config.update}
    assert {"algo", "env", "seed", "total_timesteps"} <= config_keys
    logged = {
        item.key or "/".join(item.nested_key) for r in records if r.HasField("history") for item in r.history.item
    }
    assert {"rollout/ep_rew_mean", "train/policy_gradient_loss", "time/fps"} <= logged
    summary = {item.key for r in records if r.HasField("summary") for item in r.summary.update}
    assert "test/mean_return" in summary and metrics["test/episodes"] == 2


def test_sweep_jobs_share_the_sweep_dir_as_wandb_group(tmp_path: Path) -> None:
    """A 2-job multirun with logger=wandb: both offline runs carry the sweep dir as group and comparison columns."""
    sweep_dir = tmp_path / "sweep"
    command = [sys.executable, "-m", "rlzoo.train", "-m", "algo=ppo", *TINY_ALGO_RUNS["ppo"], *TINY_RUN,
               "logger=wandb", "logger.formats=[csv]", "seed=0,1", f"hydra.sweep.dir={sweep_dir}"]  # fmt: skip
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=300, env={**os.environ, "WANDB_SILENT": "true"}
    )
    assert result.returncode == 0, result.stderr[-2000:]
    for job, seed in (("0", 0), ("1", 1)):
        files = list((sweep_dir / job / "wandb").glob("offline-run-*/run-*.wandb"))
        records = finished_records(files[0])
        run = next(r.run for r in records if r.HasField("run"))
        assert run.run_group == str(sweep_dir)
        items = [*run.config.update, *(i for r in records if r.HasField("config") for i in r.config.update)]
        config = {item.key: json.loads(item.value_json) for item in items}
        assert config["algo_name"] == "PPO" and config["env_id"] == "CartPole-v1" and config["seed"] == seed
        assert config["srl_model_name"] == "ground_truth"
    summary = (sweep_dir / "summary.csv").read_text().splitlines()
    assert len(summary) == 3 and all(",done," in line for line in summary[1:])
