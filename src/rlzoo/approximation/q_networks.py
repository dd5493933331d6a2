"""The Q-networks of the DQN family: plain or dueling heads, linear or noisy layers, values or value distributions.

The modules sit in an SB3 policy (:class:`QPolicy`) so that a model saves, loads and predicts as any SB3 one does.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from gymnasium import spaces
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.preprocessing import preprocess_obs
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor, FlattenExtractor, NatureCNN
from stable_baselines3.common.type_aliases import PyTorchObs, Schedule
from torch import nn


class NoisyLinear(nn.Module):
    """A linear layer with learned factorised Gaussian noise on its weights (Fortunato et al., 2018, "Noisy Networks
    for Exploration"): in training mode the noise drawn by the last :meth:`reset_noise` (the algorithm draws once per
    step: before acting, before each gradient step), the mean weights in eval mode.

    :param std_init: sigma0; the noise scales start at sigma0 / √in_features.
    """

    noise: torch.Tensor

    def __init__(self, in_features: int, out_features: int, std_init: float) -> None:
        super().__init__()
        bound = 1 / math.sqrt(in_features)
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features).uniform_(-bound, bound))
        self.weight_sigma = nn.Parameter(torch.full((out_features, in_features), std_init * bound))
        self.bias_mu = nn.Parameter(torch.empty(out_features).uniform_(-bound, bound))
        self.bias_sigma = nn.Parameter(torch.full((out_features,), std_init * bound))
        # f(ε) of the inputs' then the outputs' noise, written in place (not saved: drawn again after loading)
        self.register_buffer("noise", torch.zeros(in_features + out_features), persistent=False)
        self.in_features = in_features
        self.bind_noise(self.noise)
        self.reset_noise()

    def bind_noise(self, noise: torch.Tensor) -> None:
        """Use ``noise`` (in_features + out_features values, drawn in place) as this layer's noise."""
        self.noise = noise
        self._eps = noise[: self.in_features], noise[self.in_features :]  # views, kept: no slicing per forward

    def _apply(self, fn: Any, recurse: bool = True) -> NoisyLinear:
        """As ``nn.Module._apply`` (``.to(device)`` ...), then the views bound to the moved buffer."""
        super()._apply(fn, recurse)
        self.bind_noise(self.noise)
        return self

    def reset_noise(self) -> None:
        """Draw new factorised noise f(ε) = sign(ε)·√|ε| for the inputs and outputs."""
        draw_noise(self.noise)

    def weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The weight and bias this layer applies now: noisy in training mode, the means in eval mode."""
        if not self.training:
            return self.weight_mu, self.bias_mu
        eps_in, eps_out = self._eps
        weight = torch.addcmul(self.weight_mu, self.weight_sigma, torch.outer(eps_out, eps_in))
        return weight, torch.addcmul(self.bias_mu, self.bias_sigma, eps_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(x, *self.weights())


def _weights(layer: nn.Linear | NoisyLinear) -> tuple[torch.Tensor, torch.Tensor]:
    """The weight and bias a linear or noisy layer applies now."""
    return layer.weights() if isinstance(layer, NoisyLinear) else (layer.weight, layer.bias)


@torch.no_grad()
def draw_noise(noise: torch.Tensor) -> None:
    """Fill ``noise`` in place with f(ε) = sign(ε)·√|ε|, ε ~ N(0, 1) (four tensor operations, whatever its size)."""
    sign = noise.normal_().sign()
    noise.abs_().sqrt_().mul_(sign)


def _set_mode(modules: Iterable[nn.Module], mode: bool) -> None:
    """Set ``training`` on each module directly (``nn.Module.__setattr__`` is slow on a per-step path)."""
    for module in modules:
        module.__dict__["training"] = mode


def _linear(n_in: int, n_out: int, noisy_std: float | None) -> nn.Linear | NoisyLinear:
    return nn.Linear(n_in, n_out) if noisy_std is None else NoisyLinear(n_in, n_out, noisy_std)


def _hidden(sizes: list[int], activation: type[nn.Module], noisy_std: float | None) -> nn.Sequential:
    """Layers ``sizes[0] → sizes[1] → ... → sizes[-1]``, each followed by the activation."""
    layers: list[nn.Module] = []
    for n_in, n_out in itertools.pairwise(sizes):
        layers += [_linear(n_in, n_out, noisy_std), activation()]
    return nn.Sequential(*layers)


def _optimizer_defaults(optimizer_class: type[torch.optim.Optimizer], kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """``kwargs`` with Adam (or AdamW) fused unless it says otherwise: one kernel updates every parameter tensor,
    the same algorithm as the per-tensor Python loop torch uses on a CPU by default (a noisy head has 4 tensors per
    layer)."""
    kwargs = dict(kwargs or {})
    if optimizer_class in (torch.optim.Adam, torch.optim.AdamW) and not {"fused", "foreach"} & set(kwargs):
        kwargs["fused"] = True
    return kwargs


class QModule(nn.Module):
    """Observation → features → hidden layers (``net_arch``) → Q-values (batch, actions), or atom logits
    (batch, actions, atoms) when ``n_atoms > 1``.

    :param dueling: value and advantage outputs on the last hidden layer, Q = V + A - mean(A) (Wang et al., 2016).
    :param noisy_std: sigma0 of noisy layers (hidden and output layers), or None for plain linear layers.
    :param n_atoms: atoms of each action's value distribution (1: plain Q-values).
    """

    centre: torch.Tensor

    def __init__(
        self,
        features_extractor: BaseFeaturesExtractor,
        observation_space: spaces.Space,
        n_actions: int,
        net_arch: list[int],
        activation_fn: type[nn.Module],
        normalize_images: bool,
        dueling: bool,
        noisy_std: float | None,
        n_atoms: int,
    ) -> None:
        super().__init__()
        self.features_extractor = features_extractor
        self.observation_space = observation_space
        self.normalize_images = normalize_images
        self.n_actions, self.n_atoms = n_actions, n_atoms
        sizes = [features_extractor.features_dim, *net_arch]
        self.hidden = _hidden(sizes, activation_fn, noisy_std)
        self.advantage = _linear(sizes[-1], n_actions * n_atoms, noisy_std)
        self.value = _linear(sizes[-1], n_atoms, noisy_std) if dueling else None
        # I - 1/n: centres the advantages over the actions (not saved: a constant)
        centre = torch.eye(n_actions) - 1 / n_actions
        self.register_buffer("centre", centre, persistent=False)

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        obs = preprocess_obs(observations, self.observation_space, normalize_images=self.normalize_images)
        features = self.features_extractor(obs)
        for layer in self.hidden:  # forward() itself: no per-module call machinery (hooks) on a per-step path
            features = layer.forward(features)
        weight, bias = self._head_weights() if self.value is not None else _weights(self.advantage)
        out = nn.functional.linear(features, weight, bias).view(-1, self.n_actions, self.n_atoms)
        return out.squeeze(-1) if self.n_atoms == 1 else out

    def _head_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The dueling head as one linear layer: V + A - mean_a(A) is linear in the last hidden layer, so its weight
        and bias are the value's plus the advantage's centred over the actions (two small products per forward
        instead of a second layer, a mean and two sums on every row)."""
        assert self.value is not None
        (weight, bias), (value_weight, value_bias) = _weights(self.advantage), _weights(self.value)
        weight = torch.addmm(value_weight.reshape(1, -1), self.centre, weight.reshape(self.n_actions, -1))
        bias = torch.addmm(value_bias.reshape(1, -1), self.centre, bias.reshape(self.n_actions, -1))
        return weight.reshape(self.n_actions * self.n_atoms, -1), bias.reshape(-1)


