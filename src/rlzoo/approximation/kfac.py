"""K-FAC: natural-gradient steps with a Kronecker-factored Fisher (Martens & Grosse, 2015, "Optimizing Neural Networks
with Kronecker-factored Approximate Curvature"; Grosse & Martens, 2016, for convolutions), as ACKTR uses it.

For every ``Linear`` and ``Conv2d`` layer the Fisher block is approximated by A ⊗ G, A the second moment of the
layer's inputs and G that of the gradients at its outputs, both running averages collected during a backward pass of
a *sampled* loss (actions drawn from the policy, so the Fisher is the model's own, not the empirical one). The
gradient W' of each layer is preconditioned as G⁻¹ W' A⁻¹ (through eigendecompositions, damped), the whole step is
scaled down so that its predicted KL divergence stays under ``kl_clip``, then applied with SGD and momentum. Other
parameters (a Gaussian policy's log-std) take plain SGD steps.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class _Factors:
    """Running input and output-gradient second moments of one layer, and their cached eigendecompositions."""

    a: torch.Tensor | None = None
    g: torch.Tensor | None = None
    inputs: torch.Tensor | None = None  # the last forward's inputs, kept until the Fisher backward pass
    eig: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] | None = None  # dA, QA, dG, QG


Layer = nn.Linear | nn.Conv2d


def _running(old: torch.Tensor | None, new: torch.Tensor, decay: float) -> torch.Tensor:
    return new if old is None else decay * old + (1 - decay) * new


class KFAC(torch.optim.Optimizer):
    """K-FAC with momentum and KL clipping over ``model``'s parameters.

    Use: inside :meth:`record` run the forward pass; inside :meth:`fisher` backpropagate the sampled (Fisher) loss;
    zero the gradients; backpropagate the real loss; :meth:`step`.

    :param lr: learning rate (ACKTR: 0.25).
    :param momentum: SGD momentum.
    :param stat_decay: decay of the running second moments.
    :param damping: Tikhonov damping added to the Kronecker-factored curvature.
    :param kl_clip: the largest predicted KL divergence of one step.
    :param inverse_every: steps between two eigendecompositions of the factors.
    """

    def __init__(
        self,
        model: nn.Module,
        lr: float = 0.25,
        momentum: float = 0.9,
        stat_decay: float = 0.99,
        damping: float = 1e-2,
        kl_clip: float = 1e-3,
        inverse_every: int = 10,
    ) -> None:
        super().__init__(model.parameters(), {"lr": lr, "momentum": momentum})
        self.stat_decay, self.damping, self.kl_clip, self.inverse_every = stat_decay, damping, kl_clip, inverse_every
        self.factors: dict[Layer, _Factors] = {}
        self._recording = self._collecting = False
        self.steps = 0
        for module in model.modules():
            if isinstance(module, nn.Linear | nn.Conv2d):
                self.factors[module] = _Factors()
                module.register_forward_hook(self._watch)

    @contextlib.contextmanager
    def record(self) -> Iterator[None]:
        """Forward passes in this block keep the layers' inputs for the next :meth:`fisher` pass."""
        self._recording = True
        try:
            yield
        finally:
            self._recording = False

    @contextlib.contextmanager
    def fisher(self) -> Iterator[None]:
        """A backward pass in this block updates the curvature factors (its gradients are then discarded)."""
        self._collecting = True
        try:
            yield
        finally:
            self._collecting = False

    def _watch(self, module: Layer, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        """While recording: keep the layer's inputs, and have the gradient at its output reach the factors."""
        if self._recording and output.requires_grad:
            self.factors[module].inputs = inputs[0].detach()
            output.register_hook(lambda grad: self._update_factors(module, grad))

    def _update_factors(self, module: Layer, grad_output: torch.Tensor) -> None:
        factors = self.factors[module]
        if not self._collecting or factors.inputs is None:
            return
        a, g = _layer_statistics(module, factors.inputs, grad_output.detach())
        factors.a = _running(factors.a, a, self.stat_decay)
        factors.g = _running(factors.g, g, self.stat_decay)

    @torch.no_grad()
    def step(self, closure: Any = None) -> None:  # type: ignore[override]
        """Precondition the layers' gradients, clip the step's KL, apply SGD with momentum."""
        lr = self.param_groups[0]["lr"]
        updates = {p: p.grad for group in self.param_groups for p in group["params"] if p.grad is not None}
        for module, factors in self.factors.items():
            if factors.a is None or factors.g is None or module.weight.grad is None:
                continue
            if factors.eig is None or self.steps % self.inverse_every == 0:
                factors.eig = (*torch.linalg.eigh(factors.a), *torch.linalg.eigh(factors.g))
            self._precondition(module, factors.eig, updates)
        predicted_kl = sum(float((updates[p] * p.grad).sum()) for p in updates) * lr**2
        scale = min(1.0, (self.kl_clip / predicted_kl) ** 0.5) if predicted_kl > 0 else 1.0
        for group in self.param_groups:
            for p in group["params"]:
                if p in updates:
                    self._sgd(p, updates[p] * scale, lr, group["momentum"])
        self.steps += 1

    def _precondition(
        self, module: Layer, eig: tuple[torch.Tensor, ...], updates: dict[torch.Tensor, torch.Tensor]
    ) -> None:
        """Replace the layer's gradient by G⁻¹ ∇W A⁻¹ with damping, in the factors' eigenbases."""
        dA, QA, dG, QG = eig[0].clamp_min(0), eig[1], eig[2].clamp_min(0), eig[3]
        weight, bias = module.weight, module.bias
        assert weight.grad is not None
        grad = weight.grad.reshape(weight.shape[0], -1)
        if bias is not None and bias.grad is not None:
            grad = torch.cat([grad, bias.grad.unsqueeze(1)], dim=1)
        natural = QG.T @ grad @ QA
        natural = QG @ (natural / (dG.unsqueeze(1) * dA.unsqueeze(0) + self.damping)) @ QA.T
        if bias is not None and bias.grad is not None:
            updates[bias] = natural[:, -1]
            natural = natural[:, :-1]
        updates[weight] = natural.reshape(weight.shape)

    def _sgd(self, p: torch.Tensor, update: torch.Tensor, lr: float, momentum: float) -> None:
        state = self.state[p]
        buffer = state.get("momentum_buffer")
        buffer = update.clone() if buffer is None else buffer.mul_(momentum).add_(update)
        state["momentum_buffer"] = buffer
        p.add_(buffer, alpha=-lr)


def _layer_statistics(module: Layer, inputs: torch.Tensor, grads: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """A = E[a aᵀ] over the layer's inputs (with a constant 1 for the bias) and G = E[g gᵀ] over the per-example
    output gradients (the loss being a batch mean, they are scaled back by the batch size)."""
    batch = inputs.shape[0]
    if isinstance(module, nn.Conv2d):
        if isinstance(module.padding, str):
            raise ValueError(f"K-FAC needs numeric padding in {module} (not {module.padding!r})")
        patches = F.unfold(inputs, module.kernel_size, module.dilation, module.padding, module.stride)
        spatial = patches.shape[-1]
        a = patches.transpose(1, 2).reshape(-1, patches.shape[1]) / spatial
        g = grads.flatten(2).transpose(1, 2).reshape(-1, grads.shape[1]) * batch * spatial
    else:
        a, g = inputs.reshape(-1, inputs.shape[-1]), grads.reshape(-1, grads.shape[-1]) * batch
    if module.bias is not None:
        a = torch.cat([a, a.new_ones(a.shape[0], 1)], dim=1)
    return a.T @ (a / batch), g.T @ (g / g.shape[0])
