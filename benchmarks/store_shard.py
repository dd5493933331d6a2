"""Run one shard of a store's experiment and keep what finishes (docs/results.md, "The ten-seed table").

    python benchmarks/store_shard.py --worktree <checkout at the store's commit> --seeds 4,5,6 --pipeline-dir <dir>

The pipeline runs from ``--worktree`` (a git worktree of the commit ``store.yaml`` names: ``git worktree add --detach
<path> <commit>``), timed by ``/usr/bin/time -v``, the 1-minute load average sampled every minute. When it ends, or
is stopped (Ctrl-C, SIGTERM), the finished runs of the pipeline dir join the store (``rlzoo.records action=merge``,
from this checkout) and ``shards.csv`` gets the shard's row: its seeds, the records it added, CPU seconds (user +
system of the pipeline and its children) and wall from ``/usr/bin/time -v``, the load average's mean and maximum.
The platform the shard runs on (``rlzoo.provenance.platform_facts``) is written into the pipeline dir as
``platform.json``: the records take it from there where their runs' ``provenance.json`` (at an older commit) names
none. Run again with the same pipeline dir, a shard trains only what is missing; the encoders the store keeps are copied
into the pipeline dir's cache first (where it lacks them), so a shard in a fresh pipeline dir trains none of them.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STORE = ROOT / "benchmarks" / "results" / "srl_benchmark_small"
FIELDS = ("shard", "seeds", "commit", "records", "cpu_seconds", "wall_seconds", "load_mean", "load_max", "finished")


def time_figures(text: str) -> tuple[float, float]:
    """(user + system CPU seconds, wall seconds) from the report of ``/usr/bin/time -v``."""
    user = float(re.search(r"User time \(seconds\): ([\d.]+)", text).group(1))  # type: ignore[union-attr]
    system = float(re.search(r"System time \(seconds\): ([\d.]+)", text).group(1))  # type: ignore[union-attr]
    clock = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", text).group(1)  # type: ignore[union-attr]
    wall = 0.0
    for part in clock.split(":"):
        wall = wall * 60 + float(part)
    return user + system, wall


def sample_load(samples: list[float], stop: threading.Event) -> None:
    while not stop.is_set():
        samples.append(os.getloadavg()[0])
        stop.wait(60)


def commit_of(worktree: Path) -> str:
    return subprocess.run(["git", "-C", str(worktree), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip


def pipeline_overrides(seeds: str, pipeline_dir: Path) -> list[str]:
    return ["experiment=srl_benchmark_small", "hardware=local_parallel", f"pipeline.sweep.seed=[{seeds}]",
            f"pipeline.dir={pipeline_dir.resolve()}"]  # fmt: skip


def at_commit(worktree: Path) -> dict[str, str]:
    """The environment that runs the source of ``worktree``."""
    return {**os.environ, "PYTHONPATH": str(worktree.resolve() / "src")}


def seed_encoder_cache(worktree: Path, seeds: str, pipeline_dir: Path) -> None:
    """Claim the pipeline dir with the store's commit (planning writes its identity, nothing is trained), then copy
    the store's encoders into its cache where it lacks them: the shard trains none of them again."""
    plan = ("import sys; from rlzoo.pipeline.command import plan_pipeline; from rlzoo.pipeline.spec import "
            "pipeline_spec; plan_pipeline(pipeline_spec(sys.argv[1:]))")  # fmt: skip
    subprocess.run([sys.executable, "-c", plan, *pipeline_overrides(seeds, pipeline_dir)], cwd=worktree,
                   env=at_commit(worktree), check=True)  # fmt: skip
    from rlzoo.pipeline.rerun import copy_stored_encoders

    copy_stored_encoders(STORE, pipeline_dir / "encoders")
    write_platform(pipeline_dir)


