"""How often a command's log file grows when its output goes to a file (``command > log 2>&1``): a run whose log stays
the same for long looks hung in a Slurm job, under ``nohup`` or in CI.

The command runs with stdout and stderr appended to one file, whose size is read every ``--poll`` seconds. Printed:
the wall time, the load average before and after, and the longest gap without growth (from the start to the first
output, between two growths, or from the last growth to the end), with the last line written before it, so that a
silent phase can be found. The exit status is the command's, or 1 when a gap exceeds ``--limit`` seconds.

    python benchmarks/log_growth.py -- python -m rlzoo.train algo=sac env=MobileRobot total_timesteps=6000
    python benchmarks/log_growth.py --log /tmp/atari.log -- python -m rlzoo.train algo=ppo env=atari \\
        env.id=ALE/Breakout-v5 total_timesteps=2000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Gap:
    """A stretch without growth: when it began (seconds after the start), how long it lasted, the log's size then."""

    start: float
    seconds: float
    size: int


def watch(command: list[str], log: Path, poll: float) -> tuple[int, float, list[Gap]]:
    """Run ``command`` with its output in ``log``; return its exit status, its wall time and every gap."""
    started = time.monotonic()
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    size, grown, gaps = 0, started, []
    while process.poll() is None:
        time.sleep(poll)
        now, new = time.monotonic(), log.stat().st_size
        if new > size:
            gaps.append(Gap(grown - started, now - grown, size))
            size, grown = new, now
    ended = time.monotonic()
    gaps.append(Gap(grown - started, ended - grown, size))
    return process.returncode, ended - started, gaps


def line_before(log: Path, size: int) -> str:
    """The last line of the log's first ``size`` bytes (what was written before a gap)."""
    if size == 0:
        return "(nothing yet: the command was starting)"
    text = log.read_bytes()[:size].decode(errors="replace").rstrip("\n")
    return text.rsplit("\n", 1)[-1][-200:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--log", type=Path, default=None, help="the log file (default: a temporary file, kept)")
    parser.add_argument("--poll", type=float, default=1.0, help="seconds between two reads of the log's size")
    parser.add_argument("--limit", type=float, default=15.0, help="the longest gap allowed, in seconds")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    log = args.log or Path(tempfile.mkstemp(prefix="log_growth-", suffix=".log")[1])
    load = os.getloadavg()
    status, wall, gaps = watch(command, log, args.poll)
    longest = max(gaps, key=lambda gap: gap.seconds)
    print(f"command: {' '.join(command)}")
    print(f"exit status {status}, {wall:.1f} s, log {log} ({log.stat().st_size:,} bytes, {len(gaps) - 1} growths)")
    print(f"load average before {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, after "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip
    print(f"longest gap without growth: {longest.seconds:.1f} s from {longest.start:.1f} s, after the line:")
    print(f"  {line_before(log, longest.size)}")
    sys.exit(status or int(longest.seconds > args.limit))


if __name__ == "__main__":
    main()
