"""Function approximation as the autonomous-learning-library (ALL) writes it: one object per learned function.

An :class:`Approximation` holds a module, its optimizer and optionally a target network, and does everything an
algorithm would otherwise repeat in its train step: gradient clipping, the learning-rate schedule, target-network
updates, loss logging and the optimizer state saved with the model. An algorithm's update then reads like its
pseudocode::

    values = self.q(batch.observations, batch.actions)      # forward with gradients
    targets = batch.rewards + batch.discounts * self.q.target(batch.next_observations).max(1).values
    self.q.reinforce(F.smooth_l1_loss(values, targets))    # backward, clip, step, target update, log

The modules themselves live in the algorithm's SB3 policy, so ``model.save``/``model.load``/``model.predict`` work as
for any SB3 algorithm; an approximation's ``state_dict`` holds what the policy does not: optimizer state and its
update count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.distributions import Categorical, Distribution

Schedule = Callable[[float], float]
LogFn = Callable[[str, float], None]


class TargetNetwork:
    """A slowly moving copy of a module: every ``every`` updates, ``target ← tau·source + (1 - tau)·target``.

    ``tau=1`` with ``every=N`` is DQN's fixed target copied every N updates; ``every=1`` with a small ``tau`` is
    Polyak averaging (DDPG, SAC).

    :param source: the trained module.
    :param target: its copy (same architecture); initialised from ``source`` here.
    :param tau: the interpolation factor, in (0, 1].
    :param every: updates between two target moves.
    """

    def __init__(self, source: nn.Module, target: nn.Module, tau: float = 1.0, every: int = 1) -> None:
        self.source = source
        self.module = target
        self.tau = tau
        self.every = every
        target.load_state_dict(source.state_dict())
        target.requires_grad_(False)

    def __call__(self, *inputs: Any) -> Any:
        with torch.no_grad():
            return self.module(*inputs)

    def update(self, updates: int) -> None:
        """Move the target after the ``updates``-th update when it is due."""
        if updates % self.every:
            return
        with torch.no_grad():
            for target, source in zip(self.module.parameters(), self.source.parameters(), strict=True):
                target.lerp_(source, self.tau)
            for copy, original in zip(self.module.buffers(), self.source.buffers(), strict=True):
                copy.copy_(original)  # running statistics and constant buffers follow the source


class Approximation:
    """A learned function: module + optimizer (+ target network), updated by :meth:`reinforce`.

    :param model: the module (owned by the algorithm's policy, so it is saved and loaded with it).
    :param optimizer: the optimizer over ``model``'s parameters.
    :param target: a :class:`TargetNetwork` of ``model``, or None (then :meth:`target` is the model without gradients).
    :param clip_grad: the largest gradient norm (0: no clipping).
    :param lr_schedule: learning rate as a function of the progress remaining (1 → 0), SB3's schedule convention.
    :param progress: where the progress remaining is read (the algorithm's ``_current_progress_remaining``).
    :param name: the prefix of logged values (``train/<name>_loss``).
    :param log: where values are recorded (the algorithm's logger, averaged over a logging interval).
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        *,
        target: TargetNetwork | None = None,
        clip_grad: float = 0.0,
        lr_schedule: Schedule | None = None,
        progress: Callable[[], float] = lambda: 1.0,
        name: str = "approximation",
        log: LogFn | None = None,
    ) -> None:
        self.model = model
        self.optimizer = optimizer
        self._target = target
        self.clip_grad = clip_grad
        self.lr_schedule = lr_schedule
        self.progress = progress
        self.name = name
        self.log = log
        self.updates = 0
        self._parameters = list(model.parameters())  # listed once: walking the modules costs more than clipping

    def __call__(self, *inputs: Any) -> Any:
        """The model's output, with gradients (for the loss)."""
        return self.model(*inputs)

    def no_grad(self, *inputs: Any) -> Any:
        """The model's output without gradients, in its current mode."""
        with torch.no_grad():
            return self.model(*inputs)

    def eval(self, *inputs: Any) -> Any:
        """The model's output without gradients, in eval mode (no dropout, no exploration noise)."""
        with torch.no_grad():
            was_training = self.model.training
            self.model.eval()
            try:
                return self.model(*inputs)
            finally:
                self.model.train(was_training)

    def target(self, *inputs: Any) -> Any:
        """The target network's output (the model's, without gradients, when there is no target network)."""
        if self._target is None:
            return self.no_grad(*inputs)
        return self._target(*inputs)

    def reinforce(self, loss: torch.Tensor) -> Approximation:
        """Backpropagate ``loss`` and take one optimizer step (see :meth:`step`)."""
        loss.backward()
        if self.log is not None:
            self.log(f"train/{self.name}_loss", float(loss.detach()))
        self.step()
        return self

    def step(self) -> Approximation:
        """Clip the gradient, set the scheduled learning rate, step, move the target, zero the gradient."""
        if self.clip_grad:
            norm = _clip_grad_norm_(self._parameters, self.clip_grad)
            if self.log is not None:
                self.log(f"train/{self.name}_grad_norm", float(norm))
        if self.lr_schedule is not None:
            rate = self.lr_schedule(self.progress())
            for group in self.optimizer.param_groups:
                group["lr"] = rate
            if self.log is not None:
                self.log(f"train/{self.name}_learning_rate", rate)
        self.optimizer.step()
        self.updates += 1
        if self._target is not None:
            self._target.update(self.updates)
        self.zero_grad()
        return self

    def zero_grad(self) -> None:
        """Drop the optimized parameters' gradients (``optimizer.zero_grad()``, without its profiler record)."""
        for group in self.optimizer.param_groups:
            for parameter in group["params"]:
                parameter.grad = None

    def state_dict(self) -> dict[str, Any]:
        """What the policy's state does not hold: the optimizer state and the update count."""
        return {"optimizer": self.optimizer.state_dict(), "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        """Restore :meth:`state_dict` (``strict`` is accepted for SB3's ``set_parameters``)."""
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])


class QNetwork(Approximation):
    """Action values: ``q(obs)`` gives Q(s, ·) of shape (batch, actions); ``q(obs, actions)`` gives Q(s, a)."""

    def outputs(self, raw: torch.Tensor) -> torch.Tensor:
        """What the module's raw output stands for, per action (the values themselves here)."""
        return raw

    def __call__(self, observations: torch.Tensor, actions: torch.Tensor | None = None) -> torch.Tensor:
        return _select(self.outputs(self.model(observations)), actions)

    def no_grad(self, observations: torch.Tensor, actions: torch.Tensor | None = None) -> torch.Tensor:
        with torch.no_grad():
            return self(observations, actions)

    def target(self, observations: torch.Tensor, actions: torch.Tensor | None = None) -> torch.Tensor:
        return _select(self.outputs(super().target(observations)), actions)

    def with_next(
        self, observations: torch.Tensor, actions: torch.Tensor, next_observations: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``q(observations, actions)`` with gradients and ``q(next_observations)`` without, in one forward pass."""
        return _split(self.outputs(self.model(torch.cat([observations, next_observations]))), actions)


class QDist(QNetwork):
    """Action-value distributions on a fixed support (C51): ``q(obs)`` gives probabilities of shape
    (batch, actions, atoms); ``q(obs, actions)`` those of the taken actions, (batch, atoms).

    :param support: the atoms' values, (atoms,).
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, support: torch.Tensor, **kwargs: Any):
        super().__init__(model, optimizer, **kwargs)
        self.support = support
        self._bounds = float(support[0]), float(support[-1])  # read once: .item() calls on every projection otherwise

    def outputs(self, raw: torch.Tensor) -> torch.Tensor:
        """The probabilities of the atoms, from the module's logits."""
        return raw.softmax(-1)

    def greedy(self, probabilities: torch.Tensor) -> torch.Tensor:
        """The distributions (batch, atoms) of the actions of highest expected value in ``probabilities``."""
        return _select(probabilities, self.expectation(probabilities).argmax(dim=1))

    def expectation(self, probabilities: torch.Tensor) -> torch.Tensor:
        """The expected value of each distribution (the last axis)."""
        return (probabilities * self.support).sum(-1)

    def project(self, returns: torch.Tensor, probabilities: torch.Tensor) -> torch.Tensor:
        """Project the distribution with atoms moved to ``returns`` (batch, atoms) back onto the support
        (Bellemare et al., 2017, Algorithm 1): each atom's mass is split between its two nearest support atoms."""
        (v_min, v_max), last = self._bounds, len(self.support) - 1
        position = (returns.clamp(v_min, v_max) - v_min) * (last / (v_max - v_min))
        lower = position.floor()
        upper_share = probabilities * (position - lower)  # an atom on the support puts all its mass on ``lower``
        index = lower.long()
        projected = torch.zeros_like(probabilities).scatter_add_(-1, index, probabilities - upper_share)
        return projected.scatter_add_(-1, (index + 1).clamp_max_(last), upper_share)


class VNetwork(Approximation):
    """State values: ``v(obs)`` gives V(s) of shape (batch,)."""

    def __call__(self, observations: torch.Tensor) -> torch.Tensor:
        return self.model(observations).squeeze(-1)

    def no_grad(self, observations: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self(observations)

    def target(self, observations: torch.Tensor) -> torch.Tensor:
        return super().target(observations).squeeze(-1)


class Policy(Approximation):
    """A softmax policy over discrete actions: ``pi(obs)`` gives a :class:`~torch.distributions.Categorical`."""

    def __call__(self, observations: torch.Tensor) -> Distribution:
        return Categorical(logits=self.model(observations))

    def no_grad(self, observations: torch.Tensor) -> Distribution:
        with torch.no_grad():
            return self(observations)

    def target(self, observations: torch.Tensor) -> Distribution:
        return Categorical(logits=super().target(observations))


def _clip_grad_norm_(parameters: list[nn.Parameter], max_norm: float) -> torch.Tensor:
    """``nn.utils.clip_grad_norm_``'s arithmetic (2-norm of all gradients, scale min(1, max_norm / (norm + 1e-6)))
    in four tensor operations when the gradients share a device and dtype (its grouping of tensors costs more than
    the maths on a small network)."""
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads or len({(g.device, g.dtype) for g in grads}) > 1:
        return nn.utils.clip_grad_norm_(parameters, max_norm)
    norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    torch._foreach_mul_(grads, (max_norm / (norm + 1e-6)).clamp_(max=1.0))
    return norm


def _split(outputs: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``len(actions)`` rows of ``outputs`` at ``actions``, and the other rows detached."""
    n = len(actions)
    return _select(outputs[:n], actions), outputs[n:].detach()


def _select(values: torch.Tensor, actions: torch.Tensor | None) -> torch.Tensor:
    """The entries of ``values`` (batch, actions, ...) at ``actions`` (batch,) or (batch, 1); all when None."""
    if actions is None:
        return values
    index = actions.long().reshape(-1)
    return values[torch.arange(len(index), device=values.device), index]
