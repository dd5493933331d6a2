"""Replay of a multi-agent run (``python -m rlzoo.enjoy run=<dir>``): its test multiagent on a fresh env, with the
env's ``rgb_array`` frames when a video is wanted."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlzoo.multiagent.agents import load_multiagent
from rlzoo.multiagent.episodes import Budget, MultiagentEpisode, play
from rlzoo.multiagent.plan import plan_multiagent
from rlzoo.rundir import RunDir


@dataclass
class MultiagentReplay:
    """The replayed episodes, the agent keys, the seats the trained agents played and (``frames``) the rendered
    frames of all episodes in order."""

    episodes: list[MultiagentEpisode]
    keys: list[str]
    learning: tuple[str, ...] = ()
    frames: list[np.ndarray] = field(default_factory=list)
    render_fps: int = 30

    @property
    def returns(self) -> list[float]:
        """Each episode's return of the trained agents (summed over their seats)."""
        return [e.return_of(self.learning) for e in self.episodes]

    def table(self) -> str:
        """``episode,return,length,<agent>,...`` (return: the trained agents')."""
        rows = [",".join(["episode", "return", "length", *self.keys])]
        for i, (e, ret) in enumerate(zip(self.episodes, self.returns, strict=True)):
            rows.append(
                ",".join([str(i), f"{ret:.6g}", str(e.length)] + [f"{e.returns.get(k, 0.0):.6g}" for k in self.keys])
            )
        return "\n".join(rows) + "\n"


def replay_multiagent(
    run_dir: str | Path,
    n_episodes: int,
    seed: int,
    deterministic: bool = True,
    frames: bool = False,
    *,
    trusted: bool = False,
    allow: Sequence[str] = (),
) -> MultiagentReplay:
    """Play ``n_episodes`` episodes (episode ``i`` seeded ``seed + i``) with the run's test multiagent (loaded as
    :func:`~rlzoo.multiagent.agents.load_multiagent` does with ``trusted`` and ``allow``)."""
    agent = load_multiagent(run_dir, deterministic, trusted=trusted, allow=allow)
    plan = plan_multiagent(RunDir(Path(run_dir)).read_config())
    env: Any = plan.spec.make(render_mode="rgb_array" if frames else None)
    recorded: list[np.ndarray] = []

    def record(_: int) -> None:
        recorded.append(np.asarray(env.render()))

    try:
        episodes, _ = play(env, agent, Budget(episodes=n_episodes), seed, on_step=record if frames else None)
    finally:
        env.close()
    fps = int(getattr(env, "metadata", {}).get("render_fps", 30))
    return MultiagentReplay(episodes, list(plan.agents), plan.learning_keys, recorded, fps)
