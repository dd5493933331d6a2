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
from rlzoo.multiagent.versus_random import play_against_random  # noqa: E402
from rlzoo.train import train  # noqa: E402

RUN = ["verbose=0", "checkpoint_freq=0", "test_episodes=100", "hardware.torch_threads=1", "logger.formats=[csv]"]
SPREAD = ["env=pettingzoo", "env.id=mpe2.simple_spread_v3", "multiagent=independent", "algo=ppo"]
SPREAD_BUDGET = ["total_timesteps=60000", "algo.n_steps=1024", "algo.batch_size=256", "algo.ent_coef=0.01"]
# The documented command (docs/multiagent.md); its settings are the algo_env pair conf/algo_env/dqn_pettingzoo.yaml.
TICTACTOE_DQN = ["algo=dqn", "env=pettingzoo", "env.id=pettingzoo.classic.tictactoe_v3", "multiagent=fixed_opponent"]


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
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dqn_plays_tictactoe_from_either_seat(compose: Compose, tmp_path: Path, seed: int) -> None:
    """The documented command (``multiagent=fixed_opponent``, alternating seats, the ``dqn_pettingzoo`` pair), then
    200 games from each seat against a uniformly random legal player in a plain PettingZoo AEC loop: at least 90 % wins
    + draws from each seat."""
    from pettingzoo.classic import tictactoe_v3

    from rlzoo.multiagent.agents import load_multiagent

    metrics = train(compose([*TICTACTOE_DQN, *RUN, f"seed={seed}"], tmp_path / "run"))
    assert metrics["test/player_1/win_rate"] >= 0.9  # the run's own test episodes as player_1
    env = tictactoe_v3.env()
    for seat in ("player_1", "player_2"):
        agent = load_multiagent(tmp_path / "run", seats=[seat], opponent=None)
        outcomes = play_against_random(env, agent.act, seat, games=200, seed=20_000)
        print(f"tic-tac-toe seed {seed}: DQN as {seat}: {outcomes} of 200 games against random")
        assert outcomes["win"] + outcomes["draw"] >= 180, f"{seat}: {outcomes}"
