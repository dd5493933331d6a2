"""The cost of ``experiment=srl_benchmark`` scaled from a slice of its pipeline (issue 27 item 5), and the raw-pixel
runs of ``benchmarks/gpu_srl.sh``, read from the pipeline and run dirs.

``python benchmarks/srl_benchmark_cost.py pixels DIR``: one row per raw-pixel run (augment, seed, steps, train seconds,
last-100 training return, test return).
``python benchmarks/srl_benchmark_cost.py cost PIPELINE_DIR``: the measured slice of ``experiment=srl_benchmark``
(each encoder's epoch, each representation's RL steps) and its cost at the paper's setting (20,000 frames,
30 epochs, 5M steps x 10 seeds), scaled linearly from the slice.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rlzoo.results.runs import returns100_points

FULL_FRAMES = 20_000
FULL_EPOCHS = 30
FULL_STEPS = 5_000_000
FULL_SEEDS = 10


def last_100_return(run_dir: Path) -> float:
    """The mean return of the last 100 training episodes (the last row of ``returns100.csv``; nan before any)."""
    path = run_dir / "returns100.csv"
    means = returns100_points(path)[1] if path.is_file() else []
    return float(means[-1]) if len(means) else float("nan")


def pixels(root: Path) -> None:
    print("augment,seed,steps,train_seconds,last100_return,test_return")
    for run_dir in sorted(p for p in root.iterdir() if (p / "metrics.json").is_file()):
        metrics = json.loads((run_dir / "metrics.json").read_text())
        augment, seed = run_dir.name.removeprefix("aug").split("_seed")
        print(
            f"{augment},{seed},{metrics['train/timesteps']:.0f},{metrics['time/train_seconds']:.1f},"
            f"{last_100_return(run_dir):.1f},{metrics['test/mean_return']:.1f}"
        )


def cost(root: Path) -> None:
    dataset = json.loads(next(root.glob("datasets/*/dataset.json")).read_text())
    frames = int(dataset["n_samples"])
    print(f"slice: {frames} frames at {dataset['image_size']}; full: {FULL_FRAMES} frames, {FULL_EPOCHS} epochs")
    print("step,measured_seconds,measured_units,full_units,full_seconds_per_unit_of_the_table")
    total = 0.0
    for encoder in sorted(root.glob("encoders/*/metrics.json")):
        metrics = json.loads(encoder.read_text())
        info = json.loads((encoder.parent / "encoder.json").read_text())
        seconds = float(metrics["time/train_seconds"])
        epochs = max(int(info.get("epochs") or 1), 1)
        full = seconds / epochs * (FULL_FRAMES / frames) * (FULL_EPOCHS if info.get("trained", True) else 1)
        total += full
        print(f"encoder {info['method']},{seconds:.1f},{epochs} epoch(s),{FULL_EPOCHS} epochs,{full:.0f}")
    for run in sorted(root.glob("runs/*/metrics.json")):
        metrics = json.loads(run.read_text())
        seconds, steps = float(metrics["time/train_seconds"]), float(metrics["train/timesteps"])
        full = seconds / steps * FULL_STEPS * FULL_SEEDS
        total += full
        print(
            f"rl {run.parent.name},{seconds:.1f},{steps:.0f} steps,{FULL_STEPS} steps x {FULL_SEEDS} seeds,{full:.0f}"
        )
    print(f"total (one job at a time),,,,{total:.0f} s = {total / 3600:.1f} h")


if __name__ == "__main__":
    {"pixels": pixels, "cost": cost}[sys.argv[1]](Path(sys.argv[2]))
