"""The keypoint encoder (``srl_model.network.keypoints``): a spatial softmax whose expected positions are the state."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from rlzoo.errors import ConfigError
from rlzoo.srl.dataset import load_dataset
from rlzoo.srl.encoder import load_encoder
from rlzoo.srl.networks import ImageEncoder, SpatialSoftmax, fold_whitening, images_to_tensor
from srl_helpers import make_dataset, make_encoder

KEYPOINTS = ["srl_model.network.keypoints=4"]  # srl_helpers' tiny state_dim is 8 = 2 x 4


def test_spatial_softmax_gives_each_peak_position() -> None:
    maps = torch.zeros(1, 2, 8, 8)
    maps[0, 0, 2, 6] = 50.0  # row 2, column 6
    maps[0, 1, 7, 0] = 50.0
    grid = torch.linspace(-1.0, 1.0, 8)
    expected = torch.stack([grid[6], grid[2], grid[0], grid[7]]).view(1, 4)
    torch.testing.assert_close(SpatialSoftmax()(maps), expected, atol=1e-4, rtol=0)
    flat = SpatialSoftmax()(torch.zeros(1, 1, 8, 8))  # no peak: the centre
    torch.testing.assert_close(flat, torch.zeros(1, 2), atol=1e-6, rtol=0)


def test_the_state_is_the_keypoints_and_whitening_folds_into_the_frozen_head() -> None:
    torch.manual_seed(0)
    encoder = ImageEncoder(16, 16, 8, channels=4, keypoints=4).eval()
    pixels = torch.rand(32, 3, 16, 16)
    features, states = encoder.forward_features(pixels)
    assert states.shape == (32, 8) and float(states.detach().abs().max()) <= 1.0
    torch.testing.assert_close(states, features)
    assert not any(parameter.requires_grad for parameter in encoder.head.parameters())
    assert all(parameter.requires_grad for parameter in encoder.features.parameters())
    before = states.detach().numpy()
    fold_whitening(encoder, before, 1e-6)
    with torch.no_grad():
        whitened = encoder(pixels).double().numpy()
    np.testing.assert_allclose(np.cov(whitened, rowvar=False), np.eye(8), atol=1e-3)


def test_srl_splits_with_keypoints_trains_whitens_saves_and_loads(tmp_path: Path) -> None:
    dataset = make_dataset(tmp_path / "data")
    metrics = make_encoder(tmp_path / "splits", dataset, "srl_splits", [*KEYPOINTS, "whiten=0.001"])
    assert 0.0 <= metrics["srl/unwhitened/gtc_mean"] <= 1.0 and metrics["srl/epochs"] == 1
    assert json.loads((tmp_path / "splits" / "encoder.json").read_text())["network"] == {"channels": 4, "keypoints": 4}
    images = load_dataset(dataset).images[:5]
    encoder = load_encoder(tmp_path / "splits")
    assert encoder.encode(images).shape == (5, 8)
    assert isinstance(encoder.module, ImageEncoder)
    with torch.no_grad():
        pixels = (images_to_tensor(images) - encoder.module.mean) / encoder.module.std
        keypoints = encoder.module.features(pixels).numpy()  # the coordinates before whitening
    assert float(np.abs(keypoints).max()) <= 1.0
    assert not np.allclose(encoder.encode(images), keypoints, atol=1e-3)  # the whitening was saved with it


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["srl_model.network.keypoints=-1"], r"keypoints=-1; allowed: 0 \(the original encoder\) or a positive int"),
        (["srl_model.network.keypoints=two"], r"keypoints='two'; allowed"),
        (["srl_model.network.keypoints=3"], r"keypoints=3 gives a state of 6 coordinates, but srl_model.state_dim=8"),
    ],
)
def test_bad_keypoints(tmp_path: Path, overrides: list[str], message: str) -> None:
    dataset = make_dataset(tmp_path / "data")
    with pytest.raises(ConfigError, match=message):
        make_encoder(tmp_path / "bad", dataset, "srl_splits", overrides)
    assert not (tmp_path / "bad").exists()
