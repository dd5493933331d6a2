"""Presets compose the CLI's config: same overrides, same groups, same failures."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from hydra.errors import ConfigCompositionException, MissingConfigException
from omegaconf import OmegaConf

from rlzoo import preset
from rlzoo.agents.presets import hydra_value
from rlzoo.errors import ConfigError
from rlzoo.train import main

SCHEDULE = "stable_baselines3.common.utils.LinearSchedule"


def cli_config(args: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> dict:
    """What ``python -m rlzoo.train <args> --cfg job --resolve`` prints, run in-process."""
    monkeypatch.setattr(sys, "argv", ["rlzoo.train", *args, "--cfg", "job", "--resolve"])
    main()
    return yaml.safe_load(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("cli", "make"),
    [
        (["algo=ppo", "env=CartPole", "n_envs=4"], lambda: preset("ppo", n_envs=4).env("CartPole")),
        (
            [
                "algo=sac",
                "env=MobileRobot",
                "srl_model=raw_pixels",
                "algo.gamma=0.98",
                "+algo.policy_kwargs.net_arch=[64]",
            ],
            lambda: preset(
                "sac", "+algo.policy_kwargs.net_arch=[64]", srl_model="raw_pixels", algo={"gamma": 0.98}
            ).env("MobileRobot"),
        ),
        (["algo=dqn", "env=gym", "env.id=Acrobot-v1"], lambda: preset("dqn").env("Acrobot-v1")),
    ],
    ids=["tuned-pair", "keywords", "gymnasium-id"],
)
def test_preset_composes_the_cli_config(
    cli: list[str], make, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    expected = cli_config([*cli, f"run_dir={tmp_path.resolve()}"], capsys, monkeypatch)
    bound = make()
    assert OmegaConf.to_container(bound.compose(tmp_path)) == expected


def test_preset_is_env_agnostic() -> None:
    ppo = preset("ppo", seed=3)
    cartpole, acrobot = ppo.env("CartPole").config, ppo.env("Acrobot").config
    assert (cartpole.seed, acrobot.seed) == (3, 3)
    assert (cartpole.n_envs, acrobot.n_envs) == (8, 1)  # the tuned pair applies where one exists
    assert (cartpole.env.id, acrobot.env.id) == ("CartPole-v1", "Acrobot-v1")


def test_keyword_values_in_hydra_grammar() -> None:
    schedule = {"_target_": SCHEDULE, "start": 1e-3, "end": 0.0, "end_fraction": 1.0}
    cfg = preset("ppo", algo={"learning_rate": schedule, "target_kl": None}, normalize=False).env("Acrobot").config
    assert cfg.algo.learning_rate == schedule and cfg.algo.target_kl is None and cfg.normalize is False
    assert hydra_value("it's") == r"'it\'s'" and hydra_value([1, "a", True]) == "[1,'a',true]"
    assert preset("ppo", algo={"gamma": 0.9}).overrides == ("algo.gamma=0.9",)
    command = preset("ppo", "+algo.policy_kwargs.net_arch=[16]", n_envs=4).env("CartPole").command()
    assert command == "python -m rlzoo.train algo=ppo env=CartPole '+algo.policy_kwargs.net_arch=[16]' n_envs=4"


def test_unknown_overrides_fail_as_on_the_cli() -> None:
    with pytest.raises(
        ConfigCompositionException,
        match=r"(?s)Could not override 'algo.foo'.*To append to your config use \+algo.foo=1",
    ):
        preset("ppo", algo={"foo": 1}).env("CartPole")
    with pytest.raises(MissingConfigException, match="Could not find 'algo/nope'"):
        preset("nope").env("CartPole")
    with pytest.raises(MissingConfigException, match="Could not find 'env/Nowhere'"):
        preset("ppo").env("Nowhere")
    with pytest.raises(ConfigError, match="unknown run key\\(s\\) foo"):
        preset("ppo", "+foo=1").env("CartPole")
    with pytest.raises(ConfigError, match="DQN cannot handle the action space Box"):
        preset("dqn").env("Pendulum").agent()
