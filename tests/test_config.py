"""Config groups compose as documented: tuned pairs apply by themselves, every algo key reaches the constructor."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest import mock

import gymnasium as gym
import pytest
from omegaconf import OmegaConf

from conftest import Compose
from rlzoo.algos.factory import algorithm_classes, build_algorithm_factory, supported_action_spaces
from rlzoo.config import CONFIG_DIR
from rlzoo.training.settings import RunSettings

ALGOS = sorted(p.stem for p in (CONFIG_DIR / "algo").glob("*.yaml"))


def test_tuned_pair_applies_automatically(compose: Compose) -> None:
    cfg = compose(["algo=ppo", "env=CartPole"])
    assert (cfg.n_envs, cfg.algo.n_steps, cfg.algo.batch_size, cfg.normalize) == (8, 32, 256, False)
    assert cfg.algo.learning_rate._target_.endswith("LinearSchedule")


def test_algorithm_defaults_without_a_tuned_pair(compose: Compose) -> None:
    cfg = compose(["algo=ppo", "env=Acrobot"])
    assert (cfg.n_envs, cfg.algo.n_steps, cfg.algo.batch_size, cfg.normalize) == (1, 2048, 64, True)


def test_command_line_beats_tuned_pair(compose: Compose) -> None:
    cfg = compose(["algo=ppo", "env=CartPole", "n_envs=2", "algo.n_steps=64"])
    assert (cfg.n_envs, cfg.algo.n_steps) == (2, 64)


def test_any_gymnasium_id_without_yaml(compose: Compose) -> None:
    cfg = compose(["env=gym", "env.id=Acrobot-v1", "+env.max_episode_steps=50"])
    assert cfg.env.id == "Acrobot-v1"


@pytest.mark.parametrize("algo", ALGOS)
def test_every_algo_key_reaches_the_constructor(algo: str, compose: Compose) -> None:
    cfg = compose([f"algo={algo}"])
    factory = build_algorithm_factory(cfg.algo)
    yaml_keys = set(cfg.algo) - {"_target_", "_partial_"}
    assert yaml_keys == set(factory.kwargs)
    supported = supported_action_spaces(factory.algo_class)
    continuous_only = supported is not None and gym.spaces.Discrete not in supported
    env = gym.make("Pendulum-v1" if continuous_only or algo == "ars" else "CartPole-v1")
    original_init = factory.algo_class.__init__
    with mock.patch.object(factory.algo_class, "__init__", autospec=True, side_effect=original_init) as init:
        factory(env=env, policy=factory.policy_for("Mlp"), device="cpu", _init_setup_model=False)
    passed = init.call_args.kwargs
    assert yaml_keys <= set(passed)
    assert all(passed[k] is factory.kwargs[k] for k in yaml_keys)


# Options that are a recipe of another class (not its defaults): DroQ is SBX's SAC with dropout critics and UTD 20.
RECIPES = {"sbx_droq"}
# Options whose class takes no keyword worth configuring (the random agent).
KEYWORDLESS = {"random"}


@pytest.mark.parametrize("algo", [a for a in ALGOS if a not in RECIPES])
def test_algo_defaults_are_sb3_defaults(algo: str, compose: Compose) -> None:
    import inspect

    cfg = compose([f"algo={algo}", "env=Acrobot"])
    factory = build_algorithm_factory(cfg.algo)
    signature = inspect.signature(factory.algo_class)
    if algo in KEYWORDLESS:  # nothing to compare: its YAML must stay without keywords
        assert factory.kwargs == {}
        return
    assert factory.kwargs, f"algo={algo} sets no keyword: list it in KEYWORDLESS"
    for key, value in factory.kwargs.items():
        default = signature.parameters[key].default
        assert value == ({} if default is None and key == "policy_kwargs" else default), key


def _constructor_spaces(algo_class: type) -> tuple[type, ...] | None:
    """What ``algo_class``'s constructor passes to ``BaseAlgorithm.__init__`` as ``supported_action_spaces``."""
    from stable_baselines3.common.base_class import BaseAlgorithm

    class Recorded(Exception):
        pass

    recorded: dict[str, Any] = {}

    def probe(self: Any, *args: Any, **kwargs: Any) -> None:
        recorded["spaces"] = kwargs.get("supported_action_spaces")
        raise Recorded

    with mock.patch.object(BaseAlgorithm, "__init__", probe), pytest.raises(Recorded):
        algo_class(policy=next(iter(algo_class.policy_aliases), "MlpPolicy"), env=None)
    found = recorded["spaces"]
    return None if found is None else tuple(found)


def test_supported_action_spaces_agree_with_every_constructor() -> None:
    """The class attribute or the table of other libraries' algorithms says what each constructor passes to SB3: an
    SB3 release that changes one fails here, naming the algorithm."""
    from sb3_contrib import QRDQN
    from stable_baselines3 import DQN, PPO, SAC

    classes = {**algorithm_classes(), "sb3 dqn": DQN, "sb3 ppo": PPO, "sb3 sac": SAC, "qrdqn": QRDQN}
    differ = {
        name: (supported_action_spaces(cls), constructor)
        for name, cls in classes.items()
        if set(supported_action_spaces(cls) or ()) != set(constructor := _constructor_spaces(cls) or ())
    }
    assert differ == {}, "supported_action_spaces (class or LIBRARY_ACTION_SPACES) differ from the constructors"
    assert supported_action_spaces(DQN) == (gym.spaces.Discrete,)


def test_action_spaces_come_from_the_class_without_running_it() -> None:
    from stable_baselines3.common.base_class import BaseAlgorithm

    class Unknown(BaseAlgorithm):  # no attribute and not in the table: any action space
        pass

    class Boxes(Unknown):
        supported_action_spaces = (gym.spaces.Box,)

    class Nearer(Boxes):  # inherits the nearest statement
        pass

    assert supported_action_spaces(Unknown) is None
    assert supported_action_spaces(Nearer) == (gym.spaces.Box,)


def test_run_keys_are_typed(compose: Compose, tmp_path: Path) -> None:
    settings = RunSettings.from_values(OmegaConf.to_container(compose(["total_timesteps=1e5", "n_envs=4.0"])))
    assert (settings.total_timesteps, settings.n_envs) == (100_000, 4)
    assert settings.run_dir == str((tmp_path / "run").resolve())
