"""CMA-ES policy search on the ``cma`` package, evaluated over parallel envs; keeps the best parameters found."""

from dataclasses import dataclass, field
from typing import Any, ClassVar

import cma
import numpy as np
import torch
from gymnasium import spaces
from sb3_contrib.ars.policies import ARSLinearPolicy, ARSPolicy
from stable_baselines3.common.policies import BasePolicy
from torch.nn.utils import parameters_to_vector

from rlzoo.algos.episodic import EpisodicAlgorithm
from rlzoo.algos.sb3_base import require


@dataclass
class Generation:
    """One population of candidate parameter vectors and the episode returns each has collected so far."""

    candidates: list[np.ndarray]
    episodes: int  # episodes that make up one candidate's fitness
    returns: list[list[float]] = field(default_factory=list)
    running: list[int] = field(default_factory=list)  # episodes under way, per candidate

    def __post_init__(self) -> None:
        self.returns = [[] for _ in self.candidates]
        self.running = [0] * len(self.candidates)

    def assign(self) -> int:
        """The candidate an env that is free should run next: the one with the fewest episodes done or under way."""
        load = [len(r) + n for r, n in zip(self.returns, self.running, strict=True)]
        chosen = int(np.argmin(load))
        self.running[chosen] += 1
        return chosen

    def record(self, candidate: int, episode_return: float) -> None:
        self.running[candidate] -= 1
        self.returns[candidate].append(episode_return)

    @property
    def complete(self) -> bool:
        return all(len(r) >= self.episodes for r in self.returns)

    def fitness(self) -> list[float]:
        """Mean return of each candidate."""
        return [float(np.mean(r)) for r in self.returns]


