"""Every run key of ``conf/train.yaml`` is honoured or refused by every kind of run: a key a kind does not honour,
set by the user, fails in one line naming the key and the kind, before the run dir exists."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from conftest import Compose
from extras import require_extra
from rlzoo.config import CONFIG_DIR
from rlzoo.errors import ConfigError
from rlzoo.single_agent.kind import SingleAgent
from rlzoo.train import train
from rlzoo.training.kind import RUN_KEYS, RunKind, resolve_kind

require_extra("pettingzoo", "multiagent")

from rlzoo.multiagent.kind import MultiAgent  # noqa: E402

GROUPS = {"defaults", "hydra"}
# A value other than the default for every run key (what a user might type).
SET_TO: dict[str, Any] = {
    "seed": 3, "total_timesteps": 64, "total_episodes": 2, "max_train_seconds": 30, "n_envs": 2, "vec_env": "subproc",
    "normalize": True, "checkpoint_freq": 32, "eval_freq": 32, "eval_episodes": 2, "test_checkpoint": "best",
    "test_episodes": 2, "test_envs": 2, "deterministic_test": False, "sampled_test": True, "max_test_steps": 50,
    "test_steps": 500,
    "progress_bar": True, "verbose": 0, "resume": "elsewhere", "init_from": "elsewhere", "run_dir": "elsewhere",
    "trusted": True, "checkpoint_buffer": False, "memory_budget_gb": 32,
}  # fmt: skip
KINDS: dict[str, tuple[RunKind, list[str]]] = {
    "single-agent": (SingleAgent(), ["algo=ppo", "env=CartPole"]),
    "multi-agent": (MultiAgent(), ["algo=dqn", "env=pettingzoo", "env.id=pettingzoo.classic.tictactoe_v3",
                                   "multiagent=independent"]),
}  # fmt: skip


def train_yaml_keys() -> list[str]:
    """The run keys of ``conf/train.yaml`` (its top-level keys but the defaults list and Hydra's)."""
    return [key for key in OmegaConf.load(Path(CONFIG_DIR) / "train.yaml") if key not in GROUPS]


def test_the_walk_covers_every_key_of_train_yaml() -> None:
    assert sorted(train_yaml_keys()) == sorted(RUN_KEYS)
    assert set(SET_TO) == set(RUN_KEYS)
    for kind, _ in KINDS.values():
        assert kind.honoured <= set(RUN_KEYS) and set(kind.fixed) <= set(RUN_KEYS) - kind.honoured


# Each kind's keys that it does not honour (an honoured key's own tests show what it does: test_train, test_resume,
# test_multiagent_run ...).
NOT_HONOURED = [
    (name, key) for name, (kind, _) in KINDS.items() for key in train_yaml_keys() if key not in kind.honoured
]


def test_multi_agent_runs_leave_some_keys_to_single_agent_runs() -> None:
    assert {key for name, key in NOT_HONOURED if name == "multi-agent"} >= {"eval_freq", "n_envs", "init_from"}
    assert [key for name, key in NOT_HONOURED if name == "single-agent"] == []


@pytest.mark.parametrize(("kind_name", "key"), NOT_HONOURED)
def test_a_key_not_honoured_is_refused(compose: Compose, tmp_path: Path, kind_name: str, key: str) -> None:
    _, base = KINDS[kind_name]
    run_dir = tmp_path / "run"
    value = SET_TO[key]
    with pytest.raises(ConfigError) as error:
        train(compose([*base, f"{key}={value}"], run_dir), [f"{key}={value}"])
    message = str(error.value)
    assert f"{key}=" in message and "\n" not in message
    if key != "test_checkpoint":  # test_checkpoint=best is refused by the settings' own check (eval_freq=0)
        assert f"not honoured by {kind_name} runs" in message
    assert not run_dir.exists()


def test_a_fixed_key_is_accepted_at_the_kind_s_own_value(compose: Compose, tmp_path: Path) -> None:
    _, base = KINDS["multi-agent"]
    overrides = ["n_envs=1", "normalize=false", "total_timesteps=20", "test_episodes=1", "checkpoint_freq=0",
                 "verbose=0", "logger.formats=[csv]"]  # fmt: skip
    metrics = train(compose([*base, *overrides]), overrides)
    assert metrics["train/timesteps"] == 20


def test_only_a_multi_agent_run_enters_the_multiagent_package(
    compose: Compose, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [m for m in sys.modules if m.startswith("rlzoo.multiagent")]:
        monkeypatch.delitem(sys.modules, name)  # put back after the test
    assert type(resolve_kind(compose(["algo=ppo", "env=CartPole"]))) is SingleAgent
    assert [m for m in sys.modules if m.startswith("rlzoo.multiagent")] == []
    assert type(resolve_kind(compose(KINDS["multi-agent"][1]))).__name__ == "MultiAgent"