def write_platform(pipeline_dir: Path) -> None:
    """The platform this shard computes on, as ``<pipeline dir>/platform.json`` (the same libraries run the
    worktree's source: only its ``src`` is put on the path)."""
    import json

    from rlzoo.files import atomic_write_text
    from rlzoo.provenance import platform_facts
    from rlzoo.results.records import PLATFORM

    atomic_write_text(pipeline_dir / PLATFORM, json.dumps(platform_facts(), indent=1, sort_keys=True) + "\n")


def run_shard(worktree: Path, seeds: str, pipeline_dir: Path, log_dir: Path) -> bool:
    """Run the pipeline for ``seeds`` under ``/usr/bin/time -v``; return whether it finished (exit 0)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    command = ["/usr/bin/time", "-v", "-o", str(log_dir / "time.txt"), sys.executable, "-m", "rlzoo.pipeline",
               *pipeline_overrides(seeds, pipeline_dir)]  # fmt: skip
    environment = at_commit(worktree)
    with (log_dir / "pipeline.log").open("w") as out:
        process = subprocess.Popen(command, cwd=worktree, env=environment, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)  # fmt: skip
        try:
            return process.wait() == 0
        except KeyboardInterrupt:
            stop_group(process)
            return False


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """Stop the pipeline and its workers with SIGINT, which ``/usr/bin/time`` ignores while it waits, so that it
    still writes its report; SIGTERM after a minute."""
    os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait()


def _figure(seconds: float) -> str:
    return f"{seconds:.0f}" if seconds == seconds else ""  # NaN: not measured


def record_shard(name: str, seeds: str, commit: str, pipeline_dir: Path, log_dir: Path, load: list[float],
                 finished: bool) -> None:  # fmt: skip
    """Merge the shard's finished runs into the store and append its row to ``shards.csv``."""
    from rlzoo.results.store_merge import merge_into_store

    added = merge_into_store([pipeline_dir / "runs"], STORE)
    report = log_dir / "time.txt"
    try:
        cpu, wall = time_figures(report.read_text())
    except (OSError, AttributeError):  # /usr/bin/time itself was stopped: no report
        cpu, wall = float("nan"), float("nan")
    path = STORE / "shards.csv"
    new = not path.is_file()
    with path.open("a", newline="") as stream:
        writer = csv.writer(stream)
        if new:
            writer.writerow(FIELDS)
        writer.writerow([name, seeds.replace(",", " "), commit[:12], len(added), _figure(cpu), _figure(wall),
                         f"{sum(load) / max(len(load), 1):.1f}", f"{max(load, default=0):.1f}",
                         "yes" if finished else "no (stopped)"])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worktree", type=Path, required=True, help="a checkout at the store's commit")
    parser.add_argument("--seeds", required=True, help="the shard's seeds, e.g. 4,5,6")
    parser.add_argument("--pipeline-dir", type=Path, required=True, help="the shard's pipeline dir")
    parser.add_argument("--name", default=None, help="the shard's name in shards.csv (default: seeds-<seeds>)")
    args = parser.parse_args()
    commit = commit_of(args.worktree)
    wanted = (STORE / "store.yaml").read_text()
    if f"commit: {commit}" not in wanted:
        sys.exit(f"store_shard: --worktree {args.worktree} is at {commit[:12]}, not at the store's commit (store.yaml)")
    name = args.name or f"seeds-{args.seeds.replace(',', '-')}"
    log_dir = args.pipeline_dir.parent / f"{args.pipeline_dir.name}-{name}-logs"
    load: list[float] = []
    stop = threading.Event()
    sampler = threading.Thread(target=sample_load, args=(load, stop), daemon=True)
    sampler.start()
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    started = time.time()
    seed_encoder_cache(args.worktree, args.seeds, args.pipeline_dir)
    finished = run_shard(args.worktree, args.seeds, args.pipeline_dir, log_dir)
    stop.set()
    record_shard(name, args.seeds, commit, args.pipeline_dir, log_dir, load, finished)
    print(f"store_shard: {name} {'finished' if finished else 'stopped'} after {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
