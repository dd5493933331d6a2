"""``rlzoo.tune`` on PPO MobileRobot (random target): one worker against two, pruning, the best trial against the
hand-tuned pair.

Two real studies with the same seed and settings, ``--trials`` trials of ``--budget`` agent steps each: one worker
(``python -m rlzoo.tune``), then two local workers sharing the journal (``-m hardware=local_parallel tune.workers=2``).
Printed: each study's wall time and their ratio (goal on 2 cores: two workers at most 0.6x one), the fraction of
trials pruned, and the mean test return (100 deterministic episodes) of the one-worker study's best pair against the
hand-tuned pair ``conf/algo_env/ppo_MobileRobot.yaml`` at the same budget, over ``--seeds`` seeds each.

    python benchmarks/tune_workers.py                                     # the issue's figure: 30 x 100k steps
    python benchmarks/tune_workers.py --trials 10 --budget 20000 --seeds 3   # a smaller one
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

STUDY = ["algo=ppo", "env=MobileRobot", "env.random_target=true", "tune.export=false", "verbose=0"]


def run(command: list[str]) -> float:
    """Run ``command``; return its wall seconds (fails loudly when it fails)."""
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"failed ({' '.join(command)}):\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}")
    return seconds


def study(out: Path, workers: int, trials: int, budget: int) -> dict[str, object]:
    """Run one study; return its wall time, trial states and best value."""
    folder = out / f"workers{workers}"
    command = [sys.executable, "-m", "rlzoo.tune", *STUDY, f"n_trials={trials}", f"tune.budget={budget}",
               f"tune.dir={folder}"]  # fmt: skip
    if workers > 1:
        parallel = ["-m", "hardware=local_parallel", f"tune.workers={workers}", f"hydra.sweep.dir={out / 'sweep'}"]
        command[3:3] = parallel  # Hydra reads -m before the overrides
    seconds = run(command)
    with (folder / "trials.csv").open() as stream:
        rows = list(csv.DictReader(stream))
    states = [row["state"] for row in rows]
    best = max((float(row["value"]) for row in rows if row["state"] == "COMPLETE"), default=float("nan"))
    print(f"{workers} worker(s): {seconds:.1f} s, {len(rows)} trials, {states.count('PRUNED')} pruned, "
          f"{states.count('FAIL')} failed, best {best:.2f}", flush=True)  # fmt: skip
    return {"seconds": seconds, "states": states, "best": best, "dir": str(folder)}


def seeds_returns(out: Path, name: str, extra: list[str], seeds: int, budget: int) -> list[float]:
    """Mean test returns of ``seeds`` training runs (seeds 0, 1, ...) at ``budget`` steps."""
    sweep = out / name
    run([sys.executable, "-m", "rlzoo.train", "-m", *STUDY[:3], *extra, f"seed={','.join(map(str, range(seeds)))}",
         "verbose=0", f"hydra.sweep.dir={sweep}"])  # fmt: skip
    with (sweep / "summary.csv").open() as stream:
        returns = [float(row["test_return"]) for row in csv.DictReader(stream)]
    print(f"{name}: test returns {', '.join(f'{r:.1f}' for r in returns)}", flush=True)
    return returns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--budget", type=int, default=100_000, help="agent steps per trial")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("bench_out/tune_workers"))
    args = parser.parse_args()
    out = args.out.resolve()
    if out.exists():
        sys.exit(f"{out} exists: choose another --out")

    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    one = study(out, 1, args.trials, args.budget)
    two = study(out, 2, args.trials, args.budget)
    conf = Path(str(one["dir"])) / "conf"
    tuned = seeds_returns(out, "tuned", [f"hydra.searchpath=[file://{conf}]", "algo_env=tuned/ppo_MobileRobot"],
                          args.seeds, args.budget)  # fmt: skip
    hand = seeds_returns(out, "hand_tuned", [f"total_timesteps={args.budget}"], args.seeds, args.budget)
    ratio = float(two["seconds"]) / float(one["seconds"])  # type: ignore[arg-type]
    states = list(one["states"]) + list(two["states"])  # type: ignore[call-overload]
    print(f"{args.trials} trials x {args.budget} steps on {os.cpu_count()} cores (load now {os.getloadavg()[0]:.1f}):")
    print(f"  wall time: 1 worker {one['seconds']:.1f} s, 2 workers {two['seconds']:.1f} s, ratio {ratio:.3f} "
          "(goal <= 0.6)")  # fmt: skip
    print(f"  pruned: {states.count('PRUNED')} of {len(states)} trials ({states.count('PRUNED') / len(states):.0%})")
    print(f"  best pair {statistics.mean(tuned):.1f} vs hand-tuned {statistics.mean(hand):.1f} (mean test return, "
          f"{args.seeds} seeds, {args.budget} steps)")  # fmt: skip
    summary = {"trials": args.trials, "budget": args.budget, "one": one, "two": two, "ratio": ratio,
               "tuned": tuned, "hand_tuned": hand}  # fmt: skip
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
