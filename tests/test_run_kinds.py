"""A run's kind is resolved once, from a config or a run dir's saved config, through one registry; the kind plans,
builds, loads and replays its runs: ``load_agent``, ``load_run``, ``rlzoo.enjoy`` and the report's replays go
through it."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig, OmegaConf

from conftest import Compose
from extras import require_extra
from rlzoo.errors import ConfigError
from rlzoo.single_agent.kind import SingleAgent
from rlzoo.training import kind as kinds
from rlzoo.training.kind import (
    KindEntry,
    Replayed,
    ReplayRequest,
    kind_entry,
    kind_of_run,
    register_kind,
    resolve_kind,
)

require_extra("pettingzoo", "multiagent")

from rlzoo.agents import TestAgent  # noqa: E402
from rlzoo.collect import AgentPolicy  # noqa: E402
from rlzoo.enjoy import EnjoySettings, enjoy  # noqa: E402
from rlzoo.kinds import load_agent  # noqa: E402
from rlzoo.multiagent.agents import TestMultiagent  # noqa: E402
from rlzoo.playback.loading import load_run  # noqa: E402
from rlzoo.train import train  # noqa: E402

TINY = ["verbose=0", "logger.formats=[csv]", "test_episodes=2", "checkpoint_freq=0", "hardware.torch_threads=1"]
TICTACTOE = ["algo=dqn", "env=pettingzoo", "env.id=pettingzoo.classic.tictactoe_v3", "multiagent=fixed_opponent",
             "algo.learning_starts=20", "algo.buffer_size=500", "algo.batch_size=16",
             "+algo.policy_kwargs.net_arch=[16]", "total_timesteps=60"]  # fmt: skip
CARTPOLE = ["algo=ppo", "env=CartPole", "algo.n_steps=32", "algo.batch_size=32", "algo.n_epochs=1",
            "n_envs=1", "total_timesteps=64", "+algo.policy_kwargs.net_arch=[8]"]  # fmt: skip


class EchoKind:
    """A kind of run defined here: it replays nothing but its own name."""

    name = "echo"
    honoured: frozenset[str] = frozenset()
    fixed: Mapping[str, Any] = {}
    why: Mapping[str, str] = {}

    def plan(self, cfg: DictConfig, overrides: Sequence[str]) -> Any:
        raise NotImplementedError

    def build(self, plan: Any, context: Any) -> Any:
        raise NotImplementedError

    def load(self, run: Any, checkpoint: Any, *, deterministic: bool, trusted: bool, allow: Sequence[str]) -> str:
        return f"echo agent of {run.path.name}"

    def check_replay(self, request: ReplayRequest) -> None:
        pass

    def replay(self, run: Any, request: ReplayRequest) -> Replayed:
        return Replayed("final", "echo", [1.0] * request.episodes, [1] * request.episodes, "episode,return\n")


@pytest.fixture
def echo_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kinds, "KINDS", list(kinds.KINDS))
    register_kind(KindEntry("echo", EchoKind, ("echo",)))


def test_the_kind_without_marks_takes_only_what_no_other_kind_marks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kinds register from their own packages, in any order: a marked kind wins over the default registered after
    it; with no kind registered, a config is refused in one line."""
    monkeypatch.setattr(kinds, "KINDS", [])
    with pytest.raises(ConfigError, match=r"no kind of run takes this config: import rlzoo\.kinds"):
        kind_entry(OmegaConf.create({"env": {"id": "CartPole-v1"}}))
    register_kind(KindEntry("echo", EchoKind, ("echo",)))
    register_kind(KindEntry("plain", SingleAgent))
    assert kind_entry(OmegaConf.create({"echo": "on"})).name == "echo"
    assert kind_entry(OmegaConf.create({"env": {"id": "CartPole-v1"}})).name == "plain"


