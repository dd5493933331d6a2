"""CPU seconds per stage of a slice of ``experiment=srl_benchmark_small``, for one checkout of rlzoo.

A slice is the committed experiment cut down: one epoch of every encoder, 50k RL steps of seed 0 per representation,
and each run's test episodes. The RL runs go one at a time on one torch thread (``hardware=cpu``); the encoders two at a
time, each in a process of one thread, as the experiment trains them. CPU seconds are the figure that load barely
moves, so two checkouts compare stage by stage::

    python benchmarks/srl_slice.py run --src <checkout> --out <dir>     # the slice of one checkout
    python benchmarks/srl_slice.py compare <baseline dir> <new dir>     # CPU-s per stage and the ratios
    python benchmarks/srl_slice.py project <dir>                        # scaled to the 10-seed benchmark

``run`` starts ``python -m rlzoo.pipeline`` of ``<checkout>`` (its ``src/`` first on ``PYTHONPATH``) with
``benchmarks/stage_cpu`` beside it, which logs each stage's CPU seconds to ``<dir>/stages.jsonl``; the whole command's
user + system CPU and wall go to ``<dir>/total.json`` with the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

HOOKS = Path(__file__).resolve().parent / "stage_cpu"
SLICE = [
    "experiment=srl_benchmark_small",
    "hardware=cpu",
    "pipeline.encoder_workers=2",
    "pipeline.runs_beside_encoders=false",
    "pipeline.report=false",
    "pipeline.videos=false",
    "pipeline.sweep.seed=[0]",
    "pipeline.srl_train.srl_model.training.epochs=1",
    "total_timesteps=50000",
    "checkpoint_freq=0",
]


def run(src: Path, out: Path, extra: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=False)
    env = dict(os.environ, RLZOO_STAGE_LOG=str(out / "stages.jsonl"), CUDA_VISIBLE_DEVICES="")
    env["PYTHONPATH"] = os.pathsep.join([str(HOOKS), str(src.resolve() / "src")])
    command = [sys.executable, "-m", "rlzoo.pipeline", *SLICE, f"pipeline.dir={out / 'pipeline'}", *extra]
    load_before, started = os.getloadavg(), time.perf_counter()
    subprocess.run(command, env=env, check=True, cwd=out)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = {
        "command": command[2:],
        "src": str(src),
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "wall_s": time.perf_counter() - started,
        "load_before": load_before,
        "load_after": os.getloadavg(),
    }
    (out / "total.json").write_text(json.dumps(total, indent=1))
    print(json.dumps(total))


def stages(folder: Path) -> dict[str, float]:
    """CPU seconds per stage: dataset, each encoder, each representation's run (its test episodes apart), the rest.
    A run's test episodes are logged before the run itself ends, by the same process."""
    sums: dict[str, float] = defaultdict(float)
    tests: dict[int, float] = defaultdict(float)  # by pid: test episodes not yet given to their run
    for line in (folder / "stages.jsonl").read_text().splitlines():
        record = json.loads(line)
        stage, name, cpu = record["stage"], record["label"], record["cpu_s"]
        if stage == "test_episodes":
            tests[record["pid"]] += cpu
        elif stage == "rl_run":
            test = tests.pop(record["pid"], 0.0)
            sums[f"rl {name} (training)"] += cpu - test
            sums[f"rl {name} test episodes"] += test
        elif stage in ("dataset", "encoder"):
            sums[f"{stage} {name}".strip()] += cpu
    total = json.loads((folder / "total.json").read_text())
    sums["start-up, planning, table (the rest)"] = total["cpu_s"] - sum(sums.values())
    sums["total"] = total["cpu_s"]
    return dict(sums)


def compare(baseline: Path, new: Path) -> None:
    old, now = stages(baseline), stages(new)
    print("| stage | baseline CPU s | now CPU s | now / baseline |")
    print("|---|---:|---:|---:|")
    for key in sorted(set(old) | set(now), key=lambda k: (k == "total", k)):
        a, b = old.get(key, float("nan")), now.get(key, float("nan"))
        print(f"| {key} | {a:.1f} | {b:.1f} | {b / a if a else float('nan'):.2f} |")
    for name, folder in (("baseline", baseline), ("now", new)):
        total = json.loads((folder / "total.json").read_text())
        print(f"{name}: wall {total['wall_s']:.0f} s, load {total['load_before']} -> {total['load_after']}")


# The committed experiment's scale: 250k steps (5 slices) per run, 10 seeds, and the epochs its encoders trained
# before validation stopped them in the last full run (autoencoder 29, srl_splits 14, supervised 8).
RUN_SLICES, SEEDS = 5, 10
EPOCHS = {"autoencoder": 29, "srl_splits": 14, "supervised": 8, "random": 1}


def project(folder: Path) -> None:
    """The full 10-seed benchmark's CPU seconds, scaled linearly from the slice stage by stage."""
    total = 0.0
    print("| stage | slice CPU s | x | projected CPU s |")
    print("|---|---:|---:|---:|")
    for key, cpu in stages(folder).items():
        if key == "total":
            continue
        method = key.split()[1] if key.startswith(("encoder", "rl")) else ""
        factor = float(EPOCHS.get(method, 1) if key.startswith("encoder") else 1)
        if key.startswith("rl"):
            factor = float(SEEDS * (RUN_SLICES if key.endswith("(training)") else 1))
        total += cpu * factor
        print(f"| {key} | {cpu:.1f} | {factor:g} | {cpu * factor:,.0f} |")
    print(f"| total | | | {total:,.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run")
    run_parser.add_argument("--src", type=Path, required=True, help="the checkout (its src/ and conf/) to measure")
    run_parser.add_argument("--out", type=Path, required=True, help="a new folder for the slice's outputs")
    run_parser.add_argument("overrides", nargs="*", help="more pipeline overrides")
    compare_parser = commands.add_parser("compare")
    compare_parser.add_argument("baseline", type=Path)
    compare_parser.add_argument("new", type=Path)
    commands.add_parser("project").add_argument("folder", type=Path)
    args = parser.parse_args()
    if args.command == "run":
        run(args.src, args.out, args.overrides)
    elif args.command == "compare":
        compare(args.baseline, args.new)
    else:
        project(args.folder)


if __name__ == "__main__":
    main()
