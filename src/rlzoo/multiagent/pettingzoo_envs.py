"""PettingZoo envs by id: the module holding ``env()`` / ``parallel_env()`` (``mpe2.simple_spread_v3``,
``pettingzoo.classic.tictactoe_v3``), made as an AEC env, with each agent's spaces and its action mask.

Needs the ``[multiagent]`` extra (``pettingzoo``, ``mpe2``); imports numpy, gymnasium and PettingZoo only (no torch,
no SB3). A parallel env (``env.api=parallel``) is stepped through PettingZoo's own ``parallel_to_aec``, so that one
loop serves both APIs: every agent's turn is one :class:`~rlzoo.multiagent.state.MultiagentState`.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import pkgutil
import re
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np
from gymnasium import spaces

from rlzoo.errors import ConfigError

APIS = ("aec", "parallel")
# Packages whose ``<name>_v<N>`` modules are suggested for an id that is not found.
FAMILIES = ("mpe2", "pettingzoo.classic", "pettingzoo.butterfly", "pettingzoo.sisl")
MASK_KEY = "action_mask"
INSTALL = 'pip install -e ".[multiagent]"'


@dataclass(frozen=True)
class PettingZooSpec:
    """A PettingZoo env: its module, which API to make (``aec`` or ``parallel``) and its constructor's keywords."""

    id: str
    api: str = "aec"
    kwargs: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_values(cls, env_values: dict[str, Any]) -> PettingZooSpec:
        """The spec of resolved ``env`` values (``conf/env/pettingzoo.yaml``): ``id``, ``api`` and keywords."""
        values = dict(env_values)
        env_id, api = values.pop("id", None), values.pop("api", "aec")
        if env_id in (None, "", "???"):
            raise ConfigError(
                "env=pettingzoo needs the env's module: add env.id=<module>, e.g. env.id=mpe2.simple_spread_v3"
            )
        if api not in APIS:
            raise ConfigError(f"env.api={api!r} is not a PettingZoo API; allowed: {', '.join(APIS)}")
        return cls(str(env_id), str(api), {str(k): v for k, v in values.items()})

    def values(self) -> dict[str, Any]:
        return {"id": self.id, "api": self.api, **self.kwargs}

    def make(self, render_mode: str | None = None) -> Any:
        """A new AEC env (a parallel env through ``parallel_to_aec``); ``render_mode`` is added to the keywords."""
        module = pettingzoo_module(self.id)
        kwargs = {**self.kwargs, **({"render_mode": render_mode} if render_mode else {})}
        try:
            if self.api == "parallel":
                from pettingzoo.utils.conversions import parallel_to_aec

                return parallel_to_aec(module.parallel_env(**kwargs))
            return module.env(**kwargs)
        except TypeError as error:
            raise ConfigError(f"env {self.id} rejected its arguments {kwargs}: {error}") from None


def known_ids() -> list[str]:
    """The ``<family>.<name>_v<N>`` modules of the installed PettingZoo families (found without importing them)."""
    found = []
    for family in FAMILIES:
        try:
            spec = importlib.util.find_spec(family)
        except ModuleNotFoundError:
            continue
        if spec is None or spec.submodule_search_locations is None:
            continue
        found += [f"{family}.{m.name}" for m in pkgutil.iter_modules(spec.submodule_search_locations)]
    return sorted(i for i in found if re.search(r"_v\d+$", i))


def _not_found(env_id: str, why: str) -> ConfigError:
    close = difflib.get_close_matches(env_id, known_ids(), n=5, cutoff=0.6)
    hint = (
        f"; did you mean: {', '.join(close)}"
        if close
        else "; e.g. mpe2.simple_spread_v3, pettingzoo.classic.tictactoe_v3"
    )
    return ConfigError(f"env.id={env_id!r} is not a PettingZoo env ({why}){hint}")


def pettingzoo_module(env_id: str) -> ModuleType:
    """The module of a PettingZoo env id; fails with one line (close ids suggested) when it is not one."""
    if re.fullmatch(r"[\w./:-]+-v\d+", env_id):
        raise ConfigError(
            f"env.id={env_id!r} is a Gymnasium id, not a PettingZoo env: train it with env=gym (no multiagent) or give "
            "a PettingZoo module such as env.id=mpe2.simple_spread_v3"
        )
    if importlib.util.find_spec("pettingzoo") is None:
        raise ConfigError(f"env=pettingzoo needs the [multiagent] extra: {INSTALL}")
    try:
        module = importlib.import_module(env_id)
    except ModuleNotFoundError as error:
        if error.name is not None and not env_id.startswith(error.name):  # a dependency of the env is missing
            raise ConfigError(f"env.id={env_id!r} needs {error.name!r}, which is not installed ({INSTALL})") from None
        raise _not_found(env_id, "no such module") from None
    except ImportError as error:
        raise ConfigError(f"env.id={env_id!r} cannot be imported: {error}") from None
    if not callable(getattr(module, "env", None)):
        raise _not_found(env_id, "the module has no env() function")
    return module


@dataclass(frozen=True)
class AgentSpaces:
    """What one agent observes and does.

    :param observation: the learner's observation space (a masked env's ``observation`` part).
    :param action: the agent's action space.
    :param masked: the env hands this agent an action mask (``observation["action_mask"]``).
    """

    observation: spaces.Space
    action: spaces.Space
    masked: bool


def agent_spaces(env: Any) -> dict[str, AgentSpaces]:
    """Every possible agent's spaces, in the env's order."""
    found = {}
    for key in env.possible_agents:
        observation = env.observation_space(key)
        masked = isinstance(observation, spaces.Dict) and MASK_KEY in observation.spaces
        if masked:
            observation = observation["observation"]
        found[str(key)] = AgentSpaces(observation, env.action_space(key), masked)
    return found


def split_mask(observation: Any, info: dict[str, Any] | None = None) -> tuple[Any, np.ndarray | None]:
    """An observation without its action mask, and the mask (from the observation dict or ``info``; None: none)."""
    if isinstance(observation, dict) and MASK_KEY in observation:
        return observation["observation"], np.asarray(observation[MASK_KEY], dtype=bool)
    mask = (info or {}).get(MASK_KEY)
    return observation, None if mask is None else np.asarray(mask, dtype=bool)
