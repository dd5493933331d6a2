"""Multi-agent runs over PettingZoo envs: states, layouts, masks, agents that leave, run dirs and bad inputs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import Compose
from extras import require_extra

require_extra("pettingzoo", "multiagent")
require_extra("mpe2", "multiagent")

from pettingzoo.classic import tictactoe_v3  # noqa: E402

from rlzoo.errors import ConfigError  # noqa: E402
from rlzoo.multiagent.agents import RandomMultiagent, load_multiagent  # noqa: E402
from rlzoo.multiagent.episodes import Budget, play  # noqa: E402
from rlzoo.multiagent.kind import build_team  # noqa: E402
from rlzoo.multiagent.layouts import Layout  # noqa: E402
from rlzoo.multiagent.pettingzoo_envs import AgentSpaces  # noqa: E402
from rlzoo.multiagent.plan import plan_multiagent  # noqa: E402
from rlzoo.multiagent.state import MultiagentState  # noqa: E402
from rlzoo.train import train  # noqa: E402

TINY = ["verbose=0", "logger.formats=[csv]", "test_episodes=3", "checkpoint_freq=0", "hardware.torch_threads=1"]
TINY_PPO = ["algo=ppo", "algo.n_steps=16", "algo.batch_size=16", "algo.n_epochs=1", "+algo.policy_kwargs.net_arch=[16]"]
TINY_DQN = ["algo=dqn", "algo.learning_starts=20", "algo.buffer_size=500", "algo.batch_size=16",
            "algo.target_update_interval=50", "+algo.policy_kwargs.net_arch=[16]"]  # fmt: skip
LEAVING = ["env=pettingzoo", "env.id=multiagent_tiny"]
TICTACTOE = ["env=pettingzoo", "env.id=pettingzoo.classic.tictactoe_v3"]


class CheckLegal:
    """Passes states on to ``agent`` and records every action that the state's mask forbids."""

    def __init__(self, agent: Any) -> None:
        self.agent, self.illegal, self.masked_moves = agent, 0, 0

    def act(self, state: MultiagentState) -> Any:
        action = self.agent.act(state)
        if not state.done and state.action_mask is not None:
            self.masked_moves += 1
            self.illegal += not state.legal(action)
        return action


def test_state_from_aec_moves_the_mask_out_of_the_observation() -> None:
    env = tictactoe_v3.env()
    env.reset(seed=0)
    state = MultiagentState.from_aec(env, env.agent_selection)
    assert state.agent == "player_1" and np.asarray(state.observation).shape == (3, 3, 2)
    assert state.action_mask is not None and state.action_mask.dtype == bool and state.action_mask.all()
    env.step(4)
    state = MultiagentState.from_aec(env, env.agent_selection)
    assert state.agent == "player_2" and not state.legal(4) and state.legal(0)


def test_state_from_parallel_reads_every_agent() -> None:
    import multiagent_tiny

    env = multiagent_tiny.parallel_env()
    states = MultiagentState.from_parallel(env.reset(seed=0))
    assert set(states) == {"short", "long"} and states["short"].reward == 0.0
    states = MultiagentState.from_parallel(env.step({"short": 0, "long": 1}))
    assert {k: s.agent for k, s in states.items()} == {"short": "short", "long": "long"}
    assert all(s.reward in (0.0, 1.0) for s in states.values())