class CMAES(EpisodicAlgorithm):
    """Covariance Matrix Adaptation Evolution Strategy (Hansen & Ostermeier, 2001, "Completely derandomized
    self-adaptation in evolution strategies"), on the ``cma`` package, searching the parameters of a small policy.

    Every generation, ``popsize`` parameter vectors are drawn; each is scored by its mean return over
    ``n_eval_episodes`` episodes, run on whichever of the parallel envs is free; the scores update the search
    distribution. The policy that ``predict`` uses (and ``model.zip`` holds) is the best candidate found so far,
    where the S-RL Toolbox kept the last one.

    :param sigma0: initial standard deviation of the search distribution, in parameter units.
    :param popsize: candidates per generation (≥ 2), or None for CMA-ES's default 4 + ⌊3 ln n⌋ (n: parameters).
    :param n_eval_episodes: episodes that score one candidate.
    :param zero_policy: start the search at all-zero parameters (else at the policy's initial ones).
    :param diagonal: a diagonal covariance (sep-CMA-ES: linear cost in the parameter count, for larger policies).
    :param policy_kwargs: the policy's keywords (``net_arch``: hidden layers, ``[]`` for a linear policy).
    """

    supported_action_spaces: tuple[type[spaces.Space], ...] | None = (
        spaces.Box,
        spaces.Discrete,
    )  # what it acts in (None: any)

    policy_aliases: ClassVar[dict[str, type[BasePolicy]]] = {"MlpPolicy": ARSPolicy, "LinearPolicy": ARSLinearPolicy}
    policy: ARSPolicy

    def __init__(
        self,
        policy: str | type[ARSPolicy],
        env: Any,
        sigma0: float = 0.5,
        popsize: int | None = None,
        n_eval_episodes: int = 1,
        zero_policy: bool = True,
        diagonal: bool = False,
        policy_kwargs: dict[str, Any] | None = None,
        tensorboard_log: str | None = None,
        verbose: int = 0,
        seed: int | None = None,
        device: torch.device | str = "cpu",
        _init_setup_model: bool = True,
    ) -> None:
        self.check_keywords(sigma0=sigma0, popsize=popsize, n_eval_episodes=n_eval_episodes)
        super().__init__(
            policy, env, learning_rate=0.0, policy_kwargs=dict(policy_kwargs or {}), tensorboard_log=tensorboard_log,
            verbose=verbose, device=device, support_multi_env=True, seed=seed,
            supported_action_spaces=self.supported_action_spaces,
        )  # fmt: skip
        self.sigma0 = sigma0
        self.popsize = popsize
        self.n_eval_episodes = n_eval_episodes
        self.zero_policy = zero_policy
        self.diagonal = diagonal
        self.best_return = -np.inf
        self.generations = 0
        if _init_setup_model:
            self._setup_model()

    @classmethod
    def check_keywords(cls, **kwargs: Any) -> None:
        """Ranges CMA-ES needs: a positive step size, two candidates or more, one episode or more."""
        sigma0, popsize, episodes = kwargs.get("sigma0", 0.5), kwargs.get("popsize"), kwargs.get("n_eval_episodes", 1)
        require(sigma0 > 0, f"algo.sigma0={sigma0} must be > 0 (CMA-ES's initial step size)")
        require(popsize is None or popsize >= 2, f"algo.popsize={popsize} must be ≥ 2 (or null for CMA-ES's default)")
        require(episodes >= 1, f"algo.n_eval_episodes={episodes} must be ≥ 1")

    def _setup_model(self) -> None:
        self._setup_lr_schedule()
        self.set_random_seed(self.seed)
        self.policy_kwargs.setdefault("net_arch", [16])
        self.policy = self.policy_class(self.observation_space, self.action_space, **self.policy_kwargs)  # type: ignore[assignment]
        self.policy = self.policy.to(self.device)
        start = parameters_to_vector(self.policy.parameters()).detach().cpu().numpy().astype(np.float64)
        if self.zero_policy and self.generations == 0:
            start = np.zeros_like(start)
            self.policy.load_from_vector(start)
        self._workers: list[ARSPolicy] = []
        self._es: cma.CMAEvolutionStrategy | None = None
        self._start = start

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "_workers", "_es", "_generation", "_slots", "_start"]

    def _new_generation(self) -> None:
        if self._es is None:  # started here (a loaded model continues from the parameters it holds)
            options: dict[str, Any] = {"seed": (self.seed or 0) + 1, "verbose": -9, "CMA_diagonal": self.diagonal}
            if self.popsize is not None:
                options["popsize"] = self.popsize
            self._es = cma.CMAEvolutionStrategy(self._start, self.sigma0, options)
        self._generation = Generation(self._es.ask(), self.n_eval_episodes)

    def _assign(self, env: int) -> None:
        candidate = self._generation.assign()
        self._slots[env] = (self._generation, candidate)
        self._workers[env].load_from_vector(self._generation.candidates[candidate])

    def _setup_learn(self, total_timesteps: int, *args: Any, **kwargs: Any) -> tuple[int, Any]:
        out = super()._setup_learn(total_timesteps, *args, **kwargs)
        self._workers = [type(self.policy)(self.observation_space, self.action_space, **self.policy_kwargs)
                         for _ in range(self.n_envs)]  # fmt: skip
        self._start = parameters_to_vector(self.policy.parameters()).detach().cpu().numpy().astype(np.float64)
        self._new_generation()
        self._slots: list[tuple[Generation, int]] = []
        for env in range(self.n_envs):
            self._slots.append((self._generation, 0))
            self._assign(env)
        return out

    def _act(self, observations: np.ndarray) -> np.ndarray:
        actions = [w.predict(obs, deterministic=True)[0] for w, obs in zip(self._workers, observations, strict=True)]
        return np.stack(actions)

    def _observe(self, rewards: np.ndarray, dones: np.ndarray) -> None:
        for env in map(int, np.flatnonzero(dones)):
            generation, candidate = self._slots[env]
            if generation is self._generation:  # an episode begun before the last update is not scored
                generation.record(candidate, float(self._episode_returns[env]))
            if self._generation.complete:
                self._update()
            self._assign(env)

    def _update(self) -> None:
        """Tell CMA-ES the scores (it minimises: negated returns), keep the best candidate, draw the next generation."""
        assert self._es is not None
        fitness = self._generation.fitness()
        self._es.tell(self._generation.candidates, [-f for f in fitness])
        best = int(np.argmax(fitness))
        if fitness[best] > self.best_return:
            self.best_return = fitness[best]
            self.policy.load_from_vector(self._generation.candidates[best])
        self.generations += 1
        self._n_updates += 1
        self.logger.record("train/generation", self.generations)
        self.logger.record("train/sigma", float(self._es.sigma))
        self.logger.record("train/best_return", self.best_return)
        self.logger.record("train/generation_mean_return", float(np.mean(fitness)))
        self._new_generation()