class QPolicy(BasePolicy):
    """The SB3 policy of the DQN family: ``q_net`` and its target ``q_net_target``; acts greedily on expected values.

    Keyword arguments as SB3's DQN policy (``net_arch``, ``activation_fn``, ``features_extractor_class`` ...), plus
    the head's shape, which the algorithm sets from its own keywords (``dueling``, ``noisy_std``, ``n_atoms``,
    ``v_min``, ``v_max``). Adam is fused unless ``optimizer_kwargs`` sets ``fused`` or ``foreach``.
    """

    all_noise: torch.Tensor
    support: torch.Tensor

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Discrete,
        lr_schedule: Schedule,
        net_arch: list[int] | None = None,
        activation_fn: type[nn.Module] = nn.ReLU,
        features_extractor_class: type[BaseFeaturesExtractor] = FlattenExtractor,
        features_extractor_kwargs: dict[str, Any] | None = None,
        normalize_images: bool = True,
        optimizer_class: type[torch.optim.Optimizer] = torch.optim.Adam,
        optimizer_kwargs: dict[str, Any] | None = None,
        dueling: bool = False,
        noisy_std: float | None = None,
        n_atoms: int = 1,
        v_min: float = -10.0,
        v_max: float = 10.0,
    ) -> None:
        super().__init__(
            observation_space,
            action_space,
            features_extractor_class,
            features_extractor_kwargs,
            normalize_images=normalize_images,
            optimizer_class=optimizer_class,
            optimizer_kwargs=_optimizer_defaults(optimizer_class, optimizer_kwargs),
        )
        default_arch = [] if features_extractor_class is NatureCNN else [64, 64]
        self.net_arch = default_arch if net_arch is None else list(net_arch)
        self.activation_fn = activation_fn
        self.head: dict[str, Any] = {"dueling": dueling, "noisy_std": noisy_std, "n_atoms": n_atoms}
        self.v_min, self.v_max = v_min, v_max
        self.register_buffer("support", torch.linspace(v_min, v_max, n_atoms))  # also where ``device`` is read
        self.q_net = self._make_q_net()
        self.q_net_target = self._make_q_net()
        self._noisy_layers = [m for m in self.q_net.modules() if isinstance(m, NoisyLinear)]
        self._target_noisy_layers = [m for m in self.q_net_target.modules() if isinstance(m, NoisyLinear)]
        self._online_noise = sum(layer.noise.numel() for layer in self._noisy_layers)
        self.register_buffer("all_noise", torch.zeros(2 * self._online_noise), persistent=False)
        self._bind_noise()
        self.reset_noise()
        nets = (self.q_net, self.q_net_target) if self._noisy_layers else (self.q_net,)
        self._switched = [module for net in nets for module in net.modules()]  # whose mode set_training_mode sets
        self.q_net_target.load_state_dict(self.q_net.state_dict())
        self.optimizer = optimizer_class(self.q_net.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)  # type: ignore[call-arg]

    def _make_q_net(self) -> QModule:
        assert isinstance(self.action_space, spaces.Discrete)
        return QModule(
            self.make_features_extractor(),
            self.observation_space,
            int(self.action_space.n),
            self.net_arch,
            self.activation_fn,
            self.normalize_images,
            **self.head,
        )

    def _bind_noise(self) -> None:
        """Make each noisy layer's noise a slice of ``all_noise`` (online layers, then the target's): one draw."""
        offset = 0
        for layer in (*self._noisy_layers, *self._target_noisy_layers):
            size = layer.noise.numel()
            layer.bind_noise(self.all_noise[offset : offset + size])
            offset += size

    def _apply(self, fn: Any, recurse: bool = True) -> QPolicy:
        """As ``nn.Module._apply`` (``.to(device)`` ...), then the noisy layers' slices bound to the moved buffer."""
        super()._apply(fn, recurse)
        if "all_noise" in self._buffers:
            self._bind_noise()
        return self

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(
            net_arch=self.net_arch,
            activation_fn=self.activation_fn,
            features_extractor_class=self.features_extractor_class,
            features_extractor_kwargs=self.features_extractor_kwargs,
            v_min=self.v_min,
            v_max=self.v_max,
            **self.head,
        )
        return data

    @property
    def device(self) -> torch.device:
        """The networks' device, read from a buffer (SB3's walks the modules to a parameter, twice per action)."""
        return self.support.device

    def q_values(self, observations: torch.Tensor) -> torch.Tensor:
        """Expected Q-values (batch, actions) of the online network, in its current mode."""
        out = self.q_net.forward(observations)  # no per-module call machinery (hooks) on a per-step path
        return out if self.head["n_atoms"] == 1 else (out.softmax(-1) * self.support).sum(-1)

    def forward(self, obs: PyTorchObs, deterministic: bool = True) -> torch.Tensor:
        return self._predict(obs, deterministic)

    def _predict(self, observation: PyTorchObs, deterministic: bool = True) -> torch.Tensor:
        """Greedy actions; with noisy layers, exploring (``deterministic=False``) samples their noise."""
        assert isinstance(observation, torch.Tensor)
        if not self._noisy_layers:
            return self.q_values(observation).argmax(dim=1)
        with self.noise(not deterministic):
            return self.q_values(observation).argmax(dim=1)

    def reset_noise(self) -> None:
        """New noise for the noisy layers of the network and of its target (once per step)."""
        if self._noisy_layers:
            draw_noise(self.all_noise)

    @contextlib.contextmanager
    def noise(self, on: bool) -> Iterator[None]:
        """Noisy layers act on newly drawn noise inside this block when ``on`` (on their mean weights otherwise)."""
        layers = self._noisy_layers
        modes = [layer.training for layer in layers]
        if on and layers:
            draw_noise(self.all_noise[: self._online_noise])
        _set_mode(layers, on)
        try:
            yield
        finally:
            for layer, mode in zip(layers, modes, strict=True):
                layer.__dict__["training"] = mode

    def set_training_mode(self, mode: bool) -> None:
        """Train or eval mode for the network (and its target, whose noisy layers sample noise in training too);
        a no-op when the mode does not change (``predict`` sets eval mode at every step)."""
        if self.training == mode and self.q_net.training == mode:
            return
        _set_mode([*self._switched, self], mode)  # set directly, not by nn.Module.train's recursion
