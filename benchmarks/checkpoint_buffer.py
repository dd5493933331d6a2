"""The cost of keeping an off-policy run's replay buffer across checkpoints (``checkpoint_buffer``), in one process.

1. A 1,000,000-transition SAC buffer on MobileRobot's observation shape (``algo=sac env=MobileRobot``: robot and
   target positions, 2-D actions), full: seconds and disk of one checkpoint with rlzoo's append-only chunks (the rows
   gained since the previous checkpoint: ``checkpoint_freq`` of them, 25,000 by default; and the first chunk of a run
   whose buffer is already full, every row) against SB3's ``save_replay_buffer`` (the whole buffer pickled at every
   checkpoint), and the seconds to rebuild the buffer from its chunks against ``load_replay_buffer``.
2. The training overhead at the default ``checkpoint_freq`` (25,000): the design card's headline (``algo=sac
   env=MobileRobot``, its default 100,000 steps) trained with checkpoints (4 of them: 25k, 50k, 75k and the end) and
   without (``checkpoint_freq=0``), alternating with / without / without / with ... for ``--repeats`` rounds in this
   process: wall and CPU seconds of each run, the ratio of the medians (the target: at most 1.05x wall), and, within
   each run with checkpoints, the wall seconds spent writing them, so that ``wall / (wall - checkpoint seconds)`` is
   a ratio measured inside one run (what other processes' load moves least).

    python benchmarks/checkpoint_buffer.py                          # ~40 min on 2 cores (6 runs of ~6 min)
    python benchmarks/checkpoint_buffer.py --steps 0                # buffer figures only (~1 min)
    python benchmarks/checkpoint_buffer.py --steps 3000 --every 1000 --repeats 1   # smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from stable_baselines3 import SAC
from stable_baselines3.common.buffers import ReplayBuffer

from rlzoo.config import compose_config
from rlzoo.envs.mobile_robot import MobileRobotEnv
from rlzoo.provenance import cpu_seconds
from rlzoo.train import train
from rlzoo.training.buffer_chunks import BufferChunks, restore_buffer
from rlzoo.training.callbacks import Checkpoint

DEFAULT_EVERY = 25_000


def full_buffer(size: int) -> ReplayBuffer:
    """A full SAC buffer of ``size`` transitions on MobileRobot's spaces (absolute ground truth, continuous)."""
    env = MobileRobotEnv(continuous=True, relative_ground_truth=False)
    buffer = ReplayBuffer(size, env.observation_space, env.action_space, device="cpu")
    rng = np.random.default_rng(0)
    for name in ("observations", "next_observations", "actions", "rewards"):
        array = getattr(buffer, name)
        array[:] = rng.standard_normal(array.shape).astype(array.dtype)
    buffer.dones[:] = rng.random(buffer.dones.shape) < 0.01
    buffer.full, buffer.pos = True, 0
    return buffer


def timed(action: object) -> float:
    start = time.perf_counter()
    action()  # type: ignore[operator]
    return time.perf_counter() - start


def buffer_costs(size: int, every: int, folder: Path) -> dict[str, float]:
    """Seconds and bytes of one checkpoint: a chunk of ``every`` rows, a chunk of every row, SB3's pickle."""
    buffer = full_buffer(size)
    chunks = BufferChunks(folder / "replay")
    first = timed(lambda: chunks.save(buffer, size))  # a run's first checkpoint after filling the buffer: every row
    first_bytes = sum(p.stat().st_size for p in (folder / "replay").glob("*.npz"))
    buffer.pos = every % size  # ``every`` more transitions, then the next checkpoint
    manifest: dict[str, object] = {}
    delta = timed(lambda: manifest.update(chunks.save(buffer, size + every)))
    delta_bytes = (folder / "replay" / f"{size + every}.npz").stat().st_size
    sb3 = timed(lambda: SAC.save_replay_buffer(_holder(buffer), folder / "sb3_buffer.pkl"))
    sb3_bytes = (folder / "sb3_buffer.pkl").stat().st_size
    rebuilt = full_buffer(size)
    rebuild = timed(lambda: restore_buffer(rebuilt, folder, manifest))  # type: ignore[arg-type]
    assert all(np.array_equal(getattr(rebuilt, n), getattr(buffer, n)) for n in ("observations", "actions", "rewards"))
    sb3_load = timed(lambda: SAC.load_replay_buffer(_holder(full_buffer(1)), folder / "sb3_buffer.pkl"))
    return {"chunk_seconds": delta, "chunk_mb": delta_bytes / 1e6, "first_chunk_seconds": first,
            "first_chunk_mb": first_bytes / 1e6, "sb3_save_seconds": sb3, "sb3_mb": sb3_bytes / 1e6,
            "rebuild_seconds": rebuild, "sb3_load_seconds": sb3_load}  # fmt: skip