@pytest.mark.usefixtures("echo_registered")
def test_a_kind_is_one_class_registered(compose: Compose, tmp_path: Path) -> None:
    cfg = compose([*CARTPOLE, "+echo=on"])
    assert type(resolve_kind(cfg)) is EchoKind
    assert type(resolve_kind(compose(CARTPOLE))) is SingleAgent  # without its mark: the kind of every other run
    run = tmp_path / "saved"
    run.mkdir()
    (run / "config.yaml").write_text("echo: on\n")
    assert load_agent(run) == "echo agent of saved"
    replay = enjoy(EnjoySettings(run=str(run), n_episodes=3), log=lambda _: None)
    assert replay.returns == [1.0, 1.0, 1.0]
    assert (run / "enjoy" / "final_returns.csv").read_text() == "episode,return\n"


def test_a_single_agent_run_loads_and_replays_without_the_multiagent_package(
    compose: Compose, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "cartpole"
    train(compose([*CARTPOLE, *TINY], run_dir))
    for name in [m for m in sys.modules if m.startswith("rlzoo.multiagent")]:
        monkeypatch.delitem(sys.modules, name)  # put back after the test
    kind, run = kind_of_run(run_dir)
    assert type(kind) is SingleAgent and run.path == run_dir
    assert isinstance(load_agent(run_dir), TestAgent)
    replayed = kind.replay(run, ReplayRequest(episodes=2, seed=4))
    assert len(replayed.returns) == 2 and replayed.label == "final"
    assert [m for m in sys.modules if m.startswith("rlzoo.multiagent")] == []


def test_a_multi_agent_run_loads_and_replays_through_its_kind(compose: Compose, tmp_path: Path) -> None:
    run_dir = tmp_path / "tictactoe"
    train(compose([*TICTACTOE, *TINY], run_dir))
    agent = load_agent(run_dir)
    assert isinstance(agent, TestMultiagent) and set(agent.models) == {"player_1"}
    with pytest.raises(ConfigError, match=r"is a multi-agent run: load its agent with rlzoo\.load_agent"):
        load_run(run_dir)
    with pytest.raises(ConfigError, match="final models only"):
        load_agent(run_dir, checkpoint=60)
    with pytest.raises(ConfigError, match="is not a single-agent run"):
        AgentPolicy(str(run_dir)).load()
    with pytest.raises(ConfigError, match="final models only"):
        enjoy(EnjoySettings(run=str(run_dir), plot=("trajectory",)), log=lambda _: None)
    assert not (run_dir / "enjoy").exists()  # a refused replay writes nothing
    kind, run = kind_of_run(run_dir)
    replayed = kind.replay(run, ReplayRequest(episodes=2, frames=True))
    assert replayed.table.splitlines()[0] == "episode,return,length,player_1,player_2"
    assert len(replayed.frames) >= sum(replayed.lengths) and replayed.frames[0].ndim == 3


def test_resume_resolves_the_saved_runs_kind(compose: Compose, tmp_path: Path) -> None:
    run_dir = tmp_path / "tictactoe"
    train(compose([*TICTACTOE, *TINY], run_dir))
    assert resolve_kind(compose(["algo=ppo", "env=CartPole", f"resume={run_dir}"])).name == "multi-agent"


BAD_POLICY_KWARGS = [
    ("algo.policy_kwargs.net_arch=[16,-2]", "must be layer sizes"),
    ("+algo.policy_kwargs.activation_fn=wobbly", "is not an activation"),
]


@pytest.mark.parametrize("overrides", [CARTPOLE, TICTACTOE], ids=["single-agent", "multi-agent"])
@pytest.mark.parametrize(("bad", "message"), BAD_POLICY_KWARGS)
def test_every_kind_checks_policy_kwargs_in_its_plan(
    compose: Compose, tmp_path: Path, overrides: list[str], bad: str, message: str
) -> None:
    cfg = compose([*overrides, *TINY, bad], tmp_path / "run")
    with pytest.raises(ConfigError, match=message) as error:
        train(cfg)
    assert "\n" not in str(error.value)
    assert not (tmp_path / "run").exists()


def test_a_named_activation_trains_a_multi_agent_run(compose: Compose, tmp_path: Path) -> None:
    metrics = train(compose([*TICTACTOE, *TINY, "+algo.policy_kwargs.activation_fn=tanh"], tmp_path / "run"))
    assert metrics["train/timesteps"] == 60
