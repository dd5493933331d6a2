"""Test episodes on one env against several: 100 test episodes of PPO on CartPole-v1 (the tuned pair's training).

Trains ``python -m rlzoo.train algo=ppo env=CartPole`` in-process once (``--steps``, default 100k, one torch thread,
no test episodes), loads the run, then plays ``--episodes`` deterministic test episodes on a frozen test env of
``test_envs`` = 1 and each of ``--envs`` envs, in turns (``--repeats`` rounds, so load from other processes hits every
variant alike). Printed per variant: median wall and CPU seconds (this process's, ``time.process_time``), their ratio
to one env, and whether the returns equal the one-env runner's.

    python benchmarks/test_episodes.py                          # ~1-2 min on 2 cores
    python benchmarks/test_episodes.py --steps 20000 --repeats 1  # smoke run
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from rlzoo.config import compose_config
from rlzoo.playback.loading import load_run
from rlzoo.train import train
from rlzoo.training.build import RunBuilder
from rlzoo.training.episodes import EpisodeResult, play_episodes


def timed(run: Path, episodes: int, n_envs: int) -> tuple[float, float, list[EpisodeResult]]:
    """Wall and CPU seconds of ``episodes`` test episodes on ``n_envs`` envs (env built and closed included)."""
    loaded = load_run(run)
    wall, cpu = time.perf_counter(), time.process_time()
    venv = RunBuilder(loaded.plan).test_env(loaded.normalization, n_envs=n_envs)
    try:
        results = play_episodes(loaded.model, venv, episodes, deterministic=True)
    finally:
        venv.close()
    return time.perf_counter() - wall, time.process_time() - cpu, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000, help="PPO training steps before the test")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--envs", type=int, nargs="+", default=[5, 10, 20], help="test_envs values against 1")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    run = Path(tempfile.mkdtemp(prefix="bench_test_episodes_")) / "run"
    overrides = ["algo=ppo", "env=CartPole", f"total_timesteps={args.steps}", "test_episodes=0", "verbose=0"]
    train(compose_config([*overrides, "logger.formats=[csv]", "checkpoint_freq=0"], run_dir=run))
    variants = [1, *args.envs]
    times: dict[int, list[tuple[float, float]]] = {n: [] for n in variants}
    returns: dict[int, list[EpisodeResult]] = {}
    for _ in range(args.repeats):
        for n in variants:
            wall, cpu, results = timed(run, args.episodes, n)
            times[n].append((wall, cpu))
            returns[n] = results
    base_wall = statistics.median(w for w, _ in times[1])
    base_cpu = statistics.median(c for _, c in times[1])
    print(f"{args.episodes} test episodes after PPO CartPole-v1 ({args.steps} steps), medians of {args.repeats}, "
          f"{os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip
    mean_length = statistics.mean(r.length for r in returns[1])
    print(f"mean return {statistics.mean(r.ret for r in returns[1]):.1f}, mean length {mean_length:.0f} steps")
    print(f"{'test_envs':>9s} {'wall s':>7s} {'cpu s':>7s} {'wall/1':>7s} {'cpu/1':>7s}  same returns")
    for n in variants:
        wall = statistics.median(w for w, _ in times[n])
        cpu = statistics.median(c for _, c in times[n])
        same = returns[n] == returns[1]
        print(f"{n:9d} {wall:7.2f} {cpu:7.2f} {wall / base_wall:7.3f} {cpu / base_cpu:7.3f}  {same}")


if __name__ == "__main__":
    main()
