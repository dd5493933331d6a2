"""Every SRL loss decreases when trained on a tiny synthetic batch; dims slices are checked."""

from __future__ import annotations

import pytest
import torch

from rlzoo.errors import ConfigError
from rlzoo.srl import losses
from rlzoo.srl.networks import ImageEncoder
from rlzoo.srl.trainer import _encode

SIZE, STATE_DIM, N = 16, 6, 16


def _batch(continuous: bool = False) -> losses.Batch:
    """A bright square on a dark image (a robot seen from above) moved by the action: left, right, down, up."""
    generator = torch.Generator().manual_seed(0)
    corner = torch.randint(2, SIZE - 6, (N, 2), generator=generator)
    actions = torch.randint(0, 4, (N,), generator=generator)
    moves = torch.tensor([[0, -2], [0, 2], [2, 0], [-2, 0]])[actions]
    obs, next_obs = torch.zeros(N, 3, SIZE, SIZE), torch.zeros(N, 3, SIZE, SIZE)
    for i, ((row, col), (d_row, d_col)) in enumerate(zip(corner.tolist(), moves.tolist(), strict=True)):
        obs[i, :, row : row + 4, col : col + 4] = 1.0
        next_obs[i, :, row + d_row : row + d_row + 4, col + d_col : col + d_col + 4] = 1.0
    return losses.Batch(
        obs=obs,
        next_obs=next_obs,
        actions=torch.nn.functional.one_hot(actions, 4)[:, :2].float() if continuous else actions,
        rewards=(corner[:, 1] > SIZE // 2).float(),
        ground_truth=corner.float(),
    )


def _context(continuous: bool = False) -> losses.LossContext:
    encoder = ImageEncoder(SIZE, SIZE, STATE_DIM, channels=4)
    return losses.LossContext(
        state_dim=STATE_DIM, feature_dim=encoder.feature_dim, image_shape=(SIZE, SIZE, 3), channels=4,
        n_actions=None if continuous else 4, action_dim=2 if continuous else 4, ground_truth_dim=2,
        positive_reward_fraction=0.25,
    )  # fmt: skip


LOSSES = [
    (losses.Reconstruction, {}, False),
    (losses.Denoising, {"occlusion": 0.5}, False),
    (losses.VariationalReconstruction, {"beta": 1.0}, False),
    (losses.InverseDynamics, {"dims": [-2, None]}, False),
    (losses.InverseDynamics, {"dims": [-2, None]}, True),
    (losses.ForwardDynamics, {}, False),
    (losses.ForwardDynamics, {}, True),
    (losses.RewardPrediction, {"dims": [0, -2]}, False),
    (losses.RoboticPriors, {}, False),
    (losses.RoboticPriors, {}, True),
    (losses.GroundTruthRegression, {}, False),
]


@pytest.mark.parametrize(
    ("loss_class", "kwargs", "continuous"),
    LOSSES,
    ids=[c.__name__ + ("-continuous" if continuous else "") for c, _, continuous in LOSSES],
)
def test_loss_decreases(loss_class: type[losses.SRLLoss], kwargs: dict, continuous: bool) -> None:
    torch.manual_seed(0)
    encoder = ImageEncoder(SIZE, SIZE, STATE_DIM, channels=4)
    loss = loss_class(_context(continuous), **kwargs)
    batch = _batch(continuous)
    optimizer = torch.optim.Adam([*encoder.parameters(), *loss.parameters()], lr=0.01)

    def value() -> float:
        with torch.no_grad():
            torch.manual_seed(1)  # the same noise (masks, samples) before and after
            return float(loss(batch, _encode(encoder, batch), encoder))

    before = value()
    for _ in range(20):
        optimizer.zero_grad()
        loss(batch, _encode(encoder, batch), encoder).backward()
        optimizer.step()
    assert value() < 0.8 * before


def test_dims_slices() -> None:
    context = _context()
    assert losses.InverseDynamics(context, dims=[-2, None]).size == 2
    assert losses.Reconstruction(context, dims=[0, -2]).size == STATE_DIM - 2
    assert losses.RewardPrediction(context).size == STATE_DIM
    for bad in ([3, 3], [0], "0:2", [0.5, 2]):
        with pytest.raises(ConfigError, match="must be a non-empty"):
            losses.InverseDynamics(context, dims=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="weight=-1"):
        losses.InverseDynamics(context, weight=-1)


def test_a_learned_scale_makes_the_inverse_head_confident_on_small_moves() -> None:
    """Keypoint states move by about 0.05 per step: in 500 batches of Adam at lr 0.005 (about one epoch of the small
    benchmark) the plain linear head stays near chance, the one with a learned scale of its logits does not."""
    generator = torch.Generator().manual_seed(0)
    positions = torch.rand(256, 2, generator=generator) * 1.8 - 0.9
    actions = torch.randint(0, 4, (256,), generator=generator)
    moves = 0.05 * torch.tensor([[-1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])[actions]
    states = torch.zeros(256, STATE_DIM)
    states[:, -2:] = positions
    next_states = states.clone()
    next_states[:, -2:] += moves
    encoded = losses.Encoded(states, states, next_states, next_states)
    empty = torch.zeros(256, 3, 1, 1)
    batch = losses.Batch(empty, empty, actions, torch.zeros(256), torch.zeros(256, 2))
    encoder = ImageEncoder(SIZE, SIZE, STATE_DIM, channels=4)  # unused by the loss: the states are given

    def trained(learn_scale: bool) -> float:
        torch.manual_seed(0)
        loss = losses.InverseDynamics(_context(), dims=[-2, None], learn_scale=learn_scale)
        optimizer = torch.optim.Adam(loss.parameters(), lr=0.005)
        for _ in range(500):
            optimizer.zero_grad()
            value = loss(batch, encoded, encoder)
            value.backward()
            optimizer.step()
        return float(value.detach())

    assert trained(learn_scale=True) < 0.3 < 1.0 < trained(learn_scale=False)
    with pytest.raises(ConfigError, match=r"learn_scale='yes' must be true or false"):
        losses.InverseDynamics(_context(), learn_scale="yes")  # type: ignore[arg-type]
