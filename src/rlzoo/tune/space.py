"""A search space as config: what each trial of ``rlzoo.tune`` samples, read from ``conf/search_space/<algo>.yaml``.

The YAML mirrors the train config: an entry at ``algo.gamma`` sets ``algo.gamma``. An entry is a mapping with a
``type``:

- ``float`` / ``int``: ``low``, ``high``, ``log`` (sample on a log scale), ``step`` (a grid);
- ``categorical``: ``choices``, a list of scalars, or ``name: value`` pairs whose values may be anything a config
  holds (``small: [64, 64]``), Optuna seeing the names.

Two conditionals, each naming config paths (entries sampled earlier in the file, or values of the train config):

- ``when: {algo.use_sde: true}``: the entry is sampled only when that value matches (a list: any of them);
- ``at_most: [algo.n_steps, n_envs]``: the value is capped at the product of those values (``batch_size ≤ n_steps *
  n_envs``), as rl-baselines3-zoo caps PPO's batch size.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from rlzoo.errors import ConfigError
from rlzoo.schema import parse

PREFIX = "search_space."
SCALARS = (type(None), bool, int, float, str)
MISSING = object()


class Trial(Protocol):
    """What sampling needs of an ``optuna.Trial``."""

    def suggest_float(self, name: str, low: float, high: float, *, step: float | None = ..., log: bool = ...) -> float:
        """A float in ``[low, high]``."""

    def suggest_int(self, name: str, low: int, high: int, *, step: int = ..., log: bool = ...) -> int:
        """An int in ``[low, high]``."""

    def suggest_categorical(self, name: str, choices: Any) -> Any:
        """One of ``choices``."""


def lookup(values: Mapping[str, Any], path: str) -> Any:
    """The value at the dotted ``path`` of nested mappings, or :data:`MISSING`."""
    node: Any = values
    for key in path.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return MISSING
        node = node[key]
    return node


@dataclass(frozen=True)
class Param:
    """One entry: its config path, distribution keys and conditionals.

    :param choices: a categorical entry's choices, name → value (``named``: Optuna sees the names, else the values).
    """

    path: str
    type: Literal["float", "int", "categorical"]
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: dict[str, Any] = field(default_factory=dict)
    named: bool = False
    when: dict[str, list[Any]] = field(default_factory=dict)
    at_most: tuple[str | float, ...] = ()

    def candidates(self) -> list[Any]:
        """The values that bound what this entry can set: both ends of a range, every choice."""
        if self.type == "categorical":
            return list(self.choices.values())
        assert self.low is not None and self.high is not None
        cast = int if self.type == "int" else float
        return [cast(self.low), cast(self.high)]

    def applies(self, values: Mapping[str, Any]) -> bool:
        """Whether every ``when`` condition holds for ``values`` (the config with the entries sampled so far)."""
        return all(lookup(values, path) in allowed for path, allowed in self.when.items())

    def suggest(self, trial: Trial, values: Mapping[str, Any]) -> Any:
        """Sample this entry on ``trial`` (capped by ``at_most`` where given)."""
        if self.type == "categorical" and self.named:
            value = self.choices[trial.suggest_categorical(self.path, list(self.choices))]
        elif self.type == "categorical":
            value = trial.suggest_categorical(self.path, list(self.choices.values()))
        elif self.type == "int":
            assert self.low is not None and self.high is not None
            step = int(self.step or 1)
            value = trial.suggest_int(self.path, int(self.low), int(self.high), step=step, log=self.log)
        else:
            assert self.low is not None and self.high is not None
            value = trial.suggest_float(self.path, self.low, self.high, step=self.step, log=self.log)
        return self.cap(value, values)

    def cap(self, value: Any, values: Mapping[str, Any]) -> Any:
        """``value`` capped at the product of the ``at_most`` values."""
        if not self.at_most:
            return value
        factors = [lookup(values, p) if isinstance(p, str) else p for p in self.at_most]
        if any(f is MISSING for f in factors):  # an entry that was not sampled (its ``when`` did not hold)
            return value
        return min(value, type(value)(math.prod(factors)))


@dataclass(frozen=True)
class _Range:
    """The keys of a ``float`` or ``int`` entry."""

    type: Literal["float", "int"]
    low: float
    high: float
    log: bool = False
    step: float | None = None
    when: dict[str, Any] | None = None
    at_most: list[str | float] | None = None


@dataclass(frozen=True)
class _Categorical:
    """The keys of a ``categorical`` entry."""

    type: Literal["categorical"]
    choices: list[Any] | dict[str, Any]
    when: dict[str, Any] | None = None
    at_most: list[str | float] | None = None


@dataclass(frozen=True)
class SearchSpace:
    """The entries of a search space, in the order they are sampled."""

    params: tuple[Param, ...]

    @classmethod
    def from_values(cls, values: Any, config: Mapping[str, Any]) -> SearchSpace:
        """Read the ``search_space`` node (resolved, plain) and check it against the trial ``config``.

        :raise ConfigError: a bad entry, naming its path and what is allowed.
        """
        if not isinstance(values, Mapping) or not values:
            raise ConfigError(
                "the search space is empty: give conf/search_space/<algo>.yaml entries, or add one with "
                "+search_space.algo.<key>={type:float,low:..,high:..}"
            )
        params: list[Param] = []
        for path, node in _entries(values):
            params.append(_param(path, node, config, [p.path for p in params]))
        return cls(tuple(params))

    def sample(self, trial: Trial, config: Mapping[str, Any]) -> dict[str, Any]:
        """The values of one trial: ``{path: value}`` for every entry whose ``when`` holds (in file order)."""
        chosen: dict[str, Any] = {}
        for param in self.params:
            current = with_values(config, chosen)
            if param.applies(current):
                chosen[param.path] = param.suggest(trial, current)
        return chosen

    def bounds(self) -> Iterator[tuple[str, Any]]:
        """``(path, value)`` for every candidate of every entry: both ends of a range, every choice."""
        for param in self.params:
            for value in param.candidates():
                yield param.path, value

    def describe(self) -> dict[str, Any]:
        """A JSON-able form, stored with the study (a resumed study must search the same space)."""
        described = {}
        for p in self.params:
            keys = {k: v for k, v in p.__dict__.items() if k not in ("path", "named")}
            entry = {k: v for k, v in keys.items() if not (v is None or v is False or v == () or v == {})}
            if p.type == "categorical" and not p.named:
                entry["choices"] = list(p.choices.values())
            described[p.path] = entry
        return described


def with_values(config: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the nested ``config`` with ``values`` (``{dotted path: value}``) set, parents created."""
    result = _copy(config)
    for path, value in values.items():
        node = result
        *parents, last = path.split(".")
        for key in parents:
            child = node.get(key)
            node[key] = child = dict(child) if isinstance(child, Mapping) else {}
            node = child
        node[last] = value
    return result


