"""srl_model.augment: DrQ's random shift of raw pixels, in the policy's gradient updates only."""

from __future__ import annotations

from pathlib import Path

import hydra
import pytest
import torch
import torch.nn.functional as F

from conftest import Compose
from rlzoo.errors import ConfigError
from rlzoo.rundir import RunDir
from rlzoo.srl.augment import RandomShift, ShiftedNatureCNN
from rlzoo.train import train
from rlzoo.training.plan import plan_run

PAD = 2


def test_random_shift_crops_the_padded_image_in_training_only() -> None:
    torch.manual_seed(0)
    images = torch.rand(64, 3, 8, 10)
    shift = RandomShift(PAD)
    assert torch.equal(shift.eval()(images), images)
    shifted = shift.train()(images)
    padded = F.pad(images, (PAD, PAD, PAD, PAD), mode="replicate")
    offsets = []
    for image, out in zip(padded, shifted, strict=True):
        found = [
            (dy, dx)
            for dy in range(2 * PAD + 1)
            for dx in range(2 * PAD + 1)
            if torch.equal(image[:, dy : dy + 8, dx : dx + 10], out)
        ]
        assert found, "each output is a crop of the padded image at a whole-pixel offset"
        offsets.append(found[0])
    assert len(set(offsets)) > 5  # offsets differ between images


def test_augment_gives_raw_pixels_a_shifting_cnn(compose: Compose, tmp_path: Path) -> None:
    overrides = ["algo=ppo", "env=MobileRobot1D", "srl_model=raw_pixels", "srl_model.height=40", "srl_model.width=40"]
    tiny = ["algo.n_steps=16", "algo.batch_size=16", "algo.n_epochs=1", "total_timesteps=16", "test_episodes=1"]
    cfg = compose([*overrides, *tiny, "srl_model.augment=4", "checkpoint_freq=0", "verbose=0", "logger.formats=[csv]"])
    plan = plan_run(cfg)
    assert plan.factory.kwargs["policy_kwargs"]["features_extractor_class"] is ShiftedNatureCNN
    assert not plan.config.algo.get("policy_kwargs")  # the config records srl_model.augment, not the class
    assert plan.config.srl_model.augment == 4
    train(cfg)
    model = hydra.utils.get_class(cfg.algo._target_).load(RunDir(tmp_path / "run").model, device="cpu")
    extractor = model.policy.features_extractor
    assert isinstance(extractor, ShiftedNatureCNN) and extractor.shift.pad == 4
    model.policy.set_training_mode(False)  # as SB3 predicts: no shift at test or replay
    assert not extractor.shift.training


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["srl_model=raw_pixels", "srl_model.augment=-1"], r"srl_model.augment=-1 must be a whole number"),
        (["srl_model=ground_truth", "+srl_model.augment=4"], r"srl_model.augment shifts images"),
        (
            ["srl_model=raw_pixels", "srl_model.augment=4", "+algo.policy_kwargs.features_extractor_class=x"],
            r"sets algo.policy_kwargs.features_extractor_class",
        ),
    ],
)
def test_bad_augment_is_refused(overrides: list[str], message: str, compose: Compose) -> None:
    with pytest.raises(ConfigError, match=message):
        plan_run(compose(["algo=ppo", "env=MobileRobot", *overrides]))
