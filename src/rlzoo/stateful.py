"""What a part of a run (an env, a wrapper, a vec env) implements so that a resumed run puts it back exactly.

A part is :class:`Stateful` when it defines ``get_state()`` and ``set_state()``; it need not import this module (the
envs of ``rlzoo.envs`` import nothing of rlzoo and implement it by defining the two methods). A state is a flat
mapping of names to JSON values (numbers, flags, strings, lists and dicts of these) and numeric NumPy arrays: a
checkpoint writes it without pickle (``run_state.json``, ``run_state.npz``) and hands ``set_state`` what it read back,
so ``set_state`` checks every value against the part (shapes, finite numbers, ranges) and raises ``ValueError``, in
one line, for one that does not fit. ``get_state`` returns None when the part cannot hold an exact state at that
moment (the Kuka arm with bodies in contact). An env's generator (``np_random``) and its action space's generator are
saved for every env by the run state (:mod:`rlzoo.training.env_state`), not by the env.

:class:`PlainAttributes` is the fallback for a part whose whole state is its plain attributes (numbers, flags, numeric
arrays): a wrapper that does not implement the protocol, Gymnasium's classic control envs. :class:`OwnAttributes`
implements the protocol for a class over the plain attributes it names (rlzoo's wrappers).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

State = dict[str, Any]
MISSING: Any = object()


@runtime_checkable
class Stateful(Protocol):
    """A part whose state a checkpoint holds and a resumed run puts back."""

    def get_state(self) -> State | None:
        """The part's state now (None: it cannot be saved exactly at this moment)."""
        ...

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Put back a state from :meth:`get_state` of a part of the same config (checked: ``ValueError``)."""
        ...


def implements(part: Any) -> bool:
    """Whether ``part``'s class defines the protocol's methods (not an attribute passed on to what it wraps, as SB3's
    vec-env wrappers pass every attribute on)."""
    return all(callable(getattr(type(part), name, None)) for name in ("get_state", "set_state"))


def is_plain(value: Any) -> bool:
    """A number, a flag, None, or a numeric array: what :func:`plain_state` keeps of an object's attributes."""
    if value is None or isinstance(value, bool | int | float | np.bool_ | np.integer | np.floating):
        return True
    return isinstance(value, np.ndarray) and value.dtype.kind in "biuf"


def plain_state(obj: Any, names: tuple[str, ...] = ()) -> State:
    """``obj``'s plain attributes (``names``; empty: all of them), arrays copied."""
    state: State = {}
    for name in names or tuple(vars(obj)):
        value = getattr(obj, name, MISSING)
        if not name.startswith("__") and value is not MISSING and is_plain(value):
            state[name] = value.copy() if isinstance(value, np.ndarray) else value
    return state


def set_plain_state(obj: Any, state: Mapping[str, Any], names: tuple[str, ...] = ()) -> None:
    """Set ``obj``'s plain attributes (``names``; empty: all) that ``state`` holds: an array of the same shape for an
    array, a number for a number; None (nothing yet) takes either. Attributes that ``obj`` lacks or that hold other
    values are left alone, so a crafted state changes no more than these.

    :raise ValueError: an array of another shape, or a number where an array is."""
    for name in names or tuple(vars(obj)):
        current: Any = getattr(obj, name, MISSING)
        saved = state.get(name, MISSING)
        if saved is MISSING or current is MISSING or not is_plain(current) or not is_plain(saved):
            continue
        if isinstance(current, np.ndarray) or isinstance(saved, np.ndarray):
            if not isinstance(saved, np.ndarray) or (current is not None and np.shape(current) != saved.shape):
                raise ValueError(f"{name}: expected an array shaped like {np.shape(current)}")
            value: Any = saved.astype(current.dtype) if isinstance(current, np.ndarray) else saved.copy()
        else:
            value = type(current)(saved) if isinstance(current, np.generic) and saved is not None else saved
        setattr(obj, name, value)


class PlainAttributes:
    """:class:`Stateful` over an object whose whole state is its plain attributes."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def get_state(self) -> State:
        return plain_state(self.obj)

    def set_state(self, state: Mapping[str, Any]) -> None:
        set_plain_state(self.obj, state)


class OwnAttributes:
    """The protocol over the plain attributes a class names in ``state_attributes`` (none: it holds no state)."""

    state_attributes: ClassVar[tuple[str, ...]] = ()

    def get_state(self) -> State:
        return plain_state(self, self.state_attributes) if self.state_attributes else {}

    def set_state(self, state: Mapping[str, Any]) -> None:
        if self.state_attributes:
            set_plain_state(self, state, self.state_attributes)
