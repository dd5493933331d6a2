"""Config groups compose as documented: tuned pairs apply by themselves, every algo key reaches the constructor."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import gymnasium as gym
import pytest
from omegaconf import OmegaConf

from conftest import Compose
from rlzoo.algos.factory import build_algorithm_factory, supported_action_spaces
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


def test_supported_action_spaces_read_from_constructors() -> None:
    from sb3_contrib import QRDQN
    from stable_baselines3 import DQN, PPO, SAC

    assert supported_action_spaces(DQN) == (gym.spaces.Discrete,)
    assert supported_action_spaces(QRDQN) == (gym.spaces.Discrete,)
    assert gym.spaces.Box in supported_action_spaces(SAC)  # type: ignore[operator]
    assert {gym.spaces.Box, gym.spaces.Discrete} <= set(supported_action_spaces(PPO) or ())


def test_run_keys_are_typed(compose: Compose, tmp_path: Path) -> None:
    settings = RunSettings.from_values(OmegaConf.to_container(compose(["total_timesteps=1e5", "n_envs=4.0"])))
    assert (settings.total_timesteps, settings.n_envs) == (100_000, 4)
    assert settings.run_dir == str((tmp_path / "run").resolve())
