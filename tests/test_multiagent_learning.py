"""Multi-agent learning checks (slow: ``pytest -m slow tests/test_multiagent_learning.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import Compose
from extras import require_extra

require_extra("pettingzoo", "multiagent")
require_extra("mpe2", "multiagent")

from rlzoo.multiagent.agents import RandomMultiagent  # noqa: E402
from rlzoo.multiagent.episodes import Budget, play  # noqa: E402
from rlzoo.multiagent.plan import plan_multiagent  # noqa: E402
from rlzoo.train import train  # noqa: E402

RUN = ["verbose=0", "checkpoint_freq=0", "test_episodes=100", "hardware.torch_threads=1", "logger.formats=[csv]"]
SPREAD = ["env=pettingzoo", "env.id=mpe2.simple_spread_v3", "multiagent=independent", "algo=ppo"]
SPREAD_BUDGET = ["total_timesteps=60000", "algo.n_steps=1024", "algo.batch_size=256", "algo.ent_coef=0.01"]
TICTACTOE_DQN = [
    "env=pettingzoo", "env.id=pettingzoo.classic.tictactoe_v3", "multiagent=fixed_opponent", "algo=dqn",
    "total_timesteps=100000", "algo.learning_starts=1000", "algo.buffer_size=100000", "algo.learning_rate=0.0005",
    "algo.target_update_interval=1000", "algo.exploration_fraction=0.2", "algo.batch_size=64",
    "+algo.policy_kwargs.net_arch=[128,128]",
]  # fmt: skip


@pytest.mark.slow
def test_independent_ppo_beats_random_on_simple_spread(compose: Compose, tmp_path: Path) -> None:
    cfg = compose([*SPREAD, *SPREAD_BUDGET, *RUN], tmp_path / "probe")
    plan = plan_multiagent(cfg)
    env = plan.spec.make()
    random_agent = RandomMultiagent({k: s.action for k, s in plan.agents.items()}, seed=0)
    random_returns = [e.total for e in play(env, random_agent, Budget(episodes=100), seed=10_000)[0]]
    trained = [train(compose([*SPREAD, *SPREAD_BUDGET, *RUN, f"seed={s}"], tmp_path / str(s))) for s in range(3)]
    means = np.array([m["test/mean_return"] for m in trained])
    se = means.std(ddof=1) / np.sqrt(len(means))
    random_mean, random_se = np.mean(random_returns), np.std(random_returns, ddof=1) / np.sqrt(len(random_returns))
    print(f"simple_spread: PPO {means.mean():.2f} ± {se:.2f} (3 seeds), random {random_mean:.2f} ± {random_se:.2f}")
    assert means.mean() - se > random_mean + random_se + 5.0


@pytest.mark.slow
def test_dqn_plays_tictactoe_from_either_seat(compose: Compose, tmp_path: Path) -> None:
    """One DQN agent trained with alternating seats (``multiagent=fixed_opponent``, 100k actions), then 200 games from
    each seat against a uniformly random player in a plain PettingZoo AEC loop: at least 90 % wins + draws from each."""
    from pettingzoo.classic import tictactoe_v3

    from rlzoo.multiagent.agents import load_multiagent
    from rlzoo.multiagent.state import MultiagentState

    metrics = train(compose([*TICTACTOE_DQN, *RUN], tmp_path / "run"))
    assert metrics["test/player_1/win_rate"] >= 0.9  # the run's own test: as player_1
    env = tictactoe_v3.env()
    for seat in ("player_1", "player_2"):
        agent = load_multiagent(tmp_path / "run", seats=[seat], opponent="random")
        outcomes = {"win": 0, "draw": 0, "loss": 0}
        for game in range(200):
            env.reset(seed=20_000 + game)
            returns = dict.fromkeys(env.agents, 0.0)
            for key in env.agent_iter():
                state = MultiagentState.from_aec(env, key)
                returns[key] += state.reward
                env.step(agent.act(state))
            other = max(r for key, r in returns.items() if key != seat)
            outcomes["win" if returns[seat] > other else "loss" if returns[seat] < other else "draw"] += 1
        print(f"tic-tac-toe: DQN as {seat}: {outcomes} of 200 games against random")
        assert outcomes["win"] + outcomes["draw"] >= 180, f"{seat}: {outcomes}"
