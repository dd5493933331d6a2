"""``algo.policy_kwargs`` checked before anything is built: layer sizes, and activations by name.

SB3 takes ``policy_kwargs`` as an untyped dict and only trips over a bad one deep inside torch, once the run dir
exists. Here ``net_arch`` must be layer sizes (a list of positive ints, or a dict of such lists per network:
``pi``/``vf`` on-policy, ``pi``/``qf`` off-policy), and ``activation_fn`` may be a name (``relu``, ``tanh`` ...) that
becomes the ``torch.nn`` class.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from rlzoo.algos.factory import AlgorithmFactory
from rlzoo.errors import ConfigError

ACTIVATIONS = ("ReLU", "Tanh", "ELU", "LeakyReLU", "SELU", "GELU", "SiLU", "Mish", "Sigmoid", "Softplus", "Identity")
NETWORKS = ("pi", "vf", "qf")


def activation(value: Any) -> Any:
    """A ``torch.nn`` activation class from a name (``relu``, ``ReLU``, ``nn.ReLU``, ``torch.nn.ReLU``) or a class."""
    from torch import nn

    if inspect.isclass(value) and issubclass(value, nn.Module):
        return value
    if isinstance(value, str):
        name = value.removeprefix("torch.").removeprefix("nn.").replace("_", "").lower()
        for known in ACTIVATIONS:
            if known.lower() == name:
                return getattr(nn, known)
    raise ConfigError(
        f"algo.policy_kwargs.activation_fn={value!r} is not an activation; allowed: "
        f"{', '.join(a.lower() for a in ACTIVATIONS)} (or a torch.nn class)"
    )


def _layers(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(
        isinstance(size, int) and not isinstance(size, bool) and size > 0 for size in value
    )


def check_net_arch(value: Any) -> None:
    """Fail unless ``value`` is layer sizes, or a dict of layer sizes per network."""
    if _layers(value):
        return
    if isinstance(value, dict) and value and set(value) <= set(NETWORKS) and all(map(_layers, value.values())):
        return
    raise ConfigError(
        f"algo.policy_kwargs.net_arch={value!r} must be layer sizes: a list of positive integers (e.g. [64, 64]), or a "
        "dict of them per network (e.g. {pi: [64], vf: [64]}; qf for off-policy critics)"
    )


def check_policy_kwargs(factory: AlgorithmFactory) -> AlgorithmFactory:
    """``factory`` with its ``policy_kwargs`` checked (activation names made classes); other keys are left to the
    policy, which the run builds before its run dir is claimed."""
    kwargs = factory.kwargs.get("policy_kwargs")
    if kwargs is None:
        return factory
    if not isinstance(kwargs, dict):
        raise ConfigError(f"algo.policy_kwargs={kwargs!r} must be a mapping of policy keywords, e.g. {{net_arch: [8]}}")
    checked = dict(kwargs)
    if "net_arch" in checked and checked["net_arch"] is not None:
        check_net_arch(checked["net_arch"])
    if "activation_fn" in checked:
        checked["activation_fn"] = activation(checked["activation_fn"])
    return dataclasses.replace(factory, kwargs={**factory.kwargs, "policy_kwargs": checked})
