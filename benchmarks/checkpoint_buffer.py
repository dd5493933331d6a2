"""The cost of keeping an off-policy run's replay buffer across checkpoints (``checkpoint_buffer``), in one process.

1. A 1,000,000-transition SAC buffer on MobileRobot's observation shape (``algo=sac env=MobileRobot``: robot and
   target positions, 2-D actions), full: seconds and disk of one checkpoint with rlzoo's append-only chunks (the rows
   gained since the previous checkpoint: ``checkpoint_freq`` of them, 25,000 by default; and the first chunk of a run
   whose buffer is already full, every row) against SB3's ``save_replay_buffer`` (the whole buffer pickled at every
   checkpoint), and the seconds to rebuild the buffer from its chunks against ``load_replay_buffer``.
2. The training overhead at ``checkpoint_freq``: ``algo=sac env=MobileRobot`` trained ``--steps`` steps with
   checkpoints every ``--every`` steps and without, CPU seconds of this process (what moves least with other
   processes' load); the overhead per checkpoint, projected to the default interval as a ratio (the target: at most
   1.05x).

    python benchmarks/checkpoint_buffer.py                 # ~2 min on 2 cores
    python benchmarks/checkpoint_buffer.py --steps 2000    # smoke run
"""

from __future__ import annotations

import argparse
import json
import os
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


def training_cpu(steps: int, every: int, folder: Path) -> float:
    overrides = ["algo=sac", "env=MobileRobot", f"total_timesteps={steps}", f"checkpoint_freq={every}",
                 "test_episodes=0", "verbose=0", "logger.formats=[csv]", "hardware.torch_threads=1"]  # fmt: skip
    start = cpu_seconds()
    train(compose_config(overrides, run_dir=folder))
    return cpu_seconds() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000, help="buffer transitions")
    parser.add_argument("--steps", type=int, default=5000, help="training steps of the overhead runs (0: none)")
    parser.add_argument("--every", type=int, default=1000, help="checkpoint interval of the overhead run")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        figures = buffer_costs(args.size, DEFAULT_EVERY, Path(tmp))
        figures["sb3_over_chunk_seconds"] = figures["sb3_save_seconds"] / figures["chunk_seconds"]
        figures["sb3_over_chunk_mb"] = figures["sb3_mb"] / figures["chunk_mb"]
        if args.steps:
            without = training_cpu(args.steps, 0, Path(tmp) / "without")
            with_checkpoints = training_cpu(args.steps, args.every, Path(tmp) / "with")
    if args.steps:
        figures |= overhead(without, with_checkpoints, args.steps, args.every)
    print(json.dumps({k: round(v, 4) for k, v in figures.items()}, indent=1))
    print(f"load average: {os.getloadavg()}")


def overhead(without: float, with_checkpoints: float, steps: int, every: int) -> dict[str, float]:
    """CPU seconds with and without checkpoints, per checkpoint, and the ratio projected to the default interval."""
    per_checkpoint = (with_checkpoints - without) / (steps // every)
    ratio = 1 + max(per_checkpoint, 0.0) / (without / steps * DEFAULT_EVERY)
    return {"train_cpu_seconds_without": without, "train_cpu_seconds_with": with_checkpoints,
            "seconds_per_training_checkpoint": per_checkpoint, "ratio_at_default_checkpoint_freq": ratio}  # fmt: skip


if __name__ == "__main__":
    main()