def _holder(buffer: ReplayBuffer) -> SAC:
    """An object with SB3's ``save_replay_buffer`` / ``load_replay_buffer`` bound to ``buffer``."""
    holder = SAC.__new__(SAC)
    holder.replay_buffer = buffer
    holder.verbose, holder.device = 0, torch.device("cpu")
    return holder


class CheckpointTimer:
    """Adds up the wall seconds spent in :meth:`rlzoo.training.callbacks.Checkpoint._save` (model, normaliser, run
    state and buffer chunk of every checkpoint)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.count = 0

    def __enter__(self) -> CheckpointTimer:
        self.original = Checkpoint._save
        timer = self

        def timed_save(callback: Checkpoint) -> None:
            start = time.perf_counter()
            timer.original(callback)
            timer.seconds += time.perf_counter() - start
            timer.count += 1

        Checkpoint._save = timed_save  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        Checkpoint._save = self.original  # type: ignore[method-assign]


def training_run(steps: int, every: int, folder: Path) -> dict[str, float]:
    """One ``algo=sac env=MobileRobot`` run of ``steps`` steps, checkpointed every ``every`` steps (0: never)."""
    overrides = ["algo=sac", "env=MobileRobot", f"total_timesteps={steps}", f"checkpoint_freq={every}",
                 "test_episodes=0", "verbose=0", "progress_bar=false", "hardware.torch_threads=1"]  # fmt: skip
    cfg = compose_config(overrides, run_dir=folder)
    cpu, wall = cpu_seconds(), time.perf_counter()
    with CheckpointTimer() as timer:
        train(cfg)
    wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
    return {"wall": wall, "cpu": cpu, "checkpoint_seconds": timer.seconds, "checkpoints": timer.count}


def training_overhead(steps: int, every: int, repeats: int, folder: Path) -> dict[str, float]:
    """Runs with and without checkpoints, alternating (with, without, without, with, ...) after a warm-up run:
    medians and ratios."""
    runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    training_run(min(steps, 1000), 0, folder / "warm-up")  # imports, torch's first calls: paid by no measured run
    for round_ in range(repeats):
        for checkpoints in (True, False) if round_ % 2 == 0 else (False, True):
            run = training_run(steps, every if checkpoints else 0, folder / f"{round_}-{checkpoints}")
            runs[checkpoints].append(run)
            print(f"round {round_}, checkpoints {'on' if checkpoints else 'off'}: {json.dumps(run)}", flush=True)
    with_, without = runs[True], runs[False]
    median = statistics.median
    wall_with, wall_without = median(r["wall"] for r in with_), median(r["wall"] for r in without)
    in_run = [run["wall"] / (run["wall"] - run["checkpoint_seconds"]) for run in with_]
    return {"train_wall_with": wall_with, "train_wall_without": wall_without,
            "train_cpu_with": median(r["cpu"] for r in with_), "train_cpu_without": median(r["cpu"] for r in without),
            "checkpoints_per_run": with_[0]["checkpoints"],
            "seconds_per_checkpoint": median(r["checkpoint_seconds"] / max(r["checkpoints"], 1) for r in with_),
            "wall_ratio_with_over_without": wall_with / wall_without,
            "cpu_ratio_with_over_without": median(r["cpu"] for r in with_) / median(r["cpu"] for r in without),
            "wall_ratio_within_run": median(in_run)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000, help="buffer transitions")
    parser.add_argument("--steps", type=int, default=100_000, help="training steps of the overhead runs (0: none)")
    parser.add_argument("--every", type=int, default=DEFAULT_EVERY, help="checkpoint interval of the overhead runs")
    parser.add_argument("--repeats", type=int, default=3, help="runs with and runs without checkpoints")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        figures = buffer_costs(args.size, DEFAULT_EVERY, Path(tmp))
        figures["sb3_over_chunk_seconds"] = figures["sb3_save_seconds"] / figures["chunk_seconds"]
        figures["sb3_over_chunk_mb"] = figures["sb3_mb"] / figures["chunk_mb"]
        print(f"load average before training: {os.getloadavg()}", flush=True)
        if args.steps:
            figures |= training_overhead(args.steps, args.every, args.repeats, Path(tmp))
    print(json.dumps({k: round(v, 4) for k, v in figures.items()}, indent=1))
    print(f"load average: {os.getloadavg()}")


if __name__ == "__main__":
    main()
