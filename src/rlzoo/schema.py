"""Typed schemas for the run keys of every entrypoint (ground floor: no rlzoo imports but errors).

A schema is a frozen dataclass whose field types say what a key takes (``int``, ``bool``, ``Literal[...]``,
``str | None`` ...) and whose field metadata may set a lower bound (``field(metadata=at_least(1))``).
:func:`parse` turns a config mapping into one, with one :class:`~rlzoo.errors.ConfigError` for an unknown key,
a missing key, a wrong type or a value out of range.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeVar

from typeguard import TypeCheckError, check_type

from rlzoo.errors import ConfigError

T = TypeVar("T")
MINIMUM = "minimum"


def at_least(minimum: int | float) -> dict[str, Any]:
    """Field metadata: the value must be ``>= minimum``."""
    return {MINIMUM: minimum}


def describe_type(hint: Any) -> str:
    """A type hint in the words of an error message (``true or false``, ``one of a, b``, ``int or None``)."""
    if hint is bool:
        return "true or false"
    if typing.get_origin(hint) is Literal:
        return "one of " + ", ".join(map(str, typing.get_args(hint)))
    args = typing.get_args(hint)
    if args and typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(describe_type(a) for a in args)
    if hint is type(None):
        return "null"
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def _integral(value: Any, hint: Any) -> Any:
    """YAML and the command line write ``1e5`` for 100000: an integral float where an int is wanted becomes one."""
    wants_int = hint is int or int in typing.get_args(hint)
    if wants_int and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _wrong(name: str, value: Any, hint: Any, minimum: float | None) -> ConfigError:
    """The message for a value of the wrong type, in the words of its hint."""
    if hint is bool:
        return ConfigError(f"{name}={value!r} must be true or false")
    if typing.get_origin(hint) is Literal:
        return ConfigError(f"{name}={value!r}; allowed: {', '.join(map(str, typing.get_args(hint)))}")
    if hint is int:
        bound = f" ≥ {minimum}" if minimum is not None else ""
        return ConfigError(f"{name}={value!r} must be an integer{bound}")
    return ConfigError(f"{name}={value!r} has the wrong type; allowed: {describe_type(hint)}")


def check_value(name: str, value: Any, hint: Any, minimum: float | None = None) -> Any:
    """``value`` checked against ``hint`` (and ``minimum``); returned with integral floats made ints.

    :raise ConfigError: naming ``name``, the value and what is allowed.
    """
    value = _integral(value, hint)
    try:
        check_type(value, hint)
        if isinstance(value, bool) and hint is not bool and bool not in typing.get_args(hint):
            raise TypeCheckError("is a bool")
    except TypeCheckError:
        raise _wrong(name, value, hint, minimum) from None
    if minimum is not None and isinstance(value, int | float) and value < minimum:
        raise ConfigError(f"{name}={value!r} must be ≥ {minimum}")
    return value


def parse(
    schema: type[T], values: Mapping[str, Any], *, prefix: str = "", ignore: Iterable[str] = (), what: str = "key"
) -> T:
    """The schema instance for ``values`` (a config node converted to a dict, resolved).

    :param prefix: put before each key in messages (``"srl_model.training."``).
    :param ignore: keys of ``values`` that other parts read (config groups).
    :param what: what a key is called in messages (``"run key"``).
    :raise ConfigError: an unknown or missing key, a wrong type, a value below its minimum.
    """
    assert dataclasses.is_dataclass(schema)
    fields = {f.name: f for f in dataclasses.fields(schema)}
    hints = typing.get_type_hints(schema)
    skipped = set(ignore)
    unknown = sorted(str(k) for k in values if k not in fields and k not in skipped)
    if unknown:
        allowed = ", ".join(prefix + name for name in sorted(fields))
        raise ConfigError(f"unknown {what}(s) {', '.join(prefix + k for k in unknown)}; allowed: {allowed}")
    checked = {}
    for name, spec in fields.items():
        if name not in values:
            if spec.default is not dataclasses.MISSING or spec.default_factory is not dataclasses.MISSING:
                continue
            raise ConfigError(f"{prefix}{name} is missing; it takes {describe_type(hints[name])}")
        checked[name] = check_value(prefix + name, values[name], hints[name], spec.metadata.get(MINIMUM))
    return schema(**checked)
