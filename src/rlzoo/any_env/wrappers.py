"""Per-env wrappers for any env: action repeat, Atari preprocessing, real game scores under life-loss episodes."""

from __future__ import annotations

import logging
from typing import Any, SupportsFloat

import gymnasium as gym

from rlzoo.any_env.options import AtariOptions
from rlzoo.stateful import OwnAttributes

LOG = logging.getLogger("rlzoo")
# info key of the step that ends a whole game (return and length in agent steps), under life-loss training episodes.
GAME = "rlzoo_game"


class ActionRepeat(OwnAttributes, gym.Wrapper):
    """Repeat every action ``repeat`` times (rewards summed); an episode that ends stops the repetition (no state of
    its own for a checkpoint)."""

    def __init__(self, env: gym.Env, repeat: int) -> None:
        super().__init__(env)
        self.repeat = repeat

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        total = 0.0
        for _ in range(self.repeat):
            observation, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
            if terminated or truncated:
                break
        return observation, total, terminated, truncated, info


class GameEpisodes(OwnAttributes, gym.Wrapper):
    """Report whole games (``info["rlzoo_game"]``: return before clipping, length in agent steps) in a training env
    that clips rewards or ends episodes at a life loss: the Monitor files and returns100 then count games' scores.
    A checkpoint holds the game in progress."""

    state_attributes = ("_return", "_length", "_game_over")

    def __init__(self, env: gym.Env, life_loss: bool) -> None:
        super().__init__(env)
        self.life_loss = life_loss
        self._return, self._length, self._game_over = 0.0, 0, True

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        if self._game_over:
            self._return, self._length, self._game_over = 0.0, 0, False
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._return += float(reward)
        self._length += 1
        ended = terminated or truncated
        if ended and (not self.life_loss or self.env.get_wrapper_attr("was_real_done")):
            self._game_over = True
            info = {**info, GAME: {"r": self._return, "l": self._length}}
        return observation, reward, terminated, truncated, info


def atari(env: gym.Env, options: AtariOptions, frame_skip: int, training: bool) -> gym.Env:
    """SB3's ``AtariWrapper`` (no-op reset, frame skip with max-pooling, fire reset, 84 x 84 grey): training envs
    also end episodes at a life loss and clip rewards to their sign; test and replay envs play whole games unclipped.
    """
    from stable_baselines3.common.atari_wrappers import AtariWrapper, ClipRewardEnv

    life_loss = training and options.terminal_on_life_loss
    wrapped: gym.Env = AtariWrapper(
        env,
        noop_max=options.noop_max,
        frame_skip=frame_skip,
        screen_size=options.screen_size,
        terminal_on_life_loss=life_loss,
        clip_reward=False,
    )
    if training:
        wrapped = GameEpisodes(wrapped, life_loss)
        if options.clip_reward:
            wrapped = ClipRewardEnv(wrapped)
    return wrapped


class StepCap(OwnAttributes, gym.Wrapper):
    """End (truncate) an episode after ``cap`` steps, with a warning naming the setting: test and replay episodes of
    an env without a step limit of its own always finish, whatever the policy does.

    :param warn: warn (once per env); off where the caller reports the cut episodes itself.
    """

    state_attributes = ("_steps", "_warned")

    def __init__(self, env: gym.Env, cap: int, setting: str = "max_test_steps", warn: bool = True) -> None:
        super().__init__(env)
        self.cap, self.setting, self._steps, self._warned = cap, setting, 0, not warn

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        self._steps = 0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._steps += 1
        if self._steps >= self.cap and not (terminated or truncated):
            name = self.env.spec.id if self.env.spec is not None else type(self.env.unwrapped).__name__
            if not self._warned:  # once per env
                LOG.warning(
                    f"{name} has no step limit: an episode was cut at {self.setting}={self.cap} steps (raise "
                    f"{self.setting} for longer episodes)"
                )
                self._warned = True
            truncated = True
        return observation, reward, terminated, truncated, info


class EpisodeSeeds(OwnAttributes, gym.Wrapper):
    """Seed every episode: a reset with ``seed=s`` starts the sequence ``s, s + stride, s + 2 stride, ...`` that the
    following resets without a seed take. Env ``rank`` of ``n`` test envs (``stride=n``, first seed ``seed + rank``)
    then plays episodes ``rank, rank + n, ...`` of the one-env sequence ``seed, seed + 1, ...``: the episodes are the
    same however many envs play them."""

    state_attributes = ("_next",)

    def __init__(self, env: gym.Env, stride: int = 1) -> None:
        super().__init__(env)
        self.stride = stride
        self._next: int | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        if seed is not None:
            self._next = seed
        if self._next is not None:
            seed, self._next = self._next, self._next + self.stride
        return self.env.reset(seed=seed, options=options)
