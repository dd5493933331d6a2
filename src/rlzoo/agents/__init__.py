"""The agent API: an agent takes a state and returns an action; the control loop is the caller's.

- :class:`State` / :class:`StateArray`: what agents are handed; :class:`Agent` / :class:`ParallelAgent`: the protocols.
- :func:`preset`: an algorithm with settings, bound to an env with ``.env(name)``; ``.agent()`` acts and learns,
  ``.test_agent()`` acts with learning off.
- :class:`TestAgent`: a trained model with learning off (``rlzoo.load_agent`` loads one from a run dir, through
  the run's kind: :mod:`rlzoo.kinds`).

Multi-agent agents (``MultiagentState``, ``Multiagent``, ``load_multiagent``) live in :mod:`rlzoo.multiagent`, a layer
above; ``from rlzoo import load_multiagent`` reaches them. May import the ground floor, ``envs``, ``any_env``, ``srl``,
``algos``, ``loggers``, ``training`` and ``replay``.
"""

from rlzoo.agents.loaded_agent import TestAgent
from rlzoo.agents.presets import BoundPreset, Preset, preset
from rlzoo.agents.state import Agent, ParallelAgent, State, StateArray
from rlzoo.agents.training_agent import OffPolicyAgent, OnPolicyAgent, TrainingAgent

__all__ = [
    "Agent",
    "BoundPreset",
    "OffPolicyAgent",
    "OnPolicyAgent",
    "ParallelAgent",
    "Preset",
    "State",
    "StateArray",
    "TestAgent",
    "TrainingAgent",
    "preset",
]
