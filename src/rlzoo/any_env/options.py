"""The env keys rlzoo reads itself; every other key of the ``env`` group goes to ``gymnasium.make``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from rlzoo.errors import ConfigError
from rlzoo.schema import at_least, parse

ObservationMode = Literal["auto", "native", "flatten", "image"]
IMAGES = "images"  # how tables and titles name an env's own image observations


def observation_label(srl_model: str, mode: str | None) -> str:
    """How a run's observations are named in titles and tables: its ``srl_model``, except ``ground_truth`` (the env's
    own observation) on an env whose observations are images (Atari, CarRacing), which is named ``images``.

    :param mode: the run's recorded ``env.observation`` (``native``, ``flatten``, ``image``; None: unknown).
    """
    return IMAGES if srl_model == "ground_truth" and mode == "image" else srl_model


@dataclass(frozen=True)
class AtariOptions:
    """``env.atari``: SB3's ``AtariWrapper`` (the standard DQN-paper preprocessing) around an ALE game.

    Reward clipping and a life loss ending the episode apply to training only: test and replay episodes are whole
    games with their real score.
    """

    noop_max: int = field(default=30, metadata=at_least(0))
    screen_size: int = field(default=84, metadata=at_least(8))
    terminal_on_life_loss: bool = True
    clip_reward: bool = True


@dataclass(frozen=True)
class EnvOptions:
    """rlzoo's env keys (``env.<key>``).

    :param frame_skip: repeat every action this many env steps (rewards summed, stopping at the episode's end; the S-RL
        Toolbox's action repeat). Envs that skip frames themselves (MuJoCo's ``frame_skip``) get it natively, Atari
        games through ``AtariWrapper`` (max-pooling the last two frames). null: the env's own stepping.
    :param frame_stack: stack this many consecutive observations (``VecFrameStack``; 1: none).
    :param atari: ``AtariWrapper``'s settings (``conf/env/atari.yaml``); null: no Atari preprocessing.
    :param observation: how the policy observes the env: ``native`` (as SB3 takes it: Box; Discrete, MultiDiscrete and
        MultiBinary one-hot), ``flatten`` (Tuple/Dict/Discrete as one flat vector), ``image`` (a CNN on uint8 frames),
        or ``auto`` (chosen from the observation space; the choice is recorded in ``config.yaml``).
    """

    frame_skip: int | None = field(default=None, metadata=at_least(1))
    frame_stack: int = field(default=1, metadata=at_least(1))
    atari: AtariOptions | None = None
    observation: ObservationMode = "auto"

    KEYS = ("frame_skip", "frame_stack", "atari", "observation")

    @classmethod
    def split(cls, values: dict[str, Any]) -> tuple[EnvOptions, dict[str, Any]]:
        """rlzoo's keys of resolved ``env`` values (without ``id``) as options, and the ``gymnasium.make`` keywords."""
        ours = {k: values[k] for k in cls.KEYS if k in values}
        make_kwargs = {k: v for k, v in values.items() if k not in cls.KEYS}
        atari = ours.pop("atari", None)
        if atari is not None and not isinstance(atari, dict):
            raise ConfigError(f"env.atari={atari!r} must be AtariWrapper's settings ({{}} for its defaults) or null")
        options = parse(cls, ours, prefix="env.", what="env key")
        if atari is not None:
            options = cls(**{**options.values(), "atari": parse(AtariOptions, atari, prefix="env.atari.")})
        return options, make_kwargs

    def values(self) -> dict[str, Any]:
        """The keys as written in a config (defaults left out, so that a plain env's config looks as before)."""
        out: dict[str, Any] = {}
        if self.frame_skip is not None:
            out["frame_skip"] = self.frame_skip
        if self.frame_stack != 1:
            out["frame_stack"] = self.frame_stack
        if self.atari is not None:
            out["atari"] = dict(vars(self.atari))
        if self.observation != "auto":
            out["observation"] = self.observation
        return out
