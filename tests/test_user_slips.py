"""What a new user types wrong gets one line: a group option that does not exist or ``group=null`` (before Hydra
composes), an algorithm a masked env refuses (only accepted ones suggested), no test episodes, and no library warning
the user cannot act on."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from conftest import TINY_ON_POLICY, Compose
from extras import require_extra
from rlzoo.config import check_group_choices
from rlzoo.errors import ConfigError
from rlzoo.train import console_figures, train

QUIET = ["checkpoint_freq=0", "verbose=0", "logger.formats=[csv]"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["multiagent=null"], "multiagent=null: a config group takes one of its options: leave multiagent out (none by "
         "default) or choose one of fixed_opponent, independent, shared"),
        (["hardware=null"], "hardware=null: a config group takes one of its options: choose one of cpu, gpu"),
        (["logger=tensorboard"], "logger=tensorboard is not an option of logger (options: default, visdom, wandb); "
         "TensorBoard events are written with every logger option (logger=default: CSV and TensorBoard)"),
        (["algo=PPO"], "algo=PPO is not an option of algo (options: a2c, "),
        (["-m", "env=CartPole,Pendulm", "seed=range(3)"], "env=Pendulm is not an option of env"),
        (["+experiment=srl_benchmrk"], "did you mean srl_benchmark"),
    ],
)  # fmt: skip
def test_a_missing_group_option_is_one_line(arguments: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        check_group_choices("train", arguments)
    assert message in str(error.value) and "\n" not in str(error.value)
    if "PPO" in message:
        assert str(error.value).endswith("; did you mean ppo?")


def test_group_choices_that_exist_pass(tmp_path: Path) -> None:
    extra = tmp_path / "conf" / "srl_model"
    extra.mkdir(parents=True)
    (extra / "mine.yaml").write_text("name: mine\n")
    check_group_choices("train", ["algo=sac", "env=CartPole,Pendulum", "seed=range(3)", "algo_env=tuned/x",
                                  "algo.gamma=0.9", "~experiment", "--multirun", "env=glob(*)"])  # fmt: skip
    check_group_choices("train", [f"hydra.searchpath=[file://{tmp_path / 'conf'}]", "srl_model=mine"])
    check_group_choices("tune", ["search_space=sac_walltime", "algo=sac"])
    with pytest.raises(ConfigError, match="srl_model=mine is not an option"):
        check_group_choices("train", ["srl_model=mine"])


def test_the_command_line_refusal_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "rlzoo.train", "logger=tensorboard"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "rlzoo.train: error: logger=tensorboard is not an option of logger (options: default, visdom, wandb); "
        "TensorBoard events are written with every logger option (logger=default: CSV and TensorBoard)"
    ]
    assert list(tmp_path.iterdir()) == []


def test_a_masked_env_suggests_only_algorithms_it_accepts(compose: Compose, tmp_path: Path) -> None:
    require_extra("pettingzoo", "multiagent")
    from rlzoo.multiagent.plan import plan_multiagent

    game = ["env=pettingzoo", "env.id=pettingzoo.classic.tictactoe_v3", "multiagent=fixed_opponent"]
    for refused in ("sac", "ppo", "ddqn"):
        with pytest.raises(ConfigError) as error:
            plan_multiagent(compose([f"algo={refused}", *game]))
        suggested = re.findall(r"algo=(\w+)", str(error.value))
        assert suggested == ["dqn", "qrdqn"], str(error.value)
    for algo in suggested:
        assert plan_multiagent(compose([f"algo={algo}", *game])).learners == {"player_1": ("player_1",)}


def test_no_test_episodes_says_so(compose: Compose, tmp_path: Path) -> None:
    run = ["algo=ppo", "env=CartPole", "n_envs=1", *TINY_ON_POLICY, "total_timesteps=64", "test_episodes=0"]
    line = console_figures(train(compose([*run, *QUIET])))
    assert line == "no test episodes (test_episodes=0)"


def test_loading_a_run_gives_no_rollout_buffer_warning(compose: Compose, tmp_path: Path) -> None:
    """PPO trained on 2 envs with batches of 32 over 2 x 16 steps: rebuilt on one env to act, SB3 would warn about a
    truncated mini-batch of a rollout that never happens."""
    from rlzoo.kinds import load_agent

    run = ["algo=ppo", "env=CartPole", "n_envs=2", "algo.n_steps=16", "algo.batch_size=32", "algo.n_epochs=1",
           "+algo.policy_kwargs.net_arch=[16]", "total_timesteps=64", "test_episodes=1"]  # fmt: skip
    train(compose([*run, *QUIET]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        agent = load_agent(tmp_path / "run")
    assert [str(w.message) for w in caught if "mini-batch" in str(w.message)] == []
    with (tmp_path / "run" / "test_returns.csv").open() as stream:
        assert len(list(csv.DictReader(stream))) == 1
    assert agent.model.n_steps == 16  # the model is the run's, rebuilt on one env
