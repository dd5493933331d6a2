"""Encoder kinds are classes in a registry: a new kind is one :class:`EncoderKind` subclass and one YAML, with no
edit of the trainer. Here a toy kind, defined in the test, trains at test size and its encoder reloads."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from rlzoo.errors import ConfigError
from rlzoo.srl.encoder import load_encoder
from rlzoo.srl.kinds import ENCODER_KINDS, EncoderData, EncoderKind, image_encoder
from rlzoo.srl.train import compose_srl_config, train_encoder
from srl_helpers import TINY_NETWORK, make_dataset


class MeanStateKind(EncoderKind):
    """A toy kind: the seeded random CNN with its last parameter trained toward 1 by a few SGD steps, so that what it
    trained is something the test can see after the encoder is saved and reloaded."""

    name = "toy_mean_state"
    keys = frozenset({"network"})

    def make(self, data: EncoderData) -> tuple[nn.Module, dict[str, Any]]:
        module = image_encoder(self.recipe, data)
        bias = list(module.parameters())[-1]
        optimizer = torch.optim.SGD([bias], lr=0.5)
        for _ in range(20):
            optimizer.zero_grad()
            ((bias - 1.0) ** 2).sum().backward()
            optimizer.step()
        return module, {"toy_steps": 20}


@pytest.fixture
def toy_kind() -> Iterator[type[EncoderKind]]:
    yield MeanStateKind
    ENCODER_KINDS.pop(MeanStateKind.name, None)  # registered by being defined; gone after the test


def test_a_kind_defined_here_is_registered_trained_and_reloaded(toy_kind: type[EncoderKind], tmp_path: Path) -> None:
    assert ENCODER_KINDS[toy_kind.name] is toy_kind
    dataset = make_dataset(tmp_path / "data")
    # the one YAML of the new method: the random method's file with the toy kind (its network keys kept)
    overrides = ["srl_model=random", f"srl_model.kind={toy_kind.name}", f"dataset={dataset}", "progress_bar=false",
                 "device=cpu", *TINY_NETWORK]  # fmt: skip
    result = train_encoder(compose_srl_config(overrides, run_dir=tmp_path / "encoder"))
    assert result["srl/toy_steps"] == 20 and 0 <= result["srl/gtc_mean"] <= 1
    encoder = load_encoder(tmp_path / "encoder")
    bias = list(encoder.module.parameters())[-1].detach().numpy()
    assert np.allclose(bias, 1.0, atol=1e-3)  # what the kind trained is what was saved and reloaded


def test_an_unknown_kind_lists_the_registered_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"srl_model.kind='nope'; allowed: cnn, random, pca"):
        train_encoder(compose_srl_config(["srl_model=random", "srl_model.kind=nope"], run_dir=tmp_path / "x"))
    assert not (tmp_path / "x").exists()
