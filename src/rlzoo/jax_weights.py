"""SBX (JAX) models' weights as data: flax's msgpack of every train state, written beside ``model.zip``.

SB3's ``model.zip`` of an SBX model holds its policy pickled in the ``data`` entry (SBX keeps no ``.pth`` files), so
loading it runs whatever the file names. :func:`save_jax_weights` writes the policy's and the model's flax train
states (parameters, target parameters, optimiser states) with ``flax.serialization``, which stores arrays and
numbers only; :func:`load_jax_weights` puts them into a model rebuilt from the run's config.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlzoo.confined import memory_budget, read_bytes
from rlzoo.files import atomic_path

JAX_WEIGHTS = "model.msgpack"


def is_jax_model(model: object) -> bool:
    """Whether ``model`` is an SBX algorithm (its class or a base comes from the ``sbx`` package)."""
    return any(cls.__module__.split(".")[0] == "sbx" for cls in type(model).__mro__)


def train_states(model: Any) -> dict[str, Any]:
    """The flax train states of ``model`` by dotted name: ``policy.<name>_state`` and ``<name>_state``."""
    states = {f"policy.{k}": v for k, v in vars(model.policy).items() if k.endswith("_state") and hasattr(v, "params")}
    states |= {k: v for k, v in vars(model).items() if k.endswith("_state") and hasattr(v, "params")}
    return states


def save_jax_weights(folder: Path, model: object) -> None:
    """Write ``folder/model.msgpack`` for an SBX model, atomically; other models write nothing."""
    if not is_jax_model(model):
        return
    from flax import serialization

    with atomic_path(folder / JAX_WEIGHTS) as tmp:
        tmp.write_bytes(serialization.to_bytes(train_states(model)))


def load_jax_weights(path: Path, model: Any) -> None:
    """Restore ``model``'s train states from ``path`` (see :func:`save_jax_weights`); the model's shapes decide. The
    file is read through the confined layer (a regular file, no link, within the memory budget) before flax sees it.

    :raise ValueError: a file that does not hold ``model``'s states (:class:`~rlzoo.errors.Refused`: one refused).
    """
    data = read_bytes(path.parent, path.name, memory_budget())  # refused before flax is imported or reads it
    from flax import serialization

    states = train_states(model)
    restored = serialization.from_bytes(states, data)
    for name, state in restored.items():
        owner, attribute = (model.policy, name.split(".", 1)[1]) if name.startswith("policy.") else (model, name)
        setattr(owner, attribute, state)