@pytest.mark.parametrize(
    ("layout", "algo", "learners"),
    [
        ("independent", TINY_PPO, {"short", "long"}),
        ("shared", TINY_DQN, {"shared"}),
        ("fixed_opponent", TINY_DQN, {"short"}),
    ],
)
def test_every_layout_trains_on_an_env_whose_agents_leave(
    compose: Compose, tmp_path: Path, layout: str, algo: list[str], learners: set[str]
) -> None:
    run_dir = tmp_path / layout
    cfg = compose([*LEAVING, "env.api=parallel", f"multiagent={layout}", *algo, *TINY, "total_timesteps=200"], run_dir)
    metrics = train(cfg)
    assert metrics["train/timesteps"] == 200
    assert {p.name for p in (run_dir / "models").iterdir()} == learners
    assert all((run_dir / "models" / name / "model.zip").is_file() for name in learners)
    rows = (run_dir / "returns100.csv").read_text().splitlines()
    assert rows[0] == "frame,mean,std,max,min" and len(rows) >= 2
    per_agent = {p.stem for p in (run_dir / "returns100").glob("*.csv")}
    assert per_agent == {"short", "long"}
    # the short agent leaves after 2 of its 8-move episode: its returns are at most 2, the long one's at most 6
    short_max = max(float(r.split(",")[3]) for r in (run_dir / "returns100" / "short.csv").read_text().splitlines()[1:])
    assert short_max <= 2.0
    assert (run_dir / "test_returns_agents.csv").read_text().splitlines()[0] == "episode,short,long"
    saved = json.loads((run_dir / "metrics.json").read_text())
    assert {"test/short/mean_return", "test/long/mean_return", "test/long/win_rate"} <= set(saved)
    assert saved["test/mean_length"] == 8.0  # 2 + 6 moves: both agents played until they left


def test_each_learner_closes_only_its_own_transitions(compose: Compose, tmp_path: Path) -> None:
    cfg = compose([*LEAVING, "multiagent=independent", *TINY_PPO, *TINY], tmp_path / "run")
    plan = plan_multiagent(cfg)
    team = build_team(plan)
    env = plan.spec.make()
    episodes, steps = play(env, team, Budget(episodes=5), seed=0)
    assert steps == 40 and [e.length for e in episodes] == [8] * 5
    # a transition is counted when the agent's next state arrives: all but the last episode's final one
    assert team.learners.agents["short"].model.num_timesteps == 2 * 5 - 1
    assert team.learners.agents["long"].model.num_timesteps == 6 * 5 - 1


@pytest.mark.parametrize("layout", ["shared", "fixed_opponent"])
def test_masks_are_respected_over_1000_steps(compose: Compose, tmp_path: Path, layout: str) -> None:
    cfg = compose([*TICTACTOE, f"multiagent={layout}", *TINY_DQN, *TINY, "algo.exploration_fraction=0.5"], tmp_path)
    plan = plan_multiagent(cfg)
    checked = CheckLegal(build_team(plan))
    env = plan.spec.make()
    episodes, steps = play(env, checked, Budget(steps=1000), seed=0)
    assert steps == 1000 and checked.masked_moves == 1000 and checked.illegal == 0
    # no game ended on an illegal move (tic-tac-toe then gives the mover -1 and the other +1 after <= 4 moves)
    assert all(e.length >= 5 for e in episodes)
    test_agent = CheckLegal(build_team(plan).test_agent())
    play(env, test_agent, Budget(steps=300), seed=1)
    assert test_agent.masked_moves == 300 and test_agent.illegal == 0


def test_random_opponent_plays_legal_moves_only() -> None:
    env = tictactoe_v3.env()
    agent = CheckLegal(RandomMultiagent({k: env.action_space(k) for k in env.possible_agents}, seed=3))
    _, steps = play(env, agent, Budget(steps=1000), seed=0)
    assert steps == 1000 and agent.illegal == 0


@pytest.mark.parametrize("layout", ["independent", "shared"])
def test_save_load_round_trip(compose: Compose, tmp_path: Path, layout: str) -> None:
    run_dir = tmp_path / "run"
    cfg = compose(["env=pettingzoo", "env.id=mpe2.simple_spread_v3", f"multiagent={layout}", *TINY_PPO, *TINY,
                   "total_timesteps=96", "+env.max_cycles=8"], run_dir)  # fmt: skip
    plan = plan_multiagent(cfg)
    team = build_team(plan)
    env = plan.spec.make()
    play(env, team, Budget(steps=96), seed=0)
    for name, model in team.models.items():
        plan.run.models().learner(name).path.mkdir(parents=True)
        model.save(plan.run.models().learner(name).model)
    plan.run.write_config(plan.config)
    live, loaded = team.test_agent(), load_multiagent(run_dir)
    env.reset(seed=5)
    compared = 0
    for key in env.agent_iter():
        state = MultiagentState.from_aec(env, key)
        action = live.act(state)
        assert np.array_equal(np.asarray(loaded.act(state)), np.asarray(action))
        compared += not state.done
        env.step(action)
    assert compared == 3 * 8


