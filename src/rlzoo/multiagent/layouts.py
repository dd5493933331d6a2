"""Multi-agent layouts: which agent keys learn, in which learners, and which seats a learner takes.

A layout is one :class:`Layout` subclass (registered by being defined: :data:`LAYOUTS`) and an option of the
``multiagent`` config group naming it (``conf/multiagent/<option>.yaml``: ``layout: <name>``). The plan asks the
layout for its learners and seats; keys in no learner play the run's fixed opponent (``multiagent.opponent``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

from rlzoo.errors import ConfigError
from rlzoo.multiagent.pettingzoo_envs import AgentSpaces
from rlzoo.registry import Registered
from rlzoo.rundir import RunDir

# Every layout by its name (multiagent.layout), filled by Layout's subclasses as they are defined.
LAYOUTS: dict[str, type[Layout]] = {}
SHARED = "shared"  # the learner name of the shared layout (models/shared/)
RANDOM = "random"  # multiagent.opponent: a uniformly random legal action


@dataclass(frozen=True)
class LayoutSettings:
    """The ``multiagent`` group (see ``conf/multiagent/*.yaml``).

    :param layout: a name of :data:`LAYOUTS`.
    :param learner: the agent key that learns (layouts with one learner; None: the env's first agent).
    :param opponent: who plays the keys that do not learn: ``random``, or a multi-agent run dir.
    :param alternate_seats: the one learner takes every seat in turn, one episode each.
    """

    layout: str
    learner: str | None = None
    opponent: str | None = None
    alternate_seats: bool = False

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ConfigError(f"multiagent.layout={self.layout!r} is not a layout; allowed: {', '.join(LAYOUTS)}")
        opponent = self.opponent or RANDOM
        if opponent != RANDOM and not RunDir(Path(opponent)).is_run():
            raise ConfigError(f"multiagent.opponent={opponent!r} is neither 'random' nor a run dir (no config.yaml)")


class Layout(Registered, ABC, registry=LAYOUTS):
    """One layout: subclass it with a ``name`` and say which keys learn in which learner (:meth:`learners`) and
    the seats a learner takes in turn (:meth:`seats`); the subclass is registered in :data:`LAYOUTS` by its name."""

    def __init__(self, settings: LayoutSettings) -> None:
        self.settings = settings

    @abstractmethod
    def learners(self, agents: dict[str, AgentSpaces]) -> dict[str, tuple[str, ...]]:
        """Learner name → the agent keys it acts for (``agents``: every possible agent's spaces, in the env's order);
        keys in no learner play the fixed opponent. A bad fit is a ConfigError."""

    def seats(self, agents: dict[str, AgentSpaces], learners: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
        """The seats the one learner takes in turn, one episode each (empty: every key keeps its role)."""
        return ()


def make_layout(settings: LayoutSettings) -> Layout:
    """The layout ``settings.layout`` names."""
    return LAYOUTS[settings.layout](settings)


class Independent(Layout):
    """One learner per agent key: its own model, buffer and optimizer."""

    name = "independent"

    def learners(self, agents: dict[str, AgentSpaces]) -> dict[str, tuple[str, ...]]:
        return {key: (key,) for key in agents}


class Shared(Layout):
    """One policy for every agent key (its observation flattened, the agent's one-hot index appended); needs one
    observation and action space for all."""

    name = SHARED

    def learners(self, agents: dict[str, AgentSpaces]) -> dict[str, tuple[str, ...]]:
        keys = list(agents)
        first = agents[keys[0]]
        for key in keys[1:]:
            other = agents[key]
            if other.observation != first.observation or other.action != first.action:
                raise ConfigError(
                    f"multiagent=shared needs one observation and action space for every agent ({keys[0]}: "
                    f"{first.observation}, {first.action}; {key}: {other.observation}, {other.action}): "
                    "use multiagent=independent"
                )
        if first.observation.shape is None:
            raise ConfigError(f"multiagent=shared flattens observations; {first.observation} has no shape")
        return {SHARED: tuple(keys)}


class Fixed(Layout):
    """One agent key learns (``multiagent.learner``), every other key plays the fixed opponent; with
    ``alternate_seats`` the learner takes every seat in turn, its own first, then the others in the env's order."""

    name = "fixed"

    def learners(self, agents: dict[str, AgentSpaces]) -> dict[str, tuple[str, ...]]:
        learner = self.settings.learner or next(iter(agents))
        if learner not in agents:
            raise ConfigError(
                f"multiagent.learner={learner!r} is not an agent of this env; its agents: {', '.join(agents)}"
            )
        return {learner: (learner,)}

    def seats(self, agents: dict[str, AgentSpaces], learners: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
        if not self.settings.alternate_seats:
            return ()
        ((learner,),) = learners.values()
        for key, spaces_ in agents.items():
            if spaces_ != agents[learner]:
                raise ConfigError(
                    f"multiagent.alternate_seats=true: the learner ({learner}) cannot take {key}'s seat, whose "
                    "observation or action space differs; set multiagent.alternate_seats=false"
                )
        return (learner, *(key for key in agents if key != learner))
