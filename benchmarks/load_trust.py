"""``load_agent`` of a run dir trusted (SB3's own ``load``, which unpickles) against untrusted (the default: the
config checked against the allowlist, the model rebuilt from it on one env, the weights through ``weights_only``).

Trains a small run once in-process (``--algo``, default PPO on CartPole, ``--steps`` steps, one torch thread, no test
episodes), then loads it ``--repeats`` times each way, in turns (so load from other processes hits both alike), after
one warm-up load of each. Printed: median wall and CPU seconds (``time.process_time``) per load and the ratio
untrusted / trusted.

    python benchmarks/load_trust.py                       # ~30 s on 2 cores
    python benchmarks/load_trust.py --algo sac --env Pendulum
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from rlzoo.config import compose_config
from rlzoo.kinds import load_agent
from rlzoo.train import train


def timed(run: Path, trusted: bool) -> tuple[float, float]:
    """Wall and CPU seconds of one ``load_agent``."""
    wall, cpu = time.perf_counter(), time.process_time()
    load_agent(run, trusted=trusted)
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", default="ppo")
    parser.add_argument("--env", default="CartPole")
    parser.add_argument("--steps", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as folder:
        run = Path(folder) / "run"
        overrides = [f"algo={args.algo}", f"env={args.env}", f"total_timesteps={args.steps}", "test_episodes=0",
                     "verbose=0", "logger.formats=[csv]", "checkpoint_freq=0"]  # fmt: skip
        train(compose_config(overrides, run_dir=run))
        times: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        for trusted in (True, False):
            timed(run, trusted)  # warm-up: imports and first-call caches
        for _ in range(args.repeats):
            for trusted in (True, False):
                times[trusted].append(timed(run, trusted))
    medians = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in times.items()}
    print(f"load_agent, {args.algo} on {args.env}, {args.repeats} loads each (median wall s, CPU s):")
    for trusted, label in ((True, "trusted (SB3 load)"), (False, "untrusted (default)")):
        print(f"  {label:22s} {medians[trusted][0]:.4f}  {medians[trusted][1]:.4f}")
    print(
        f"  ratio untrusted/trusted: wall {medians[False][0] / medians[True][0]:.2f}, "
        f"CPU {medians[False][1] / medians[True][1]:.2f}"
    )


if __name__ == "__main__":
    main()
