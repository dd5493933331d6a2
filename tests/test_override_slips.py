"""A sweep without ``-m`` and a key the config lacks given without ``+``: one line before Hydra starts."""

from __future__ import annotations

import pytest

from rlzoo.errors import ConfigError
from rlzoo.overrides import check_overrides, hydra_overrides


@pytest.mark.parametrize("override", ["seed=1,2", "seed=range(3)", "env=CartPole,Pendulum"])
def test_a_sweep_without_multirun_is_one_line(override: str) -> None:
    with pytest.raises(ConfigError, match=r"is a sweep .*add -m / --multirun") as caught:
        check_overrides("train", [override])
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("arguments", "meant"),
    [
        (["algo.gama=0.9"], "did you mean algo.gamma?"),
        (["algo=sac", "algo.tua=0.1"], "did you mean algo.tau?"),
        (["total_timestep=5"], "did you mean total_timesteps?"),
        (["-m", "algo.gama=0.9,0.99"], "algo.gama=0.9,0.99: algo has no key gama; did you mean algo.gamma?"),
    ],
)
def test_a_missing_key_without_plus_names_the_key_meant(arguments: list[str], meant: str) -> None:
    with pytest.raises(ConfigError, match=r"to add a key, write \+") as caught:
        check_overrides("train", arguments)
    assert meant in str(caught.value) and "\n" not in str(caught.value)


def test_keys_that_exist_pass() -> None:
    check_overrides("train", ["algo=sac", "algo.tau=0.1", "seed=3", "env=Pendulum", "+algo.policy_kwargs.x=1"])
    check_overrides("train", ["-m", "seed=range(3)", "algo.gamma=0.9,0.99", "hydra.job.chdir=false"])
    check_overrides("collect", ["n_samples=10"])


def test_flags_and_their_values_are_not_overrides() -> None:
    assert hydra_overrides(["--cfg", "job", "-cn", "train", "seed=1", "-m"]) == ["seed=1"]
    assert hydra_overrides(["--help", "algo.gama=1"]) is None
