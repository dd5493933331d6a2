"""ACKTR (K-FAC) and ACER (Retrace, truncated importance weights, trust region): the pieces and the algorithms."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from stable_baselines3.common.env_util import make_vec_env
from torch import nn

from conftest import Compose
from rlzoo import preset
from rlzoo.algos.acer import ACER, Segment, retrace
from rlzoo.algos.acktr import ACKTR
from rlzoo.approximation.kfac import KFAC
from rlzoo.errors import ConfigError
from rlzoo.train import train
from test_agents import drive, learn_twin


def regression(kl_clip: float) -> tuple[nn.Module, KFAC, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
    x = torch.randn(256, 3) * torch.tensor([1.0, 10.0, 0.1])  # badly scaled inputs: where natural gradients help
    y = x @ torch.tensor([[1.0], [0.1], [10.0]])
    return model, KFAC(model, lr=0.1, kl_clip=kl_clip, inverse_every=1, stat_decay=0.9), x, y


def kfac_step(model: nn.Module, kfac: KFAC, x: torch.Tensor, y: torch.Tensor) -> float:
    with kfac.record():
        prediction = model(x)
    with kfac.fisher():  # a Gaussian model's Fisher: targets sampled around the prediction
        (prediction - (prediction.detach() + torch.randn_like(prediction))).pow(2).mean().backward(retain_graph=True)
    kfac.zero_grad()
    loss = (prediction - y).pow(2).mean()
    loss.backward()
    kfac.step()
    kfac.zero_grad()
    return loss.item()


def test_kfac_collects_factors_and_descends() -> None:
    model, kfac, x, y = regression(kl_clip=1.0)
    losses = [kfac_step(model, kfac, x, y) for _ in range(60)]
    first = kfac.factors[model[0]]
    assert first.a is not None and first.a.shape == (4, 4) and first.g is not None and first.g.shape == (8, 8)
    assert losses[-1] < 0.2 * losses[0]


def test_kfac_kl_clip_bounds_the_step() -> None:
    small, large = regression(kl_clip=1e-8), regression(kl_clip=1.0)
    starts = [torch.nn.utils.parameters_to_vector(m.parameters()).clone() for m, *_ in (small, large)]
    kfac_step(*small)
    kfac_step(*large)
    vector = torch.nn.utils.parameters_to_vector
    moves = [(vector(m.parameters()) - s).norm() for (m, *_), s in zip((small, large), starts, strict=True)]
    assert 0 < moves[0] < 0.01 * moves[1]


def test_kfac_preconditions_convolutions() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 3, 3, stride=2, padding=1), nn.Flatten(), nn.Linear(3 * 4 * 4, 1))
    kfac = KFAC(model, kl_clip=1.0)
    x, y = torch.randn(16, 2, 8, 8), torch.randn(16, 1)
    kfac_step(model, kfac, x, y)
    factors = kfac.factors[model[0]]
    assert factors.a is not None and factors.a.shape == (2 * 9 + 1, 2 * 9 + 1) and factors.g.shape == (3, 3)  # type: ignore[union-attr]


def test_retrace_targets_match_the_recursion_by_hand() -> None:
    rewards = torch.tensor([[1.0], [2.0], [3.0]])
    dones = torch.tensor([[0.0], [1.0], [0.0]])
    segment = Segment(torch.zeros(4, 1, 1), torch.zeros(3, 1).long(), rewards, dones, torch.zeros(3, 1, 2))
    rho_bar = torch.tensor([[0.5], [0.5], [0.5]])
    q_taken = torch.tensor([[10.0], [20.0], [30.0]])
    values = torch.tensor([[1.0], [2.0], [3.0], [4.0]])
    targets = retrace(segment, rho_bar, q_taken, values, gamma=0.9)
    last = 3 + 0.9 * 4  # bootstrapped from V(s_3)
    second = 2.0  # the episode ended at step 1
    first = 1 + 0.9 * (0.5 * (second - 20) + 2)
    assert targets.flatten().tolist() == pytest.approx([first, second, last])


def test_acer_trust_region_bounds_the_step_towards_the_average_policy() -> None:
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    kwargs = {"n_steps": 8, "replay_start": 0, "policy_kwargs": {"net_arch": [16]}, "seed": 0}
    model = ACER("MlpPolicy", env, trust_region=0.01, **kwargs).learn(64)
    segment = model.segments[-1]
    logits, q = model._forward(segment.observations)
    values = (logits.softmax(-1) * q).sum(-1).detach()
    advantages = torch.full_like(values[:-1], 100.0)  # a huge policy gradient
    rho = torch.ones_like(logits[:-1])
    gradient = model._policy_gradient(logits[:-1], q[:-1].detach(), values[:-1], rho, advantages, segment)
    average = model.policy.average_net(segment.observations[:-1].flatten(0, 1))[0].unflatten(0, (8, 2))
    k = logits[:-1].softmax(-1).detach() - average.softmax(-1)
    assert ((k * gradient).sum(-1) <= 0.0101).all()  # the projected step's linearised KL stays under delta


@pytest.mark.parametrize("algo_class", [ACER, ACKTR])
def test_learns_saves_loads_and_predicts(algo_class: type, tmp_path: Path) -> None:
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    kwargs = {"replay_start": 32} if algo_class is ACER else {}
    model = algo_class("MlpPolicy", env, n_steps=8, seed=0, policy_kwargs={"net_arch": [16]}, **kwargs)
    model.learn(320)
    assert model.actor_critic.updates == model._n_updates > 10
    model.save(tmp_path / "model.zip")
    loaded = algo_class.load(tmp_path / "model.zip", device="cpu")
    assert loaded.actor_critic.updates == model.actor_critic.updates
    observations = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
    assert (
        loaded.predict(observations, deterministic=True)[0] == model.predict(observations, deterministic=True)[0]
    ).all()


def test_acktr_handles_continuous_actions() -> None:
    model = ACKTR("MlpPolicy", make_vec_env("Pendulum-v1", n_envs=2, seed=0), n_steps=8, seed=0).learn(160)
    assert model._n_updates == 10 and np.isfinite(model.policy.log_std.detach().numpy()).all()


@pytest.mark.parametrize("algo", ["acer", "acktr"])
def test_training_agent_learns_as_sb3_learn(algo: str) -> None:
    overrides = ["n_envs=2", "algo.n_steps=8", "+algo.policy_kwargs.net_arch=[16]"]
    bound = preset(algo, *overrides, *(["algo.replay_start=32"] if algo == "acer" else []), verbose=0).env("CartPole")
    agent = drive(bound, 160)
    assert agent.model.num_timesteps == 160 and agent.model._n_updates > 0
    mine, theirs = agent.model.policy.state_dict(), learn_twin(bound, 160).state_dict()
    assert all(torch.equal(mine[key], theirs[key]) for key in theirs)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["algo=acer", "env=Pendulum"], r"ACER cannot handle the action space Box"),
        (["algo=acer", "algo.trust_region=0"], r"algo.trust_region=0(\.0)? must be > 0, or null"),
        (["algo=acer", "algo.average_decay=1"], r"algo.average_decay=1(\.0)? must be in \[0, 1\)"),
        (["algo=acktr", "algo.kl_clip=-1"], r"algo.kl_clip=-1(\.0)? must be > 0"),
    ],
)
def test_bad_input(overrides: list[str], message: str, compose: Compose) -> None:
    with pytest.raises(ConfigError, match=message):
        train(compose([*overrides, "total_timesteps=64", "test_episodes=0", "verbose=0", "logger.formats=[csv]"]))
