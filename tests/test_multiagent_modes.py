"""Multi-agent runs log and test as configured: every learner writes through the run's logger only, and
``deterministic_test=false`` samples the test actions under the legal-move mask."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import Compose
from extras import require_extra

require_extra("pettingzoo", "multiagent")

from rlzoo.multiagent.episodes import Budget, play  # noqa: E402
from rlzoo.multiagent.kind import build_team  # noqa: E402
from rlzoo.multiagent.plan import plan_multiagent  # noqa: E402
from rlzoo.multiagent.state import MultiagentState  # noqa: E402
from rlzoo.train import train  # noqa: E402

QUIET = ["logger.formats=[csv]", "checkpoint_freq=0", "hardware.torch_threads=1"]
TINY_DQN = ["algo=dqn", "algo.learning_starts=20", "algo.buffer_size=500", "algo.batch_size=16",
            "algo.target_update_interval=50", "+algo.policy_kwargs.net_arch=[16]"]  # fmt: skip
TICTACTOE = ["env=pettingzoo", "env.id=pettingzoo.classic.tictactoe_v3"]


def test_a_shared_learner_prints_no_console_table(
    compose: Compose, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every model of a shared learner logs through the run's logger (here CSV only): SB3's console table, which
    a model without that logger prints at verbose=1, never appears."""
    run_dir = tmp_path / "run"
    overrides = [*TICTACTOE, "multiagent=shared", *TINY_DQN, *QUIET, "verbose=1", "test_episodes=2"]
    train(compose([*overrides, "total_timesteps=400"], run_dir))
    printed = capsys.readouterr()
    assert "rollout/" not in printed.out + printed.err and "exploration_rate" not in printed.out + printed.err
    progress = (run_dir / "models" / "shared" / "progress.csv").read_text().splitlines()
    assert "rollout/exploration_rate" in progress[0].split(",") and len(progress) >= 3


def test_sampled_test_actions_differ_from_greedy_ones_on_tictactoe(compose: Compose, tmp_path: Path) -> None:
    """``deterministic_test=false`` on a masked env plays sampled actions (DQN: ε-greedy over the legal moves at the
    end of its exploration schedule): the test games differ from the greedy ones."""
    tables = {}
    for mode in ("true", "false"):
        run_dir = tmp_path / mode
        overrides = [*TICTACTOE, "multiagent=random", *TINY_DQN, *QUIET, "verbose=0", "test_episodes=40"]
        train(compose([*overrides, "total_timesteps=200", f"deterministic_test={mode}"], run_dir))
        tables[mode] = (run_dir / "test_returns_agents.csv").read_text()
    assert tables["true"].splitlines()[0] == tables["false"].splitlines()[0] == "episode,player_1,player_2"
    assert tables["true"] != tables["false"]


@pytest.mark.parametrize(("epsilon", "differ"), [(0.0, False), (1.0, True)])
def test_sampled_test_actions_are_legal_and_follow_the_exploration_rate(
    compose: Compose, epsilon: float, differ: bool
) -> None:
    """Sampled actions stay legal; with ε = 0 they are the greedy ones, with ε = 1 random legal moves (which differ
    from the greedy move in most positions)."""
    overrides = [*TICTACTOE, "multiagent=random", *TINY_DQN, *QUIET, f"algo.exploration_final_eps={epsilon}"]
    team = build_team(plan_multiagent(compose(overrides)))
    greedy, sampled = team.test_agent(), team.test_agent(deterministic=False, seed=1)
    env = plan_multiagent(compose(overrides)).spec.make()
    moves, different = 0, 0
    for game in range(20):
        env.reset(seed=game)
        for key in env.agent_iter():
            state = MultiagentState.from_aec(env, key)
            if state.done:
                env.step(None)
                continue
            action = sampled.act(state)
            assert state.legal(action)
            if key == "player_1":  # the trained seat (the random opponent plays player_2)
                different += action != greedy.act(state)
                moves += 1
            env.step(action)
    assert moves >= 20 * 3
    assert (different > moves // 4) if differ else different == 0
    episodes, _ = play(env, sampled, Budget(episodes=3), seed=0)
    assert len(episodes) == 3 and np.isfinite([e.total for e in episodes]).all()
