"""Training agents: ``act(state)`` chooses the action and learns from the transition the state closes.

The step-by-step body of SB3's ``collect_rollouts`` with the env turned inside out: instead of stepping an env, the
agent is handed the state the env reached. Storage is SB3's own (``RolloutBuffer`` / ``ReplayBuffer``, filled by the
algorithm's own helpers) and updates are the algorithm's own ``train()``, called when its ``learn()`` would call it:
when the rollout is full (on-policy) or every ``train_freq`` (off-policy). Every private SB3 member it uses is reached
through :mod:`rlzoo.agents.sb3_private`. Driven by the same envs with the same
seeds, an agent ends with the same weights as ``model.learn()``.
"""

from __future__ import annotations

from typing import Any, overload

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.type_aliases import TrainFrequencyUnit
from stable_baselines3.common.utils import obs_as_tensor, should_collect_more_steps

from rlzoo.agents import sb3_private as sb3
from rlzoo.agents.observation_transform import HeldVecEnv
from rlzoo.agents.state import State, StateArray
from rlzoo.algos.jax_backend import is_jax_class
from rlzoo.errors import ConfigError


class TrainingAgent:
    """Acts and learns: for one :class:`State` when the preset has ``n_envs=1``, else for a :class:`StateArray` of
    ``n_envs`` rows (envs that reset in the same step).

    A single env is driven as a plain Gymnasium loop: hand in every state the env returns, the last state of an
    episode included (its transition is stored when the next episode's first state arrives; the action returned for
    it is not used). States carry what the representation reads, as for :class:`~rlzoo.agents.TestAgent`.

    :param model: the algorithm, built on ``held``'s vec env.
    :param held: the held envs behind ``model``'s env.
    :param train_steps: the training budget in agent steps, for schedules (learning rate, clip range, exploration).
    :param log_interval: as in the algorithm's ``learn()``.
    """

    def __init__(self, model: BaseAlgorithm, held: HeldVecEnv, train_steps: int, log_interval: int) -> None:
        env = model.get_env()
        assert env is not None
        self.model = model
        self.held = held
        self.env = env  # the outermost vec env: held envs, representation, normalisation, SB3's own wrappers
        self.train_steps = train_steps
        self.log_interval = log_interval
        self._actions: np.ndarray | None = None  # what the envs were last told to do
        self._terminal: State | None = None

    @property
    def n_envs(self) -> int:
        return self.env.num_envs

    @overload
    def act(self, state: State) -> Any: ...
    @overload
    def act(self, state: StateArray) -> np.ndarray: ...
    def act(self, state: State | StateArray) -> Any:
        """Learn from the transition ``state`` closes, then choose the action for it."""
        if isinstance(state, StateArray):
            if len(state) != self.n_envs:
                raise ValueError(f"this agent was built for n_envs={self.n_envs}; got {len(state)} states")
            if self._actions is None:
                self._start(state.observation)
            else:
                self._close(state)
            return self._choose()
        if self.n_envs != 1:
            raise ValueError(f"this agent was built for n_envs={self.n_envs}: pass a StateArray of {self.n_envs} rows")
        if self._actions is None:
            self._start(np.asarray(state.observation)[None])
        elif state.done and self._terminal is None:
            self._terminal = state  # closed with the next episode's first state, as a VecEnv would return it
            return self._actions[0]
        else:
            self._close(self._merge(state))
        return self._choose()[0]

    def _merge(self, state: State) -> StateArray:
        """One vec-env step: the deferred end of an episode with the next one's first state, or a plain step."""
        ended, self._terminal = self._terminal, None
        observation = np.asarray(state.observation)[None]
        if ended is None:
            return StateArray(observation, np.array([state.reward]), np.zeros(1, bool), np.zeros(1, bool))
        return StateArray(
            observation, np.array([ended.reward]), np.array([ended.terminated]), np.array([ended.truncated]),
            [np.asarray(ended.observation)],
        )  # fmt: skip

    def _start(self, observations: np.ndarray) -> None:
        """Begin as ``learn()`` begins: counters, logger, and the first observations through the representation.
        A model that has trained (a resumed multi-agent learner) keeps its step count: its schedules go on."""
        self.held.hold_reset(observations)
        done = self.model.num_timesteps
        sb3.setup_learn(self.model, self.train_steps - done, reset_num_timesteps=done == 0)

    def _close(self, states: StateArray) -> None:
        """Step the held envs to ``states`` and learn from the transitions."""
        assert self._actions is not None
        self.held.hold_step(states)
        new_obs, rewards, dones, infos = self.env.step(self._actions)
        self.model.num_timesteps += self.n_envs
        sb3.update_info_buffer(self.model, infos, dones)
        self._learn(new_obs, rewards, dones, infos)

    def _learn(self, new_obs: Any, rewards: np.ndarray, dones: np.ndarray, infos: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    def _choose(self) -> np.ndarray:
        raise NotImplementedError


class OnPolicyAgent(TrainingAgent):
    """PPO, A2C, TRPO and other ``OnPolicyAlgorithm`` subclasses: fill the ``RolloutBuffer``, ``train()`` when full."""

    model: OnPolicyAlgorithm

    def __init__(self, model: OnPolicyAlgorithm, held: HeldVecEnv, train_steps: int, log_interval: int = 1) -> None:
        super().__init__(model, held, train_steps, log_interval)
        self._n_steps = 0
        self._iteration = 0
        self._pending: tuple[np.ndarray, th.Tensor, th.Tensor] | None = None

    def _choose(self) -> np.ndarray:
        model, n = self.model, self.n_envs
        if self._n_steps == 0:  # a rollout begins
            model.policy.set_training_mode(False)
            model.rollout_buffer.reset()
            if model.use_sde:
                model.policy.reset_noise(n)
        if model.use_sde and model.sde_sample_freq > 0 and self._n_steps % model.sde_sample_freq == 0:
            model.policy.reset_noise(n)
        actions, values, log_probs = self._policy_outputs(sb3.last_observation(model))
        clipped = actions
        if isinstance(model.action_space, spaces.Box):
            if model.policy.squash_output:
                clipped = model.policy.unscale_action(clipped)
            else:
                clipped = np.clip(actions, model.action_space.low, model.action_space.high)
        self._pending = (actions, values, log_probs)
        self._actions = clipped
        return clipped

    def _learn(self, new_obs: Any, rewards: np.ndarray, dones: np.ndarray, infos: list[dict[str, Any]]) -> None:
        assert self._pending is not None
        model = self.model
        actions, values, log_probs = self._pending
        self._n_steps += 1
        if isinstance(model.action_space, spaces.Discrete):
            actions = actions.reshape(-1, 1)
        for idx, done in enumerate(dones):  # a time limit is not a terminal state: bootstrap its value
            terminal = infos[idx].get("terminal_observation")
            if done and terminal is not None and infos[idx].get("TimeLimit.truncated", False):
                rewards[idx] += model.gamma * self._terminal_value(terminal)
        starts = sb3.episode_starts(model)
        model.rollout_buffer.add(sb3.last_observation(model), actions, rewards, starts, values, log_probs)
        sb3.set_last(model, new_obs, dones)
        if self._n_steps < model.n_steps:
            return
        model.rollout_buffer.compute_returns_and_advantage(last_values=self._values(new_obs), dones=dones)
        self._iteration += 1
        sb3.update_progress(model)
        if self.log_interval and self._iteration % self.log_interval == 0:
            model.dump_logs(self._iteration)
        model.train()
        self._n_steps = 0

    def _policy_outputs(self, observations: Any) -> tuple[np.ndarray, th.Tensor, th.Tensor]:
        """:return: sampled actions, their value estimates and log-probabilities, for a batch of observations."""
        with th.no_grad():
            actions, values, log_probs = self.model.policy(obs_as_tensor(observations, self.model.device))
        return actions.cpu().numpy(), values, log_probs

    def _values(self, observations: Any) -> th.Tensor:
        """:return: the value estimates of a batch of observations."""
        with th.no_grad():
            return self.model.policy.predict_values(obs_as_tensor(observations, self.model.device))

    def _terminal_value(self, observation: Any) -> float:
        """:return: the value estimate of one episode's last observation (an episode cut by a time limit)."""
        with th.no_grad():
            return float(self.model.policy.predict_values(self.model.policy.obs_to_tensor(observation)[0])[0])


class JaxOnPolicyAgent(OnPolicyAgent):
    """SBX's PPO: the policy and value networks run in JAX (``predict_all``, ``vf.apply``), as in SBX's own
    ``collect_rollouts``; the rollout buffer and ``train()`` are as for SB3."""

    def _policy_outputs(self, observations: Any) -> tuple[np.ndarray, th.Tensor, th.Tensor]:
        model = self.model
        policy: Any = model.policy
        if not model.use_sde or isinstance(model.action_space, spaces.Discrete):
            policy.reset_noise()  # a new key: a new stochastic action
        actions, log_probs, values = policy.predict_all(policy.prepare_obs(observations)[0], policy.noise_key)
        return np.array(actions), th.as_tensor(np.array(values)), th.as_tensor(np.array(log_probs))

    def _values(self, observations: Any) -> th.Tensor:
        model: Any = self.model
        values = model.vf.apply(model.policy.vf_state.params, model.policy.prepare_obs(observations)[0])
        return th.as_tensor(np.array(values).flatten())

    def _terminal_value(self, observation: Any) -> float:
        return float(self._values(observation)[0])


class OffPolicyAgent(TrainingAgent):
    """DQN, SAC, TD3 and other ``OffPolicyAlgorithm`` subclasses: store every transition in the ``ReplayBuffer``,
    ``train(gradient_steps)`` every ``train_freq`` once ``learning_starts`` steps were collected."""

    model: OffPolicyAlgorithm

    def __init__(self, model: OffPolicyAlgorithm, held: HeldVecEnv, train_steps: int, log_interval: int = 4) -> None:
        super().__init__(model, held, train_steps, log_interval)
        self._steps = 0  # vec-env steps and episodes collected since the last update round
        self._episodes = 0
        self._buffer_actions: np.ndarray | None = None

    def _choose(self) -> np.ndarray:
        model, n = self.model, self.n_envs
        if self._steps == 0:  # a collection round begins
            model.policy.set_training_mode(False)
            if model.use_sde:
                model.actor.reset_noise(n)  # type: ignore[operator]
        if model.use_sde and model.sde_sample_freq > 0 and self._steps % model.sde_sample_freq == 0:
            model.actor.reset_noise(n)  # type: ignore[operator]
        self._actions, self._buffer_actions = sb3.sample_action(model, n)
        return self._actions

    def _learn(self, new_obs: Any, rewards: np.ndarray, dones: np.ndarray, infos: list[dict[str, Any]]) -> None:
        model = self.model
        assert self._buffer_actions is not None and model.replay_buffer is not None
        self._steps += 1
        sb3.store_transition(model, self._buffer_actions, new_obs, rewards, dones, infos)
        sb3.update_progress(model)
        sb3.on_step(model)
        for idx, done in enumerate(dones):
            if done:
                self._episodes += 1
                episodes = sb3.count_episode(model)
                if model.action_noise is not None:
                    model.action_noise.reset(**({"indices": [idx]} if self.n_envs > 1 else {}))
                if self.log_interval and episodes % self.log_interval == 0:
                    model.dump_logs()
        if should_collect_more_steps(model.train_freq, self._steps, self._episodes):  # type: ignore[arg-type]
            return
        if model.num_timesteps > 0 and model.num_timesteps > model.learning_starts:
            gradient_steps = model.gradient_steps if model.gradient_steps >= 0 else self._steps * self.n_envs
            if gradient_steps > 0:
                model.train(batch_size=model.batch_size, gradient_steps=gradient_steps)
        self._steps = self._episodes = 0


def training_agent(model: BaseAlgorithm, held: HeldVecEnv, train_steps: int) -> TrainingAgent:
    """The training agent for ``model``'s kind of algorithm."""
    from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy  # sb3-contrib: where agents train

    name = type(model).__name__
    if isinstance(model, OnPolicyAlgorithm):
        if isinstance(model.policy, RecurrentActorCriticPolicy):
            raise ConfigError(f"{name}: recurrent policies have no training agent; train with run_experiment")
        agent_class = JaxOnPolicyAgent if is_jax_class(type(model)) else OnPolicyAgent
        return agent_class(model, held, train_steps)
    if isinstance(model, OffPolicyAlgorithm):
        if model.n_envs > 1 and model.train_freq.unit != TrainFrequencyUnit.STEP:  # type: ignore[union-attr]
            raise ConfigError(f"{name}: train_freq in episodes needs n_envs=1 (as in SB3)")
        return OffPolicyAgent(model, held, train_steps)
    raise ConfigError(
        f"{name} is neither an OnPolicyAlgorithm nor an OffPolicyAlgorithm, so it has no step-by-step training agent; "
        "train it with run_experiment (its test agent works as for any algorithm)"
    )
