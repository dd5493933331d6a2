"""Precision of image networks: bfloat16 autocast for encoder trunks, decoders and CNN policies; fused batch norms."""

from __future__ import annotations

from pathlib import Path

import hydra
import numpy as np
import pytest
import torch

from conftest import Compose
from rlzoo.errors import ConfigError
from rlzoo.hardware import Hardware
from rlzoo.precision import check_precision, fast_bf16, resolve_precision
from rlzoo.rundir import RunDir
from rlzoo.srl.augment import ShiftedNatureCNN
from rlzoo.srl.dataset import load_dataset
from rlzoo.srl.encoder import load_encoder
from rlzoo.srl.networks import ImageDecoder, ImageEncoder, images_to_tensor
from rlzoo.train import train
from rlzoo.training.plan import plan_run
from srl_helpers import make_dataset, make_encoder

KEYPOINTS = ["srl_model.state_dim=8", "srl_model.network.keypoints=4"]


def test_auto_is_bf16_exactly_where_the_hardware_computes_it() -> None:
    assert resolve_precision("auto", "cpu") == ("bf16" if fast_bf16("cpu") else "fp32")
    assert resolve_precision("bf16", "cpu") == "bf16" and resolve_precision("fp32", "cuda") == "fp32"


@pytest.mark.parametrize("value", ["fp16", "float32", None, 16])
def test_a_bad_precision_is_refused_with_the_allowed_values(value: object) -> None:
    with pytest.raises(ConfigError, match=rf"hardware.precision={value!r} is not a precision; allowed: fp32, bf16"):
        check_precision(value, "hardware.precision")
    with pytest.raises(ConfigError, match=r"hardware.precision"):
        Hardware.from_config({"device": "cpu", "precision": value})


@pytest.mark.parametrize("keypoints", [0, 4])
def test_bf16_encoder_gives_fp32_states_close_to_fp32(keypoints: int) -> None:
    torch.manual_seed(0)
    encoder = ImageEncoder(32, 32, 8, channels=8, keypoints=keypoints).eval()
    pixels = torch.rand(16, 3, 32, 32)
    with torch.no_grad():
        exact = encoder(pixels)
        encoder.precision = "bf16"
        approx = encoder(pixels)
    assert approx.dtype == torch.float32
    assert not torch.equal(approx, exact)  # the trunk did run in bfloat16
    relative = float((approx - exact).abs().mean() / exact.abs().mean())
    assert relative < 0.05


def test_bf16_decoder_gives_fp32_images_in_the_unit_range() -> None:
    torch.manual_seed(0)
    decoder = ImageDecoder(8, 32, 32, channels=8)
    decoder.precision = "bf16"
    with torch.no_grad():
        images = decoder(torch.randn(4, 8))
    assert images.dtype == torch.float32 and images.shape == (4, 3, 32, 32)
    assert float(images.min()) >= 0.0 and float(images.max()) <= 1.0


def test_encoders_loaded_in_bf16_fold_batch_norms_and_stay_close(tmp_path: Path) -> None:
    dataset = make_dataset(tmp_path / "data")
    make_encoder(tmp_path / "splits", dataset, "srl_splits", KEYPOINTS)
    images = load_dataset(dataset).images[:20]
    unfused = ImageEncoder(16, 16, 8, channels=4, keypoints=4).eval()
    unfused.load_state_dict(torch.load(tmp_path / "splits" / "encoder.pt", weights_only=True))
    with torch.no_grad():
        reference = unfused(images_to_tensor(images)).numpy()
    in_fp32 = load_encoder(tmp_path / "splits")  # unchanged: bit for bit the states its metrics were measured on
    assert any(isinstance(m, torch.nn.BatchNorm2d) for m in in_fp32.module.modules())
    assert np.array_equal(in_fp32.encode(images), reference)
    in_bf16 = load_encoder(tmp_path / "splits", "cpu", "bf16")
    assert in_bf16.module.precision == "bf16"
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in in_bf16.module.modules())
    assert np.abs(in_bf16.encode(images) - reference).mean() < 0.05 * np.abs(reference).mean()
    fused = ImageEncoder(16, 16, 8, channels=4, keypoints=4)
    fused.load_state_dict(unfused.state_dict())
    with torch.no_grad():
        np.testing.assert_allclose(fused.fuse_for_inference()(images_to_tensor(images)).numpy(), reference, atol=1e-5)


def test_an_encoder_trains_in_bf16(tmp_path: Path) -> None:
    dataset = make_dataset(tmp_path / "data")
    metrics = make_encoder(
        tmp_path / "ae", dataset, "autoencoder", [*KEYPOINTS, "srl_model.training.precision=bf16", "whiten=0.001"]
    )
    assert metrics["srl/epochs"] == 1 and 0.0 <= metrics["srl/unwhitened/gtc_mean"] <= 1.0
    assert np.isfinite(metrics["srl/val_loss"])
    with pytest.raises(ConfigError, match=r"srl_model.training.precision"):
        make_encoder(tmp_path / "bad", dataset, "autoencoder", ["srl_model.training.precision=half"])
    assert not (tmp_path / "bad").exists()


def test_bf16_raw_pixels_policy_trains_and_reloads(compose: Compose, tmp_path: Path) -> None:
    overrides = ["algo=ppo", "env=MobileRobot1D", "srl_model=raw_pixels", "srl_model.height=40", "srl_model.width=40"]
    tiny = ["algo.n_steps=16", "algo.batch_size=16", "algo.n_epochs=1", "total_timesteps=16", "test_episodes=1"]
    cfg = compose([*overrides, *tiny, "hardware.precision=bf16", "checkpoint_freq=0", "verbose=0"])
    plan = plan_run(cfg)
    assert plan.factory.kwargs["policy_kwargs"]["features_extractor_kwargs"] == {"pad": 0, "precision": "bf16"}
    plain = plan_run(compose([*overrides, *tiny]))
    assert "features_extractor_class" not in (plain.factory.kwargs.get("policy_kwargs") or {})
    train(cfg)
    model = hydra.utils.get_class(cfg.algo._target_).load(RunDir(tmp_path / "run").model, device="cpu")
    extractor = model.policy.features_extractor
    assert isinstance(extractor, ShiftedNatureCNN) and extractor.precision_setting == "bf16"
    observation = torch.randint(0, 255, (2, 3, 40, 40), dtype=torch.uint8).float()
    with torch.no_grad():
        assert extractor(observation).dtype == torch.float32


def test_a_bad_hardware_precision_is_refused_before_the_run_dir(compose: Compose, tmp_path: Path) -> None:
    cfg = compose(["algo=ppo", "env=MobileRobot1D", "srl_model=raw_pixels", "hardware.precision=fp16"])
    with pytest.raises(ConfigError, match=r"hardware.precision='fp16'.*allowed: fp32, bf16, auto"):
        train(cfg)
    assert not (tmp_path / "run").exists()