def _copy(node: Any) -> Any:
    if isinstance(node, Mapping):
        return {k: _copy(v) for k, v in node.items()}
    return list(node) if isinstance(node, list) else node


def _entries(node: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """``(path, entry)`` for every mapping with a ``type`` key, depth first in file order."""
    for key, value in node.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and "type" in value:
            yield path, value
        elif isinstance(value, Mapping) and value:
            yield from _entries(value, path + ".")
        else:
            raise ConfigError(
                f"{PREFIX}{path}={value!r} is not a search-space entry; allowed: a mapping with type: float, int or "
                "categorical (fixed values belong in the train config: algo.<key>=...)"
            )


def _param(path: str, node: Mapping[str, Any], config: Mapping[str, Any], earlier: list[str]) -> Param:
    """Check one entry and make its :class:`Param`."""
    name = f"{PREFIX}{path}."
    kind = node.get("type")
    if kind == "categorical":
        cat = parse(_Categorical, node, prefix=name)
        when, at_most = _when(path, cat.when, config, earlier), _at_most(path, cat.at_most, config, earlier)
        named = isinstance(cat.choices, dict)
        return Param(path, "categorical", choices=_choices(path, cat.choices), named=named, when=when, at_most=at_most)
    if kind in ("float", "int"):
        rng = parse(_Range, node, prefix=name)
        _check_range(path, rng)
        when, at_most = _when(path, rng.when, config, earlier), _at_most(path, rng.at_most, config, earlier)
        return Param(path, rng.type, rng.low, rng.high, rng.log, rng.step, when=when, at_most=at_most)
    raise ConfigError(f"{name}type={kind!r}; allowed: float, int, categorical")


def _at_most(
    path: str, refs: list[str | float] | None, config: Mapping[str, Any], earlier: list[str]
) -> tuple[str | float, ...]:
    for ref in refs or ():
        if isinstance(ref, str) and ref not in earlier and not isinstance(lookup(config, ref), int | float):
            raise ConfigError(
                f"{PREFIX}{path}.at_most names {ref}, which is neither an entry above it nor a number of the train "
                "config"
            )
    return tuple(refs or ())


def _choices(path: str, choices: list[Any] | dict[str, Any]) -> dict[str, Any]:
    if not choices:
        raise ConfigError(f"{PREFIX}{path}.choices is empty; a categorical entry needs at least one choice")
    if isinstance(choices, dict):
        return {str(k): v for k, v in choices.items()}
    for choice in choices:
        if not isinstance(choice, SCALARS):
            raise ConfigError(
                f"{PREFIX}{path}.choices holds {choice!r}; list choices are null, true/false, numbers or strings — "
                "name other values: choices: {small: [64, 64], big: [256, 256]}"
            )
    named = {str(c): c for c in choices}
    if len(named) != len(choices):
        raise ConfigError(f"{PREFIX}{path}.choices={choices} repeats a choice")
    return named


def _check_range(path: str, rng: _Range) -> None:
    name = f"{PREFIX}{path}"
    if rng.low > rng.high:
        raise ConfigError(f"{name}: low={rng.low} > high={rng.high}; allowed: low ≤ high")
    if rng.type == "int" and not all(float(v).is_integer() for v in (rng.low, rng.high, rng.step or 1)):
        raise ConfigError(f"{name}: an int entry takes integer low, high and step (got {rng.low}, {rng.high})")
    if rng.log and rng.low <= 0:
        raise ConfigError(f"{name}: log=true needs low > 0 (got low={rng.low})")
    if rng.log and rng.step is not None:
        raise ConfigError(f"{name}: log=true and step={rng.step} exclude each other (Optuna samples one or the other)")
    if rng.step is not None and rng.step <= 0:
        raise ConfigError(f"{name}: step={rng.step} must be > 0")


def _when(
    path: str, when: dict[str, Any] | None, config: Mapping[str, Any], earlier: list[str]
) -> dict[str, list[Any]]:
    conditions: dict[str, list[Any]] = {}
    for ref, allowed in (when or {}).items():
        if ref not in earlier and lookup(config, ref) is MISSING:
            raise ConfigError(
                f"{PREFIX}{path}.when names {ref}, which is neither an entry above it nor a key of the train config"
            )
        conditions[ref] = list(allowed) if isinstance(allowed, list) else [allowed]
    return conditions