def test_fixed_opponent_from_a_saved_run(compose: Compose, tmp_path: Path) -> None:
    first = tmp_path / "first"
    train(compose([*TICTACTOE, "multiagent=independent", *TINY_DQN, *TINY, "total_timesteps=100"], first))
    second = tmp_path / "second"
    overrides = ["multiagent=fixed_opponent", "multiagent.learner=player_2", f"multiagent.opponent={first}"]
    metrics = train(compose([*TICTACTOE, *overrides, *TINY_DQN, *TINY, "total_timesteps=100"], second))
    assert {p.name for p in (second / "models").iterdir()} == {"player_2"}
    assert metrics["test/episodes"] == 3
    loaded = load_multiagent(second)
    assert set(loaded.models) == {"player_2"} and loaded.opponent is not None


BAD_INPUTS = [
    (["algo=ppo", "env=CartPole", "multiagent=independent"], "needs a PettingZoo env"),
    (["algo=ppo", "env=pettingzoo", "env.id=mpe2.simple_sprad_v3", "multiagent=independent"],
     "did you mean: mpe2.simple_spread_v3"),
    (["algo=ppo", "env=pettingzoo", "env.id=CartPole-v1", "multiagent=independent"], "is a Gymnasium id"),
    (["algo=ppo", "env=pettingzoo", "env.id=mpe2.simple_speaker_listener_v4", "multiagent=shared"],
     "use multiagent=independent"),
    (["algo=dqn", "env=pettingzoo", "env.id=mpe2.simple_spread_v3", "+env.continuous_actions=true",
      "multiagent=independent"], "algorithms that fit: a2c"),
    (["algo=ppo", *TICTACTOE, "multiagent=fixed_opponent"], "masked argmax"),
    (["algo=ppo", "env=pettingzoo", "env.id=mpe2.simple_spread_v3"], "add multiagent=independent"),
    (["algo=ppo", *TICTACTOE, "multiagent=fixed_opponent", "multiagent.learner=player_3"],
     "its agents: player_1, player_2"),
    (["algo=ppo", "env=pettingzoo", "env.id=mpe2.simple_spread_v3", "multiagent=independent", "n_envs=2"], "n_envs=1"),
    (["algo=ppo", "env=pettingzoo", "env.id=mpe2.simple_spread_v3", "multiagent=independent", "sampled_test=true"],
     "sampled_test=True is not honoured by multi-agent runs"),
]  # fmt: skip


@pytest.mark.parametrize(("overrides", "message"), BAD_INPUTS)
def test_bad_inputs_fail_with_one_line_before_anything_is_written(
    compose: Compose, tmp_path: Path, overrides: list[str], message: str
) -> None:
    run_dir = tmp_path / "run"
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")) as error:
        train(compose(overrides, run_dir))
    assert "\n" not in str(error.value)
    assert not run_dir.exists()


def test_enjoy_replays_and_records_a_multiagent_run(compose: Compose, tmp_path: Path) -> None:
    from rlzoo.enjoy import EnjoySettings, enjoy

    run_dir = tmp_path / "run"
    train(compose([*TICTACTOE, "multiagent=fixed_opponent", *TINY_DQN, *TINY, "total_timesteps=60"], run_dir))
    replay = enjoy(EnjoySettings(run=str(run_dir), n_episodes=2, video=True), log=lambda _: None)
    assert len(replay.returns) == 2 and all(5 <= n <= 9 for n in replay.lengths)
    table = (run_dir / "enjoy" / "final_returns.csv").read_text().splitlines()
    assert table[0] == "episode,return,length,player_1,player_2" and len(table) == 3
    assert (run_dir / "enjoy" / "final.mp4").stat().st_size > 1000


