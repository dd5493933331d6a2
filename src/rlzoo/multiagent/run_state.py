"""What a multi-agent run's future depends on beyond its learners' weights, saved at each checkpoint without pickle,
in the single-agent run state's files (``run_state.json`` and ``run_state.npz``: :class:`~rlzoo.training.run_state.
Snapshot`), so that a resumed run ends where the uninterrupted run ends:

- Python's, NumPy's and torch's generators;
- per learning key (``agent/<key>/``): SB3's runtime state of its model (last observation, counters, the schedules'
  progress, the exploration rate, episode-info buffers); its training agent's (the action it was told to take, the
  end of a game it has not stored yet, its place in the collection round or rollout, a masked agent's exploration
  generator, an on-policy agent's rollout so far); its monitor's running episode; its action space's generator; its
  replay buffer as append-only chunks (:mod:`rlzoo.training.buffer_chunks`, ``replay/<key>/``);
- per learner (``learner/<name>/``): SB3's logger values not yet written;
- the fixed opponent's generators, the seat rotation's seats still to leave, the env's action spaces' generators.

Checkpoints are taken at game boundaries (:class:`~rlzoo.multiagent.kind.MultiagentLearning`), where the env holds
nothing that the next game's ``reset(seed=seed + i)`` does not set again, so no env state is saved. A restore sets only
attributes that exist and hold plain values; a value of the wrong kind or shape is one line
(:class:`~rlzoo.errors.Refused`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import torch as th
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecEnvWrapper

from rlzoo.agents import sb3_private as sb3
from rlzoo.agents.state import State
from rlzoo.agents.training_agent import TrainingAgent
from rlzoo.checkpoint_format import BUFFERS, REPLAY
from rlzoo.errors import Refused
from rlzoo.multiagent.agents import TrainingMultiagent
from rlzoo.rundir import RunDir
from rlzoo.training.buffer_chunks import BufferChunks, restore_buffer, saveable
from rlzoo.training.run_state import (
    MISSING,
    Snapshot,
    capture_generators,
    capture_logger,
    capture_model,
    capture_plain,
    generator_state,
    restore_generators,
    restore_logger,
    restore_model,
    restore_plain,
    set_generator,
)

LOG = logging.getLogger("rlzoo")
# A training agent's own members (each kind of agent has some of them): what it was told to do, where it is in its
# collection round (off-policy) or rollout (on-policy), the legal actions of its state.
AGENT_STATE = ("_actions", "_buffer_actions", "_steps", "_episodes", "_n_steps", "_iteration", "action_mask")
MONITOR_STATE = ("needs_reset", "total_steps", "t_start")
PENDING = ("actions", "values", "log_probs")  # an on-policy agent's outputs for the step it has not stored yet


def _nest(snapshot: Snapshot, prefix: str, part: Snapshot) -> None:
    snapshot.values |= {prefix + key: value for key, value in part.values.items()}
    snapshot.arrays |= {prefix + key: value for key, value in part.arrays.items()}


def _part(snapshot: Snapshot, prefix: str) -> Snapshot:
    """The keys of ``snapshot`` under ``prefix``, without it."""
    cut = len(prefix)
    values = {key[cut:]: value for key, value in snapshot.values.items() if key.startswith(prefix)}
    return Snapshot(values, {key[cut:]: value for key, value in snapshot.arrays.items() if key.startswith(prefix)})


def _monitor(agent: TrainingAgent) -> Monitor | None:
    """The SB3 Monitor around the agent's held env (its running episode's rewards)."""
    venv: VecEnv = agent.env
    while isinstance(venv, VecEnvWrapper):
        venv = venv.venv
    env = venv.envs[0] if isinstance(venv, DummyVecEnv) else None
    while env is not None and not isinstance(env, Monitor):
        env = getattr(env, "env", None)
    return env


def _generators(agent: Any) -> dict[str, np.random.Generator]:
    """An agent's or opponent's own generators (a masked agent's exploration, a random opponent's choices)."""
    return {name: g for name in ("_rng", "rng") if isinstance(g := getattr(agent, name, None), np.random.Generator)}


# --- capture ---------------------------------------------------------------------------------------------------------
def _capture_agent(agent: TrainingAgent) -> Snapshot:
    part = Snapshot()
    model = agent.model
    capture_model(part, model, envs_saved=True)
    capture_plain(part, "agent/", agent, AGENT_STATE)
    ended = agent._terminal
    part.put("agent/terminal", None if ended is None else [ended.reward, ended.terminated, ended.truncated])
    if ended is not None:
        part.put("agent/terminal/observation", np.asarray(ended.observation))
    for name, generator in _generators(agent).items():
        part.put(f"agent/{name}", generator_state(generator))
    monitor = _monitor(agent)
    if monitor is not None:
        capture_plain(part, "monitor/", monitor, MONITOR_STATE)
        part.put("monitor/rewards", np.asarray(monitor.rewards, dtype=np.float64))
    part.put("space", generator_state(model.action_space._np_random))
    if isinstance(model, OnPolicyAlgorithm):
        capture_plain(part, "rollout/", model.rollout_buffer)
        pending = getattr(agent, "_pending", None)
        for name, value in zip(PENDING, pending or (), strict=False):
            part.put(f"pending/{name}", value.detach().cpu().numpy() if isinstance(value, th.Tensor) else value)
    return part


def _capture_opponent(snapshot: Snapshot, opponent: Any) -> None:
    for name, generator in _generators(opponent).items():
        snapshot.put(f"opponent/{name}", generator_state(generator))
    for key, space in getattr(opponent, "action_spaces", {}).items():
        snapshot.put(f"opponent/space/{key}", generator_state(space._np_random))


class MultiagentStateWriter:
    """Writes a multi-agent checkpoint's run state (and each key's new replay rows) into the folder being written.

    :param run: the run dir (``replay/<key>/`` gets each key's chunks).
    :param keep_buffer: ``checkpoint_buffer``: save the replay buffers.
    :param restored: the run state a resumed run started from (its chunk lists go on).
    """

    def __init__(self, run: RunDir, keep_buffer: bool, restored: Snapshot | None = None) -> None:
        found = restored.get(BUFFERS) if restored is not None and keep_buffer else None
        self.manifests: dict[str, Any] = found if isinstance(found, dict) else {}
        self.folder, self.keep_buffer = run.path / REPLAY, keep_buffer
        self.chunks: dict[str, BufferChunks] = {}
        self.saved: dict[str, Any] = dict(self.manifests)  # each key's last chunk list
        self._warned = False

    def __call__(self, folder: Path, team: TrainingMultiagent, env: Any) -> None:
        """Save ``team``'s state and the generators of ``env``'s (an AEC env's) action spaces."""
        snapshot = Snapshot()
        capture_generators(snapshot)
        buffers: dict[str, Any] = {}
        for key, agent in team.learners.agents.items():
            _nest(snapshot, f"agent/{key}/", _capture_agent(agent))
            buffer = getattr(agent.model, "replay_buffer", None)
            if buffer is not None and self.keep_buffer:
                self._save_buffer(buffers, key, buffer, int(agent.model.num_timesteps))
        if buffers:
            snapshot.put(BUFFERS, buffers)
        for name, model in team.models.items():
            part = Snapshot()
            capture_logger(part, model)
            _nest(snapshot, f"learner/{name}/", part)
        if team.opponent is not None:
            _capture_opponent(snapshot, team.opponent)
        if team.rotation is not None:
            snapshot.put("rotation/left", sorted(team.rotation._left))
        for key in env.possible_agents:
            snapshot.put(f"env/space/{key}", generator_state(env.action_space(key)._np_random))
        snapshot.write(folder)

    def _save_buffer(self, buffers: dict[str, Any], key: str, buffer: Any, steps: int) -> None:
        if not saveable(buffer):
            if not self._warned:
                LOG.warning(f"checkpoint_buffer: a {type(buffer).__name__} is not saved (rlzoo saves SB3's replay "
                            "buffers and its masked one); a resumed run starts with empty buffers")  # fmt: skip
                self._warned = True
            return
        chunks = self.chunks.setdefault(key, BufferChunks(self.folder / key, self.manifests.get(key)))
        if chunks.steps != steps or key not in self.saved:  # a key that took no step since keeps its list
            self.saved[key] = chunks.save(buffer, steps)
        buffers[key] = self.saved[key]


# --- restore ---------------------------------------------------------------------------------------------------------
def restore_team(
    folder: Path, run_path: Path, team: TrainingMultiagent, env: Any, keep_buffer: bool
) -> Snapshot | None:
    """Put a checkpoint's run state into the freshly built ``team`` (its learners' weights already loaded) and
    ``env``; return the snapshot, whose generators and logger values :func:`finish_restore` sets once learning is about
    to start (None: a checkpoint without run state, resumed with empty buffers and new generators)."""
    snapshot = Snapshot.read(folder)
    if snapshot is None:
        LOG.warning(f"resuming from {folder}: the checkpoint holds no run state (written before rlzoo saved it): "
                    "the learners go on with empty replay buffers and new generators")  # fmt: skip
        return None
    found = snapshot.get(BUFFERS)
    for key, agent in team.learners.agents.items():
        _restore_agent(_part(snapshot, f"agent/{key}/"), agent, key)
        manifest = found.get(key) if isinstance(found, dict) and keep_buffer else None
        buffer = getattr(agent.model, "replay_buffer", None)
        if isinstance(manifest, dict) and isinstance(buffer, ReplayBuffer):  # checked when the point was found
            restore_buffer(buffer, run_path, manifest, key)
    if team.opponent is not None:
        _restore_opponent(snapshot, team.opponent)
    left = snapshot.get("rotation/left")
    if team.rotation is not None and isinstance(left, list):
        team.rotation._left = {str(key) for key in left if key in team.rotation.seats}
    for key in env.possible_agents:
        space = env.action_space(key)
        space._np_random = set_generator(snapshot.get(f"env/space/{key}"), space._np_random, f"env space {key}")
    return snapshot


def _restore_agent(part: Snapshot, agent: TrainingAgent, key: str) -> None:
    model = agent.model
    restore_model(part, model)
    restore_plain(part, "agent/", agent, AGENT_STATE)
    agent._terminal = _terminal(part, model, key)
    for name, generator in _generators(agent).items():
        set_generator(part.get(f"agent/{name}"), generator, f"agent {key}'s {name}")
    monitor = _monitor(agent)
    rewards = part.get("monitor/rewards")
    if monitor is not None and isinstance(rewards, np.ndarray) and rewards.ndim == 1:
        restore_plain(part, "monitor/", monitor, MONITOR_STATE)
        monitor.rewards = [float(reward) for reward in rewards]
    space: Any = model.action_space  # gymnasium types _np_random as set; a saved None leaves it unset
    space._np_random = set_generator(part.get("space"), space._np_random, f"action space of {key}")
    if isinstance(model, OnPolicyAlgorithm):
        restore_plain(part, "rollout/", model.rollout_buffer)
        _restore_pending(part, agent, model)


def _terminal(part: Snapshot, model: BaseAlgorithm, key: str) -> State | None:
    """The end of a game the agent had been handed but not yet stored (its transition closes with the next state)."""
    outcome, observation = part.get("agent/terminal"), part.get("agent/terminal/observation")
    if outcome is None or outcome is MISSING:
        return None
    shape = model.observation_space.shape
    fits = isinstance(outcome, list) and len(outcome) == 3 and isinstance(outcome[0], int | float)
    if not fits or not isinstance(observation, np.ndarray) or observation.shape != shape:
        raise Refused(f"run state agent/{key}/terminal: expected a reward, two flags and an observation of {shape}")
    return State(observation, float(outcome[0]), bool(outcome[1]), bool(outcome[2]))


def _restore_pending(part: Snapshot, agent: TrainingAgent, model: OnPolicyAlgorithm) -> None:
    saved = [part.get(f"pending/{name}") for name in PENDING]
    if all(value is MISSING for value in saved):
        return
    if not all(isinstance(value, np.ndarray) and value.dtype.kind in "biuf" for value in saved):
        raise Refused("run state pending: expected the arrays of an on-policy agent's last step")
    actions, values, log_probs = saved
    setattr(agent, "_pending", (actions, th.as_tensor(values, device=model.device),  # noqa: B010
                                th.as_tensor(log_probs, device=model.device)))  # fmt: skip


def _restore_opponent(snapshot: Snapshot, opponent: Any) -> None:
    for name, generator in _generators(opponent).items():
        set_generator(snapshot.get(f"opponent/{name}"), generator, f"the opponent's {name}")
    for key, space in getattr(opponent, "action_spaces", {}).items():
        space._np_random = set_generator(snapshot.get(f"opponent/space/{key}"), space._np_random, f"space {key}")


def finish_restore(snapshot: Snapshot | None, team: TrainingMultiagent) -> None:
    """Once learning is about to start: ``learn()``'s setup of every learner that had begun (its counters and last
    observation kept), SB3's unwritten logger values, and the generators last (nothing draws from them before the
    first game)."""
    if snapshot is None:
        return
    for agent in team.learners.agents.values():
        if agent._actions is not None:  # it had begun: _start is not called again
            done = int(agent.model.num_timesteps)
            sb3.setup_learn(agent.model, agent.train_steps - done, reset_num_timesteps=False)
            agent.model.policy.set_training_mode(False)
    for name, model in team.models.items():
        restore_logger(_part(snapshot, f"learner/{name}/"), model)
    restore_generators(snapshot)
