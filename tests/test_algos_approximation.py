"""The Approximation helper, and a user's own agent written on it (the example of docs/algorithms.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from gymnasium import spaces
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.policies import BasePolicy
from torch import nn

from rlzoo.algos.sb3_base import ApproximationShell
from rlzoo.approximation.approximations import Approximation, QDist, QNetwork, TargetNetwork, _clip_grad_norm_
from rlzoo.approximation.q_networks import QPolicy
from rlzoo.approximation.replay_buffers import sample_batch


def linear(inputs: int = 2, outputs: int = 3) -> nn.Linear:
    torch.manual_seed(0)
    return nn.Linear(inputs, outputs)


def test_target_network_moves_every_n_updates_by_tau() -> None:
    source, copy = linear(), linear()
    target = TargetNetwork(source, copy, tau=0.5, every=2)
    assert torch.equal(copy.weight, source.weight) and not copy.weight.requires_grad
    before = copy.weight.clone()
    with torch.no_grad():
        source.weight.add_(1.0)
    target.update(1)
    assert torch.equal(copy.weight, before)  # not due
    target.update(2)
    assert torch.allclose(copy.weight, before + 0.5)


def test_reinforce_clips_schedules_steps_moves_target_and_logs() -> None:
    model = linear()
    logged: dict[str, float] = {}
    progress = [1.0]
    f = QNetwork(
        model,
        torch.optim.SGD(model.parameters(), lr=1.0),
        target=TargetNetwork(model, linear(), every=2),
        clip_grad=0.1,
        lr_schedule=lambda remaining: 0.5 * remaining,
        progress=lambda: progress[0],
        name="q",
        log=logged.__setitem__,
    )
    x, actions = torch.ones(4, 2), torch.tensor([0, 1, 2, 0])
    assert f(x, actions).shape == (4,) and f(x).shape == (4, 3) and f.no_grad(x).requires_grad is False
    before = model.weight.clone()
    progress[0] = 0.2
    f.reinforce((f(x, actions) * 100).sum())
    step = (model.weight - before).norm()
    assert step <= 0.1 * 0.5 * 0.2 + 1e-6  # gradient norm clipped to 0.1, learning rate 0.5 x 0.2
    assert logged["train/q_learning_rate"] == pytest.approx(0.1) and logged["train/q_grad_norm"] > 0.1
    assert "train/q_loss" in logged and f.updates == 1 and model.weight.grad is None
    assert not torch.equal(f.target(x), f.no_grad(x))  # target moves every 2 updates
    f.reinforce(f(x).sum())
    assert torch.equal(f.target(x), f.no_grad(x))
    state = f.state_dict()
    g = QNetwork(model, torch.optim.SGD(model.parameters(), lr=1.0))
    g.load_state_dict(state)
    assert g.updates == 2


@pytest.mark.parametrize("scale", [1e-3, 10.0])
def test_gradient_clipping_is_torchs(scale: float) -> None:
    parameters = [nn.Parameter(torch.zeros(4, 3)), nn.Parameter(torch.zeros(3)), nn.Parameter(torch.zeros(2))]
    grads = [torch.randn(p.shape) * scale for p in parameters[:2]]  # the last parameter has no gradient
    results = []
    for clip in (nn.utils.clip_grad_norm_, _clip_grad_norm_):
        for parameter, grad in zip(parameters, grads, strict=False):
            parameter.grad = grad.clone()
        results.append((clip(parameters, 1.0), [p.grad.clone() for p in parameters[:2]]))
    (norm, clipped), (own_norm, own_clipped) = results
    assert torch.equal(norm, own_norm) and all(torch.equal(a, b) for a, b in zip(clipped, own_clipped, strict=True))


def test_eval_switches_dropout_off_without_changing_mode() -> None:
    model = nn.Sequential(nn.Linear(2, 64), nn.Dropout(0.9))
    f = Approximation(model, torch.optim.SGD(model.parameters(), lr=0.1))
    x = torch.ones(8, 2)
    assert torch.equal(f.eval(x), f.eval(x)) and model.training


@pytest.mark.parametrize("kind", [QNetwork, QDist])
def test_with_next_is_the_two_forward_passes_in_one(kind: type[QNetwork] | type[QDist]) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2 * (5 if kind is QDist else 1)))
    if kind is QDist:
        model.append(nn.Unflatten(1, (2, 5)))
    extra = {"support": torch.linspace(-1, 1, 5)} if kind is QDist else {}
    q = kind(model, torch.optim.SGD(model.parameters(), lr=0.1), **extra)  # type: ignore[arg-type]
    observations, next_observations, actions = torch.randn(4, 3), torch.randn(4, 3), torch.tensor([0, 1, 1, 0])
    values, following = q.with_next(observations, actions, next_observations)
    torch.testing.assert_close(values, q(observations, actions))
    torch.testing.assert_close(following, q.no_grad(next_observations))
    assert values.requires_grad and not following.requires_grad


def test_categorical_projection_keeps_mass_and_splits_between_neighbours() -> None:
    support = torch.linspace(0.0, 4.0, 5)
    f = QDist(linear(), torch.optim.SGD(linear().parameters(), lr=0.1), support=support)
    probabilities = torch.tensor([[0.5, 0.5, 0.0, 0.0, 0.0]])
    projected = f.project(torch.tensor([[0.5, 9.0, 1.0, 2.0, 3.0]]), probabilities)
    assert projected.sum().item() == pytest.approx(1.0)
    assert projected[0].tolist() == pytest.approx([0.25, 0.25, 0.0, 0.0, 0.5])  # 0.5 splits; 9 clips to v_max
    assert f.expectation(projected).item() == pytest.approx(0.25 + 2.0)


# The example of docs/algorithms.md, "Optional helpers: the approximation/ blocks": a plain DQN on an Approximation.
class MyDQN(ApproximationShell, OffPolicyAlgorithm):
    """DQN (Mnih et al., 2015) written on a QNetwork; epsilon-greedy is left out for brevity."""

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {"MlpPolicy": QPolicy}
    approximations = ("q",)
    supported_action_spaces = (spaces.Discrete,)
    policy: QPolicy

    def __init__(self, policy: str, env: Any, learning_rate: float = 1e-3, target_update_interval: int = 100,
                 seed: int | None = None, device: str = "auto", _init_setup_model: bool = True) -> None:  # fmt: skip
        super().__init__(
            policy, env, learning_rate, buffer_size=10_000, learning_starts=100, batch_size=32,
            seed=seed, device=device, sde_support=False, supported_action_spaces=self.supported_action_spaces,
        )  # fmt: skip
        self.target_update_interval = target_update_interval
        if _init_setup_model:
            self._setup_model()

    def _setup_model(self) -> None:
        super()._setup_model()
        self.q = self._approximate(
            QNetwork, self.policy.q_net, self.policy.optimizer, "q", clip_grad=10.0,
            target=self.policy.q_net_target, target_every=self.target_update_interval,
        )  # fmt: skip

    def train(self, gradient_steps: int, batch_size: int = 32) -> None:
        for _ in range(gradient_steps):
            batch = sample_batch(self.replay_buffer, batch_size, self.gamma, 1.0, self._vec_normalize_env)  # type: ignore[arg-type]
            values = self.q(batch.observations, batch.actions)
            targets = (
                batch.rewards
                + batch.discounts * (1 - batch.dones) * self.q.target(batch.next_observations).max(1).values
            )
            self.q.reinforce(F.mse_loss(values, targets))  # fmt: skip


def test_own_agent_trains_saves_loads_and_predicts(tmp_path: Path) -> None:
    env = make_vec_env("CartPole-v1", n_envs=1, seed=0)
    model = MyDQN("MlpPolicy", env, seed=0).learn(400)
    assert model.q.updates == 300 and model.q.optimizer is model.policy.optimizer
    model.save(tmp_path / "model.zip")
    loaded = MyDQN.load(tmp_path / "model.zip", device="cpu")
    assert loaded.q.updates == 300  # the approximation's state came back with the policy
    observations = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    assert (
        loaded.predict(observations, deterministic=True)[0] == model.predict(observations, deterministic=True)[0]
    ).all()