def test_the_trained_agent_plays_second_in_a_plain_aec_loop(compose: Compose, tmp_path: Path) -> None:
    """Trained as player_1 (multiagent=fixed_opponent), loaded into player_2's seat against an explicit random
    opponent: 100 games of a plain PettingZoo loop, every player_2 move the model's masked argmax, every outcome
    counted once."""
    from rlzoo.multiagent.learners import action_scores, masked_argmax

    run_dir = tmp_path / "run"
    overrides = [*TICTACTOE, "multiagent=fixed_opponent", *TINY_DQN, *TINY, "total_timesteps=200"]
    metrics = train(compose(overrides, run_dir))
    rates = [metrics[f"test/player_1/{o}_rate"] for o in ("win", "draw", "loss")]
    assert sum(rates) == pytest.approx(1.0) and all(0 <= r <= 1 for r in rates)
    from rlzoo.train import console_figures

    line = console_figures(metrics)
    assert f"learner as player_1: mean return {metrics['test/player_1/mean_return']:.2f}, win {rates[0]:.0%}" in line
    assert "learner as player_2: mean return" in line
    agent = load_multiagent(run_dir, seats=["player_2"], opponent="random")
    model = agent.models["player_2"]
    assert set(agent.models) == {"player_2"} and isinstance(agent.opponent, RandomMultiagent)
    env = tictactoe_v3.env()
    outcomes = {"win": 0, "draw": 0, "loss": 0}
    model_moves = 0
    for game in range(100):
        env.reset(seed=game)
        returns = {"player_1": 0.0, "player_2": 0.0}
        for key in env.agent_iter():
            state = MultiagentState.from_aec(env, key)
            returns[key] += state.reward
            action = agent.act(state)
            if not state.done:
                assert state.legal(action)
                if key == "player_2":
                    observation = agent.coder(state)[None]
                    assert action == masked_argmax(action_scores(model, observation), state.action_mask[None])[0]
                    model_moves += 1
            env.step(action)
        mine, theirs = returns["player_2"], returns["player_1"]
        outcomes["win" if mine > theirs else "loss" if mine < theirs else "draw"] += 1
    assert sum(outcomes.values()) == 100 and model_moves >= 100 * 2  # player_2 moves at least twice a game
    print(f"tic-tac-toe, trained agent second vs random: {outcomes}")


