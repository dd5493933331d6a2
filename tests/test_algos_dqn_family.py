"""The DQN family (ddqn, per, c51, rainbow): replay, networks, save/load/predict, agents, and bad input."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import torch
from gymnasium import spaces
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.torch_layers import FlattenExtractor

from conftest import TINY_OFF_POLICY, Compose
from rlzoo import preset
from rlzoo.algos.dqn_family import CategoricalDQN, DeepQ, PrioritizedDQN, Rainbow
from rlzoo.approximation.q_networks import NoisyLinear, QModule
from rlzoo.approximation.replay_buffers import PrioritizedReplayBuffer, SumTree
from rlzoo.errors import ConfigError
from rlzoo.train import train
from test_agents import drive, learn_twin

TINY = {"learning_starts": 50, "buffer_size": 500, "batch_size": 16, "policy_kwargs": {"net_arch": [16]}}
VARIANTS = {
    "ddqn": (DeepQ, {}),
    "dqn-nstep-plain": (DeepQ, {"double": False, "dueling": False, "n_steps": 3}),
    "per": (PrioritizedDQN, {"prioritized_replay": {"alpha": 0.6}, "n_steps": 2}),
    "c51": (CategoricalDQN, {"n_atoms": 11}),
    "rainbow": (Rainbow, {"n_atoms": 11}),
}


def test_sum_tree_draws_in_proportion_to_priorities() -> None:
    tree = SumTree(5)
    tree[np.arange(5)] = np.array([1.0, 0.0, 3.0, 0.0, 4.0])
    assert tree.total == 8.0
    assert tree.find(np.array([0.0, 0.99, 1.0, 3.99, 4.0, 7.99])).tolist() == [0, 0, 2, 2, 4, 4]
    tree[np.array([4])] = np.array([0.0])
    draws = tree.find(np.random.default_rng(0).uniform(0, tree.total, 1000))
    assert set(draws.tolist()) == {0, 2} and 0.65 < (draws == 2).mean() < 0.85


@pytest.mark.parametrize("searched", [4, 100])  # descend from the root's children, or search the leaves' sums
def test_deep_sum_tree_finds_each_leaf_on_its_own_mass_and_draws_in_proportion(searched: int) -> None:
    rng = np.random.default_rng(1)
    tree = SumTree(100, branching=4, searched=searched)  # 4 levels: 4 x 4 x 4 x 4 = 256 leaves, 100 used
    assert [len(level) for level in tree.levels] == [100, 28, 8, 4]
    priorities = rng.uniform(0.1, 1.0, 100) * (rng.random(100) < 0.8)  # some leaves never drawn
    tree[np.arange(100)] = priorities
    tree[np.array([7, 7])] = np.array([0.5, 0.5])  # an index listed twice
    priorities[7] = 0.5
    cumulative = np.cumsum(priorities)
    assert tree.total == pytest.approx(cumulative[-1])
    positive = np.flatnonzero(priorities)
    starts, ends = (cumulative - priorities)[positive], cumulative[positive]
    assert (tree.find(starts + 1e-9) == positive).all() and (tree.find(ends - 1e-9) == positive).all()
    draws = np.bincount(tree.find(rng.uniform(0, tree.total, 200_000)), minlength=100)
    expected = 200_000 * priorities / cumulative[-1]
    assert draws[priorities == 0].sum() == 0
    assert np.abs(draws - expected).max() < 5 * np.sqrt(expected.max())  # binomial counts: std ≤ √expected


def fill(buffer: PrioritizedReplayBuffer, rewards: list[float], dones: list[bool]) -> None:
    for i, (reward, done) in enumerate(zip(rewards, dones, strict=True)):
        obs = np.array([[float(i)]], dtype=np.float32)
        buffer.add(obs, obs + 1, np.array([[0]]), np.array([reward]), np.array([done]), [{}])


def test_prioritized_n_step_transitions_stop_at_episode_ends() -> None:
    space = spaces.Box(-100, 100, (1,))
    buffer = PrioritizedReplayBuffer(10, space, spaces.Discrete(2), device="cpu", n_steps=3, gamma=0.5)
    fill(buffer, [1.0, 2.0, 4.0, 8.0, 16.0], [False, True, False, False, False])
    batch = buffer._batch(np.array([0, 1, 2, 4]), np.zeros(4, int), np.ones(4), np.arange(4), None)
    assert batch.rewards.tolist() == [1 + 0.5 * 2, 2, 4 + 0.5 * 8 + 0.25 * 16, 16]  # row 4 is the newest
    assert batch.dones.tolist() == [1, 1, 0, 0]
    assert batch.discounts.tolist() == [0.25, 0.5, 0.125, 0.5]
    assert batch.next_observations.flatten().tolist() == [2, 2, 5, 5]


def test_priorities_steer_draws_and_weights_correct_them() -> None:
    space = spaces.Box(-100, 100, (1,))
    buffer = PrioritizedReplayBuffer(8, space, spaces.Discrete(2), device="cpu", alpha=1.0, epsilon=1e-6)
    fill(buffer, [0.0] * 8, [False] * 8)
    buffer.update_priorities(np.arange(8), np.array([1.0, 1, 1, 1, 1, 1, 1, 9]))
    batch = buffer.sample_prioritized(64, beta=1.0)
    assert batch.indices is not None
    assert (batch.indices == 7).mean() > 0.45  # 9 / 16 of the mass
    weights = dict(zip(batch.indices.tolist(), batch.weights.tolist(), strict=True))
    assert weights[7] == pytest.approx(1 / 9, rel=1e-4) and max(weights.values()) == 1.0


def test_noisy_layer_keeps_its_noise_until_drawn_again_and_none_in_eval_mode() -> None:
    layer = NoisyLinear(3, 2, std_init=0.5)
    x = torch.ones(1, 3)
    first = layer(x)
    assert torch.equal(layer(x), first)  # the same noise for every forward of one step
    layer.reset_noise()
    assert not torch.equal(layer(x), first)
    layer.eval()
    mean = torch.nn.functional.linear(x, layer.weight_mu, layer.bias_mu)
    assert torch.equal(layer(x), mean)
    assert "noise" not in layer.state_dict()  # the noise is not saved


@pytest.mark.parametrize(("n_atoms", "noisy_std"), [(1, None), (5, 0.5)])
def test_dueling_head_is_value_plus_centred_advantages(n_atoms: int, noisy_std: float | None) -> None:
    space = spaces.Box(-1, 1, (4,))
    net = QModule(FlattenExtractor(space), space, 3, [16], torch.nn.ReLU, True, True, noisy_std, n_atoms)
    x = torch.randn(8, 4)
    features = net.hidden(x)
    advantages = net.advantage(features).view(8, 3, n_atoms)
    assert net.value is not None
    expected = net.value(features).view(8, 1, n_atoms) + advantages - advantages.mean(dim=1, keepdim=True)
    torch.testing.assert_close(net(x), expected.squeeze(-1) if n_atoms == 1 else expected)


def test_policy_draws_all_noise_at_once_and_acting_redraws_only_the_online_network() -> None:
    policy = Rainbow("MlpPolicy", "CartPole-v1", seed=0, **TINY).policy.to("cpu")
    online, target = policy._noisy_layers, policy._target_noisy_layers
    assert len(online) == len(target) == 3  # hidden, advantage and value layers
    assert all(layer.noise._base is policy.all_noise for layer in online + target)  # slices of one buffer
    before = [layer.noise.clone() for layer in online + target]
    with policy.noise(True):
        assert all(layer.training for layer in online)
    after = [layer.noise.clone() for layer in online + target]
    assert all(not torch.equal(a, b) for a, b in zip(before[:3], after[:3], strict=True))
    assert all(torch.equal(a, b) for a, b in zip(before[3:], after[3:], strict=True))
    policy.reset_noise()
    assert all(not torch.equal(a, layer.noise) for a, layer in zip(after, online + target, strict=True))
    noise = policy.all_noise
    assert abs(float(noise.pow(4).mean()) - 1) < 0.35  # f(ε)⁴ = ε², of mean 1 (std 0.07 over these 410 draws)
    policy.to(torch.float64)  # a move: every layer's noise and its in/out views follow the policy's buffer
    assert all(layer.noise._base is layer._eps[1]._base is policy.all_noise for layer in online + target)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variant_learns_saves_loads_and_predicts(variant: str, tmp_path: Path) -> None:
    algo_class, keywords = VARIANTS[variant]
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    model = algo_class("MlpPolicy", env, seed=0, target_update_interval=5, **TINY, **keywords)
    start = {k: v.clone() for k, v in model.policy.q_net.state_dict().items()}
    model.learn(300)
    assert model.q.updates == model._n_updates > 0
    assert any(not torch.equal(start[k], v) for k, v in model.policy.q_net.state_dict().items())
    prioritized = variant in ("per", "rainbow")
    assert isinstance(model.replay_buffer, PrioritizedReplayBuffer) is prioritized
    model.save(tmp_path / "model.zip")
    loaded = algo_class.load(tmp_path / "model.zip", device="cpu")
    observations = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
    assert (
        loaded.predict(observations, deterministic=True)[0] == model.predict(observations, deterministic=True)[0]
    ).all()
    assert loaded.q.updates == model.q.updates and loaded.policy.head == model.policy.head


def test_rainbow_explores_by_noise_and_acts_greedily_when_deterministic() -> None:
    algo_class, keywords = VARIANTS["rainbow"]
    model = algo_class("MlpPolicy", "CartPole-v1", seed=0, exploration_initial_eps=0.0, **TINY, **keywords)
    observations = np.random.default_rng(0).normal(size=(256, 4)).astype(np.float32)
    greedy = [model.predict(observations, deterministic=True)[0] for _ in range(2)]
    assert (greedy[0] == greedy[1]).all()
    noisy = model.predict(observations, deterministic=False)[0]
    assert (noisy != greedy[0]).any()


def test_full_exploration_does_not_ask_the_network() -> None:
    model = DeepQ("MlpPolicy", "CartPole-v1", seed=0, **TINY)
    model.exploration_rate = 1.0
    observations = np.zeros((64, 4), dtype=np.float32)
    with mock.patch.object(model.policy, "predict", side_effect=AssertionError("asked")):
        actions = model.predict(observations)[0]
        assert model.predict(observations[0])[0].shape == ()
    assert actions.shape == (64,) and set(actions.tolist()) == {0, 1}
    model.exploration_rate = 0.5
    mixed = model.predict(observations)[0]
    greedy = model.predict(observations, deterministic=True)[0]
    assert (mixed == greedy).mean() > 0.6 and (mixed != greedy).any()


@pytest.mark.parametrize("algo", ["ddqn", "rainbow"])
def test_training_agent_learns_as_sb3_learn(algo: str) -> None:
    overrides = [*TINY_OFF_POLICY, "algo.train_freq=32", "algo.gradient_steps=4", "algo.target_update_interval=3"]
    bound = preset(algo, *overrides, *(["algo.n_atoms=11"] if algo == "rainbow" else []), verbose=0).env("CartPole")
    agent = drive(bound, 192)
    assert agent.model.num_timesteps == 192 and agent.model._n_updates > 0
    mine, theirs = agent.model.policy.state_dict(), learn_twin(bound, 192).state_dict()
    assert all(torch.equal(mine[key], theirs[key]) for key in theirs)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["algo=c51", "env=Pendulum"], r"CategoricalDQN cannot handle the action space Box.*algorithms that fit: a2c"),
        (["algo=c51", "algo.n_atoms=1"], r"algo.n_atoms=1 must be ≥ 2"),
        (["algo=rainbow", "algo.v_min=10", "algo.v_max=-10"], r"algo.v_min=10(\.0)? must be < algo.v_max=-10(\.0)?"),
        (["algo=per", "+algo.prioritized_replay.beta0=0.4"], r"algo.prioritized_replay.beta0 is not a key"),
        (["algo=per", "algo.prioritized_replay.beta=2"], r"algo.prioritized_replay.beta=2 must be in \[0, 1\]"),
        (["algo=ddqn", "+algo.policy_kwargs.dueling=false"], r"algo.policy_kwargs.dueling: set algo.<key> instead"),
        (["algo=ddqn", "algo.noisy_std=0"], r"algo.noisy_std=0(\.0)? must be > 0, or null"),
        (["algo=ddqn", "+algo.n_atoms=5"], r"algo.n_atoms is not a keyword of DeepQ"),
    ],
)
def test_bad_input(overrides: list[str], message: str, compose: Compose) -> None:
    with pytest.raises(ConfigError, match=message):
        train(compose([*overrides, "total_timesteps=64", "test_episodes=0", "verbose=0", "logger.formats=[csv]"]))
