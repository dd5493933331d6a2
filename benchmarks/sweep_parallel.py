"""Wall time of a 4-job sweep with ``hardware=local_parallel`` against the same 4 jobs one after another.

Both are real ``python -m rlzoo.train --multirun`` invocations: PPO on CartPole-v1 (the tuned pair), seeds 0-3,
``--steps`` agent steps each (default 50k: about 10 s of training per job on one core), 10 test episodes. The
sequential sweep uses Hydra's basic launcher in one process (imports paid once); the parallel one the joblib launcher
with one worker per core and one torch thread per job (imports paid once per worker). Variants alternate for
``--repeats`` rounds; the median wall-time ratio parallel / sequential is printed (goal on 2 cores: at most 0.6).

    python benchmarks/sweep_parallel.py                       # ~2 min on 2 cores
    python benchmarks/sweep_parallel.py --steps 5000 --repeats 1   # smoke run
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VARIANTS = {"sequential": "hardware=cpu", "local_parallel": "hardware=local_parallel"}


def run_sweep(hardware: str, steps: int, sweep_dir: Path) -> float:
    """Run the 4-job sweep; return its wall seconds (fails loudly if a job did not finish)."""
    command = [sys.executable, "-m", "rlzoo.train", "--multirun", hardware, "algo=ppo", "env=CartPole",
               "seed=0,1,2,3", f"total_timesteps={steps}", "test_episodes=10", "verbose=0",
               f"hydra.sweep.dir={sweep_dir}"]  # fmt: skip
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"sweep failed ({' '.join(command)}):\n{result.stderr[-3000:]}")
    with (sweep_dir / "summary.csv").open() as stream:
        statuses = [row["status"] for row in csv.DictReader(stream)]
    if statuses != ["done"] * 4:
        sys.exit(f"sweep {sweep_dir}: job statuses {statuses}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=50_000, help="agent steps per job")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("bench_out/sweep_parallel.json"))
    args = parser.parse_args()

    timings: dict[str, list[float]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="rlzoo-sweep-bench-") as tmp:
        for repeat in range(args.repeats):
            for name, hardware in VARIANTS.items():
                seconds = run_sweep(hardware, args.steps, Path(tmp) / f"{name}-{repeat}")
                timings[name].append(seconds)
                print(f"round {repeat + 1}: {name:<15} {seconds:6.1f} s", flush=True)
    medians = {name: statistics.median(values) for name, values in timings.items()}
    ratio = medians["local_parallel"] / medians["sequential"]
    print(f"4 jobs x {args.steps} steps on {os.cpu_count()} cores, medians of {args.repeats}:")
    print(f"  sequential {medians['sequential']:.1f} s, local_parallel {medians['local_parallel']:.1f} s")
    print(f"  wall-time ratio local_parallel / sequential: {ratio:.3f} (goal <= 0.6)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"steps": args.steps, "timings": timings, "ratio": ratio}, indent=2) + "\n")


if __name__ == "__main__":
    main()