def test_seats_and_opponents_are_explicit(compose: Compose, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    train(compose([*TICTACTOE, "multiagent=independent", *TINY_DQN, *TINY, "total_timesteps=60"], run_dir))
    both = load_multiagent(run_dir)
    assert set(both.models) == {"player_1", "player_2"} and both.models["player_1"] is not both.models["player_2"]
    alone = load_multiagent(run_dir, seats=["player_1"], opponent=None)
    env = tictactoe_v3.env()
    env.reset(seed=0)
    env.step(alone.act(MultiagentState.from_aec(env, "player_1")))
    with pytest.raises(KeyError, match="no model plays agent 'player_2'"):
        alone.act(MultiagentState.from_aec(env, "player_2"))
    with pytest.raises(ConfigError, match=r"agent 'player_3' is not an agent of .*tictactoe_v3; its agents: player_1"):
        load_multiagent(run_dir, seats=["player_3"])


class SeatLog:
    """Passes states on to ``agent`` and records, per episode, the seats it was asked to move for."""

    def __init__(self, agent: Any) -> None:
        self.agent, self.seats = agent, [set[str]()]

    def act(self, state: MultiagentState) -> Any:
        if not state.done:
            self.seats[-1].add(state.agent)
        return self.agent.act(state)


def test_the_learner_takes_every_seat_in_turn(compose: Compose) -> None:
    """``multiagent=fixed_opponent`` (``alternate_seats: true``): the one learner plays player_1 in even episodes and
    player_2 in odd ones; the random opponent plays the other seat."""
    plan = plan_multiagent(compose([*TICTACTOE, "multiagent=fixed_opponent", *TINY_DQN, *TINY, "total_timesteps=60"]))
    assert plan.seats == ("player_1", "player_2")
    team = build_team(plan)
    opponent = SeatLog(team.opponent)
    team.opponent = opponent
    env = plan.spec.make()
    episodes, _ = play(env, team, Budget(episodes=4), seed=0, on_episode=lambda *_: opponent.seats.append(set()))
    assert len(episodes) == 4
    assert opponent.seats[:4] == [{"player_2"}, {"player_1"}, {"player_2"}, {"player_1"}]
    overrides = [*TICTACTOE, "multiagent=fixed_opponent", "multiagent.alternate_seats=false", *TINY_DQN]
    fixed = plan_multiagent(compose(overrides))
    assert fixed.seats == ()


def test_the_figures_of_a_learner_that_alternates_seats_are_its_own(compose: Compose, tmp_path: Path) -> None:
    """Tic-tac-toe, the learner alternating seats (test episode ``i``: ``player_1`` when ``i`` is even): each test
    return is the learner's seat's, each seat's rates count the learner's outcomes there, and returns100.csv holds
    the learner's returns (summed over both players they would all be 0)."""
    run_dir = tmp_path / "run"
    overrides = [*TICTACTOE, "multiagent=fixed_opponent", *TINY_DQN, *TINY, "total_timesteps=300", "test_episodes=6"]
    metrics = train(compose(overrides, run_dir))
    rows = [line.split(",") for line in (run_dir / "test_returns_agents.csv").read_text().splitlines()[1:]]
    learner = [float(row[1 + i % 2]) for i, row in enumerate(rows)]
    tested = [float(line.split(",")[1]) for line in (run_dir / "test_returns.csv").read_text().splitlines()[1:]]
    assert tested == learner and metrics["test/mean_return"] == pytest.approx(np.mean(learner))
    for seat, column in (("player_1", 1), ("player_2", 2)):
        there = [row for i, row in enumerate(rows) if i % 2 == column - 1]
        won = sum(float(row[column]) > float(row[3 - column]) for row in there) / len(there)
        lost = sum(float(row[column]) < float(row[3 - column]) for row in there) / len(there)
        assert (metrics[f"test/{seat}/win_rate"], metrics[f"test/{seat}/loss_rate"]) == (won, lost)
    curve = (run_dir / "returns100.csv").read_text().splitlines()[1].split(",")
    assert float(curve[3]) == 1.0 and float(curve[4]) == -1.0  # max, min: the learner won and lost games


class LastLearns(Layout):
    """A layout defined here: the env's last agent learns, the others play the random opponent."""

    name = "last_learns"

    def learners(self, agents: dict[str, AgentSpaces]) -> dict[str, tuple[str, ...]]:
        last = list(agents)[-1]
        return {last: (last,)}


def test_a_layout_defined_in_a_test_trains(compose: Compose, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    overrides = [*TICTACTOE, "multiagent=independent", "multiagent.layout=last_learns", *TINY_DQN, *TINY]
    metrics = train(compose([*overrides, "total_timesteps=60"], run_dir))
    assert {p.name for p in (run_dir / "models").iterdir()} == {"player_2"}
    assert metrics["test/episodes"] == 3 and "test/player_2/win_rate" in metrics
    with pytest.raises(ConfigError, match=r"multiagent\.layout='nowhere' is not a layout; allowed: independent"):
        train(compose([*TICTACTOE, "multiagent=independent", "multiagent.layout=nowhere", *TINY_DQN, *TINY]))


def test_the_tictactoe_table_is_the_output_of_the_script_the_doc_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/multiagent.md names ``benchmarks/tictactoe_table.py`` and holds its table between the script's markers;
    the script (a smoke run: one seed, 300 actions, 4 games a seat) rewrites only what lies between them."""
    import importlib.util

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "tictactoe_table.py"
    spec = importlib.util.spec_from_file_location("tictactoe_table", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    text = module.DOC.read_text()
    assert "python benchmarks/tictactoe_table.py" in text and text.count(module.BEGIN) == text.count(module.END) == 1
    doc = tmp_path / "doc.md"
    doc.write_text(f"before\n{module.BEGIN}\nstale\n{module.END}\nafter\n")
    module.main(["--seeds", "0", "--steps", "300", "--games", "4", "--doc", str(doc), "test_episodes=2"])
    lines = doc.read_text().splitlines()
    assert lines[:2] == ["before", module.BEGIN] and lines[-2:] == [module.END, "after"] and "stale" not in lines
    row = next(line for line in lines if line.startswith("| 0 |")).split("|")
    assert [sum(int(n) for n in row[i].split("/")) for i in (2, 4)] == [4, 4]
