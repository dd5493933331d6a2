"""The agent API: an agent takes a state and returns an action; the control loop is the caller's.

- :class:`State` / :class:`StateArray`: what agents are handed; :class:`Agent` / :class:`ParallelAgent`: the protocols.
- :func:`preset`: an algorithm with settings, bound to an env with ``.env(name)``; ``.agent()`` acts and learns,
  ``.test_agent()`` acts with learning off.
- :func:`load_agent`: the test agent of a run dir.
- :class:`MultiagentState` / :class:`Multiagent`: one agent's turn in a PettingZoo env, and the protocol;
  :func:`load_multiagent`: the test multiagent of a multi-agent run dir.
"""

from rlzoo.agents.multiagent import TestMultiagent, load_multiagent
from rlzoo.agents.multiagent_state import Multiagent, MultiagentState
from rlzoo.agents.presets import BoundPreset, Preset, preset
from rlzoo.agents.state import Agent, ParallelAgent, State, StateArray
from rlzoo.agents.test_agent import TestAgent, load_agent
from rlzoo.agents.training_agent import OffPolicyAgent, OnPolicyAgent, TrainingAgent

__all__ = [
    "Agent",
    "BoundPreset",
    "Multiagent",
    "MultiagentState",
    "OffPolicyAgent",
    "OnPolicyAgent",
    "ParallelAgent",
    "Preset",
    "State",
    "StateArray",
    "TestAgent",
    "TestMultiagent",
    "TrainingAgent",
    "load_agent",
    "load_multiagent",
    "preset",
]
