"""Multiagents: ``act(MultiagentState)`` returns the action of the agent whose turn it is (ALL's ``Multiagent``).

- :class:`TrainingMultiagent`: each learning key's training agent acts and learns; other keys play the opponent.
- :class:`TestMultiagent`: learning off (greedy, or sampled under the mask); :func:`load_multiagent` loads one
  from a run dir; :class:`RotatingTestMultiagent` seats its one model in every seat in turn.
- :class:`RandomMultiagent`: legal actions at random (the ``random`` fixed opponent).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm

from rlzoo.agents.state import State
from rlzoo.errors import ConfigError
from rlzoo.multiagent.layouts import RANDOM
from rlzoo.multiagent.learners import (
    Learners,
    MaskedQAgent,
    ObservationCoder,
    action_scores,
    build_learners,
    masked_argmax,
    masked_sample,
)
from rlzoo.multiagent.plan import MultiagentPlan
from rlzoo.multiagent.state import Multiagent, MultiagentState
from rlzoo.training.build import load_model, snapshot
from rlzoo.training.safe_load import restore_weights
from rlzoo.training.shared_config import shared_config


class RandomMultiagent:
    """Plays a uniformly random legal action for every agent (the ``random`` opponent); seeded."""

    def __init__(self, action_spaces: dict[str, spaces.Space], seed: int = 0) -> None:
        self.action_spaces = action_spaces
        self._rng = np.random.default_rng(seed)
        for i, space in enumerate(action_spaces.values()):
            space.seed(seed + i)

    def act(self, state: MultiagentState) -> Any:
        if state.done:
            return None
        if state.action_mask is not None:
            return int(self._rng.choice(np.flatnonzero(state.action_mask)))
        return self.action_spaces[state.agent].sample()


class TestMultiagent:
    """Acts with trained models, learning off: per agent key its model (shared: the same model for all keys), and
    the ``opponent`` for keys without one. Masked envs: the masked argmax, or (``deterministic=False``) an action
    sampled under the mask (:func:`~rlzoo.multiagent.learners.masked_sample`).

    :param models: the model of each learning agent key.
    :param coder: what the models observe of a state (the shared layout appends the agent id).
    :param opponent: plays the keys without a model (None: every key must have one).
    :param seed: seeds the sampled actions of masked envs.
    """

    __test__ = False  # not a pytest class

    def __init__(
        self,
        models: dict[str, BaseAlgorithm],
        coder: ObservationCoder,
        opponent: Multiagent | None = None,
        deterministic: bool = True,
        seed: int = 0,
    ) -> None:
        self.models, self.coder, self.opponent, self.deterministic = models, coder, opponent, deterministic
        self.rng = np.random.default_rng(seed)

    def act(self, state: MultiagentState) -> Any:
        if state.done:
            return None
        model = self.models.get(state.agent)
        if model is None:
            if self.opponent is None:
                raise KeyError(f"no model plays agent {state.agent!r}; models: {', '.join(self.models)}")
            return self.opponent.act(state)
        observation = self.coder(state)[None]
        if state.action_mask is not None:
            if not self.deterministic:
                return masked_sample(model, observation[0], np.asarray(state.action_mask, bool), self.rng)
            return int(masked_argmax(action_scores(model, observation), state.action_mask[None])[0])
        action, _ = model.predict(observation, deterministic=self.deterministic)
        return action[0]


class TrainingMultiagent:
    """Acts and learns: hands each learning key's states to that key's training agent (which stores the transition
    and trains when its algorithm's ``learn()`` would), and the other keys' states to ``opponent``.

    Drive it with every state of an AEC loop, ``done`` ones included (that is how an agent's last transition is
    closed; it returns None for them, the action PettingZoo expects for an agent that left).

    :param seats: the seats the one learner takes in turn, one episode each (the opponent plays the others), so
        that one agent learns to play from every seat; empty: each learning key plays its own seat.
    """

    def __init__(self, learners: Learners, opponent: Multiagent | None = None, seats: Sequence[str] = ()) -> None:
        self.learners = learners
        self.opponent = opponent
        self.rotation = SeatRotation(tuple(seats)) if seats else None

    @property
    def models(self) -> dict[str, BaseAlgorithm]:
        """The models to save, by learner name."""
        return self.learners.models

    def act(self, state: MultiagentState) -> Any:
        if self.rotation is None:
            agent = self.learners.agents.get(state.agent)
        else:
            (agent,) = self.learners.agents.values()
            seated = self.rotation.seat == state.agent
            self.rotation.saw(state)
            agent = agent if seated else None
        if agent is None:
            if self.opponent is None:
                raise KeyError(f"agent {state.agent!r} has no learner and there is no opponent")
            return self.opponent.act(state)
        if isinstance(agent, MaskedQAgent):
            agent.action_mask = state.action_mask
        inner = State(self.learners.coder(state), state.reward, state.terminated, state.truncated, state.info)
        action = agent.act(inner)
        return None if state.done else action

    def test_agent(self, deterministic: bool = True, seed: int = 0) -> Multiagent:
        """A test multiagent with the weights as they are now (they do not change when this one goes on learning);
        ``seed`` seeds its sampled actions (``deterministic=False``). A learner that alternates seats takes them in
        turn as in training, from the first (:class:`RotatingTestMultiagent`)."""
        copies = {name: snapshot(model) for name, model in self.models.items()}
        owner = {key: name for name, model in self.models.items() for key, a in self.learners.agents.items()
                 if a.model.policy is model.policy}  # fmt: skip
        models = {key: copies[name] for key, name in owner.items()}
        test = TestMultiagent(models, self.learners.coder, self.opponent, deterministic, seed)
        return test if self.rotation is None else RotatingTestMultiagent(test, self.rotation.seats)


class RotatingTestMultiagent:
    """A test multiagent whose one model takes ``seats`` in turn, one episode each (``seats[i % n]`` in episode
    ``i``); the test's opponent plays the other seats."""

    def __init__(self, test: TestMultiagent, seats: Sequence[str]) -> None:
        (self.model,) = set(test.models.values())
        self.test, self.rotation = test, SeatRotation(tuple(seats))

    def act(self, state: MultiagentState) -> Any:
        self.test.models = {self.rotation.seat: self.model}
        action = self.test.act(state)
        self.rotation.saw(state)
        return action


TRAINING = "training"  # load_multiagent's default opponent: the one the run trained against
OpponentChoice = str | Path | Multiagent | None


class SeatRotation:
    """The seat the learner takes in this episode: ``seats[i % n]`` in episode ``i``. An episode ends once every seat
    was handed its done state (an AEC loop hands each agent one before it leaves)."""

    def __init__(self, seats: tuple[str, ...]) -> None:
        self.seats, self.episode = seats, 0
        self._left: set[str] = set()

    @property
    def seat(self) -> str:
        return self.seats[self.episode % len(self.seats)]

    def saw(self, state: MultiagentState) -> None:
        """Count ``state`` (after it was acted on): the episode's last done state moves the learner on a seat."""
        if state.done:
            self._left.add(state.agent)
            if self._left >= set(self.seats):
                self.episode, self._left = self.episode + 1, set()


def opponent_for(plan: MultiagentPlan, others: Sequence[str] | None = None) -> Multiagent | None:
    """The fixed opponent of a plan (``multiagent.opponent``) for the keys ``others`` (None: the keys that do not
    learn, or every key when the learner alternates seats); None when there are none."""
    if others is None:
        others = list(plan.agents) if plan.seats else [key for key in plan.agents if key not in plan.learning_keys]
    if not others:
        return None
    return _opponent(plan, plan.layout.opponent or RANDOM, others)


def _opponent(
    plan: MultiagentPlan,
    choice: OpponentChoice,
    others: Sequence[str],
    *,
    trusted: bool = False,
    allow: Sequence[str] = (),
) -> Multiagent | None:
    """``choice`` for the keys ``others``: ``random`` (a random legal action), a multi-agent run dir (its trained
    agent takes those seats, loaded as :func:`load_multiagent` with ``trusted`` and ``allow``), a multiagent as it
    is, or None."""
    if choice is None or isinstance(choice, Multiagent):
        return choice
    if str(choice) == TRAINING:
        return opponent_for(plan, others)
    if str(choice) == RANDOM:
        return RandomMultiagent({key: plan.agents[key].action for key in others}, plan.seed)
    return load_multiagent(choice, seats=others, opponent=None, trusted=trusted, allow=allow)


def _seat_models(
    plan: MultiagentPlan, by_key: dict[str, BaseAlgorithm], seats: Sequence[str]
) -> dict[str, BaseAlgorithm]:
    """The model that acts for each seat: the key's own, or the one trained agent's (the fixed layout), checked."""
    chosen = {}
    for key in seats:
        if key not in plan.agents:
            raise ConfigError(
                f"load_multiagent: agent {key!r} is not an agent of {plan.spec.id}; "
                f"its agents: {', '.join(plan.agents)}"
            )
        if key in by_key:
            chosen[key] = by_key[key]
            continue
        (trained,) = plan.learning_keys  # independent and shared layouts train every key
        if plan.agents[key] != plan.agents[trained]:
            raise ConfigError(
                f"load_multiagent: the trained agent ({trained}) cannot take {key}'s seat: their observation or "
                "action spaces differ"
            )
        chosen[key] = by_key[trained]
    return chosen


def load_multiagent(
    run_dir: str | Path,
    deterministic: bool = True,
    *,
    seats: Sequence[str] | None = None,
    opponent: OpponentChoice = TRAINING,
    trusted: bool = False,
    allow: Sequence[str] = (),
) -> TestMultiagent:
    """The test multiagent of a multi-agent run dir (its models on the CPU): ``act(state)`` for whichever agent's
    turn it is.

    :param seats: the agent ids the trained agents act for (None: the ids they trained as). With one trained agent
        (``multiagent=fixed_opponent``) its model takes every seat named: ``seats=["player_2"]`` plays second; with
        ``multiagent=independent`` each id's own model acts, with ``shared`` the shared model.
    :param opponent: who acts for the other ids: ``"training"`` (the opponent the run trained against), ``"random"``
        (a random legal action), a multi-agent run dir (its trained agent), a :class:`Multiagent`, or None (no one: a
        state of another id is refused).
    :param trusted: load with SB3's own ``load`` (it unpickles) and any ``_target_``; by default the config is checked
        against the allowlist and each learner rebuilt from it, its weights read without unpickling
        (:mod:`rlzoo.training.safe_load`).
    :param allow: module names whose ``_target_`` entries the caller trusts (their own algorithm module).
    :raise ConfigError: not a run dir, not a multi-agent run, a missing or corrupt model, an id the env does not have.
    """
    from rlzoo.multiagent.plan import plan_multiagent
    from rlzoo.playback.loading import open_run

    run = open_run(run_dir)
    config = run.read_config()
    if not trusted:
        config = shared_config(config, run.config, allow)
    plan = plan_multiagent(config)
    if trusted:
        models = {name: load_model(plan.factory.algo_class, run.models().learner(name).model) for name in plan.learners}
    else:
        models = _load_untrusted(plan, lambda name: run.models().learner(name).model)
    shared = any(len(keys) > 1 for keys in plan.learners.values())
    coder = ObservationCoder(plan.learning_keys if shared else None)
    by_key = {key: models[name] for name, keys in plan.learners.items() for key in keys}
    seated = _seat_models(plan, by_key, plan.learning_keys if seats is None else seats)
    others = [key for key in plan.agents if key not in seated]
    chosen = _opponent(plan, opponent, others, trusted=trusted, allow=allow) if others else None
    return TestMultiagent(seated, coder, chosen, deterministic)


def _load_untrusted(plan: MultiagentPlan, model_path: Callable[[str], Path]) -> dict[str, BaseAlgorithm]:
    """Every learner's model rebuilt from the checked plan (on the CPU) with the weights of its ``model.zip``;
    nothing in the files is unpickled."""
    built = build_learners(
        plan.factory, plan.policy, plan.agents, plan.learners, seed=plan.seed, device="cpu", train_steps=1
    ).models
    for name, model in built.items():
        path = model_path(name)
        if not path.is_file():
            raise ConfigError(f"{path} cannot be loaded as {type(model).__name__}: no such file")
        restore_weights(model, path)
    return built
