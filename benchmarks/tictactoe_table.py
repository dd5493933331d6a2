"""The tic-tac-toe table of docs/multiagent.md: the documented command (``algo=dqn env=pettingzoo
env.id=pettingzoo.classic.tictactoe_v3 multiagent=fixed_opponent``, its ``dqn_pettingzoo`` pair) trained in-process
per seed, then ``--games`` games from each seat against a uniformly random legal player in a plain PettingZoo AEC
loop (:func:`rlzoo.multiagent.versus_random.play_against_random`, as the slow check
``tests/test_multiagent_learning.py`` plays them). The table and its time line are rewritten between the doc's
markers; the rest of the doc is kept.

    python benchmarks/tictactoe_table.py                       # 3 seeds; 2-10 min per seed on 2 cores
    python benchmarks/tictactoe_table.py --seeds 0 --steps 300 --games 4 --doc /tmp/doc.md test_episodes=2  # smoke
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from rlzoo.config import compose_config
from rlzoo.files import atomic_write_text
from rlzoo.multiagent.agents import load_multiagent
from rlzoo.multiagent.versus_random import play_against_random
from rlzoo.train import train

DOC = Path(__file__).resolve().parents[1] / "docs" / "multiagent.md"
BEGIN, END = "<!-- benchmarks/tictactoe_table.py: begin -->", "<!-- benchmarks/tictactoe_table.py: end -->"
COMMAND = ["algo=dqn", "env=pettingzoo", "env.id=pettingzoo.classic.tictactoe_v3", "multiagent=fixed_opponent"]
RUN = ["verbose=0", "checkpoint_freq=0", "test_episodes=100", "hardware.torch_threads=1", "logger.formats=[csv]"]
SEATS = ("player_1", "player_2")
GAMES_SEED = 20_000  # game i from a seat is reset with GAMES_SEED + i


@dataclass(frozen=True)
class SeedResult:
    """One seed's outcomes from each seat (``{"win": n, "draw": n, "loss": n}``), its wall time and load."""

    seed: int
    outcomes: dict[str, dict[str, int]]
    wall: float
    load: float


def measure(seed: int, games: int, overrides: Sequence[str], folder: Path) -> SeedResult:
    """Train the documented command with ``seed`` into ``folder``, then play ``games`` games from each seat."""
    from pettingzoo.classic import tictactoe_v3

    load, start = os.getloadavg()[0], time.perf_counter()
    run = folder / f"seed{seed}"
    train(compose_config([*COMMAND, *RUN, f"seed={seed}", *overrides], run_dir=run))
    env = tictactoe_v3.env()
    outcomes = {}
    for seat in SEATS:
        agent = load_multiagent(run, seats=[seat], opponent=None)
        outcomes[seat] = play_against_random(env, agent.act, seat, games, GAMES_SEED)
    env.close()
    return SeedResult(seed, outcomes, time.perf_counter() - start, load)


def table(results: Sequence[SeedResult], games: int) -> str:
    """The markdown table and its time line."""
    head = "| seed |" + "|".join(f" as `{s}` (won / drawn / lost) | wins + draws " for s in SEATS) + "|"
    rows = [head, "|---" * (1 + 2 * len(SEATS)) + "|"]
    for r in results:
        cells = [f" {r.seed} "]
        for seat in SEATS:
            o = r.outcomes[seat]
            cells += [f" {o['win']} / {o['draw']} / {o['loss']} ", f" {100 * (o['win'] + o['draw']) / games:.3g} % "]
        rows.append("|" + "|".join(cells) + "|")
    walls, loads = [r.wall for r in results], [r.load for r in results]
    cores = os.cpu_count()
    timing = (
        f"One run with its {games} + {games} games took {min(walls):.0f}-{max(walls):.0f} s wall on {cores} cores "
        f"(1-minute load average {min(loads):.1f}-{max(loads):.1f} at its start)."
    )
    return "\n".join(rows) + "\n\n" + timing


def rewrite(doc: Path, text: str) -> None:
    """Replace what lies between the doc's markers with ``text``."""
    content = doc.read_text()
    if content.count(BEGIN) != 1 or content.count(END) != 1 or content.index(BEGIN) > content.index(END):
        raise SystemExit(f"{doc}: needs one {BEGIN} line and one {END} line after it")
    before, rest = content.split(BEGIN)
    after = rest.split(END)[1]
    atomic_write_text(doc, f"{before}{BEGIN}\n{text}\n{END}{after}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--games", type=int, default=200, help="games from each seat (default 200)")
    parser.add_argument("--steps", type=int, default=None, help="total_timesteps (default: the pair's 100,000)")
    parser.add_argument("--doc", type=Path, default=DOC, help="the doc whose table is rewritten")
    parser.add_argument("--runs", type=Path, default=None, help="where the runs are written (default: a temp dir)")
    parser.add_argument("overrides", nargs="*", help="more key=value overrides of the runs")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    overrides = [*([f"total_timesteps={args.steps}"] if args.steps else []), *args.overrides]
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.runs or Path(scratch)
        results = []
        for seed in args.seeds:
            results.append(measure(seed, args.games, overrides, folder))
            print(f"seed {seed}: {results[-1].outcomes} in {results[-1].wall:.0f} s", flush=True)
    text = table(results, args.games)
    rewrite(args.doc, text)
    print(f"{args.doc}: table rewritten\n{text}")


if __name__ == "__main__":
    main()
