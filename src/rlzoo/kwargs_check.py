"""Keyword arguments checked against a callable's signature and type hints (ground floor).

Constructors (SB3 algorithms, Gymnasium envs) accept wrong types in ways that fail late or never
(``random_target="maybe"`` is truthy): each keyword must be a parameter and its value must match the parameter's hint.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rlzoo.errors import ConfigError
from rlzoo.schema import check_value


def coerce_yaml(value: Any, hint: Any) -> Any:
    """YAML has no tuples: a list given where the hint allows a tuple but not a list becomes a tuple."""
    if not isinstance(value, list):
        return value
    origins = {typing.get_origin(h) or h for h in (typing.get_args(hint) or (hint,))}
    if tuple in origins and list not in origins:
        return tuple(value)
    return value


def type_hints(target: Callable[..., Any]) -> dict[str, Any]:
    """The resolved hints of ``target``'s parameters (a class: its ``__init__``); {} when they cannot be resolved
    here (hints naming ``TYPE_CHECKING``-only types)."""
    function = target.__init__ if inspect.isclass(target) else target
    try:
        return typing.get_type_hints(function)
    except Exception:  # NameError for TYPE_CHECKING-only names, TypeError for odd objects
        return {}


def check_keywords(
    target: Callable[..., Any],
    kwargs: Mapping[str, Any],
    *,
    prefix: str,
    owner: str,
    also_allowed: Iterable[str] = (),
) -> dict[str, Any]:
    """``kwargs`` checked against ``target``'s parameters; returned with lists made tuples where hints want them.

    :param prefix: the config path of the keywords in messages (``"env."``, ``"algo."``).
    :param owner: what takes them, in messages (``"CartPoleEnv"``).
    :param also_allowed: keywords taken by a wrapper around ``target`` (``gymnasium.make``'s own).
    :raise ConfigError: an unknown keyword (the allowed ones listed) or a value of the wrong type.
    """
    signature = inspect.signature(target)
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())
    allowed = sorted({*(n for n in signature.parameters if n not in ("self", "args", "kwargs")), *also_allowed})
    hints = type_hints(target)
    checked = {}
    for key, value in kwargs.items():
        if key not in allowed and not accepts_any:
            raise ConfigError(f"{prefix}{key} is not a keyword of {owner}; allowed: {', '.join(allowed)}")
        hint = hints.get(key)
        if hint is None:
            parameter = signature.parameters.get(key)
            annotation = parameter.annotation if parameter is not None else inspect.Parameter.empty
            hint = None if annotation is inspect.Parameter.empty or isinstance(annotation, str) else annotation
        checked[key] = value if hint is None else check_value(prefix + key, coerce_yaml(value, hint), hint)
    return checked
